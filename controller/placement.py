"""Pure rules for topic names and replica placement."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from protocol.types import BrokerId

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_error(name: str | None) -> str | None:
    """Why `name` is not a legal topic name (Kafka's Topic.validate), or None if it is."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL.match(name):
        return (
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def assign_replicas(
    brokers: Sequence[BrokerId],
    racks: Mapping[BrokerId, str | None],
    num_partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    start_index: int = 0,
) -> dict[int, tuple[BrokerId, ...]]:
    """Spread replicas over brokers like Kafka's rack-unaware/rack-aware assignment.

    Leaders are spread round-robin starting at `start_index`; followers are shifted so that replicas
    of consecutive partitions do not land on the same brokers in the same order. When every broker
    has a rack, brokers are interleaved by rack first so each partition's replicas span racks.
    """
    if replication_factor > len(brokers):
        raise ValueError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    ordered = sorted(brokers)
    if ordered and all(racks.get(b) for b in ordered):
        by_rack: dict[str, list[BrokerId]] = {}
        for b in ordered:
            by_rack.setdefault(racks[b] or "", []).append(b)
        interleaved: list[BrokerId] = []
        queues = [list(v) for _, v in sorted(by_rack.items())]
        while any(queues):
            for q in queues:
                if q:
                    interleaved.append(q.pop(0))
        ordered = interleaved
    n = len(ordered)
    rack_aware = bool(ordered) and all(racks.get(b) for b in ordered)
    all_racks = {racks.get(b) for b in ordered}
    result: dict[int, tuple[BrokerId, ...]] = {}
    for i in range(num_partitions):
        p = first_partition + i
        first = (start_index + p) % n
        shift = 1 + (p // n) % max(n - 1, 1)
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[(first + shift + j) % n] if n > 1 else ordered[first])
        if rack_aware:
            # Kafka's rule: a follower goes to a rack without a replica yet while there is one,
            # and never to a broker already chosen; candidates are taken in the shifted order
            chosen = [ordered[first]]
            candidates = [ordered[(first + shift + k) % n] for k in range(n)]
            while len(chosen) < replication_factor:
                used_racks = {racks.get(b) for b in chosen}
                fresh = [b for b in candidates if b not in chosen]
                pick = next((b for b in fresh if racks.get(b) not in used_racks), None)
                if pick is None or used_racks == all_racks:
                    pick = fresh[0]
                chosen.append(pick)
            replicas = chosen
        # de-duplicate while keeping order (only possible if n is small and shift wraps)
        seen: list[BrokerId] = []
        for b in replicas + ordered:
            if b not in seen:
                seen.append(b)
            if len(seen) == replication_factor:
                break
        result[p] = tuple(seen)
    return result
