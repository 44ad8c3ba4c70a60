"""Pipelined (chain) replication: whom a follower fetches from, pure rules.

With a topic's `replication.pipeline.enable` on and three or more replicas, the followers form a
chain in the order of the replica list with the leader left out: the first follower fetches from
the leader, each next one from the follower before it, which serves it from its own log up to its
log end offset, so the leader sends each byte once instead of once per follower. Each chain member
reports its successors' replica states upstream on its own fetch (the carrier:
protocol/schemas/fetch_v12_chain.py), so that the leader keeps Kafka's rules exactly: the high
watermark is the smallest log end offset of the ISR, ISR shrink and expansion follow
replica.lag.time.max.ms, truncation follows the leader epochs. The high watermark flows down the
chain in the fetch answers (a member's own HW: the leader's, capped by its log end offset).

Per follower partition, the fetch source (`fetch_source`), re-planned on every metadata image and
after every failure of the source:

    STAR  (source = leader)       chain off, fewer than 3 replicas, this follower first in the
                                  chain, this follower outside the ISR (it catches up from the
                                  leader, and the leader decides its ISR expansion from its own
                                  fetches, as in Kafka), or its predecessor broken
    CHAIN (source = predecessor)  chain on, this follower in the ISR, its predecessor in the ISR
                                  and not broken

    CHAIN --predecessor fails (connection error, timeout, NOT_LEADER_OR_FOLLOWER, an epoch
            error, an error answering OffsetsForLeaderEpoch)-->        STAR for CHAIN_RETRY_MS
            (`ChainHealth.failed`: the predecessor is broken until then)
    CHAIN --predecessor leaves the ISR (it lags or died: the leader
            shrank the ISR), new leader or leader epoch in an image-->  STAR (re-planned)
    STAR  --CHAIN_RETRY_MS passed and the plan names the predecessor again-->  CHAIN

A change of source starts the partition over on the new source from TRUNCATING, as a change of
leader does (broker/replication/fetcher.py). A member serves a successor only while it follows the
same leader epoch and has itself finished truncating for it (`Partition.serves_chain`); otherwise
it answers NOT_LEADER_OR_FOLLOWER and the successor goes to the leader.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from protocol.schemas.fetch_v12_chain import ChainReport
from protocol.types import BrokerId, Offset

MIN_CHAIN_REPLICAS = 3
"""Below this there is one follower at most: nothing to chain."""
CHAIN_RETRY_MS = 3_000
"""How long a predecessor that failed is passed over (its successor fetches from the leader)."""


def chain_order(replicas: Sequence[BrokerId], leader: BrokerId) -> tuple[BrokerId, ...]:
    """The chain: the followers in the order of the replica list."""
    return tuple(r for r in replicas if r != leader)


def fetch_source(
    local: BrokerId,
    replicas: Sequence[BrokerId],
    leader: BrokerId,
    isr: Collection[BrokerId],
    *,
    enabled: bool,
    broken: Collection[BrokerId] = (),
) -> BrokerId:
    """The broker `local` fetches this partition from: its predecessor in the chain while the
    chain holds (see the module's state machine), else the leader."""
    if not enabled or len(replicas) < MIN_CHAIN_REPLICAS or local == leader:
        return leader
    chain = chain_order(replicas, leader)
    if local not in chain or local not in isr:
        return leader
    position = chain.index(local)
    if position == 0:
        return leader
    predecessor = chain[position - 1]
    if predecessor not in isr or predecessor in broken:
        return leader
    return predecessor


def successor(
    local: BrokerId, replicas: Sequence[BrokerId], leader: BrokerId, *, enabled: bool
) -> BrokerId | None:
    """The follower `local` may serve in the chain (None: none). The successor's own plan, which
    knows the ISR and its failures, decides whether it fetches here."""
    if not enabled or len(replicas) < MIN_CHAIN_REPLICAS:
        return None
    chain = chain_order(replicas, leader)
    if local not in chain:
        return None
    position = chain.index(local)
    return chain[position + 1] if position + 1 < len(chain) else None


@dataclass(slots=True)
class ChainHealth:
    """The chain predecessors this broker found broken, each until a deadline (monotonic ms)."""

    retry_ms: int = CHAIN_RETRY_MS
    _until: dict[BrokerId, float] = field(default_factory=dict)

    def failed(self, broker: BrokerId, now_ms: float | None = None) -> None:
        now = time.monotonic() * 1000 if now_ms is None else now_ms
        self._until[broker] = now + self.retry_ms

    def broken(self, now_ms: float | None = None) -> frozenset[BrokerId]:
        now = time.monotonic() * 1000 if now_ms is None else now_ms
        for broker, until in list(self._until.items()):
            if until <= now:
                del self._until[broker]
        return frozenset(self._until)


# -- the replica states a chain member reports, and the leader applies ------------------------------


class ReplicaState(Protocol):
    """What is known of a replica's fetches (broker/replication/partition.py's ReplicaState)."""

    log_end_offset: Offset
    last_caught_up_time_ms: int
    last_fetch_time_ms: int


def report_of(
    replica_id: BrokerId, state: ReplicaState, now_ms: int
) -> ChainReport:
    """What a chain member reports upstream of a successor's state (ages in its own clock)."""
    return ChainReport(
        replica_id=replica_id,
        log_end_offset=state.log_end_offset,
        fetch_age_ms=max(0, now_ms - state.last_fetch_time_ms),
        caught_up_age_ms=max(0, now_ms - state.last_caught_up_time_ms),
    )


def apply_report(
    state: ReplicaState,
    report: ChainReport,
    now_ms: int,
    *,
    reporter_log_end_offset: int,
    reporter_caught_up_ms: int,
    leader_end_offset: int,
) -> bool:
    """Apply a successor's reported state to what this broker knows of it (on the leader, or on
    a chain member relaying it further up); False if the report is older than what is known.

    The observation wins only if it is newer than the last one (a direct fetch or an earlier
    report): a successor that left the chain for the leader is not pulled back by a stale report.
    Its log end offset is the reported one, at most the reporter's (it copied from the reporter).
    It was caught up with this broker's log when it was caught up with the reporter's and the
    reporter with this broker's, so the earlier of the two times counts (its lag is at most the
    sum of the two); caught up now if it reached this broker's log end offset."""
    observed = now_ms - report.fetch_age_ms
    if observed <= state.last_fetch_time_ms:
        return False
    state.log_end_offset = Offset(min(report.log_end_offset, reporter_log_end_offset))
    caught_up = min(now_ms - report.caught_up_age_ms, reporter_caught_up_ms)
    if state.log_end_offset >= leader_end_offset:
        caught_up = observed
    state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, caught_up)
    state.last_fetch_time_ms = observed
    return True
