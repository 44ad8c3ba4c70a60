"""ISR changes on the leader: the periodic shrink check and the controller round trip.

`Partition` decides (pure, no awaits): `maybe_shrink_isr` / `maybe_expand_isr` return a proposed
`PartitionRegistration` and mark it pending. This module sends the proposal to the controller
(`alter_partition`, compare-and-set on partition_epoch) in a task and hands the answer back:

    proposed --alter_partition ok-->     committed: Partition.isr_change_committed(reg)
    proposed --KafkaError / other-->     failed:    Partition.isr_change_failed(proposal); the
                                                    next image (or the next check) retries

Between the proposal and the answer the partition may have changed (new image, new leader
epoch, deleted), so the answer is applied only to the same `Partition` object, and the
partition itself re-checks epochs. The shrink check runs every replica.lag.time.max.ms / 2 (Kafka's
isr-expiration period); in a cluster it also runs at once when the set of peers that cannot follow
this broker changes (`wake`: its failure detector suspects one, or one's heartbeats say it lost
ZooKeeper; `suspected`), and every heartbeat interval while that set is not empty, so that a dead
follower leaves the ISR of every partition this broker leads within the heartbeat timeout, also
of one that was idle when the follower died and is written to later.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from controller.model import PartitionRegistration
from protocol.errors import ErrorCode, KafkaError
from protocol.types import BrokerId

if TYPE_CHECKING:
    from broker.replication.partition import Partition
    from broker.replication.replica_manager import ReplicaManager

log = logging.getLogger("samsa.isr")

AlterPartition = Callable[
    [str, int, BrokerId, PartitionRegistration], Awaitable[PartitionRegistration]
]


class IsrManager:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        alter_partition: AlterPartition,
        *,
        replica_lag_time_max_ms: int,
        suspected: Callable[[], AbstractSet[BrokerId]] | None = None,
        suspicion_timeout_ms: int = 1000,
        suspicion_recheck_ms: int = 200,
    ) -> None:
        self.replica_manager = replica_manager
        self._alter_partition = alter_partition
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._suspected: Callable[[], AbstractSet[BrokerId]] = suspected or (lambda: frozenset())
        """The peers that cannot follow this broker now, by its own evidence (none on a single
        node; controller/zk_health.py `suspected_peers`)."""
        self.suspicion_timeout_ms = suspicion_timeout_ms
        self.suspicion_recheck_ms = suspicion_recheck_ms
        self._tasks: set[asyncio.Task[None]] = set()
        self._shrink_task: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Future[None] | None = None

    def start(self) -> None:
        self._shrink_task = asyncio.get_running_loop().create_task(self._shrink_loop())

    async def stop(self) -> None:
        tasks = list(self._tasks)
        if self._shrink_task is not None:
            tasks.append(self._shrink_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- shrink ----------------------------------------------------------------------------------

    def check_shrink(self, now_ms: int | None = None) -> int:
        """One pass of the shrink check over every led partition; returns proposals submitted."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        suspected = self._suspected()
        submitted = 0
        for partition in list(self.replica_manager.partitions.values()):
            proposal = partition.maybe_shrink_isr(
                now, self.replica_lag_time_max_ms, suspected, self.suspicion_timeout_ms
            )
            if proposal is not None:
                self.submit(partition, proposal)
                submitted += 1
        return submitted

    def wake(self) -> None:
        """Run the shrink check now (the failure detector's suspicions changed). No awaits."""
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _sleep(self, seconds: float) -> None:
        """Sleep up to `seconds`, or until `wake`."""
        loop = asyncio.get_running_loop()
        self._wakeup = wakeup = loop.create_future()
        timer = loop.call_later(seconds, self.wake)
        try:
            await wakeup
        finally:
            timer.cancel()
            self._wakeup = None

    async def _shrink_loop(self) -> None:
        interval = max(0.01, self.replica_lag_time_max_ms / 2000)
        while True:
            await self._sleep(self.suspicion_recheck_ms / 1000 if self._suspected() else interval)
            try:
                self.check_shrink()
            except Exception:
                log.exception("isr shrink check failed")

    # -- controller round trip -------------------------------------------------------------------

    def submit(self, partition: Partition, proposal: PartitionRegistration) -> None:
        """Send `proposal` (already pending on `partition`) to the controller in a task."""
        task = asyncio.get_running_loop().create_task(self._alter(partition, proposal))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alter(
        self, partition: Partition, proposal: PartitionRegistration
    ) -> None:
        tp = partition.tp
        try:
            committed = await self._alter_partition(
                tp.topic, tp.partition, partition.local_broker_id, proposal
            )
        except asyncio.CancelledError:
            raise
        except KafkaError as e:
            log.info(
                "isr change rejected topic=%s partition=%d proposed_isr=%s partition_epoch=%d error=%s message=%s",
                tp.topic, tp.partition, list(proposal.isr), proposal.partition_epoch, e.code.name, e.message,
            )  # fmt: skip
            ineligible = e.code == ErrorCode.ineligible_replica
            partition.isr_change_failed(proposal, self.suspicion_timeout_ms if ineligible else 0)
            return
        except (
            Exception
        ) as e:  # controller unreachable: same as a refusal, retried by the next check
            log.warning(
                "isr change failed topic=%s partition=%d proposed_isr=%s error=%r",
                tp.topic, tp.partition, list(proposal.isr), e,
            )  # fmt: skip
            partition.isr_change_failed(proposal)
            return
        if self.replica_manager.partitions.get(tp) is not partition:
            return
        if partition.isr_change_committed(committed):
            self.replica_manager.delayed_produce.check_and_complete(tp)
