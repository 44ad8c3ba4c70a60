"""Leader election rules: pure functions of a partition's registration and the cluster's health.

The ZooKeeper controller calls `plan_partition` for every partition whenever something it depends
on changes (brokers come or go, a suspicion is reported, a broker asks for a controlled shutdown)
and writes each returned registration with compare-and-set. Nothing here does I/O, so every rule
is unit tested on its own (tests/unit/test_election.py).

Rules (Kafka's, plus Samsa's heartbeat suspicion):

- A leader is *unfit* when it is NO_BROKER, not registered (its ZooKeeper session ended), asking
  for a controlled shutdown, or suspected by a majority of the other ISR members (`majority_suspects`).
- An unfit leader is replaced by the first replica, in assignment order, that is in the ISR,
  registered, not shutting down, not itself majority-suspected and not the old leader. The leader
  epoch is bumped and the old leader leaves the ISR (it must catch up again).
- With no such ISR member, and `unclean` allowed, the first live replica outside the ISR becomes
  leader with an ISR of itself (possible data loss; logged by the caller).
- Otherwise the partition goes offline: leader NO_BROKER, leader epoch bumped, ISR left as it was
  (so a returning ISR member can lead again). If the old leader is still registered (merely
  suspected or shutting down) it keeps leading: an offline partition helps nobody.
- An offline partition whose ISR has a live, fit member gets that member as leader.
- A fit leader keeps its epoch; followers that are no longer registered (or are shutting down)
  leave the ISR, as Kafka's controller removes offline replicas from ISRs.

Preferred leaders (auto.leader.rebalance.enable, every leader.imbalance.check.interval.seconds):
for each broker, the share of the partitions whose first replica it is but which another broker
leads is its imbalance; past leader.imbalance.per.broker.percentage, each such partition whose
preferred replica is registered, in the ISR and not shutting down gets it back as leader, epoch
bumped (`preferred_leader_moves`, Kafka's checkAndTriggerAutoLeaderRebalance).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace

from controller.model import ClusterImage, PartitionRegistration
from protocol.types import NO_BROKER, BrokerId, LeaderEpoch


def majority_suspects(
    suspect: BrokerId, reporters: AbstractSet[BrokerId], voters: Sequence[BrokerId]
) -> bool:
    """True when more than half of `voters` other than `suspect` report `suspect` as silent.

    For a partition the voters are its ISR: with ISR {1,2,3} and leader 1, both 2 and 3 must
    suspect 1; with ISR {1,2}, broker 2 alone suffices. No other voter: never.
    """
    others = [v for v in voters if v != suspect]
    if not others:
        return False
    agreeing = sum(1 for v in others if v in reporters)
    return agreeing * 2 > len(others)


def choose_leader(
    replicas: Sequence[BrokerId],
    isr: Sequence[BrokerId],
    eligible: AbstractSet[BrokerId],
    *,
    exclude: AbstractSet[BrokerId] = frozenset(),
    unclean: bool = False,
) -> tuple[BrokerId, bool]:
    """(leader, unclean_used): the first replica in assignment order that is in the ISR and
    eligible; else, if `unclean`, the first eligible replica; else (NO_BROKER, False)."""
    for r in replicas:
        if r in isr and r in eligible and r not in exclude:
            return r, False
    if unclean:
        for r in replicas:
            if r in eligible and r not in exclude:
                return r, True
    return NO_BROKER, False


def plan_partition(
    reg: PartitionRegistration,
    live: AbstractSet[BrokerId],
    *,
    shutting_down: AbstractSet[BrokerId] = frozenset(),
    suspicions: Mapping[BrokerId, AbstractSet[BrokerId]] | None = None,
    unclean: bool = False,
) -> tuple[PartitionRegistration, str] | None:
    """The registration the controller should write for this partition, with the reason, or None
    when nothing needs to change. `suspicions` maps a suspected broker to its reporters.
    The returned registration keeps `reg.partition_epoch` (the CAS expectation)."""
    suspicions = suspicions or {}

    def suspected(b: BrokerId) -> bool:
        return majority_suspects(b, suspicions.get(b, frozenset()), reg.isr)

    eligible = {b for b in live if b not in shutting_down and not suspected(b)}
    leader = reg.leader
    if leader == NO_BROKER or leader not in live:
        reason = "offline" if leader == NO_BROKER else "leader not registered"
    elif leader in shutting_down:
        reason = "controlled shutdown"
    elif suspected(leader):
        reason = "leader suspected"
    else:
        reason = ""
    if reason:
        new_leader, was_unclean = choose_leader(
            reg.replicas, reg.isr, eligible, exclude={leader}, unclean=unclean
        )
        if new_leader != NO_BROKER:
            if was_unclean:
                isr: tuple[BrokerId, ...] = (new_leader,)
                reason += ", unclean election"
            else:
                isr = tuple(b for b in reg.isr if b in live and b != leader and b not in shutting_down)
                if new_leader not in isr:
                    isr = (new_leader, *isr)
            return (
                replace(
                    reg,
                    leader=new_leader,
                    isr=isr,
                    leader_epoch=LeaderEpoch(reg.leader_epoch + 1),
                ),
                reason,
            )
        if leader == NO_BROKER or leader in live:
            return None  # already offline, or the old leader still lives: keep it
        return (
            replace(reg, leader=NO_BROKER, leader_epoch=LeaderEpoch(reg.leader_epoch + 1)),
            reason + ", no eligible replica: offline",
        )
    # fit leader: drop followers that are gone or leaving from the ISR
    isr = tuple(b for b in reg.isr if b == leader or (b in live and b not in shutting_down))
    if leader not in isr:
        isr = (leader, *isr)
    if isr != reg.isr:
        return replace(reg, isr=isr), "offline replicas leave the ISR"
    return None


def preferred_leader_move(
    reg: PartitionRegistration, live: AbstractSet[BrokerId], shutting_down: AbstractSet[BrokerId]
) -> PartitionRegistration | None:
    """Move leadership back to the first (preferred) replica once it is back in the ISR."""
    if not reg.replicas:
        return None
    preferred = reg.replicas[0]
    if (
        reg.leader == preferred
        or preferred not in reg.isr
        or preferred not in live
        or preferred in shutting_down
    ):
        return None
    return replace(reg, leader=preferred, leader_epoch=LeaderEpoch(reg.leader_epoch + 1))


def preferred_leader_moves(
    image: ClusterImage, shutting_down: AbstractSet[BrokerId], imbalance_percentage: int
) -> list[tuple[str, int, PartitionRegistration, PartitionRegistration]]:
    """(topic, partition, current, with its preferred leader) for every partition to move back."""
    live = set(image.brokers)
    by_preferred: dict[BrokerId, list[tuple[str, int, PartitionRegistration]]] = {}
    for topic in image.topics.values():
        for p, reg in topic.partitions.items():
            if reg.replicas:
                by_preferred.setdefault(reg.replicas[0], []).append((topic.name, p, reg))
    moves = []
    for preferred, partitions in sorted(by_preferred.items()):
        imbalanced = [(t, p, reg) for t, p, reg in partitions if reg.leader != preferred]
        if len(imbalanced) * 100 <= imbalance_percentage * len(partitions):
            continue
        for t, p, reg in imbalanced:
            moved = preferred_leader_move(reg, live, shutting_down)
            if moved is not None:
                moves.append((t, p, reg, moved))
    return moves
