"""A consumer group of the KIP-848 protocol (group type "consumer"): its members, epochs and
assignments, and the reconciliation of each member towards its target assignment.

Pure state and rules (no clock, no I/O), as Kafka's group coordinator has them (ConsumerGroup,
ConsumerGroupMember, CurrentAssignmentBuilder); the heartbeat flow that drives them, with session
and rebalance timers, is `consumer_groups.py`.

Three epochs: the group epoch is bumped whenever what the assignment depends on changes (a member
joins, leaves or is fenced, a subscription changes, a subscribed topic is created, deleted or gets
partitions, the racks of a subscribed partition's replicas change); the target assignment epoch
is the group epoch the target assignment was last computed at; each member's epoch is the target
assignment epoch it has reconciled to.

Group states (`ConsumerGroupState`, computed, as Kafka's ConsumerGroup.maybeUpdateGroupState):

    Empty        no members.
    Assigning    group epoch > target assignment epoch: the target assignment is computed on the
                 next heartbeat.
    Reconciling  the target assignment is current but some member has not reached it.
    Stable       every member is at the target assignment epoch, in member state Stable.
    Dead         the group was removed (deleted, or replaced by a classic group); never stored.

Member states (`MemberState`) and transitions (`reconcile`, Kafka's CurrentAssignmentBuilder):

    Stable                the member owns its whole assignment at its epoch.
        -> UnrevokedPartitions    a newer target takes some of its partitions away: it keeps its
                                  epoch and must stop using them (the heartbeat answer lists only
                                  the partitions it keeps)
        -> UnreleasedPartitions   it moves to the new epoch but some of its new partitions are
                                  still owned by another member
        -> Stable                 it moves to the new epoch with its new partitions
    UnrevokedPartitions   waiting for the member to report (owned partitions in a heartbeat) that
                          it no longer owns the revoked partitions; bounded by its rebalance
                          timeout, after which it is fenced.
        -> (as from Stable)       once it no longer reports any of them
    UnreleasedPartitions  waiting for previous owners to release partitions it is given.
        -> Stable / UnreleasedPartitions   as they are released (the partition is added then)

Partitions pending revocation still belong to their member (`partition_owners`): they are given
to another member only once the owner has acknowledged the revocation.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Topic id -> partitions."""

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
CONSUMER_GROUP_TYPE = "consumer"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member that uses the classic protocol in a consumer group joined with (KIP-848
    online migration; Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]
    """(protocol name, ConsumerProtocolSubscription bytes) in the member's order of preference."""


@dataclass(frozen=True, slots=True)
class ResolvedRegularExpression:
    """The topics a group's regular expression matched when it was last resolved (Kafka's
    ResolvedRegularExpression, kept in a ConsumerGroupRegularExpression record): `version`, the
    coordinator's topic-creation mark it was resolved against (regex_resolution.py), and
    `timestamp_ms`, when."""

    topics: frozenset[str]
    version: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """One member (a value: every change makes a new one with `dataclasses.replace`)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None
    """Set when the member uses the classic protocol (JoinGroup/SyncGroup/Heartbeat)."""
    partition_epochs: Mapping[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    """The epoch at which each partition of `assigned` and `pending_revocation` was assigned
    (KIP-1251); a partition missing here counts as assigned at the member's epoch (what Kafka
    takes when a record carries no epochs, or when a classic group is converted)."""

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """Kafka's assignmentEpoch, then pendingRevocationEpoch: None when the member owns no
        such partition."""
        if partition in self.assigned.get(topic_id, ()) or partition in self.pending_revocation.get(topic_id, ()):
            return self.partition_epochs.get((topic_id, partition), max(self.member_epoch, 0))
        return None

    def with_epochs(self, epoch: int) -> ConsumerGroupMember:
        """Kafka's Builder.updateMemberEpoch: the previous epoch is the current one."""
        return dataclasses.replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch


def _difference(a: frozenset[int], b: Iterable[int]) -> frozenset[int]:
    return a - frozenset(b)


def owns_any(owned: Mapping[uuid.UUID, Iterable[int]] | None, partitions: Assignment) -> bool:
    """Does the member still report (owned partitions of its heartbeat) any of `partitions`?
    None (not reported) counts as yes."""
    if owned is None:
        return True
    return any(p in partitions.get(topic_id, ()) for topic_id, ps in owned.items() for p in ps)


def is_subset(owned: Mapping[uuid.UUID, Iterable[int]] | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(p in assigned.get(topic_id, ()) for topic_id, ps in owned.items() for p in ps)


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    owner_epoch: Mapping[tuple[uuid.UUID, int], int],
    owned: Mapping[uuid.UUID, Iterable[int]] | None,
) -> ConsumerGroupMember:
    """The member's next state towards `target` at `target_epoch` (Kafka's
    CurrentAssignmentBuilder.build); `owner_epoch` has the epoch of the member currently owning
    each assigned or pending-revocation partition, `owned` what this member reported owning."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, target_epoch, target, owner_epoch, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS and owns_any(owned, member.pending_revocation):
        return member
    return _next_assignment(member, target_epoch, target, owner_epoch, owned)


def _next_assignment(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    owner_epoch: Mapping[tuple[uuid.UUID, int], int],
    owned: Mapping[uuid.UUID, Iterable[int]] | None,
) -> ConsumerGroupMember:
    new_assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    to_assign: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        gone = current - keep
        pending_own = member.pending_revocation.get(topic_id, frozenset())
        add = {
            p
            for p in wanted - keep
            if owner_epoch.get((topic_id, p), -1) == -1 or p in pending_own
        }
        unreleased = unreleased or len(add) < len(wanted - keep)
        if keep:
            new_assigned[topic_id] = keep
        if gone:
            revoke[topic_id] = gone
        if add:
            to_assign[topic_id] = frozenset(add)
    # kept and revoked partitions keep the epoch they were assigned at, new ones take the target's
    # (Kafka's CurrentAssignmentBuilder.computeNextAssignment)
    def epochs(parts: Assignment) -> dict[tuple[uuid.UUID, int], int]:
        return {
            (topic_id, p): member.partition_epochs.get((topic_id, p), max(member.member_epoch, 0))
            for topic_id, ps in parts.items()
            for p in ps
        }

    kept = epochs(new_assigned)
    if revoke and owns_any(owned, revoke):
        return dataclasses.replace(
            member.with_epochs(member.member_epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=new_assigned,
            pending_revocation=revoke,
            partition_epochs=kept | epochs(revoke),
        )
    for topic_id, ps in to_assign.items():
        new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | ps
        kept.update(((topic_id, p), target_epoch) for p in ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return dataclasses.replace(
        member.with_epochs(target_epoch), state=state, assigned=new_assigned, pending_revocation={},
        partition_epochs=kept,
    )


@dataclass(slots=True, eq=False)
class ConsumerGroup:
    """The KIP-848 state of one group id (its committed offsets stay on the coordinator's group
    record, shared with the classic protocol)."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    """Instance id -> member id."""
    target: dict[str, Assignment] = field(default_factory=dict)
    """Member id -> its target assignment at `assignment_epoch`."""
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    """Subscribed topic name -> (topic id, partition count) when the group epoch was last bumped."""
    resolved_regexes: dict[str, ResolvedRegularExpression] = field(default_factory=dict)
    """The members' regular expressions -> their last resolution (regex_resolution.py: resolved
    off the heartbeat; a regular expression not resolved yet is missing)."""
    partition_racks: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    """Subscribed topic name -> each partition's replica racks (sorted) at the last group epoch
    bump: part of what Kafka's topic metadata hash covers, so a rack change bumps the epoch."""
    assignor: str = ""
    """The server assignor the target assignment was last computed with."""
    assignment_timestamp_ms: int = 0
    """When the target assignment was last computed (0: never)."""
    shared: bool = field(default=False, repr=False)
    """Its dicts are shared with a copy (`snapshot`): copied before they change (copy-on-write:
    `members`, `static_members` and `target` change in place, the others are only replaced)."""

    def snapshot(self) -> ConsumerGroup:
        """A copy as the group is now (group_reverts.py), in constant time: both share the dicts
        until one of them changes them."""
        self.shared = True
        return ConsumerGroup(self.group_id, self.group_epoch, self.assignment_epoch, self.members,
                             self.static_members, self.target, self.subscription_metadata, self.resolved_regexes,
                             self.partition_racks, self.assignor, self.assignment_timestamp_ms, shared=True)  # fmt: skip

    def _own(self) -> None:
        if self.shared:
            self.members, self.static_members, self.target = dict(self.members), dict(self.static_members), dict(self.target)
            self.shared = False

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.state is not MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = None if instance_id is None else self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def subscribed_regexes(self) -> set[str]:
        """The regular expressions some member subscribes to (Kafka's subscribedRegularExpressions)."""
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}

    def update_member(self, member: ConsumerGroupMember) -> None:
        if self.members.get(member.member_id) == member and (
            member.instance_id is None or self.static_members.get(member.instance_id) == member.member_id
        ):
            return  # unchanged (a steady heartbeat): nothing copied
        self._own()
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        self._own()
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        if member is not None and member.instance_id is not None:
            if self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        return member

    def set_target(self, member_id: str, assignment: Assignment) -> None:
        self._own()
        self.target[member_id] = assignment

    def partition_owners(self) -> dict[tuple[uuid.UUID, int], int]:
        """(topic id, partition) -> epoch of the member that owns it (assigned or pending
        revocation): Kafka's currentPartitionEpoch."""
        owners: dict[tuple[uuid.UUID, int], int] = {}
        for m in self.members.values():
            for parts in (m.assigned, m.pending_revocation):
                for topic_id, ps in parts.items():
                    for p in ps:
                        owners[(topic_id, p)] = m.member_epoch
        return owners

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (ties: the name first in sort order), else
        the default (Kafka's ConsumerGroup.computePreferredServerAssignor)."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return max(sorted(counts), key=lambda name: counts[name])
