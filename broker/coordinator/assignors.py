"""Server-side partition assignors of KIP-848 consumer groups (`group.consumer.assignors`, the
client's `group.remote.assignor`): pure functions from the members' subscriptions to each member's
target assignment.

- `range` is Kafka's RangeAssignor: members sorted (static members first by instance id, then
  by member id); for each topic, each subscribed member in that order takes the next contiguous
  range, the first `partitions % members` of them one partition more. Co-partitioned topics
  are assigned alike. Same answer as Kafka for the same members.
- `uniform` (the default) balances partitions across members as evenly as their subscriptions
  allow and keeps each member's current target partitions where balance permits (sticky), like
  Kafka's UniformAssignor; when several balanced, sticky answers exist, which member gets which
  of the moved partitions may differ from Kafka's.

Neither reads racks: Kafka 4.3.1's server assignors are not rack-aware (the racks of the
partitions' replicas only enter its topic metadata hash: consumer_groups.py bumps the group epoch
when they change), so a member's `client.rack` does not change its assignment, as on Kafka.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.coordinator.consumer_group import Assignment


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    topics: frozenset[uuid.UUID]
    """Subscribed topics that exist."""
    current: Assignment
    """The member's current target assignment (for stickiness)."""


AssignFn = Callable[[list[MemberSpec], Mapping[uuid.UUID, int]], dict[str, Assignment]]


def _sorted_members(members: list[MemberSpec]) -> list[MemberSpec]:
    static = sorted((m for m in members if m.instance_id is not None), key=lambda m: m.instance_id or "")
    dynamic = sorted((m for m in members if m.instance_id is None), key=lambda m: m.member_id)
    return static + dynamic


def range_assign(members: list[MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    ordered = _sorted_members(members)
    result: dict[str, dict[uuid.UUID, frozenset[int]]] = {m.member_id: {} for m in ordered}
    for topic_id, count in partitions.items():
        subscribers = [m for m in ordered if topic_id in m.topics]
        if not subscribers:
            continue
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            end = min(start + quota + (1 if i < extra else 0), count)
            if start < end:
                result[m.member_id][topic_id] = frozenset(range(start, end))
            start = end
    return dict(result)


def uniform_assign(members: list[MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    ordered = _sorted_members(members)
    load: dict[str, int] = {m.member_id: 0 for m in ordered}
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in ordered}
    by_id = {m.member_id: m for m in ordered}
    all_partitions = [(t, p) for t in sorted(partitions, key=str) for p in range(partitions[t])]
    eligible: dict[tuple[uuid.UUID, int], list[str]] = {
        tp: [m.member_id for m in ordered if tp[0] in m.topics] for tp in all_partitions
    }
    # A member's fair share: partitions it can take divided among the members that can take them.
    share: dict[str, float] = {m.member_id: 0.0 for m in ordered}
    for candidates in eligible.values():
        for member_id in candidates:
            share[member_id] += 1 / len(candidates)
    quota = {member_id: -(-share[member_id] // 1) for member_id in share}  # ceil
    unassigned: list[tuple[uuid.UUID, int]] = []
    for tp in all_partitions:
        keeper = None
        for m in ordered:
            if tp[1] in m.current.get(tp[0], ()) and tp[0] in m.topics and load[m.member_id] < quota[m.member_id]:
                keeper = m.member_id
                break
        if keeper is None:
            unassigned.append(tp)
        else:
            owned[keeper].setdefault(tp[0], set()).add(tp[1])
            load[keeper] += 1
    for tp in unassigned:
        candidates = eligible[tp]
        if not candidates:
            continue
        target = min(candidates, key=lambda member_id: (load[member_id] - share[member_id], load[member_id]))
        owned[target].setdefault(tp[0], set()).add(tp[1])
        load[target] += 1
    _rebalance(owned, load, eligible, by_id)
    return {mid: {t: frozenset(ps) for t, ps in topics.items() if ps} for mid, topics in owned.items()}


def _rebalance(
    owned: dict[str, dict[uuid.UUID, set[int]]],
    load: dict[str, int],
    eligible: Mapping[tuple[uuid.UUID, int], list[str]],
    by_id: Mapping[str, MemberSpec],
) -> None:
    """Move partitions from the most to the least loaded member while that narrows the gap by
    more than one and the receiver subscribes to the partition's topic."""
    for _ in range(sum(load.values()) + 1):
        moved = False
        for heavy in sorted(load, key=lambda m: -load[m]):
            for light in sorted(load, key=lambda m: load[m]):
                if load[heavy] - load[light] <= 1:
                    break
                for topic_id in sorted(owned[heavy], key=str):
                    if topic_id not in by_id[light].topics or not owned[heavy][topic_id]:
                        continue
                    p = max(owned[heavy][topic_id])
                    if light not in eligible[(topic_id, p)]:
                        continue
                    owned[heavy][topic_id].discard(p)
                    owned[light].setdefault(topic_id, set()).add(p)
                    load[heavy] -= 1
                    load[light] += 1
                    moved = True
                    break
                if moved:
                    break
            if moved:
                break
        if not moved:
            return


ASSIGNORS: dict[str, AssignFn] = {"uniform": uniform_assign, "range": range_assign}
"""Kafka's built-in server assignors by name (`group.consumer.assignors` may list these)."""
