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
  leave the ISR, as Kafka's controller removes offline replicas from ISRs, and so do followers
  suspected by a majority of the other live ISR members (the leader among them): the heartbeat
  counterpart of KRaft's fencing, whose handleBrokerFenced takes a broker that missed
  broker.session.timeout.ms of heartbeats out of every ISR. Such a follower comes back through
  the leader's ordinary expansion once it is heard again and has caught up
  (`isr_ineligible` refuses it before: the AlterPartition check, Kafka's ineligibleReplicasForIsr).

Preferred leaders (auto.leader.rebalance.enable, every leader.imbalance.check.interval.seconds):
for each broker, the share of the partitions whose first replica it is but which another broker
leads is its imbalance; past leader.imbalance.per.broker.percentage, each such partition whose
preferred replica is registered, in the ISR, not shutting down and not doubted (registered for less
than samsa.preferred.leader.settle.ms: clients may still be backing off from reconnecting to it),
and none of whose ISR members is out of touch (suspected by any broker, not heard by the controller
in the last two heartbeat intervals, as a broker paused a moment ago that nobody suspects yet, or
cut off from ZooKeeper, so that it would go on following the old leader), gets it back as leader,
epoch bumped (`preferred_leader_moves`, Kafka's checkAndTriggerAutoLeaderRebalance, which moves only
to live brokers). The move is optional; any of these would turn it into a stall.

Operator elections (ElectLeaders; `elect_leader`, `plan_elections`) follow Kafka's controller
instead: preferred moves leadership to the first replica when it is in the ISR and eligible,
unclean elects a live replica for a partition without a live leader; each answers Kafka's
per-partition errors. They do not wait for a settled ISR as the optional move above does.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace

from controller.model import BrokerRegistration, ClusterImage, PartitionRegistration
from protocol.errors import ErrorCode, KafkaError
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


def offline_replicas(brokers: Mapping[BrokerId, BrokerRegistration]) -> dict[tuple[str, int], set[BrokerId]]:
    """(topic, partition) -> the brokers whose replica of it is in a failed log dir."""
    out: dict[tuple[str, int], set[BrokerId]] = {}
    for b, reg in brokers.items():
        for tp in reg.offline_replicas:
            out.setdefault((tp.topic, tp.partition), set()).add(b)
    return out


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

    eligible = electable(live, shutting_down, suspicions, reg)
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
    # fit leader: drop followers that are gone, leaving, or suspected by a majority from the ISR
    gone = {b for b in reg.isr if b != leader and (b not in live or b in shutting_down)}
    voters = [b for b in reg.isr if b not in gone]
    silent = {
        b for b in voters if b != leader and majority_suspects(b, suspicions.get(b, frozenset()), voters)
    }
    isr = tuple(b for b in reg.isr if b not in gone and b not in silent)
    if leader not in isr:
        isr = (leader, *isr)
    if isr == reg.isr:
        return None
    if silent:
        reason = f"suspected replicas {sorted(silent)} leave the ISR"
        return replace(reg, isr=isr), ("offline replicas leave the ISR, " if gone else "") + reason
    return replace(reg, isr=isr), "offline replicas leave the ISR"


def isr_ineligible(
    joining: AbstractSet[BrokerId],
    proposed_isr: Sequence[BrokerId],
    live: AbstractSet[BrokerId],
    shutting_down: AbstractSet[BrokerId],
    suspicions: Mapping[BrokerId, AbstractSet[BrokerId]],
) -> dict[BrokerId, str]:
    """Brokers a leader may not add to an ISR, with the reason (Kafka's ineligibleReplicasForIsr:
    not registered, shutting down, fenced; here fenced is suspected by a majority of the other
    members of the proposed ISR, the rule that takes a follower out in `plan_partition`)."""
    out: dict[BrokerId, str] = {}
    for b in joining:
        if b not in live:
            out[b] = "not registered"
        elif b in shutting_down:
            out[b] = "shutting down"
        elif majority_suspects(b, suspicions.get(b, frozenset()), proposed_isr):
            out[b] = "suspected"
    return out


def preferred_leader_move(
    reg: PartitionRegistration,
    live: AbstractSet[BrokerId],
    shutting_down: AbstractSet[BrokerId],
    doubted: AbstractSet[BrokerId] = frozenset(),
    out_of_touch: AbstractSet[BrokerId] = frozenset(),
) -> PartitionRegistration | None:
    """Move leadership back to the first (preferred) replica once it is back in the ISR, unless
    it is `doubted` or any ISR member is `out_of_touch` (see the module docstring)."""
    if not reg.replicas:
        return None
    preferred = reg.replicas[0]
    if (
        reg.leader == preferred
        or preferred not in reg.isr
        or preferred not in live
        or preferred in shutting_down
        or preferred in doubted
        or any(b in out_of_touch for b in reg.isr)
    ):
        return None
    return replace(reg, leader=preferred, leader_epoch=LeaderEpoch(reg.leader_epoch + 1))


def preferred_leader_moves(
    image: ClusterImage,
    shutting_down: AbstractSet[BrokerId],
    imbalance_percentage: int,
    doubted: AbstractSet[BrokerId] = frozenset(),
    out_of_touch: AbstractSet[BrokerId] = frozenset(),
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
            moved = preferred_leader_move(reg, live, shutting_down, doubted, out_of_touch)
            if moved is not None:
                moves.append((t, p, reg, moved))
    return moves


class ElectionType(enum.IntEnum):
    """ElectLeaders' election_type (Kafka's org.apache.kafka.common.ElectionType)."""

    PREFERRED = 0
    UNCLEAN = 1


def elect_leader(
    reg: PartitionRegistration,
    election_type: ElectionType,
    live: AbstractSet[BrokerId],
    eligible: AbstractSet[BrokerId],
) -> PartitionRegistration | ErrorCode:
    """An operator's election for one partition (ElectLeaders), as Kafka's controller makes it
    (ReplicationControlManager.electLeader and PartitionChangeBuilder): the new registration, or
    the error to answer. `live` are the registered brokers, `eligible` those of them that may lead
    (not shutting down, not suspected by a majority: `electable`).

    PREFERRED: ELECTION_NOT_NEEDED if the first replica leads; else the first replica if it is in
    the ISR and eligible; else, if the current leader is fit, PREFERRED_LEADER_NOT_AVAILABLE; else
    the first other eligible ISR member; else PREFERRED_LEADER_NOT_AVAILABLE.
    UNCLEAN: ELECTION_NOT_NEEDED if the partition has a live leader; else the first eligible ISR
    member (a clean election after all); else the first eligible replica, with an ISR of itself
    (possible data loss); else ELIGIBLE_LEADERS_NOT_AVAILABLE.
    A new leader bumps the leader epoch; `partition_epoch` stays (the CAS expectation).
    """

    def valid(b: BrokerId) -> bool:
        return b in reg.isr and b in eligible

    leader_fit = reg.leader != NO_BROKER and valid(reg.leader)
    isr = reg.isr
    if election_type is ElectionType.PREFERRED:
        preferred = reg.replicas[0] if reg.replicas else NO_BROKER
        if reg.leader == preferred:
            return ErrorCode.election_not_needed
        if valid(preferred):
            new = preferred
        elif leader_fit:
            return ErrorCode.preferred_leader_not_available
        else:
            new = next((r for r in reg.replicas[1:] if valid(r)), NO_BROKER)
        if new == NO_BROKER or new == reg.leader:
            return ErrorCode.preferred_leader_not_available
    else:
        if reg.leader != NO_BROKER and reg.leader in live:
            return ErrorCode.election_not_needed
        new = next((r for r in reg.replicas if valid(r)), NO_BROKER)
        if new == NO_BROKER:
            new = next((r for r in reg.replicas if r in eligible), NO_BROKER)
            isr = (new,)
        if new == NO_BROKER:
            return ErrorCode.eligible_leaders_not_available
    return replace(reg, leader=new, isr=isr, leader_epoch=LeaderEpoch(reg.leader_epoch + 1))


def electable(
    live: AbstractSet[BrokerId],
    shutting_down: AbstractSet[BrokerId],
    suspicions: Mapping[BrokerId, AbstractSet[BrokerId]],
    reg: PartitionRegistration,
) -> set[BrokerId]:
    """The brokers that may lead `reg` (the `eligible` of `plan_partition`)."""
    return {
        b for b in live
        if b not in shutting_down and not majority_suspects(b, suspicions.get(b, frozenset()), reg.isr)
    }


ElectionResults = list[tuple[str, list[tuple[int, KafkaError | None]]]]
"""Per topic, in request order: (partition, error or None) - the shape of ElectLeaders' answer."""


def plan_elections(
    image: ClusterImage,
    election_type: ElectionType,
    partitions: Sequence[tuple[str, Sequence[int]]] | None,
    eligible: Callable[[PartitionRegistration], AbstractSet[BrokerId]],
) -> tuple[ElectionResults, list[tuple[str, int, PartitionRegistration, PartitionRegistration]]]:
    """Every election of one ElectLeaders request: the answer (partitions elected answer None
    until their write succeeds) and the writes (topic, partition, current, new). `partitions`
    None means every partition of every topic, whose ELECTION_NOT_NEEDED results are left out
    (ReplicationControlManager.electLeaders)."""
    live = set(image.brokers)
    every = partitions is None
    if partitions is None:
        partitions = [(t.name, sorted(t.partitions)) for t in image.topics.values()]
    results: ElectionResults = []
    moves = []
    for name, ids in partitions:
        topic = image.topics.get(name)
        answers: list[tuple[int, KafkaError | None]] = []
        results.append((name, answers))
        for p in ids:
            reg = None if topic is None else topic.partitions.get(p)
            if reg is None:
                message = f"No such topic as {name}" if topic is None else f"No such partition as {name}-{p}"
                answers.append((p, KafkaError(ErrorCode.unknown_topic_or_partition, message)))
                continue
            elected = elect_leader(reg, election_type, live, eligible(reg))
            if isinstance(elected, ErrorCode):
                if not (every and elected == ErrorCode.election_not_needed):
                    answers.append((p, KafkaError(elected)))
                continue
            answers.append((p, None))
            moves.append((name, p, reg, elected))
    return results, moves
