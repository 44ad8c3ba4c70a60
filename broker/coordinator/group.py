"""A classic consumer group: its members, generation, protocol, leader and committed offsets.

This module holds the state and the rules that need no clock and no I/O; the JoinGroup, SyncGroup,
Heartbeat and LeaveGroup flows that drive it (with timers and waiting members) are in
`membership.py`, persistence and loading in `coordinator.py`.

States and transitions (`GroupState`), as in Kafka's classic group protocol:

    Empty                no members; may hold committed offsets (a "simple" group has only
                         offsets and no protocol type).
        -> PreparingRebalance   a member joins
        -> Dead                 the group is deleted, expires (no offsets left) or is unloaded
    PreparingRebalance   waiting for every known member to (re)join, bounded by the rebalance
                         timeout (the largest of the members'); a new group first waits
                         group.initial.rebalance.delay.ms for more members.
        -> CompletingRebalance  the join phase completes with members: generation + 1, a protocol
                                is chosen and a leader; every joined member gets its JoinGroup answer
        -> Empty                the join phase completes with no members (generation + 1)
        -> Dead
    CompletingRebalance  waiting for the leader's SyncGroup with the assignment.
        -> Stable               the leader's assignment is stored; members get their assignment
        -> PreparingRebalance   a member joins, leaves, fails its session or does not sync in time
        -> Dead
    Stable               members heartbeat; SyncGroup answers with the stored assignment.
        -> PreparingRebalance   a member joins (new, or the leader / a member with new metadata
                                rejoins), leaves or fails its session
        -> Dead
    Dead                 gone; requests get COORDINATOR_NOT_AVAILABLE so clients look it up again.

KIP-848 online migration (group_conversion.py) is outside these transitions: an upgrade takes a
group with members, in any state but Dead, to Empty with its members set aside (`consumer` then
holds them), and a downgrade makes it a Stable classic group again, which at once prepares a
rebalance (unless a static member replacing another found the group's target assignment current).

Any other transition is a bug and raises `IllegalStateTransition`.
"""

from __future__ import annotations

import asyncio
import enum
import struct
from collections import Counter
from dataclasses import dataclass, field

from broker.coordinator.consumer_group import ConsumerGroup
from broker.coordinator.records import (
    GroupMetadataValue,
    MemberRecord,
    OffsetAndMetadata,
)
from protocol.topic_partition import TopicPartition

CONSUMER_PROTOCOL_TYPE = "consumer"
CLASSIC_GROUP_TYPE = "classic"
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
"""A member that joined a new group may wait this long for its first JoinGroup answer (Kafka's)."""


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One member as the leader sees it in its JoinGroup answer."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True, eq=False)
class Member:
    """A member of a classic group (mutable: the group changes it as it rejoins and syncs)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    awaiting_join: asyncio.Future[object] | None = None
    awaiting_sync: asyncio.Future[object] | None = None
    is_new: bool = False
    joined_at: float = 0.0
    """Loop time of the last JoinGroup (for NEW_MEMBER_JOIN_TIMEOUT_MS)."""
    heartbeat_deadline: float = 0.0
    """Loop time after which the member's session has expired unless it is kept alive."""
    heartbeat_timer: asyncio.TimerHandle | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Same protocols, in the same order, with the same metadata."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def cancel_timer(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None


@dataclass(slots=True, eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    """Wall-clock time of the last state change (GroupMetadataValue current_state_timestamp)."""
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id -> member id."""
    pending_members: dict[str, asyncio.TimerHandle | None] = field(default_factory=dict)
    """KIP-394: member ids handed out with MEMBER_ID_REQUIRED, not joined yet (with their timer)."""
    pending_sync: set[str] = field(default_factory=set)
    """Members of this generation that have not sent SyncGroup yet."""
    new_member_added: bool = False
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    pending_offset_commits: Counter[TopicPartition] = field(default_factory=Counter)
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    """Producer id -> offsets its open transaction committed (TxnOffsetCommit): visible in
    `offsets` only once its COMMIT marker is written, dropped on ABORT."""
    join_timer: asyncio.TimerHandle | None = None
    sync_timer: asyncio.TimerHandle | None = None
    initial_delay: bool = False
    """The join phase is in group.initial.rebalance.delay.ms (completes only on its timer)."""
    consumer: ConsumerGroup | None = None
    """The group's KIP-848 state while its type is "consumer" (consumer_group.py); this record
    then has no classic members (state Empty) and holds the group's committed offsets."""

    # -- state --------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {target.value} is not allowed"
            )
        self.state = target
        self.state_timestamp_ms = now_ms

    # -- members ------------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_timer()
        if member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id, keeping everything else (its assignment)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        known = self.static_member_id(instance_id)
        return known is not None and known != member_id

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def size(self) -> int:
        return len(self.members)

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return self.awaiting_join_count() == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if none did."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is not None and leader.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols ----------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Could a member with these protocols join? (else INCONSISTENT_GROUP_PROTOCOL)"""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for its most preferred candidate; most votes wins
        (ties go to the protocol the leader prefers, then the first member's)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol supported by every member")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        order: list[Member] = []
        if self.leader_id in self.members:
            order.append(self.members[self.leader_id])
        order.extend(self.members.values())
        for member in order:
            for name, _ in member.protocols:
                if votes.get(name) == best:
                    return name
        raise AssertionError("unreachable")

    def init_next_generation(self, now_ms: int) -> None:
        """End of the join phase: generation + 1, then CompletingRebalance (or Empty)."""
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
            self.pending_sync = set(self.members)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY, now_ms)
            self.pending_sync = set()

    def joined_members(self) -> tuple[JoinedMember, ...]:
        """What the leader gets: every member with its metadata for the chosen protocol."""
        assert self.protocol_name is not None
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
            for m in self.members.values()
        )

    # -- consumer protocol --------------------------------------------------------------------

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None if it cannot be known."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= parse_subscription_topics(m.metadata_for(self.protocol_name))
            except (KeyError, ValueError, struct.error):
                return None
        return topics

    # -- records ------------------------------------------------------------------------------

    def to_record(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue of the current generation (with these assignments if given)."""
        members = []
        for m in self.members.values():
            assignment = m.assignment if assignments is None else assignments.get(m.member_id, b"")
            subscription = m.metadata_for(self.protocol_name) if self.protocol_name else b""
            members.append(
                MemberRecord(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.rebalance_timeout_ms, m.session_timeout_ms, subscription, assignment,
                )
            )  # fmt: skip
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp_ms,
            members=tuple(members),
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> ClassicGroup:
        """A group loaded from __consumer_offsets: Empty without members, else Stable."""
        group = cls(group_id)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.state_timestamp_ms = (
            value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms
        )
        for r in value.members:
            protocols = ((value.protocol, r.subscription),) if value.protocol else ()
            member = Member(
                r.member_id, r.group_instance_id, r.client_id, r.client_host,
                r.rebalance_timeout_ms, r.session_timeout_ms, value.protocol_type, protocols,
                assignment=r.assignment,
            )  # fmt: skip
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.leader_id = value.leader if value.leader in group.members else None
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group


def parse_subscription_topics(data: bytes) -> set[str]:
    """Topic names from a ConsumerProtocolSubscription (int16 version, then [topic string])."""
    if len(data) < 6:
        raise ValueError("subscription too short")
    (count,) = struct.unpack_from(">i", data, 2)
    pos = 6
    topics: set[str] = set()
    for _ in range(count):
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2
        if n < 0 or pos + n > len(data):
            raise ValueError("subscription topic truncated")
        topics.add(data[pos : pos + n].decode("utf-8"))
        pos += n
    return topics


def parse_assignment(data: bytes) -> list[tuple[str, int]]:
    """(topic, partition) pairs of a ConsumerProtocolAssignment (int16 version, then [topic
    string, [int32 partition]]); a malformed one raises ValueError or struct.error."""
    if len(data) < 6:
        return []
    (count,) = struct.unpack_from(">i", data, 2)
    pos = 6
    out: list[tuple[str, int]] = []
    for _ in range(max(count, 0)):
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2
        if n < 0 or pos + n > len(data):
            raise ValueError("assignment topic truncated")
        topic = data[pos : pos + n].decode("utf-8")
        pos += n
        (partitions,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(partitions, 0)):
            out.append((topic, struct.unpack_from(">i", data, pos)[0]))
            pos += 4
    return out
