# Over 700 lines: the heartbeat flow, its records and its timers share one in-memory group state per coordinator.
"""The KIP-848 consumer group protocol on the group coordinator: ConsumerGroupHeartbeat and
ConsumerGroupDescribe, as Kafka's GroupMetadataManager serves them.

A heartbeat with member epoch 0 joins (creating the group if needed), > 0 keeps the member alive
and reconciles it, -1 leaves, -2 leaves temporarily (a static member, who keeps its assignment
until its session expires or it rejoins with the same instance id). Each heartbeat:

1. applies the member's changed fields; a new group first moves to epoch 1, then a changed
   subscription (topic names), or a change of what the members' regular expressions match or of
   the subscribed topics' partitions in the cluster (their count, or the racks of their replicas'
   brokers: what Kafka's topic metadata hash covers) bumps the group epoch (Kafka 4.3's counts);
2. if the group epoch is ahead of the target assignment epoch and the last target is at least
   `group.consumer.assignment.interval.ms` old (KIP-1263), computes the target assignment of
   every member with the group's server assignor (the one most members ask for, else the first
   of `group.consumer.assignors`); otherwise the member is reconciled to the last target;
3. moves the member towards its target (`consumer_group.reconcile`): partitions to revoke are
   withheld from everyone until the member stops reporting them.

A member is fenced (removed; the group epoch bumped) when its session
(`group.consumer.session.timeout.ms`) expires, or when it has not revoked partitions within its
rebalance timeout. A group id is one type or the other: a consumer heartbeat joining a classic
group with members converts it (group_conversion.py; GROUP_ID_NOT_FOUND with Kafka's message when
group.consumer.migration.policy or its protocol type forbid it), classic members of a consumer
group are served by classic_join.py, and when the last consumer-protocol member of a group whose
other members use the classic protocol leaves or is fenced, the group is converted back; an empty
group changes type on its first join.

Every change is written to the group's __consumer_offsets partition as Kafka's records
(consumer_records.py: the group epoch, each member's metadata, target and current assignment, the
target assignment epoch; tombstones when a member leaves or the group is deleted) before the
heartbeat is answered, in the order of the changes (`write_in_order`), and `restore` rebuilds the
group from them when a coordinator loads the partition: members carry on with their epochs after
a coordinator move. A change whose records cannot be written is answered with the coordinator
error and reverted, with the group's later changes not yet written (group_reverts.py).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker import clock
from broker.config.broker import ASSIGNOR_CLASSES
from broker.coordinator import consumer_records as rec
from broker.coordinator.assignors import ASSIGNORS, MemberSpec
from broker.coordinator.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    ResolvedRegularExpression,
    is_subset,
    reconcile,
)
from broker.coordinator.group import ClassicGroup, GroupState
from broker.coordinator.group_configs import GroupConfigs
from broker.coordinator.group_conversion import downgrade, upgrade
from broker.coordinator.group_reverts import Change, ClassicTimeout, GroupReverts
from broker.coordinator.migration import MigrationError, MigrationPolicy, can_downgrade
from broker.coordinator.ordered_writes import GroupAppend, OrderedWrites
from broker.coordinator.records import group_metadata_key
from broker.coordinator.regex_resolution import RegexRefresh, RegexUpdate, TopicFilter, compile_regex, resolve
from broker.coordinator.replica_racks import ReplicaRacks
from protocol.errors import ErrorCode
from protocol.records import NewRecord

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.coordinator.membership import GroupMembership
    from controller.model import ClusterImage

log = logging.getLogger("samsa.coordinator")

CONSUMER_GENERATED_MEMBER_ID_VERSION = 1
"""From ConsumerGroupHeartbeat v1 the consumer generates its member id (KIP-1082)."""


def _every_topic(names: Iterable[str]) -> frozenset[str]:
    """The topic filter of a heartbeat without a principal to check (no authorizer)."""
    return frozenset(names)


def new_member_id() -> str:
    """Like Kafka's Uuid.randomUuid().toString(): 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def assignor_name(configured: str) -> str:
    """`group.consumer.assignors` may name Kafka's classes: the name clients ask for."""
    return ASSIGNOR_CLASSES.get(configured, configured)


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat's fields (None: unchanged since the last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[uuid.UUID, tuple[int, ...]] | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class HeartbeatError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class GroupsPartition(Protocol):
    """A __consumer_offsets partition this coordinator leads: its groups by id."""

    @property
    def groups(self) -> dict[str, ClassicGroup]: ...


GroupLookup = Callable[[str], "tuple[ErrorCode, GroupsPartition | None]"]


class ConsumerGroups:
    """The consumer-protocol groups of the partitions this coordinator leads, and their timers."""

    def __init__(
        self, config: BrokerConfig, image: Callable[[], ClusterImage], lookup: GroupLookup, append: GroupAppend,
        membership: GroupMembership,
    ) -> None:  # fmt: skip
        self._config = config
        self._membership = membership
        """The classic groups' protocol, which a group's online migration hands members to and from."""
        self.migration_policy = MigrationPolicy(config.group_consumer_migration_policy.lower())
        self._reverts = GroupReverts(self, membership)
        self._change: Change | None = None
        """The change being made: its group's snapshot, reverted if its records are not written."""
        self._image = image
        self._group_configs = GroupConfigs(config, image)
        self._lookup = lookup
        self._out: list[NewRecord] = []
        """Records of the change being made (written before its answer is sent)."""
        self._writes = OrderedWrites(append)
        self._assignors = [assignor_name(a) for a in config.group_consumer_assignors]
        self._session_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._rebalance_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._classic_timers: dict[str, dict[tuple[str, str], asyncio.TimerHandle]] = {"join": {}, "sync": {}}
        """A classic member's join and sync timeouts (classic_join.py), by kind."""
        self._classic_timeouts: dict[tuple[str, str, str], ClassicTimeout] = {}
        """The same timeouts by (kind, group id, member id), as a revert reschedules them."""
        self._racks = ReplicaRacks()
        self._regex_refresh = RegexRefresh(config.group_consumer_regex_refresh_interval_ms)

    @property
    def assignors(self) -> list[str]:
        return self._assignors

    # == validation (Kafka's GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid)

    def validate(self, req: HeartbeatRequest, api_version: int, topic_partitions_null: bool) -> None:
        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(ErrorCode.invalid_request, message)

        if api_version >= CONSUMER_GENERATED_MEMBER_ID_VERSION or req.member_epoch > 0 or \
                req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id.strip():
                raise invalid("MemberId can't be empty.")
        if not req.group_id.strip():
            raise invalid("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id.strip():
            raise invalid("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise invalid("RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if topic_partitions_null or req.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self._assignors:
            raise HeartbeatError(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self._assignors)}.",
            )

    # == heartbeat =================================================================================

    async def heartbeat(
        self, req: HeartbeatRequest, client_id: str, client_host: str, may_describe: TopicFilter = _every_topic
    ) -> HeartbeatResult:
        """Apply the heartbeat in memory, write its records, then answer (the coordinator's error
        if they could not be written). `may_describe`: the topics the member's principal may
        describe, what a resolution of the group's regular expressions it starts keeps."""
        self.begin(req.group_id)
        try:
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                result = self._leave(req)
            else:
                result = self._heartbeat(req, client_id, client_host, may_describe)
        except HeartbeatError as e:
            result = HeartbeatResult(e.error, e.message)
        error = await self.commit(req.group_id)
        return result if error == ErrorCode.none else HeartbeatResult(error, error.name)

    def begin(self, group_id: str) -> None:
        """Start a change of the group (a heartbeat, a timer's, or a classic member's request:
        classic_join.py): its snapshot is taken."""
        self._out = []
        _, part = self._lookup(group_id)
        self._change = None if part is None else self._reverts.take(part.groups, group_id)

    async def commit(self, group_id: str) -> ErrorCode:
        """Write the change's records (if any): the coordinator's error."""
        records, self._out = self._out, []
        change, self._change = self._change, None
        if not records:
            return ErrorCode.none
        return await asyncio.shield(self.write_in_order(group_id, records, change=change))

    # == records (consumer_records.py) ==============================================================

    def _emit(self, record_type: int, group_id: str, member_id: str | None, value: bytes | None) -> None:
        self._out.append(NewRecord(rec.key_bytes(rec.ConsumerGroupKey(record_type, group_id, member_id)), value))

    def _emit_member(self, group_id: str, m: ConsumerGroupMember) -> None:
        self._emit(rec.MEMBER_METADATA, group_id, m.member_id, rec.member_metadata_value(_metadata(m)))

    def _emit_current(self, group_id: str, m: ConsumerGroupMember) -> None:
        value = rec.CurrentAssignmentValue(m.member_epoch, m.previous_member_epoch, m.state, m.assigned,
                                           m.pending_revocation, m.partition_epochs)  # fmt: skip
        self._emit(rec.CURRENT_ASSIGNMENT, group_id, m.member_id, rec.current_assignment_value(value))

    def _emit_member_tombstones(self, group_id: str, member_id: str) -> None:
        """Kafka's order: current assignment, target assignment, then the member."""
        for record_type in (rec.CURRENT_ASSIGNMENT, rec.TARGET_MEMBER, rec.MEMBER_METADATA):
            self._emit(record_type, group_id, member_id, None)

    def _flush_later(self, group_id: str) -> None:
        """Write what a timer changed (no request waits on it)."""
        records, self._out = self._out, []
        change, self._change = self._change, None
        if records:
            self.write_in_order(group_id, records, background=True, change=change)

    def write_in_order(
        self, group_id: str, records: list[NewRecord], *, background: bool = False, change: Change | None = None
    ) -> asyncio.Task[ErrorCode]:
        """Write a group's records after those of its changes made before (ordered_writes.py)."""
        return self._writes.write(group_id, records, background=background, change=change)

    def deletion_records(self, group: ConsumerGroup) -> list[NewRecord]:
        """Tombstones for every record of a group being deleted (it has no members)."""
        self._out = []
        for member_id in group.members:
            self._emit_member_tombstones(group.group_id, member_id)
        self._emit(rec.TARGET_METADATA, group.group_id, None, None)
        for regex in sorted(group.resolved_regexes):
            self._emit(rec.REGULAR_EXPRESSION, group.group_id, regex, None)
        self._emit(rec.GROUP_METADATA, group.group_id, None, None)
        records, self._out = self._out, []
        return records

    def creation_records(self, group: ConsumerGroup) -> list[NewRecord]:
        """Every record of a group made whole at once (an upgraded classic group, migration.py),
        in Kafka's ConsumerGroup.createConsumerGroupRecords order: the members, the group epoch,
        the target assignment and its epoch, the current assignments."""
        self._out = []
        for m in group.members.values():
            self._emit_member(group.group_id, m)
        self._emit(rec.GROUP_METADATA, group.group_id, None, rec.group_epoch_value(group.group_epoch))
        for member_id in group.members:
            self._emit(rec.TARGET_MEMBER, group.group_id, member_id, rec.target_member_value(group.target.get(member_id, {})))
        self._emit(rec.TARGET_METADATA, group.group_id, None, rec.target_metadata_value(
            rec.TargetMetadataValue(group.assignment_epoch, group.assignment_timestamp_ms)))  # fmt: skip
        for m in group.members.values():
            self._emit_current(group.group_id, m)
        records, self._out = self._out, []
        return records

    async def convert_to_classic(self, holder: ClassicGroup) -> ErrorCode:
        """An empty consumer-protocol group becomes a classic group (a classic member joins): its
        records are deleted, so that a reload does not bring the consumer group back. A change:
        reverted (the consumer group back) if they cannot be written; the append's error."""
        if holder.consumer is None:
            return ErrorCode.none
        self.begin(holder.group_id)
        records = self.deletion_records(holder.consumer)
        self._out = records
        holder.consumer = None
        return await self.commit(holder.group_id)

    def delete_group(
        self, groups: dict[str, ClassicGroup], holder: ClassicGroup, offset_tombstones: list[NewRecord],
        undo: Callable[[], None] | None = None, *, background: bool = False,
    ) -> asyncio.Task[ErrorCode]:  # fmt: skip
        """An empty group with a consumer group deleted (DeleteGroups, or expired): the tombstones
        of its offsets, of the consumer group, then of the group, in one write after its changes
        under way. A change, as Kafka's deletion is (its replay removes the group, reverted if the
        write fails): if they cannot be written the group is back, and `undo` is called."""
        assert holder.consumer is not None
        change = self._reverts.take(groups, holder.group_id)
        if undo is not None:
            change.undo.append(undo)
        records = [*offset_tombstones, *self.deletion_records(holder.consumer),
                   NewRecord(group_metadata_key(holder.group_id), None)]  # fmt: skip
        del groups[holder.group_id]
        return self.write_in_order(holder.group_id, records, background=background, change=change)

    def restore(self, group_id: str, records: Mapping[tuple[int, str | None], rec.ConsumerGroupValue]) -> ConsumerGroup:
        """A group rebuilt from its records when its partition is loaded: members keep their
        epochs and assignments and get a full session."""
        epoch = records[(rec.GROUP_METADATA, None)]
        group = ConsumerGroup(group_id, group_epoch=epoch if isinstance(epoch, int) else 0)
        target = records.get((rec.TARGET_METADATA, None))
        if isinstance(target, rec.TargetMetadataValue):
            group.assignment_epoch = target.assignment_epoch
            group.assignment_timestamp_ms = target.assignment_timestamp_ms
        for (record_type, member_id), value in records.items():
            if member_id is None:
                continue
            if record_type == rec.TARGET_MEMBER and isinstance(value, Mapping):
                group.target[member_id] = value
            elif record_type == rec.REGULAR_EXPRESSION and isinstance(value, ResolvedRegularExpression):
                group.resolved_regexes[member_id] = value  # keyed by the regular expression
            elif record_type == rec.MEMBER_METADATA and isinstance(value, rec.MemberMetadataValue):
                current = records.get((rec.CURRENT_ASSIGNMENT, member_id))
                member = ConsumerGroupMember(
                    member_id, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                    client_host=value.client_host, rebalance_timeout_ms=value.rebalance_timeout_ms,
                    subscribed_topic_names=value.subscribed_topic_names,
                    subscribed_topic_regex=value.subscribed_topic_regex, server_assignor=value.server_assignor,
                    classic=value.classic,
                )  # fmt: skip
                if isinstance(current, rec.CurrentAssignmentValue):
                    member = dataclasses.replace(
                        member, member_epoch=current.member_epoch, previous_member_epoch=current.previous_member_epoch,
                        state=current.state, assigned=current.assigned, pending_revocation=current.pending_revocation,
                        partition_epochs=current.partition_epochs,
                    )  # fmt: skip
                group.update_member(member)
        group.target = {m: a for m, a in group.target.items() if m in group.members}
        self._refresh_subscriptions(group, self._image())  # what the group epoch was computed against
        for member_id in group.members:
            self.start_session(group_id, member_id)
        return group

    def start_session(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """(Re)start the member's session: the group's consumer.session.timeout.ms (group config,
        else group.consumer.session.timeout.ms) unless given (a classic member's own)."""
        own = self._group_configs.int_value(group_id, "consumer.session.timeout.ms")
        timeout = own if timeout_ms is None else timeout_ms
        self._schedule(self._session_timers, (group_id, member_id), timeout,
                       lambda: self._fence(group_id, member_id, "session expired"))  # fmt: skip

    def _group(self, group_id: str, create: bool) -> tuple[ClassicGroup, ConsumerGroup]:
        error, part = self._lookup(group_id)
        if part is None:
            raise HeartbeatError(error, error.name)
        holder = part.groups.get(group_id)
        if holder is not None and holder.is_in(GroupState.DEAD):
            holder = None
        if holder is not None and holder.consumer is not None:
            return holder, holder.consumer
        if holder is not None and (holder.members or not holder.is_in(GroupState.EMPTY)):
            if not create:
                raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
            return holder, self._upgraded(holder)
        if not create:
            raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        if holder is None:
            holder = ClassicGroup(group_id, state_timestamp_ms=clock.now_ms())
            part.groups[group_id] = holder
        holder.consumer = ConsumerGroup(group_id)
        holder.protocol_type = None
        holder.protocol_name = None
        return holder, holder.consumer

    def _upgraded(self, holder: ClassicGroup) -> ConsumerGroup:
        """A classic group with members converted (group_conversion.upgrade): its records start
        the change's, its members' sessions run at their classic session timeouts."""
        topic_ids = {name: t.topic_id for name, t in self._image().topics.items()}
        try:
            upgraded = upgrade(holder, self.migration_policy, self._config.group_consumer_max_size, topic_ids,
                               self._membership)  # fmt: skip
        except MigrationError as e:
            raise HeartbeatError(ErrorCode.group_id_not_found, str(e)) from e
        group = upgraded.group
        assert not self._out, "an upgrade's records come first"
        self._out = upgraded.records(self.creation_records(group))
        self._refresh_subscriptions(group, self._image())  # Kafka's metadata hash of the converted group
        for member_id, m in group.members.items():
            self.start_session(group.group_id, member_id, None if m.classic is None else m.classic.session_timeout_ms)
        return group

    def _member(self, group: ConsumerGroup, req: HeartbeatRequest, member_id: str) -> ConsumerGroupMember:
        joining = req.member_epoch == 0
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise HeartbeatError(
                        ErrorCode.unknown_member_id,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                return ConsumerGroupMember(member_id)
            _check_epoch(member, req)
            return member
        existing = group.static_member(req.instance_id)
        if joining:
            if existing is None:
                return ConsumerGroupMember(member_id, instance_id=req.instance_id)
            if existing.classic is None and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # a classic one is replaced at once (Kafka's getOrMaybeSubscribeStaticConsumerGroupMember)
                raise HeartbeatError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {existing.member_id} with instance id {req.instance_id} "
                    "is not released yet.",
                )
            return self.replace_static_member(group, existing, member_id)
        if existing is None:
            raise HeartbeatError(
                ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown."
            )
        if existing.member_id != member_id:
            raise HeartbeatError(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {req.instance_id} was fenced by member "
                f"{existing.member_id}.",
            )
        _check_epoch(existing, req)
        return existing

    def replace_static_member(
        self, group: ConsumerGroup, existing: ConsumerGroupMember, member_id: str
    ) -> ConsumerGroupMember:
        """A rejoining static instance takes the member's place (and its assignment) at epoch 0."""
        target = group.target.get(existing.member_id)
        group.remove_member(existing.member_id)
        self._cancel_timers(group.group_id, existing.member_id)
        self._emit_member_tombstones(group.group_id, existing.member_id)
        if target is not None:
            group.set_target(member_id, target)
            self._emit(rec.TARGET_MEMBER, group.group_id, member_id, rec.target_member_value(target))
        return dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)

    def _heartbeat(
        self, req: HeartbeatRequest, client_id: str, client_host: str, may_describe: TopicFilter
    ) -> HeartbeatResult:
        joining = req.member_epoch == 0
        if req.subscribed_topic_regex and compile_regex(req.subscribed_topic_regex) is None:
            raise HeartbeatError(  # before the group is looked up: a refused join creates no group
                ErrorCode.invalid_regular_expression,
                f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular expression.",
            )
        holder, group = self._group(req.group_id, joining)
        member_id = req.member_id or new_member_id()
        if len(group.members) >= self._config.group_consumer_max_size and member_id not in group.members:
            raise HeartbeatError(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of "
                f"{self._config.group_consumer_max_size} members.",
            )
        member = self._member(group, req, member_id)
        is_new = member.member_id not in group.members
        updated = dataclasses.replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
            ),
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=(
                tuple(req.subscribed_topic_names)
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                req.subscribed_topic_regex
                if req.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=client_id,
            client_host=client_host,
        )
        after = self.apply_member(holder, group, member, updated, req.owned, may_describe=may_describe)
        if after != updated:
            if after.state is MemberState.UNREVOKED_PARTITIONS:
                self.schedule_revocation_timeout(group.group_id, member_id, after.member_epoch,
                                                 after.rebalance_timeout_ms)  # fmt: skip
            else:
                self._cancel(self._rebalance_timers, (group.group_id, member_id))
        self.start_session(group.group_id, member_id)
        full = joining or (
            req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None and req.owned is not None
        )
        changed = after.assigned != member.assigned or is_new
        return HeartbeatResult(
            ErrorCode.none,
            member_id=member_id,
            member_epoch=after.member_epoch,
            heartbeat_interval_ms=self._group_configs.int_value(group.group_id, "consumer.heartbeat.interval.ms"),
            assignment=after.assigned if full or changed else None,
        )

    def apply_member(
        self, holder: ClassicGroup, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
        owned: Mapping[uuid.UUID, tuple[int, ...]] | None, downgrading: bool = False,
        may_describe: TopicFilter = _every_topic,
    ) -> ConsumerGroupMember:  # fmt: skip
        """Steps 1-3 of a heartbeat (or of a classic member's JoinGroup): `member` becomes
        `updated`, the group epoch is bumped if the subscriptions changed, the target assignment
        computed if due, and the member reconciled towards it (`owned`: the partitions it reports,
        None when it does not say); returns the member as it now is. `downgrading`: the group
        becomes a classic group right after (classic_join.py); if its target assignment is stale,
        none is computed and the member is not reconciled (the classic group rebalances).
        `may_describe`: the topics the member's principal may describe (regex_resolution.py)."""
        member_id = updated.member_id
        is_new = member_id not in group.members
        # A new group first moves away from epoch 0; then a changed subscription (topic names, or
        # a regular expression already resolved, or dropped) bumps it, as Kafka 4.3 does; a new
        # regular expression bumps it once resolved (`_regexes_resolved`).
        names_changed = set(updated.subscribed_topic_names) != set(member.subscribed_topic_names)
        if is_new or _metadata(updated) != _metadata(member):
            self._emit_member(group.group_id, updated)
        regex = self._update_regex(group, member, updated, may_describe)
        group.update_member(updated)
        epoch_before = group.group_epoch
        if is_new:
            holder.state_timestamp_ms = clock.now_ms()
        if group.group_epoch == 0:
            group.group_epoch = 1
        bump = names_changed or regex is RegexUpdate.UPDATED_AND_RESOLVED
        if bump or regex is not RegexUpdate.UPDATED:  # a new one's topics count once resolved
            bump = self._refresh_subscriptions(group, self._image()) or bump
        if bump:
            group.group_epoch += 1
            log.info("consumer group epoch bumped group=%s epoch=%d members=%d",
                     group.group_id, group.group_epoch, len(group.members))  # fmt: skip
        if group.group_epoch != epoch_before:
            self._emit(rec.GROUP_METADATA, group.group_id, None, rec.group_epoch_value(group.group_epoch))
        if downgrading and group.group_epoch > group.assignment_epoch:
            return updated  # the classic group the group becomes rebalances instead
        now = clock.now_ms()
        interval = self._group_configs.int_value(group.group_id, "consumer.assignment.interval.ms")
        if group.group_epoch > group.assignment_epoch and (
            group.assignment_timestamp_ms == 0 or interval == 0 or now >= group.assignment_timestamp_ms + interval
        ):
            self._update_target_assignment(group, now)
        before = group.members[member_id]
        after = before
        if not before.is_reconciled_to(group.assignment_epoch):
            after = reconcile(
                before, group.assignment_epoch, group.target.get(member_id, {}), group.partition_owners(), owned
            )
            if after != before:
                group.update_member(after)
                self._emit_current(group.group_id, after)
        return after

    def _update_regex(
        self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember, may_describe: TopicFilter
    ) -> RegexUpdate:
        """Kafka's maybeUpdateRegularExpressions, before the member's change reaches the group: the
        tombstone of a regular expression its last member dropped, and a resolution of the group's
        scheduled if one is due (regex_resolution.py)."""
        old, new = member.subscribed_topic_regex or None, updated.subscribed_topic_regex or None
        if old == new:
            self._schedule_resolution(group, None, None, False, may_describe)
            return RegexUpdate.NO_CHANGE
        update = RegexUpdate.UPDATED
        subscribers = {r: sum(m.subscribed_topic_regex == r for m in group.members.values()) for r in (old, new) if r}
        dropped = old is not None and subscribers[old] == 1 and member.member_id in group.members
        if dropped:
            self._emit(rec.REGULAR_EXPRESSION, group.group_id, old, None)
        brought_new = new is not None and subscribers[new] == 0
        if new is None or (not brought_new and new in group.resolved_regexes):
            update = RegexUpdate.UPDATED_AND_RESOLVED
        self._schedule_resolution(group, old, new, brought_new, may_describe)
        if dropped:
            group.resolved_regexes = {r: v for r, v in group.resolved_regexes.items() if r != old}
        return update

    def _schedule_resolution(
        self, group: ConsumerGroup, old: str | None, new: str | None, brought_new: bool, may_describe: TopicFilter
    ) -> None:
        regexes = self._regex_refresh.due(group, old, new, brought_new, self._image())
        if regexes is not None:
            group_id = group.group_id
            self._regex_refresh.schedule(group_id, lambda: self._regexes_resolved(group_id, regexes, may_describe))

    def _regexes_resolved(self, group_id: str, regexes: set[str], may_describe: TopicFilter) -> None:
        """Kafka's handleRegularExpressionsResult, run after the heartbeat that scheduled it: the
        group's regular expressions resolved against the cluster as it is now, a record for each
        that the group still subscribes to, and the group epoch bumped if what they match (or the
        subscribed topics' metadata) changed."""
        group = self._current(group_id)
        if group is None:
            return
        image, now = self._image(), clock.now_ms()
        result = resolve(image, sorted(regexes), may_describe, self._regex_refresh.new_topics_mark(image), now)
        self.begin(group_id)
        subscribed = group.subscribed_regexes()
        resolved, bump = dict(group.resolved_regexes), False
        for regex, resolution in sorted(result.items()):
            if regex not in subscribed:
                continue
            previous = resolved.get(regex)
            bump |= (frozenset() if previous is None else previous.topics) != resolution.topics
            resolved[regex] = resolution
            self._emit(rec.REGULAR_EXPRESSION, group_id, regex, rec.regular_expression_value(resolution))
        group.resolved_regexes = resolved
        bump = self._refresh_subscriptions(group, image) or bump
        if bump:
            group.group_epoch += 1
            self._emit(rec.GROUP_METADATA, group_id, None, rec.group_epoch_value(group.group_epoch))
        log.info("consumer group regular expressions resolved group=%s regexes=%d topics=%d epoch=%d bumped=%s",
                 group_id, len(result), len(image.topics), group.group_epoch, bump)  # fmt: skip
        self._flush_later(group_id)

    def _drop_regexes(self, group: ConsumerGroup, regexes: set[str]) -> None:
        """Tombstones for the regular expressions among these that no member subscribes to any more
        (Kafka's maybeDeleteResolvedRegularExpressions)."""
        gone = regexes - group.subscribed_regexes()
        for regex in sorted(gone):
            self._emit(rec.REGULAR_EXPRESSION, group.group_id, regex, None)
        if gone:
            group.resolved_regexes = {r: v for r, v in group.resolved_regexes.items() if r not in gone}

    def _refresh_subscriptions(self, group: ConsumerGroup, image: ClusterImage) -> bool:
        """The subscribed topics (the members' topic names, and what their regular expressions
        were last resolved to) with their partition counts and replica racks in the cluster (what
        Kafka's topic metadata hash covers); True when they changed since the last group epoch
        bump."""
        names: set[str] = set()
        for m in group.members.values():
            names.update(m.subscribed_topic_names)
            resolution = group.resolved_regexes.get(m.subscribed_topic_regex or "")
            if resolution is not None:
                names |= resolution.topics
        metadata = {
            name: (topic.topic_id, len(topic.partitions))
            for name in names
            if (topic := image.topics.get(name)) is not None
        }
        racks = {name: self._racks.of(image, name) for name in metadata}
        changed = (metadata, racks) != (group.subscription_metadata, group.partition_racks)
        group.subscription_metadata = metadata
        group.partition_racks = racks
        return changed

    def _subscribed_ids(self, group: ConsumerGroup, member: ConsumerGroupMember) -> frozenset[uuid.UUID]:
        names = set(member.subscribed_topic_names)
        resolution = group.resolved_regexes.get(member.subscribed_topic_regex or "")
        if resolution is not None:
            names |= resolution.topics
        return frozenset(group.subscription_metadata[n][0] for n in names if n in group.subscription_metadata)

    def _update_target_assignment(self, group: ConsumerGroup, now_ms: int) -> None:
        name = group.preferred_assignor(self._assignors[0])
        specs = [
            MemberSpec(m.member_id, m.instance_id, self._subscribed_ids(group, m), group.target.get(m.member_id, {}))
            for m in group.members.values()
        ]
        partitions = dict(group.subscription_metadata.values())
        previous, group.target = group.target, dict(ASSIGNORS[name](specs, partitions))
        for member_id, assignment in group.target.items():
            if previous.get(member_id) != assignment:
                self._emit(rec.TARGET_MEMBER, group.group_id, member_id, rec.target_member_value(assignment))
        group.assignment_epoch = group.group_epoch
        group.assignor = name
        group.assignment_timestamp_ms = now_ms
        self._emit(rec.TARGET_METADATA, group.group_id, None,
                   rec.target_metadata_value(rec.TargetMetadataValue(group.assignment_epoch, now_ms)))  # fmt: skip
        log.info("consumer group target assignment computed group=%s epoch=%d assignor=%s members=%d",
                 group.group_id, group.group_epoch, name, len(specs))  # fmt: skip

    # == describe =================================================================================

    def describe(self, group_id: str) -> tuple[ErrorCode, str | None, ConsumerGroup | None]:
        """(error, message, group) for ConsumerGroupDescribe."""
        error, part = self._lookup(group_id)
        if part is None:
            return error, None, None
        holder = part.groups.get(group_id)
        if holder is None or holder.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found, f"Group {group_id} not found.", None
        if holder.consumer is None:
            return ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.", None
        return ErrorCode.none, None, holder.consumer

    def topic_names(self) -> dict[uuid.UUID, str]:
        """The cluster's topic names by id."""
        return {t.topic_id: name for name, t in self._image().topics.items()}

    def assignor_of(self, group: ConsumerGroup) -> str:
        return group.assignor or group.preferred_assignor(self._assignors[0])

    # == leaving and fencing =====================================================================

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        _, group = self._group(req.group_id, False)
        response = HeartbeatResult(ErrorCode.none, member_id=req.member_id, member_epoch=req.member_epoch)
        if req.instance_id is None:
            if req.member_id not in group.members:
                raise HeartbeatError(
                    ErrorCode.unknown_member_id,
                    f"Member {req.member_id} is not a member of group {group.group_id}.",
                )
            self._remove(group, (req.member_id,), "left")
            return response
        member = group.static_member(req.instance_id)
        if member is None:
            raise HeartbeatError(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise HeartbeatError(
                ErrorCode.fenced_instance_id,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                f"{member.member_id}.",
            )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            leaving = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
            group.update_member(leaving)
            self._emit_current(group.group_id, leaving)
            self._cancel(self._rebalance_timers, (group.group_id, member.member_id))
            log.info("static member left temporarily group=%s member_id=%s instance_id=%s",
                     group.group_id, member.member_id, req.instance_id)  # fmt: skip
            return dataclasses.replace(response, member_id=member.member_id)
        self._remove(group, (member.member_id,), "left")
        return response

    async def fence_members(self, group_id: str, member_ids: Sequence[str], reason: str) -> ErrorCode:
        """Kafka's consumerGroupFenceMembers for a LeaveGroup: the members go, the group epoch is
        bumped once, and the records are written before the answer (their error, if any)."""
        group = self._current(group_id)
        if group is None or not member_ids:
            return ErrorCode.none
        self.begin(group_id)
        self._remove(group, member_ids, reason)
        return await self.commit(group_id)

    def _remove(self, group: ConsumerGroup, member_ids: Sequence[str], reason: str) -> None:
        if can_downgrade(self.migration_policy, group, set(member_ids), self._config.group_max_size):
            self.downgrade(group, set(member_ids),
                           f"Downgrade group {group.group_id} from consumer to classic for member leaving.")
            return
        regexes = {m.subscribed_topic_regex for member_id in member_ids
                   if (m := group.members.get(member_id)) is not None and m.subscribed_topic_regex}  # fmt: skip
        for member_id in member_ids:
            group.remove_member(member_id)
            self._cancel_timers(group.group_id, member_id)
            self._emit_member_tombstones(group.group_id, member_id)
        self._drop_regexes(group, regexes)
        self._refresh_subscriptions(group, self._image())
        group.group_epoch += 1
        self._emit(rec.GROUP_METADATA, group.group_id, None, rec.group_epoch_value(group.group_epoch))
        for member_id in member_ids:
            log.info("consumer group member removed group=%s member_id=%s reason=%s epoch=%d members=%d",
                     group.group_id, member_id, reason, group.group_epoch, len(group.members))  # fmt: skip

    def downgrade(self, group: ConsumerGroup, leaving: set[str], rebalance: str | None) -> None:
        """The group's members left all use the classic protocol (group_conversion.downgrade): the
        consumer group's tombstones, then the classic group's record; the classic group rebalances
        for the reason given, if one is."""
        _, part = self._lookup(group.group_id)
        holder = None if part is None else part.groups.get(group.group_id)
        assert holder is not None and holder.consumer is group
        for member_id in group.members:
            self._cancel_timers(group.group_id, member_id)
        out = self._out
        tombstones = self.deletion_records(group)
        classic = downgrade(holder, group, leaving, self.topic_names(), self._membership, rebalance)
        self._out = [*out, *tombstones, classic]

    def _current(self, group_id: str) -> ConsumerGroup | None:
        _, part = self._lookup(group_id)
        holder = None if part is None else part.groups.get(group_id)
        return None if holder is None else holder.consumer

    def _fence(self, group_id: str, member_id: str, reason: str) -> None:
        self._session_timers.pop((group_id, member_id), None)
        group = self._current(group_id)
        if group is not None and member_id in group.members:
            self.begin(group_id)
            self._remove(group, (member_id,), reason)
            self._flush_later(group_id)

    def _rebalance_expired(self, group_id: str, member_id: str, epoch: int) -> None:
        self._rebalance_timers.pop((group_id, member_id), None)
        group = self._current(group_id)
        member = None if group is None else group.members.get(member_id)
        if member is not None and member.member_epoch == epoch and member.state is MemberState.UNREVOKED_PARTITIONS:
            self._fence(group_id, member_id, "rebalance_timeout")

    # == timers ====================================================================================

    def schedule_revocation_timeout(self, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        """Fence the member unless it revokes its partitions within its rebalance timeout."""
        self._schedule(self._rebalance_timers, (group_id, member_id), timeout_ms,
                       lambda: self._rebalance_expired(group_id, member_id, epoch))  # fmt: skip

    @staticmethod
    def _schedule(
        timers: dict[tuple[str, str], asyncio.TimerHandle], key: tuple[str, str], delay_ms: int,
        callback: Callable[[], None],
    ) -> None:  # fmt: skip
        ConsumerGroups._cancel(timers, key)
        timers[key] = asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback)

    @staticmethod
    def _cancel(timers: dict[tuple[str, str], asyncio.TimerHandle], key: tuple[str, str]) -> None:
        handle = timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        """The member's timers stop; the change being made keeps its classic timeouts, which a
        revert restarts."""
        for timers in (self._session_timers, self._rebalance_timers):
            self._cancel(timers, (group_id, member_id))
        for kind in self._classic_timers:
            timeout = self._cancel_classic(kind, group_id, member_id)
            if timeout is not None and self._change is not None:
                self._change.undo.append(functools.partial(self.restore_classic_timeout, timeout))

    def schedule_classic_timeout(
        self, kind: str, group_id: str, member_id: str, delay_ms: int, reason: str, if_absent: bool = False
    ) -> None:
        """Fence a classic member unless it joins ("join") or syncs ("sync") within `delay_ms`."""
        timers = self._classic_timers[kind]
        if if_absent and (group_id, member_id) in timers:
            return
        self._schedule(timers, (group_id, member_id), delay_ms,
                       lambda: self._classic_expired(kind, group_id, member_id, reason))  # fmt: skip
        deadline = timers[(group_id, member_id)].when()
        self._classic_timeouts[(kind, group_id, member_id)] = ClassicTimeout(kind, group_id, member_id, deadline, reason)

    def cancel_classic_timeout(self, kind: str, group_id: str, member_id: str) -> None:
        self._cancel_classic(kind, group_id, member_id)

    def _cancel_classic(self, kind: str, group_id: str, member_id: str) -> ClassicTimeout | None:
        self._cancel(self._classic_timers[kind], (group_id, member_id))
        return self._classic_timeouts.pop((kind, group_id, member_id), None)

    def classic_timeouts(self, group: ConsumerGroup) -> list[ClassicTimeout]:
        """The group's classic timeouts running."""
        return [t for m in group.members for kind in self._classic_timers
                if (t := self._classic_timeouts.get((kind, group.group_id, m))) is not None]  # fmt: skip

    def restore_classic_timeout(self, timeout: ClassicTimeout) -> None:
        """A timeout a reverted change stopped runs again until its deadline (group_reverts.py), if
        its member is in the group."""
        group = self._current(timeout.group_id)
        if group is None or timeout.member_id not in group.members:
            return
        delay_ms = round((timeout.deadline - asyncio.get_running_loop().time()) * 1000)
        self.schedule_classic_timeout(timeout.kind, timeout.group_id, timeout.member_id, delay_ms, timeout.reason)

    def _classic_expired(self, kind: str, group_id: str, member_id: str, reason: str) -> None:
        self._classic_timers[kind].pop((group_id, member_id), None)
        self._classic_timeouts.pop((kind, group_id, member_id), None)
        self._cancel(self._session_timers, (group_id, member_id))
        self._fence(group_id, member_id, reason)

    def unload(self, group: ConsumerGroup) -> None:
        """The group's partition is no longer led here: its timers stop, and its resolution of
        regular expressions if one is scheduled."""
        for member_id in list(group.members):
            self._cancel_timers(group.group_id, member_id)
        self._regex_refresh.cancel(group.group_id)

    def close(self) -> None:
        self._writes.close()
        self._regex_refresh.close()
        for timers in (self._session_timers, self._rebalance_timers, *self._classic_timers.values()):
            for handle in timers.values():
                handle.cancel()
            timers.clear()
        self._classic_timeouts.clear()


def _check_epoch(member: ConsumerGroupMember, req: HeartbeatRequest) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: the member's epoch, or its previous one
    while it owns only partitions of its current assignment (the answer that bumped its epoch may
    have been lost)."""
    if req.member_epoch > member.member_epoch:
        raise HeartbeatError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({req.member_epoch}) than the one known "
            f"by the group coordinator ({member.member_epoch}). The member must abandon all its partitions "
            "and rejoin.",
        )
    if req.member_epoch < member.member_epoch and (
        req.member_epoch != member.previous_member_epoch or not is_subset(req.owned, member.assigned)
    ):
        raise HeartbeatError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({req.member_epoch}) than the one known "
            f"by the group coordinator ({member.member_epoch}). The member must abandon all its partitions "
            "and rejoin.",
        )


def _metadata(m: ConsumerGroupMember) -> rec.MemberMetadataValue:
    return rec.MemberMetadataValue(m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names,
                                   m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor,
                                   m.classic)  # fmt: skip
