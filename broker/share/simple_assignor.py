"""The `simple` assignor of share groups (Kafka 4.3.1's SimpleAssignor, the only one share groups
have): a pure function from the members' subscriptions and current target assignments to each
member's new target assignment.

Unlike a consumer group's, a share group's partition may be given to several members: with more
members than partitions each partition is shared by `desired sharing` = ceil(members / partitions)
of them. Balance first (each member gets its desired count of partitions, computed as Kafka does
from the member's index), then stickiness (a member keeps what it has where balance allows).
When every member subscribes to the same topics (homogeneous) all their partitions are balanced
together (SimpleHomogeneousAssignmentBuilder); otherwise each topic is balanced among the
members subscribing to it (SimpleHeterogeneousAssignmentBuilder).

Kafka's builders walk Java hash sets and maps, so when several balanced, sticky answers exist the
one chosen follows Java's hash order; here members are taken in member id order and partitions in
(topic id, partition) order, so which member gets which moved partition may differ from Kafka's.
Partitions that are no longer assignable (not in `assignable`) are taken away. One departure
from Kafka's code: a member that lost an over-shared partition but still holds its desired count
is not given another one (Kafka's builder lists it as unfilled and may, leaving another member
short: with members a{0}, b{0,1}, c{} and three partitions, b would end with two and c none).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Assignment = Mapping[uuid.UUID, frozenset[int]]
TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class ShareMemberSpec:
    topics: frozenset[uuid.UUID]
    """Subscribed topics that exist."""
    current: Assignment
    """The member's target assignment before this one."""


def assign(
    members: Mapping[str, ShareMemberSpec], assignable: Mapping[uuid.UUID, Sequence[int]]
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Member id -> its new target assignment. `assignable` has, per subscribed topic, the
    partitions that may be assigned (in Kafka: those whose share-group state is initialized)."""
    if not members:
        return {}
    ids = sorted(members)
    if len({members[m].topics for m in ids}) == 1:
        result = _homogeneous(ids, members, assignable)
    else:
        result = _heterogeneous(ids, members, assignable)
    return {ids[i]: {t: frozenset(ps) for t, ps in sorted(result[i].items()) if ps} for i in range(len(ids))}


def _desired_counts(num_members: int, num_partitions: int) -> tuple[int, list[int]]:
    """Kafka's desired sharing (members per partition) and desired partition count per member
    index: ceil((i+1)·x) - ceil(i·x) with x = sharing·partitions/members, in doubles as Kafka."""
    if num_partitions == 0 or num_members == 0:
        return 0, [0] * num_members
    sharing = (num_members + num_partitions - 1) // num_partitions
    precise = sharing * num_partitions / num_members
    return sharing, [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(num_members)]


class _Placement:
    """Who holds what while one assignment is built: by partition and by member, both ordered."""

    def __init__(self, num_members: int) -> None:
        self.by_partition: dict[TopicPartition, dict[int, None]] = {}
        self.by_member: dict[int, dict[TopicPartition, None]] = {i: {} for i in range(num_members)}

    def add(self, tp: TopicPartition, member: int) -> None:
        self.by_partition.setdefault(tp, {})[member] = None
        self.by_member[member][tp] = None

    def remove(self, tp: TopicPartition, member: int) -> None:
        del self.by_partition[tp][member]
        del self.by_member[member][tp]

    def held(self, member: int, topic: uuid.UUID | None) -> int:
        """How many partitions `member` holds (of `topic` only, unless None)."""
        if topic is None:
            return len(self.by_member[member])
        return sum(1 for t, _p in self.by_member[member] if t == topic)

    def assign_remaining(
        self,
        order: Sequence[TopicPartition],
        sharing: int,
        desired: Sequence[int],
        unfilled: list[int],
        topic: uuid.UUID | None = None,
    ) -> None:
        """Give each partition short of `sharing` members to the unfilled members in turn, until
        each holds its desired count (of `topic`, when given) (Kafka's assignRemainingPartitions)."""
        pos, assigned_this_pass = 0, False
        for tp in order:
            holders = self.by_partition.setdefault(tp, {})
            to_make = sharing - len(holders)
            while to_make > 0 and unfilled:
                if pos >= len(unfilled):
                    if not assigned_this_pass:
                        break
                    pos, assigned_this_pass = 0, False
                member = unfilled[pos]
                if self.held(member, topic) >= desired[member]:
                    unfilled.pop(pos)  # filled since it was listed (see the module docstring)
                    continue
                if member in holders:
                    pos += 1
                    continue
                self.add(tp, member)
                to_make -= 1
                assigned_this_pass = True
                if self.held(member, topic) >= desired[member]:
                    unfilled.pop(pos)
                else:
                    pos += 1
            if not unfilled:
                break

    def assignment(self, member: int) -> dict[uuid.UUID, set[int]]:
        out: dict[uuid.UUID, set[int]] = {}
        for t, p in self.by_member[member]:
            out.setdefault(t, set()).add(p)
        return out


def _homogeneous(
    ids: list[str], members: Mapping[str, ShareMemberSpec], assignable: Mapping[uuid.UUID, Sequence[int]]
) -> list[dict[uuid.UUID, set[int]]]:
    n = len(ids)
    subscribed = members[ids[0]].topics
    targets = [(t, p) for t in sorted(subscribed) for p in sorted(assignable.get(t, ()))]
    target_set = set(targets)
    sharing, desired = _desired_counts(n, len(targets))
    placed = _Placement(n)
    unfilled: set[int] = set()
    overfilled: set[int] = set()
    for i, member_id in enumerate(ids):
        for t, ps in sorted(members[member_id].current.items()):
            for p in sorted(ps):
                if (t, p) in target_set:
                    placed.add((t, p), i)
        held = len(placed.by_member[i])
        if held < desired[i]:
            unfilled.add(i)
        elif held > desired[i]:
            overfilled.add(i)
    # Partitions shared by more members than desired lose some, overfilled members first.
    for tp in sorted(placed.by_partition):
        holders = placed.by_partition[tp]
        for prefer_overfilled in (True, False):
            for member in list(holders):
                if len(holders) <= sharing:
                    break
                if (member in overfilled) == prefer_overfilled:
                    placed.remove(tp, member)
                    unfilled.add(member)
    # Members still holding more than their desired count give the rest back.
    for member in sorted(overfilled):
        for tp in list(placed.by_member[member]):
            if len(placed.by_member[member]) <= desired[member]:
                break
            placed.remove(tp, member)
    placed.assign_remaining(targets, sharing, desired, sorted(unfilled))
    return [placed.assignment(i) for i in range(n)]


def _heterogeneous(
    ids: list[str], members: Mapping[str, ShareMemberSpec], assignable: Mapping[uuid.UUID, Sequence[int]]
) -> list[dict[uuid.UUID, set[int]]]:
    n = len(ids)
    placed = _Placement(n)
    all_topics = sorted(set().union(*(members[m].topics for m in ids)))
    for topic in all_topics:
        subscribers = [i for i, m in enumerate(ids) if topic in members[m].topics]
        targets = [(topic, p) for p in sorted(assignable.get(topic, ()))]
        target_set = set(targets)
        sharing, counts = _desired_counts(len(subscribers), len(targets))
        desired = [0] * n
        for position, member in enumerate(subscribers):
            desired[member] = counts[position]
        for i, member_id in enumerate(ids):
            for p in sorted(members[member_id].current.get(topic, ())):
                if (topic, p) in target_set:
                    placed.add((topic, p), i)
        held = {i: [tp for tp in placed.by_member[i] if tp[0] == topic] for i in range(n)}
        for i in range(n):
            for tp in held[i][desired[i] :]:
                placed.remove(tp, i)
        for tp in targets:
            holders = placed.by_partition.get(tp, {})
            for member in list(holders):
                if len(holders) <= sharing:
                    break
                placed.remove(tp, member)
        unfilled = [i for i in subscribers if placed.held(i, topic) < desired[i]]
        placed.assign_remaining(targets, sharing, desired, unfilled, topic)
    return [placed.assignment(i) for i in range(n)]
