"""Leader election rules (controller/election.py): pure functions, no ZooKeeper."""

from __future__ import annotations

import uuid
from types import MappingProxyType

from controller.election import (
    ElectionType,
    choose_leader,
    elect_leader,
    isr_ineligible,
    majority_suspects,
    plan_elections,
    plan_partition,
    preferred_leader_move,
    preferred_leader_moves,
)
from controller.model import BrokerRegistration, ClusterImage, PartitionRegistration, TopicRegistration
from protocol.errors import ErrorCode
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


def test_follower_suspected_by_a_majority_of_the_other_isr_members_leaves_the_isr() -> None:
    live = {B1, B2, B3}
    # ISR {1,2,3}, leader 1: the leader alone suspecting 3 is not a majority of 3's others {1, 2}
    assert plan_partition(reg(1, (1, 2, 3)), live, suspicions={B3: {B1}}) is None
    new, reason = plan_partition(reg(1, (1, 2, 3)), live, suspicions={B3: {B1, B2}})  # type: ignore[misc]
    assert new.leader == B1 and new.isr == (B1, B2) and new.leader_epoch == 5 and new.partition_epoch == 7
    assert reason == "suspected replicas [3] leave the ISR"
    # ISR {1,3}: the leader is the only other member, its suspicion is the majority
    new, _ = plan_partition(reg(1, (1, 3)), live, suspicions={B3: {B1}})  # type: ignore[misc]
    assert new.isr == (B1,)
    # reporters outside the ISR do not count
    assert plan_partition(reg(1, (1, 3)), live, suspicions={B3: {B2}}) is None
    # a dead and a suspected follower together
    new, reason = plan_partition(reg(1, (1, 2, 3)), {B1, B3}, suspicions={B3: {B1}})  # type: ignore[misc]
    assert new.isr == (B1,) and reason.startswith("offline replicas leave the ISR, suspected")


def test_leader_suspected_by_its_followers_is_replaced_not_shrunk_to_itself() -> None:
    """A leader cut off from both followers suspects them and is suspected by them: the followers'
    view wins (new leader), the cut-off leader's suspicions cannot take them out of the ISR."""
    both = {B1: {B2, B3}, B2: {B1}, B3: {B1}}
    new, reason = plan_partition(reg(1, (1, 2, 3)), {B1, B2, B3}, suspicions=both)  # type: ignore[misc]
    assert reason == "leader suspected" and new.leader == B2 and new.isr == (B2, B3)


def test_isr_ineligible() -> None:
    live, isr = {B1, B2, B3}, (B1, B2, B3)
    assert isr_ineligible({B3}, isr, live, set(), {}) == {}
    assert isr_ineligible({B3}, isr, {B1, B2}, set(), {}) == {B3: "not registered"}
    assert isr_ineligible({B3}, isr, live, {B3}, {}) == {B3: "shutting down"}
    assert isr_ineligible({B3}, isr, live, set(), {B3: {B1, B2}}) == {B3: "suspected"}
    assert isr_ineligible({B3}, isr, live, set(), {B3: {B1}}) == {}  # not a majority of {1, 2}


def test_preferred_leader_never_moves_to_a_doubted_broker_nor_past_an_out_of_touch_one() -> None:
    assert preferred_leader_move(reg(2, (2, 3, 1)), {B1, B2, B3}, set(), doubted={B1}) is None
    assert preferred_leader_move(reg(2, (2, 3, 1)), {B1, B2, B3}, set(), doubted={B3}) is not None
    # an ISR member that would not learn of the move (suspected, silent, cut off from ZooKeeper)
    assert preferred_leader_move(reg(2, (2, 3, 1)), {B1, B2, B3}, set(), out_of_touch={B3}) is None
    assert preferred_leader_move(reg(2, (2, 1)), {B1, B2, B3}, set(), out_of_touch={B3}) is not None
    parts = {0: reg(2, (1, 2, 3)), 1: reg(2, (1, 2, 3))}
    assert preferred_leader_moves(image(parts), set(), 10, doubted={B1}) == []
    assert preferred_leader_moves(image(parts), set(), 10, out_of_touch={B3}) == []
    assert len(preferred_leader_moves(image(parts), set(), 10, doubted={B3})) == 2


# -- operator elections (ElectLeaders) ------------------------------------------------------------

ALL = {B1, B2, B3}


def test_preferred_election() -> None:
    # the first replica back in the ISR takes over; the ISR stays, the leader epoch is bumped
    assert elect_leader(reg(2, (1, 2, 3)), ElectionType.PREFERRED, ALL, ALL) == reg(1, (1, 2, 3), epoch=6)
    assert elect_leader(reg(1, (1, 2, 3)), ElectionType.PREFERRED, ALL, ALL) == ErrorCode.election_not_needed
    # preferred replica not in the ISR, or not eligible, while the leader is fit
    assert elect_leader(reg(2, (2, 3)), ElectionType.PREFERRED, ALL, ALL) == ErrorCode.preferred_leader_not_available
    assert elect_leader(reg(2, (1, 2)), ElectionType.PREFERRED, ALL, {B2, B3}) == ErrorCode.preferred_leader_not_available
    # an unfit leader and no fit preferred replica: the next fit ISR member (PartitionChangeBuilder)
    assert elect_leader(reg(2, (1, 2, 3)), ElectionType.PREFERRED, {B3}, {B3}) == reg(3, (1, 2, 3), epoch=6)
    assert elect_leader(reg(-1, (2,)), ElectionType.PREFERRED, {B3}, {B3}) == ErrorCode.preferred_leader_not_available


def test_unclean_election() -> None:
    # a live leader: nothing to do, even outside the eligible set
    assert elect_leader(reg(2, (2,)), ElectionType.UNCLEAN, ALL, {B1}) == ErrorCode.election_not_needed
    # offline, a live ISR member: a clean election after all
    assert elect_leader(reg(-1, (2, 3)), ElectionType.UNCLEAN, {B3}, {B3}) == reg(3, (2, 3), epoch=6)
    # offline, no live ISR member: the first live replica, with an ISR of itself
    assert elect_leader(reg(-1, (1,)), ElectionType.UNCLEAN, {B2, B3}, {B2, B3}) == reg(2, (2,), epoch=6)
    assert elect_leader(reg(-1, (1,)), ElectionType.UNCLEAN, {B2}, set()) == ErrorCode.eligible_leaders_not_available
    assert elect_leader(reg(-1, (1,), replicas=(1,)), ElectionType.UNCLEAN, {B2, B3}, {B2, B3}) == (
        ErrorCode.eligible_leaders_not_available
    )


def test_plan_elections_answers_as_the_controller() -> None:
    cluster = image({0: reg(2, (1, 2, 3)), 1: reg(1, (1, 2, 3))})
    results, moves = plan_elections(cluster, ElectionType.PREFERRED, [("t", [0, 1, 9]), ("u", [0])], lambda _r: ALL)
    assert [(t, [(p, None if e is None else (e.code, e.message)) for p, e in ps]) for t, ps in results] == [
        ("t", [(0, None), (1, (ErrorCode.election_not_needed, "election_not_needed")),
               (9, (ErrorCode.unknown_topic_or_partition, "No such partition as t-9"))]),
        ("u", [(0, (ErrorCode.unknown_topic_or_partition, "No such topic as u"))]),
    ]  # fmt: skip
    assert moves == [("t", 0, reg(2, (1, 2, 3)), reg(1, (1, 2, 3), epoch=6))]
    # every partition: those that need no election are left out, every topic is named
    results, moves = plan_elections(cluster, ElectionType.PREFERRED, None, lambda _r: ALL)
    assert [(t, [p for p, _ in ps]) for t, ps in results] == [("t", [0])]
    results, moves = plan_elections(cluster, ElectionType.UNCLEAN, None, lambda _r: ALL)
    assert results == [("t", [])] and moves == []
