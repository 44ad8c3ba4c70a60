"""Replication rules without a network: truncation decisions (pure), and the leader's follower
state, high watermark, ISR shrink/expand and min.insync.replicas on a Partition with a real
UnifiedLog, with a tiny in-process controller answering alter_partition (compare-and-set)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from test_log_support import TP, batch, close_opened_logs, open_log  # noqa: F401 - fixture

from broker.log.epoch_cache import LeaderEpochFileCache
from broker.replication.fetcher import Truncation, truncation_offset
from broker.replication.isr import IsrManager
from broker.replication.partition import AlterIsr, Partition, PartitionRole
from broker.replication.replica_manager import ReplicaManager
from broker.replication.settings import FetcherSettings, IsrSettings
from controller.model import BrokerRegistration, ClusterImage, PartitionRegistration, TopicRegistration
from protocol.errors import ErrorCode, KafkaError
from protocol.types import BrokerId, ControllerEpoch, LeaderEpoch, Offset
from tests.support.controller import SharedController, View

B1, B2, B3 = BrokerId(1), BrokerId(2), BrokerId(3)
LAG = 10_000


# -- truncation (KIP-101 / KIP-279) ----------------------------------------------------------------


def cache_with(tmp_path: Path, entries: list[tuple[int, int]]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint", persist=False)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def decide(
    cache: LeaderEpochFileCache, leo: int, hw: int, leader_epoch: int, leader_end: int
) -> Truncation:
    return truncation_offset(
        leader_epoch, leader_end, lambda e: cache.end_offset_for(e, leo), leo, hw
    )


def test_same_epoch_leader_shorter_cuts_to_leader_end(tmp_path: Path) -> None:
    # follower wrote 0..119 in epoch 1 and 2; the leader's epoch 2 ended at 100
    cache = cache_with(tmp_path, [(1, 0), (2, 50)])
    assert decide(cache, leo=120, hw=40, leader_epoch=2, leader_end=100) == Truncation(
        Offset(100), True
    )


def test_same_epoch_leader_longer_keeps_log(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, [(1, 0), (2, 50)])
    assert decide(cache, leo=80, hw=40, leader_epoch=2, leader_end=100) == Truncation(
        Offset(80), True
    )


def test_leader_answers_earlier_epoch_known_here(tmp_path: Path) -> None:
    # the follower has epoch 3 (a zombie's writes); the leader never saw 3: epoch 2 ended at 70 there
    cache = cache_with(tmp_path, [(1, 0), (2, 50), (3, 90)])
    assert decide(cache, leo=120, hw=40, leader_epoch=2, leader_end=70) == Truncation(
        Offset(70), True
    )


def test_leader_answers_epoch_unknown_here_cuts_and_asks_again(tmp_path: Path) -> None:
    # follower epochs 1, 3; leader answers epoch 2 (which the follower never saw), ending at 95
    cache = cache_with(tmp_path, [(1, 0), (3, 60)])
    first = decide(cache, leo=120, hw=10, leader_epoch=2, leader_end=95)
    assert first == Truncation(Offset(60), False)  # end of local epoch 1 = start of 3
    cache.truncate_from_end(60)
    assert cache.latest_epoch == 1
    # second round: the leader answers for epoch 1, which ended at 55 on the leader
    assert decide(cache, leo=60, hw=10, leader_epoch=1, leader_end=55) == Truncation(
        Offset(55), True
    )


def test_leader_does_not_know_the_epoch_cuts_to_high_watermark(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, [(4, 0)])
    assert decide(cache, leo=30, hw=12, leader_epoch=-1, leader_end=-1) == Truncation(
        Offset(12), True
    )


def test_leader_answer_below_every_local_epoch(tmp_path: Path) -> None:
    # the follower's first epoch is 5 starting at 100 (older entries gone); leader answers epoch 3
    cache = cache_with(tmp_path, [(5, 100)])
    assert decide(cache, leo=150, hw=100, leader_epoch=3, leader_end=120) == Truncation(
        Offset(100), True
    )


def test_empty_follower_never_moves_forward(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, [])
    assert decide(cache, leo=0, hw=0, leader_epoch=2, leader_end=500) == Truncation(
        Offset(0), True
    )


# -- leader side -----------------------------------------------------------------------------------


def controller_for(reg: PartitionRegistration) -> tuple[SharedController, View]:
    """The controller double holding `reg` for TP, and the leader's (B1's) view of it."""
    shared = SharedController()
    view = shared.attach(BrokerRegistration(B1, (), None))
    shared.set_partition(TP, reg)
    return shared, view


def isr_manager(view: View, partitions: list[Partition], **settings: object) -> IsrManager:
    """An ISR manager sending `partitions`' ISR changes to `view`."""
    config = {"replica_lag_time_max_ms": LAG, **settings}
    return IsrManager(view.alter_partition, lambda: partitions, lambda p: None, IsrSettings(**config))  # type: ignore[arg-type]


def leader_partition(
    tmp_path: Path,
    isr: tuple[BrokerId, ...] = (B1, B2, B3),
    alter_isr: AlterIsr | None = None,
    **config: object,
) -> Partition:
    log_ = open_log(tmp_path / "orders-0", **config)
    partition = Partition(TP, B1, log_, alter_isr=alter_isr)
    assert partition.make_leader(
        PartitionRegistration((B1, B2, B3), isr, B1, LeaderEpoch(3), 7)
    )
    return partition


async def append_async(partition: Partition, n: int = 1, acks: int = -1) -> Offset:
    info = await partition.append_records_to_leader(batch(n), acks)
    return Offset(info.last_offset + 1)


def append(partition: Partition, n: int = 1, acks: int = -1) -> Offset:
    return asyncio.run(append_async(partition, n, acks))


def test_high_watermark_is_min_leo_over_isr_and_monotonic(tmp_path: Path) -> None:
    p = leader_partition(tmp_path)
    end = append(p, 5)
    assert p.high_watermark == 0  # followers' LEOs unknown
    p.update_follower_fetch_state(B2, Offset(5), 1000, end)
    p.maybe_increment_high_watermark()
    assert p.high_watermark == 0
    p.update_follower_fetch_state(B3, Offset(3), 1000, end)
    p.maybe_increment_high_watermark()
    assert p.high_watermark == 3
    p.update_follower_fetch_state(B3, Offset(5), 1000, end)
    p.maybe_increment_high_watermark()
    assert p.high_watermark == 5
    p.update_follower_fetch_state(
        B3, Offset(2), 1000, end
    )  # a follower going back cannot move the HW back
    p.maybe_increment_high_watermark()
    assert p.high_watermark == 5


def test_fetch_from_non_replica_is_refused(tmp_path: Path) -> None:
    p = leader_partition(tmp_path)
    with pytest.raises(KafkaError) as e:
        p.update_follower_fetch_state(BrokerId(9), Offset(0), 1000, Offset(0))
    assert e.value.code == ErrorCode.not_leader_or_follower


def test_caught_up_time_follows_kafkas_rules(tmp_path: Path) -> None:
    p = leader_partition(tmp_path)
    start = p.replica_state(B2).last_caught_up_time_ms
    append(p, 10)
    # fetch at 5 while the leader is at 10: not caught up now; previous fetch unknown
    p.update_follower_fetch_state(B2, Offset(5), start + 100, Offset(10))
    assert p.replica_state(B2).last_caught_up_time_ms == start
    # fetch at 10 (>= leader's LEO at the previous fetch): caught up as of the previous fetch
    p.update_follower_fetch_state(B2, Offset(10), start + 200, Offset(12))
    assert p.replica_state(B2).last_caught_up_time_ms == start + 100
    # fetch reaching the leader's LEO now: caught up now
    p.update_follower_fetch_state(B2, Offset(12), start + 300, Offset(12))
    assert p.replica_state(B2).last_caught_up_time_ms == start + 300


def test_shrink_then_expand_through_controller(tmp_path: Path) -> None:
    async def main() -> None:
        shared, view = controller_for(PartitionRegistration((B1, B2, B3), (B1, B2, B3), B1, LeaderEpoch(3), 7))
        partitions: list[Partition] = []
        isr = isr_manager(view, partitions)
        p = leader_partition(tmp_path, alter_isr=isr.submit)
        partitions.append(p)
        t0 = p.replica_state(B2).last_caught_up_time_ms
        end = await append_async(p, 4)
        p.update_follower_fetch_state(B2, end, t0 + 10, end)
        p.update_follower_fetch_state(B3, Offset(0), t0 + 10, end)
        assert p.high_watermark == 0

        # B3 stuck at 0 for longer than the lag: proposed out; HW waits until committed
        assert isr.check_shrink(t0 + LAG + 1) == 1
        assert p.pending_isr == {B1, B2}
        assert p.maximal_isr == {B1, B2, B3}
        assert isr.check_shrink(t0 + LAG + 2) == 0  # one change in flight at a time
        await asyncio.sleep(0.01)
        assert p.isr == {B1, B2} and p.pending_isr is None and p.partition_epoch == 8
        assert p.high_watermark == 4
        assert shared.calls[0].isr == (B1, B2) and shared.calls[0].partition_epoch == 7

        # B3 catches up to the HW: its fetch proposes the expansion; the HW computation includes it
        await append_async(p, 2)  # leader at 6, HW 4
        p.update_follower_fetch_state(B3, Offset(4), t0 + LAG + 20, Offset(6))
        assert p.pending_isr == {B1, B2, B3} and p.maximal_isr == {B1, B2, B3}
        await asyncio.sleep(0.01)
        assert shared.calls[1].isr == (B1, B2, B3) and shared.calls[1].partition_epoch == 8
        assert p.isr == {B1, B2, B3} and p.partition_epoch == 9
        await isr.stop()

    asyncio.run(main())


def test_expand_needs_leader_epoch_start(tmp_path: Path) -> None:
    log_ = open_log(tmp_path / "orders-0")
    log_.append_as_leader(batch(10), 2)
    p = Partition(TP, B1, log_, initial_high_watermark=Offset(5))
    p.make_leader(PartitionRegistration((B1, B2), (B1,), B1, LeaderEpoch(3), 0))
    assert p.leader_epoch_start_offset == 10
    p.update_follower_fetch_state(B2, Offset(8), 1, Offset(10))  # past the HW, short of epoch start
    assert p.pending_isr is None
    p.update_follower_fetch_state(B2, Offset(10), 2, Offset(10))  # its fetch proposes it
    assert p.pending_isr == {B1, B2}


def test_stale_alter_clears_pending_and_keeps_isr(tmp_path: Path) -> None:
    async def main() -> None:
        shared, view = controller_for(PartitionRegistration((B1, B2, B3), (B1, B2, B3), B1, LeaderEpoch(3), 9))
        partitions: list[Partition] = []
        isr = isr_manager(view, partitions)
        p = leader_partition(tmp_path, alter_isr=isr.submit)  # partition epoch 7, the controller's 9
        partitions.append(p)
        t0 = p.replica_state(B2).last_caught_up_time_ms
        assert isr.check_shrink(t0 + LAG + 1) == 1  # neither follower ever fetched
        await asyncio.sleep(0.01)
        assert p.isr == {B1, B2, B3} and p.pending_isr is None  # stale partition epoch 7 != 9
        await isr.stop()

    asyncio.run(main())


def test_min_insync_replicas(tmp_path: Path) -> None:
    p = leader_partition(tmp_path, isr=(B1,), min_insync_replicas=2)
    with pytest.raises(KafkaError) as e:
        append(p, 1, acks=-1)
    assert e.value.code == ErrorCode.not_enough_replicas
    append(p, 1, acks=1)  # acks=1 is not held to min.insync.replicas
    assert p.high_watermark == 1  # the ISR is {leader}


def test_isr_shrinking_below_min_isr_never_acknowledges(tmp_path: Path) -> None:
    p = leader_partition(tmp_path, isr=(B1, B2), min_insync_replicas=2)
    end = append(p, 3)
    assert p.acks_satisfied(end, p.leader_epoch) == (False, ErrorCode.none)
    # the follower is removed (controller committed), the HW runs to the leader's LEO
    assert p.make_leader(
        PartitionRegistration((B1, B2, B3), (B1,), B1, LeaderEpoch(3), 8)
    )
    assert p.high_watermark == end
    assert p.acks_satisfied(end, p.leader_epoch) == (
        True,
        ErrorCode.not_enough_replicas_after_append,
    )


def test_leadership_loss_ends_acks_wait(tmp_path: Path) -> None:
    p = leader_partition(tmp_path)
    end = append(p, 1)
    epoch = p.leader_epoch
    assert p.acks_satisfied(end, epoch) == (False, ErrorCode.none)
    p.make_follower(
        PartitionRegistration((B1, B2, B3), (B2, B3), B2, LeaderEpoch(4), 8)
    )
    assert p.role == PartitionRole.FOLLOWER
    assert p.acks_satisfied(end, epoch) == (True, ErrorCode.not_leader_or_follower)
    # leader again under a later epoch: the old append's wait still ends in an error
    p.make_leader(
        PartitionRegistration((B1, B2, B3), (B1, B2, B3), B1, LeaderEpoch(5), 9)
    )
    assert p.acks_satisfied(end, epoch) == (True, ErrorCode.not_leader_or_follower)


def test_stale_image_does_not_undo_isr(tmp_path: Path) -> None:
    p = leader_partition(tmp_path)
    assert p.make_leader(
        PartitionRegistration((B1, B2, B3), (B1, B2), B1, LeaderEpoch(3), 8)
    )
    assert not p.make_leader(
        PartitionRegistration((B1, B2, B3), (B1, B2, B3), B1, LeaderEpoch(3), 7)
    )
    assert p.isr == {B1, B2}


def test_fencing_order_epoch_before_leadership(tmp_path: Path) -> None:
    p = leader_partition(tmp_path)
    p.make_follower(
        PartitionRegistration((B1, B2, B3), (B2, B3), B2, LeaderEpoch(4), 8)
    )
    from broker.replication.partition import FetchIsolation

    with pytest.raises(KafkaError) as e:
        p.read_records(
            Offset(0), 100, FetchIsolation.HIGH_WATERMARK, current_leader_epoch=3
        )
    assert e.value.code == ErrorCode.fenced_leader_epoch
    with pytest.raises(KafkaError) as e:
        p.read_records(
            Offset(0), 100, FetchIsolation.HIGH_WATERMARK, current_leader_epoch=4
        )
    assert e.value.code == ErrorCode.not_leader_or_follower


def test_replica_manager_follower_fetch_moves_hw_and_completes_acks(
    tmp_path: Path,
) -> None:
    """acks=all through the replica manager: a follower fetch at the new LEO completes it."""
    from broker.config import LogConfig
    from broker.log.manager import LogManager
    from broker.replication.partition import FetchIsolation
    from broker.replication.replica_manager import FetchRequestPartition

    async def main() -> None:
        lm = LogManager([tmp_path / "data"], LogConfig())
        lm.load_logs()
        _, view = controller_for(PartitionRegistration((B1, B2), (B1, B2), B1, LeaderEpoch(1), 0))
        rm = ReplicaManager(
            B1, lm, lambda t: LogConfig(), {}, alter_partition=view.alter_partition,
            isr_settings=IsrSettings(), fetcher_settings=FetcherSettings(B1, "PLAINTEXT"),
        )  # fmt: skip
        reg = PartitionRegistration((B1, B2), (B1, B2), B1, LeaderEpoch(1), 0)
        topic = TopicRegistration("orders", uuid.uuid4(), MappingProxyType({0: reg}))
        image = ClusterImage(
            "c",
            B1,
            ControllerEpoch(1),
            MappingProxyType({}),
            MappingProxyType({"orders": topic}),
        )
        rm.on_image(None, image)
        produce = asyncio.create_task(rm.append_records([(TP, batch(3))], -1, 5000))
        await asyncio.sleep(0.01)
        assert not produce.done()
        rm.read_local(
            [FetchRequestPartition(TP, Offset(0), 1 << 20)],
            FetchIsolation.LOG_END,
            1 << 20,
            replica_id=2,
        )
        await asyncio.sleep(0.01)
        assert (
            not produce.done()
        )  # the follower fetched from 0: it does not have the batch yet
        rm.read_local(
            [FetchRequestPartition(TP, Offset(3), 1 << 20)],
            FetchIsolation.LOG_END,
            1 << 20,
            replica_id=2,
        )
        result = await asyncio.wait_for(produce, 1)
        assert result[TP].error == ErrorCode.none
        assert rm.partitions[TP].high_watermark == 3
        # a produce waiting when leadership moves away ends with NOT_LEADER_OR_FOLLOWER
        produce = asyncio.create_task(rm.append_records([(TP, batch(1))], -1, 5000))
        await asyncio.sleep(0.01)
        moved = replace(reg, leader=B2, leader_epoch=LeaderEpoch(2), partition_epoch=1)
        topic2 = replace(topic, partitions=MappingProxyType({0: moved}))
        rm.on_image(image, replace(image, topics=MappingProxyType({"orders": topic2})))
        result = await asyncio.wait_for(produce, 1)
        assert result[TP].error == ErrorCode.not_leader_or_follower
        lm.close()

    asyncio.run(main())


# -- heartbeat suspicion (samsa.heartbeat.timeout.ms) ---------------------------------------------


def test_suspected_follower_holding_the_hw_back_leaves_without_waiting_for_the_lag(tmp_path: Path) -> None:
    p = leader_partition(tmp_path)
    t0 = p.replica_state(B2).last_caught_up_time_ms
    end = append(p, 4)
    p.update_follower_fetch_state(B2, end, t0 + 10, end)
    p.update_follower_fetch_state(B3, Offset(2), t0 + 10, end)
    silence = 500
    # not suspected: nothing before replica.lag.time.max.ms
    assert p.maybe_shrink_isr(t0 + 1000, LAG) is None
    # suspected but fetched lately: stays (the heartbeats may be what is lost)
    assert p.suspected_out_of_sync_replicas(t0 + 10 + silence, {B3}, silence) == frozenset()
    # suspected, silent past the heartbeat timeout and behind the leader's LEO: out at once
    assert p.suspected_out_of_sync_replicas(t0 + 20 + silence, {B3}, silence) == {B3}
    proposal = p.maybe_shrink_isr(t0 + 20 + silence, LAG, {B3}, silence)
    assert proposal is not None and proposal.isr == (B1, B2) and p.pending_isr == {B1, B2}


def test_suspected_follower_that_holds_nothing_back_stays(tmp_path: Path) -> None:
    p = leader_partition(tmp_path)
    t0 = p.replica_state(B2).last_caught_up_time_ms
    end = append(p, 4)
    p.update_follower_fetch_state(B2, end, t0 + 10, end)
    p.update_follower_fetch_state(B3, end, t0 + 10, end)  # has everything: no write waits for it
    assert p.suspected_out_of_sync_replicas(t0 + 5000, {B3}, 500) == frozenset()
    append(p, 1)  # the next write does wait for it: then it goes
    assert p.suspected_out_of_sync_replicas(t0 + 5000, {B3}, 500) == {B3}


def test_leader_that_suspects_every_follower_does_not_shrink_to_itself(tmp_path: Path) -> None:
    """Cut off from both followers, the leader suspects both, and they suspect it: the controller
    moves leadership; the leader must not win the race by taking the ISR down to itself."""
    p = leader_partition(tmp_path)
    t0 = p.replica_state(B2).last_caught_up_time_ms
    append(p, 4)
    assert p.suspected_out_of_sync_replicas(t0 + 5000, {B2, B3}, 500) == frozenset()
    assert p.maybe_shrink_isr(t0 + 5000, LAG, {B2, B3}, 500) is None
    # with one follower left in the ISR and suspected, neither (the controller's majority rule decides)
    q = leader_partition(tmp_path / "q", isr=(B1, B3))
    append(q, 1)
    assert q.suspected_out_of_sync_replicas(t0 + 5000, {B3}, 500) == frozenset()


def test_refused_expansion_is_held_off(tmp_path: Path) -> None:
    proposals: list[PartitionRegistration] = []
    p = leader_partition(tmp_path, isr=(B1, B2), alter_isr=lambda _, proposal: proposals.append(proposal))
    p.update_follower_fetch_state(B3, Offset(0), 1, Offset(0))  # its fetch proposes it
    assert [x.isr for x in proposals] == [(B1, B2, B3)]
    p.isr_change_failed(proposals[0], hold_expansion_ms=60_000)  # INELIGIBLE_REPLICA: suspected
    assert p.pending_isr is None and p.maybe_expand_isr(B3) is None
    p._expansion_held_until_ms = 0  # the hold is over
    assert p.maybe_expand_isr(B3) is not None


def test_isr_manager_runs_the_check_when_the_detector_suspects(tmp_path: Path) -> None:
    async def main() -> None:
        shared, view = controller_for(PartitionRegistration((B1, B2, B3), (B1, B2, B3), B1, LeaderEpoch(3), 7))
        suspected: set[BrokerId] = set()
        partitions: list[Partition] = []
        isr = isr_manager(
            view, partitions, replica_lag_time_max_ms=600_000,  # the lag check: never
            suspected=lambda: frozenset(suspected), suspicion_timeout_ms=0, suspicion_recheck_ms=50,
        )  # fmt: skip
        p = leader_partition(tmp_path, alter_isr=isr.submit)
        partitions.append(p)
        isr.start()
        await append_async(p, 2)  # neither follower fetched it
        await asyncio.sleep(0.05)
        assert p.isr == {B1, B2, B3}
        suspected.add(B3)
        isr.wake()
        await asyncio.sleep(0.05)
        assert p.isr == {B1, B2} and shared.calls[0].isr == (B1, B2)
        await isr.stop()

    asyncio.run(main())
