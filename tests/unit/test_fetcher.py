"""The replica fetcher end to end, in one process: three real `Broker`s on loopback ports sharing
a small in-memory controller (tests only; the cluster tests use ZooKeeper). The controller can
hold back images from a broker, which makes that broker a zombie leader: it keeps its old
leadership while the others move on.

Covers: followers replicate and acks=all completes through real Fetch requests; a zombie leader
cannot acknowledge acks=all; its divergent tail is truncated through OffsetForLeaderEpoch when it
learns of the new leader; a follower whose log is behind the leader's log start restarts there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_log_support import batch

import broker.server as server_module
from broker.config import BrokerConfig
from broker.replication.partition import FetchIsolation
from broker.server import Broker
from controller.model import PartitionRegistration
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId, LeaderEpoch, Offset
from tests.support.controller import SharedController

TP = TopicPartition("orders", 0)


async def wait_for(
    cond: Callable[[], bool], timeout: float = 10.0, what: str = ""
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def log_bytes(b: Broker, tp: TopicPartition = TP) -> bytes:
    partition = b.replica_manager.partitions[tp]
    info = partition.read_records(
        partition.log_start_offset, 1 << 30, FetchIsolation.LOG_END, fetch_only_from_leader=False
    ).info
    return b"" if info is None or info.records is None else info.records.read_bytes()


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], Any]:
    shared = SharedController()
    monkeypatch.setattr(
        server_module,
        "EmbeddedController",
        lambda data_dir, registration, cluster_id=None, **_: shared.attach(registration),
    )

    async def start(
        n: int = 3, **overrides: str
    ) -> tuple[SharedController, dict[BrokerId, Broker]]:
        brokers: dict[BrokerId, Broker] = {}
        for i in range(1, n + 1):
            props = {
                "broker.id": str(i),
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": str(tmp_path / f"b{i}"),
                "replica.fetch.wait.max.ms": "200",
                "replica.fetch.backoff.ms": "50",
                "replica.lag.time.max.ms": "2000",
                "min.insync.replicas": "2",
                **overrides,
            }
            config, _ = BrokerConfig.from_properties(props)
            b = Broker(config)
            await b.start()
            brokers[BrokerId(i)] = b
        return shared, brokers

    return start


def test_replicate_zombie_fenced_and_truncated(cluster: Callable[[], Any]) -> None:
    async def main() -> None:
        shared, brokers = await cluster()
        b1, b2, b3 = brokers[BrokerId(1)], brokers[BrokerId(2)], brokers[BrokerId(3)]
        ids = (BrokerId(1), BrokerId(2), BrokerId(3))
        try:
            shared.set_partition(
                TP, PartitionRegistration(ids, ids, BrokerId(1), LeaderEpoch(1), 0)
            )
            # acks=all completes once both followers fetched the batch through the network
            for _ in range(5):
                result = await b1.replica_manager.append_records(
                    [(TP, batch(2))], -1, 5000
                )
                assert result[TP].error == ErrorCode.none, result
            assert b1.replica_manager.partitions[TP].high_watermark == 10
            await wait_for(
                lambda: log_bytes(b2) == log_bytes(b1) == log_bytes(b3),
                what="replicas equal",
            )
            await wait_for(
                lambda: b3.replica_manager.partitions[TP].high_watermark == 10,
                what="follower HW",
            )

            # b1 is cut off from the controller: b2 becomes leader in epoch 2, b1 does not know
            shared.held.add(BrokerId(1))
            shared.set_partition(
                TP,
                PartitionRegistration(
                    ids, (BrokerId(2), BrokerId(3)), BrokerId(2), LeaderEpoch(2), 1
                ),
            )
            await wait_for(
                lambda: b2.replica_manager.partitions[TP].is_leader, what="b2 leads"
            )
            zombie = await b1.replica_manager.append_records([(TP, batch(3))], 1, 1000)
            assert (
                zombie[TP].error == ErrorCode.none
            )  # acks=1 on the zombie: accepted, not safe
            waited = await b1.replica_manager.append_records([(TP, batch(1))], -1, 800)
            assert (
                waited[TP].error == ErrorCode.request_timed_out
            )  # acks=all never acknowledged
            assert b1.replica_manager.partitions[TP].high_watermark == 10

            for _ in range(2):
                result = await b2.replica_manager.append_records(
                    [(TP, batch(4))], -1, 5000
                )
                assert result[TP].error == ErrorCode.none, result
            assert b2.replica_manager.partitions[TP].log_end_offset == 18
            assert (
                b1.replica_manager.partitions[TP].log_end_offset == 14
            )  # 10 + 3 + 1 zombie

            # b1 learns of epoch 2: it truncates its zombie tail at 10 and copies b2's log
            shared.release(BrokerId(1))
            await wait_for(
                lambda: log_bytes(b1) == log_bytes(b2),
                what="zombie truncated and caught up",
            )
            epochs = b1.replica_manager.partitions[TP]._log.leader_epoch_cache.entries()
            assert epochs == [(1, 0), (2, 10)]
            # and it rejoins the ISR through alter_partition
            await wait_for(
                lambda: set(shared.reg(TP).isr) == set(ids), what="b1 back in the ISR"
            )
        finally:
            for b in brokers.values():
                await b.stop()

    asyncio.run(main())


def test_lagging_follower_leaves_isr_and_min_isr_holds(
    cluster: Callable[[], Any],
) -> None:
    async def main() -> None:
        shared, brokers = await cluster(2, **{"replica.lag.time.max.ms": "600"})
        b1, b2 = brokers[BrokerId(1)], brokers[BrokerId(2)]
        ids = (BrokerId(1), BrokerId(2))
        try:
            shared.set_partition(
                TP, PartitionRegistration(ids, ids, BrokerId(1), LeaderEpoch(1), 0)
            )
            result = await b1.replica_manager.append_records([(TP, batch(2))], -1, 5000)
            assert result[TP].error == ErrorCode.none
            # the follower stops fetching (its fetchers are gone)
            await b2.replica_manager.fetcher_manager.shutdown()
            pending = asyncio.create_task(
                b1.replica_manager.append_records([(TP, batch(1))], -1, 5000)
            )
            await wait_for(
                lambda: shared.reg(TP).isr == (BrokerId(1),), what="ISR shrink"
            )
            result = await pending
            # the HW passed the batch only because the ISR shrank below min.insync.replicas=2
            assert result[TP].error == ErrorCode.not_enough_replicas_after_append
            result = await b1.replica_manager.append_records([(TP, batch(1))], -1, 5000)
            assert result[TP].error == ErrorCode.not_enough_replicas
        finally:
            for b in brokers.values():
                await b.stop()

    asyncio.run(main())


def test_follower_behind_leader_log_start_restarts_there(
    cluster: Callable[[], Any],
) -> None:
    async def main() -> None:
        shared, brokers = await cluster(2, **{"min.insync.replicas": "1"})
        b1, b2 = brokers[BrokerId(1)], brokers[BrokerId(2)]
        ids = (BrokerId(1), BrokerId(2))
        try:
            # b1 leads alone and deletes its first records before b2 is a replica
            shared.set_partition(
                TP,
                PartitionRegistration(
                    (BrokerId(1),), (BrokerId(1),), BrokerId(1), LeaderEpoch(1), 0
                ),
            )
            for _ in range(3):
                await b1.replica_manager.append_records([(TP, batch(2))], -1, 5000)
            b1.replica_manager.partitions[TP].delete_records_on_leader(Offset(4))
            shared.set_partition(
                TP,
                PartitionRegistration(
                    ids, (BrokerId(1),), BrokerId(1), LeaderEpoch(1), 1
                ),
            )
            await wait_for(
                lambda: TP in b2.replica_manager.partitions,
                what="b2 hosts the partition",
            )
            await wait_for(
                lambda: b2.replica_manager.partitions[TP].log_end_offset == 6,
                what="b2 caught up",
            )
            assert b2.replica_manager.partitions[TP].log_start_offset == 4
            await wait_for(lambda: shared.reg(TP).isr == ids, what="b2 joins the ISR")
        finally:
            for b in brokers.values():
                await b.stop()

    asyncio.run(main())


def test_partition_added_during_a_long_poll_does_not_wait_for_it(cluster: Callable[[], Any]) -> None:
    """A follower long-polls its leader for one idle partition (replica.fetch.wait.max.ms 3 s here)
    when it is given a second partition of the same leader: the poll is abandoned, the new
    partition truncates and fetches at once, and an acks=all write to it completes in well under
    the poll time (before: it waited for the poll to end)."""

    async def main() -> None:
        shared, brokers = await cluster(2, **{"replica.fetch.wait.max.ms": "3000"})
        b1 = brokers[BrokerId(1)]
        ids = (BrokerId(1), BrokerId(2))
        other = TopicPartition("orders", 1)
        try:
            shared.set_partition(TP, PartitionRegistration(ids, ids, BrokerId(1), LeaderEpoch(1), 0))
            await wait_for(lambda: TP in brokers[BrokerId(2)].replica_manager.partitions, what="follower")
            await asyncio.sleep(0.5)  # b2's fetch of the idle TP is parked on b1 now
            shared.set_partition(other, PartitionRegistration(ids, ids, BrokerId(1), LeaderEpoch(1), 0))
            await wait_for(lambda: other in b1.replica_manager.partitions, what="new partition")
            started = asyncio.get_running_loop().time()
            result = await b1.replica_manager.append_records([(other, batch(1))], -1, 5000)
            took = asyncio.get_running_loop().time() - started
            assert result[other].error == ErrorCode.none, result
            assert took < 1.5, f"acks=all on the new partition took {took:.2f}s"
        finally:
            for b in brokers.values():
                await b.stop()

    asyncio.run(main())
