"""A share group (KIP-932, group type "share"): its members, epochs, target assignment and which
share partitions have their state initialized, with the rules of a ShareGroupHeartbeat as Kafka
4.3.1's GroupMetadataManager applies them.

Pure state and rules (no clock, no I/O): the caller passes the time and the cluster's topics, and
writes the group's records and initializes share-partition state with the share coordinator
before answering. Not reachable from any handler yet.

Group states (`ShareGroupState`, computed as Kafka's ShareGroup.maybeUpdateGroupState):

    Empty    no members.
        -> Stable    a member joins (heartbeat with member epoch 0)
    Stable   at least one member.
        -> Empty     the last member leaves (epoch -1) or is fenced (session expired)
    Dead     the group was deleted; never stored.

Epochs. The group epoch is bumped when a member joins, leaves or is fenced, when a member's
subscribed topic names change, when a subscribed topic is created, deleted or gets partitions,
and when share partitions of a subscribed topic finish initializing (so the next heartbeat
assigns them). The target assignment is recomputed with the simple assignor when the group epoch
is ahead of the assignment epoch and `group.share.assignment.interval.ms` has passed since the
last one. Unlike a consumer group, a member takes its target assignment at once (a share
partition may be read by several members, so nothing has to be revoked first): its member epoch
becomes the assignment epoch (ShareGroupAssignmentBuilder), with only the partitions of topics it
subscribes.

Member epoch checks (FENCED_MEMBER_EPOCH): a heartbeat's epoch must be the member's epoch, or its
previous epoch (the answer bumping it may have been lost); epoch 0 (re)joins. An unknown member
with epoch > 0 gets UNKNOWN_MEMBER_ID, a group id that is not a share group GROUP_ID_NOT_FOUND.

Share-partition state. Only partitions whose share-group state is initialized with the share
coordinator are assigned (Kafka's ShareGroupStatePartitionMetadata: initializing, initialized and
deleting topics). `partitions_to_initialize` names the subscribed partitions not yet initialized
(nor initializing for less than `group.share.initialize.retry.interval.ms`) and marks them
initializing; `initialized` records the share coordinator's answer.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.share.simple_assignor import ShareMemberSpec, assign
from protocol.errors import ErrorCode, KafkaError

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Topic id -> partitions."""

LEAVE_GROUP_MEMBER_EPOCH = -1
SHARE_GROUP_TYPE = "share"


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """The group coordinator configs a share group obeys (Kafka's defaults; the broker's and the
    group's own through GroupConfigs.share_group_settings)."""

    max_size: int = 200
    """`group.share.max.size`"""
    heartbeat_interval_ms: int = 5_000
    """`group.share.heartbeat.interval.ms`"""
    session_timeout_ms: int = 45_000
    """`group.share.session.timeout.ms`"""
    assignment_interval_ms: int = 1_000
    """`group.share.assignment.interval.ms`"""
    initialize_retry_interval_ms: int = 30_000
    """`group.share.initialize.retry.interval.ms`"""


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic as the cluster has it."""

    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    """One member (a value: every change makes a new one)."""

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    """The fields of a ShareGroupHeartbeatRequest."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    """None: unchanged since the last heartbeat."""


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None
    """Sent when the member (re)joined, sent its full subscription, or its assignment changed."""


@dataclass(slots=True, eq=False)
class ShareGroup:
    group_id: str
    group_epoch: int = 1
    """A new group's epoch is 1 (Kafka 4.3.1's ModernGroup): its first member's join bumps it to 2."""
    assignment_epoch: int = 0
    assignment_timestamp_ms: int = 0
    """When the target assignment was last computed (0: never)."""
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    """Member id -> its target assignment at `assignment_epoch`."""
    subscription_metadata: dict[str, TopicInfo] = field(default_factory=dict)
    """Subscribed topic name -> the topic when the group epoch was last bumped."""
    initializing: dict[uuid.UUID, tuple[frozenset[int], int]] = field(default_factory=dict)
    """Topic id -> (partitions whose state is being initialized, since when)."""
    initialized: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    """Topic id -> partitions whose share-group state is initialized: the assignable ones."""
    deleting: frozenset[uuid.UUID] = frozenset()
    """Topics whose share-group state is being deleted, no longer initialized (DeleteGroups,
    DeleteShareGroupOffsets; Kafka's deletingTopics)."""

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> frozenset[str]:
        return frozenset().union(*(m.subscribed_topic_names for m in self.members.values()))


def validate(req: ShareHeartbeat) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid: INVALID_REQUEST."""
    if not req.member_id:
        raise KafkaError(ErrorCode.invalid_request, "MemberId can't be empty.")
    if not req.group_id:
        raise KafkaError(ErrorCode.invalid_request, "GroupId can't be empty.")
    if req.rack_id is not None and not req.rack_id:
        raise KafkaError(ErrorCode.invalid_request, "RackId can't be empty.")
    if req.member_epoch == 0:
        if not req.subscribed_topic_names:
            raise KafkaError(ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise KafkaError(ErrorCode.invalid_request, "MemberEpoch is invalid.")


def _check_epoch(member: ShareGroupMember, epoch: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid."""
    if epoch == 0 or epoch == member.member_epoch:
        return
    if epoch > member.member_epoch:
        raise KafkaError(
            ErrorCode.fenced_member_epoch,
            f"The share group member has a greater member epoch ({epoch}) than the one known by the "
            f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    if epoch != member.previous_member_epoch:
        raise KafkaError(
            ErrorCode.fenced_member_epoch,
            f"The share group member has a smaller member epoch ({epoch}) than the one known by the "
            f"group coordinator ({member.member_epoch}), and it does not match the previous member epoch "
            f"({member.previous_member_epoch}). The member must abandon all its partitions and rejoin.",
        )


def heartbeat(
    group: ShareGroup,
    req: ShareHeartbeat,
    client_id: str,
    client_host: str,
    topics: Mapping[str, TopicInfo],
    settings: ShareGroupSettings,
    now_ms: int,
) -> HeartbeatAnswer:
    """One ShareGroupHeartbeat with member epoch >= 0 on `group` (a new, empty group for a first
    join); raises KafkaError with Kafka's code. `req` was validated."""
    if len(group.members) >= settings.max_size and req.member_id not in group.members:
        raise KafkaError(
            ErrorCode.group_max_size_reached,
            f"The share group has reached its maximum capacity of {settings.max_size} members.",
        )
    member = group.members.get(req.member_id)
    if member is None:
        if req.member_epoch != 0:
            raise KafkaError(
                ErrorCode.unknown_member_id,
                f"Member {req.member_id} is not a member of group {group.group_id}.",
            )
        member = ShareGroupMember(req.member_id)
    _check_epoch(member, req.member_epoch)

    updated = dataclasses.replace(
        member,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        subscribed_topic_names=(
            frozenset(req.subscribed_topic_names)
            if req.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        client_id=client_id,
        client_host=client_host,
    )
    subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
    bump = subscription_changed
    if group.assignment_epoch >= group.group_epoch:
        bump = bump or initialized_assignment_pending(group)
    group.members[updated.member_id] = updated
    metadata = _subscription_metadata(group, topics)
    if metadata != group.subscription_metadata:
        group.subscription_metadata = metadata
        bump = True
    if bump:
        group.group_epoch += 1

    if group.group_epoch > group.assignment_epoch and (
        group.assignment_timestamp_ms == 0
        or settings.assignment_interval_ms == 0
        or now_ms >= group.assignment_timestamp_ms + settings.assignment_interval_ms
    ):
        _update_target_assignment(group, now_ms)

    reconciled = _reconcile(updated, group, subscription_changed)
    group.members[reconciled.member_id] = reconciled
    send_assignment = (
        req.member_epoch == 0
        or req.subscribed_topic_names is not None
        or reconciled.assigned != member.assigned
    )
    return HeartbeatAnswer(
        reconciled.member_id,
        reconciled.member_epoch,
        settings.heartbeat_interval_ms,
        reconciled.assigned if send_assignment else None,
    )


def leave(group: ShareGroup, member_id: str) -> HeartbeatAnswer:
    """A heartbeat with member epoch -1 (Kafka's shareGroupLeave): the member is removed and the
    group epoch bumped; UNKNOWN_MEMBER_ID for a member the group does not have."""
    if member_id not in group.members:
        raise KafkaError(
            ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}."
        )
    fence(group, member_id)
    return HeartbeatAnswer(member_id, LEAVE_GROUP_MEMBER_EPOCH, 0, None)


def fence(group: ShareGroup, member_id: str) -> None:
    """Remove a member that left or whose session expired (Kafka's shareGroupFenceMember)."""
    group.members.pop(member_id, None)
    group.target.pop(member_id, None)
    group.subscription_metadata = {
        name: info
        for name, info in group.subscription_metadata.items()
        if name in group.subscribed_topic_names()
    }
    group.group_epoch += 1


def _subscription_metadata(group: ShareGroup, topics: Mapping[str, TopicInfo]) -> dict[str, TopicInfo]:
    return {name: topics[name] for name in sorted(group.subscribed_topic_names()) if name in topics}


def _update_target_assignment(group: ShareGroup, now_ms: int) -> None:
    specs = {
        m.member_id: ShareMemberSpec(
            frozenset(
                group.subscription_metadata[n].topic_id
                for n in m.subscribed_topic_names
                if n in group.subscription_metadata
            ),
            group.target.get(m.member_id, {}),
        )
        for m in group.members.values()
    }
    assignable = {
        info.topic_id: sorted(p for p in group.initialized.get(info.topic_id, ()) if p < info.partitions)
        for info in group.subscription_metadata.values()
    }
    group.target = dict(assign(specs, assignable))
    group.assignment_epoch = group.group_epoch
    group.assignment_timestamp_ms = now_ms


def _reconcile(member: ShareGroupMember, group: ShareGroup, subscription_changed: bool) -> ShareGroupMember:
    """Kafka's maybeReconcile with ShareGroupAssignmentBuilder: the member takes its target."""
    epoch = group.assignment_epoch
    if not subscription_changed and member.member_epoch == epoch:
        return member
    subscribed = {
        group.subscription_metadata[n].topic_id
        for n in member.subscribed_topic_names
        if n in group.subscription_metadata
    }
    target = {t: ps for t, ps in group.target.get(member.member_id, {}).items() if t in subscribed}
    if member.member_epoch != epoch:
        return dataclasses.replace(
            member, assigned=target, member_epoch=epoch, previous_member_epoch=member.member_epoch
        )
    return dataclasses.replace(member, assigned=target)


def initialized_assignment_pending(group: ShareGroup) -> bool:
    """Whether some initialized partitions of a subscribed topic are not in the target assignment
    yet (Kafka's initializedAssignmentPending)."""
    if not group.members or not group.initialized:
        return False
    subscribed_ids = {info.topic_id for info in group.subscription_metadata.values()}
    assigned: dict[uuid.UUID, set[int]] = {}
    for a in group.target.values():
        for t, ps in a.items():
            assigned.setdefault(t, set()).update(ps)
    return any(t in subscribed_ids and assigned.get(t) != set(ps) for t, ps in group.initialized.items())


def partitions_to_initialize(
    group: ShareGroup, topics: Mapping[str, TopicInfo], now_ms: int, retry_interval_ms: int
) -> dict[uuid.UUID, frozenset[int]]:
    """The subscribed partitions whose share-group state must be initialized with the share
    coordinator (Kafka's subscribedTopicsChangeMap), now marked initializing."""
    todo: dict[uuid.UUID, frozenset[int]] = {}
    for name in sorted(group.subscribed_topic_names()):
        info = topics.get(name)
        if info is None:
            continue
        done = set(group.initialized.get(info.topic_id, ()))
        pending = group.initializing.get(info.topic_id)
        if pending is not None and now_ms - pending[1] < retry_interval_ms:
            done |= pending[0]
        if not done or len(done) < info.partitions:
            todo[info.topic_id] = frozenset(range(info.partitions)) - done
    for topic_id, ps in todo.items():
        group.initializing[topic_id] = (ps, now_ms)
    return todo


def initialized(group: ShareGroup, topic_id: uuid.UUID, partitions: frozenset[int]) -> None:
    """The share coordinator initialized the state of `partitions`: they become assignable (the
    next heartbeat bumps the group epoch to assign them)."""
    group.initialized[topic_id] = group.initialized.get(topic_id, frozenset()) | partitions
    pending = group.initializing.get(topic_id)
    if pending is not None:
        rest = pending[0] - partitions
        if rest:
            group.initializing[topic_id] = (rest, pending[1])
        else:
            del group.initializing[topic_id]
