"""Leader election rules (controller/election.py): pure functions, no ZooKeeper."""

from __future__ import annotations

import uuid
from types import MappingProxyType

from controller.election import (
    choose_leader,
    majority_suspects,
    plan_partition,
    preferred_leader_move,
    preferred_leader_moves,
)
from controller.model import BrokerRegistration, ClusterImage, PartitionRegistration, TopicRegistration
from protocol.types import NO_BROKER, BrokerId, ControllerEpoch, LeaderEpoch

B1, B2, B3 = BrokerId(1), BrokerId(2), BrokerId(3)


def reg(leader: int, isr: tuple[int, ...], epoch: int = 5, replicas: tuple[int, ...] = (1, 2, 3)) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=tuple(BrokerId(r) for r in replicas),
        isr=tuple(BrokerId(r) for r in isr),
        leader=BrokerId(leader),
        leader_epoch=LeaderEpoch(epoch),
        partition_epoch=7,
    )


def test_majority_suspects() -> None:
    assert majority_suspects(B1, {B2, B3}, [B1, B2, B3])
    assert not majority_suspects(B1, {B2}, [B1, B2, B3])
    assert majority_suspects(B1, {B2}, [B1, B2])
    assert not majority_suspects(B1, set(), [B1, B2])
    assert not majority_suspects(B1, {B2, B3}, [B1])  # nobody else in the ISR
    # a reporter outside the ISR does not count
    assert not majority_suspects(B1, {B3}, [B1, B2])


def test_choose_leader_order_isr_unclean() -> None:
    assert choose_leader([B1, B2, B3], [B2, B3], {B2, B3}) == (B2, False)
    assert choose_leader([B1, B2, B3], [B1], {B2, B3}) == (NO_BROKER, False)
    assert choose_leader([B1, B2, B3], [B1], {B2, B3}, unclean=True) == (B2, True)
    assert choose_leader([B1, B2, B3], [B1, B2], {B1, B2}, exclude={B1}) == (B2, False)


def test_fit_leader_no_change() -> None:
    assert plan_partition(reg(1, (1, 2, 3)), {B1, B2, B3}) is None


def test_dead_leader_moves_to_isr_member_with_bumped_epoch() -> None:
    planned = plan_partition(reg(1, (1, 2, 3)), {B2, B3})
    assert planned is not None
    new, reason = planned
    assert new.leader == B2 and new.leader_epoch == 6 and new.isr == (B2, B3)
    assert new.partition_epoch == 7  # the CAS expectation is kept
    assert "not registered" in reason


def test_dead_leader_skips_dead_isr_members() -> None:
    new, _ = plan_partition(reg(1, (1, 2, 3)), {B3})  # type: ignore[misc]
    assert new.leader == B3 and new.isr == (B3,)


def test_no_live_isr_member_goes_offline_without_unclean() -> None:
    new, reason = plan_partition(reg(1, (1,)), {B2, B3})  # type: ignore[misc]
    assert new.leader == NO_BROKER and new.leader_epoch == 6 and new.isr == (B1,)
    assert "offline" in reason
    # already offline: nothing to write
    assert plan_partition(new, {B2, B3}) is None


def test_unclean_election_takes_live_non_isr_replica() -> None:
    new, reason = plan_partition(reg(1, (1,)), {B2, B3}, unclean=True)  # type: ignore[misc]
    assert new.leader == B2 and new.isr == (B2,) and "unclean" in reason


def test_offline_partition_returns_when_isr_member_comes_back() -> None:
    offline = reg(-1, (1,), epoch=6)
    assert plan_partition(offline, {B2, B3}) is None
    new, _ = plan_partition(offline, {B1, B2, B3})  # type: ignore[misc]
    assert new.leader == B1 and new.leader_epoch == 7 and new.isr == (B1,)


def test_suspected_leader_moves_only_on_majority() -> None:
    live = {B1, B2, B3}
    assert plan_partition(reg(1, (1, 2, 3)), live, suspicions={B1: {B2}}) is None
    new, reason = plan_partition(reg(1, (1, 2, 3)), live, suspicions={B1: {B2, B3}})  # type: ignore[misc]
    assert new.leader == B2 and new.isr == (B2, B3) and reason == "leader suspected"


def test_suspected_leader_with_no_alternative_keeps_leading() -> None:
    assert plan_partition(reg(1, (1, 2)), {B1, B2}, suspicions={B1: {B2}, B2: {B1}}) is None


def test_controlled_shutdown_moves_leadership_and_shrinks_isr() -> None:
    new, reason = plan_partition(reg(1, (1, 2, 3)), {B1, B2, B3}, shutting_down={B1})  # type: ignore[misc]
    assert new.leader == B2 and new.isr == (B2, B3) and reason == "controlled shutdown"
    # a follower shutting down leaves the ISR, leader epoch unchanged
    new, _ = plan_partition(reg(1, (1, 2, 3)), {B1, B2, B3}, shutting_down={B3})  # type: ignore[misc]
    assert new.leader == B1 and new.isr == (B1, B2) and new.leader_epoch == 5
    # the only ISR member keeps leading while it shuts down
    assert plan_partition(reg(1, (1,)), {B1, B2, B3}, shutting_down={B1}) is None


def test_dead_follower_leaves_isr() -> None:
    new, _ = plan_partition(reg(1, (1, 2, 3)), {B1, B3})  # type: ignore[misc]
    assert new.leader == B1 and new.isr == (B1, B3) and new.leader_epoch == 5


def test_preferred_leader_move() -> None:
    assert preferred_leader_move(reg(2, (2, 3)), {B1, B2, B3}, set()) is None  # not in ISR yet
    moved = preferred_leader_move(reg(2, (2, 3, 1)), {B1, B2, B3}, set())
    assert moved is not None and moved.leader == B1 and moved.leader_epoch == 6
    assert preferred_leader_move(reg(1, (1, 2)), {B1, B2}, set()) is None


def image(partitions: dict[int, PartitionRegistration], live: tuple[int, ...] = (1, 2, 3)) -> ClusterImage:
    topic = TopicRegistration("t", uuid.uuid4(), MappingProxyType(partitions))
    brokers = {BrokerId(b): BrokerRegistration(BrokerId(b), (), None) for b in live}
    return ClusterImage("c", B1, ControllerEpoch(1), MappingProxyType(brokers), MappingProxyType({"t": topic}))


def test_preferred_leader_moves_only_past_the_imbalance_percentage() -> None:
    # broker 1 prefers 10 partitions (replicas (1, 2, 3)); broker 2 leads `away` of them
    def moves(away: int, percentage: int = 10, **kw: object) -> list[int]:
        parts = {p: reg(2 if p < away else 1, (1, 2, 3)) for p in range(10)}
        return [p for _, p, _, _ in preferred_leader_moves(image(parts, **kw), set(), percentage)]  # type: ignore[arg-type]

    assert moves(1) == []  # 10% is not above 10%
    assert moves(2) == [0, 1]  # 20% is
    assert moves(1, percentage=0) == [0]
    assert moves(10, percentage=100) == []
    assert moves(3, live=(2, 3)) == []  # the preferred broker is not registered


def test_preferred_leader_moves_skip_partitions_the_preferred_replica_cannot_lead() -> None:
    parts = {0: reg(2, (2, 3)), 1: reg(3, (3, 1, 2)), 2: reg(1, (1, 2, 3))}
    got = preferred_leader_moves(image(parts), set(), 10)
    assert [(p, old.leader, new.leader, new.leader_epoch) for _, p, old, new in got] == [(1, 3, 1, 6)]
    assert preferred_leader_moves(image(parts), {B1}, 10) == []  # shutting down
