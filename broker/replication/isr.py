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

Each answer is counted as Kafka's Partition counts it (ReplicaManager's IsrExpandsPerSec,
IsrShrinksPerSec, FailedIsrUpdatesPerSec): a committed expansion or shrink, or a failure (a
refusal, the controller unreachable, an answer for a leadership that has moved on).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from broker import clock
from broker.metrics.stats import ReplicaStats
from broker.replication.settings import IsrSettings
from controller.model import PartitionRegistration
from protocol.errors import ErrorCode, KafkaError
from protocol.types import BrokerId

if TYPE_CHECKING:
    from broker.replication.partition import Partition

log = logging.getLogger("samsa.isr")

AlterPartition = Callable[
    [str, int, BrokerId, PartitionRegistration], Awaitable[PartitionRegistration]
]


class IsrManager:
    """Built by the replica manager with what it needs: the controller's `alter_partition`, the
    partitions to check (`partitions()`), and `on_committed(partition)`, called once an ISR
    change took effect (waiting acks=all produces are checked again)."""

    def __init__(
        self,
        alter_partition: AlterPartition,
        partitions: Callable[[], Iterable[Partition]],
        on_committed: Callable[[Partition], None],
        settings: IsrSettings,
        stats: ReplicaStats | None = None,
    ) -> None:
        self._alter_partition = alter_partition
        self.stats = stats if stats is not None else ReplicaStats()
        self._partitions = partitions
        self._on_committed = on_committed
        self.settings = settings
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
        """One pass of the shrink check over every led partition; returns proposals made (each
        partition sends its own, through `submit`)."""
        now = clock.now_ms() if now_ms is None else now_ms
        s = self.settings
        suspected = s.suspected()
        proposals = 0
        for partition in list(self._partitions()):
            proposal = partition.maybe_shrink_isr(
                now, s.replica_lag_time_max_ms, suspected, s.suspicion_timeout_ms
            )
            if proposal is not None:
                proposals += 1
        return proposals

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
        s = self.settings
        interval = max(0.01, s.replica_lag_time_max_ms / 2000)
        while True:
            await self._sleep(s.suspicion_recheck_ms / 1000 if s.suspected() else interval)
            try:
                self.check_shrink()
            except Exception:
                log.exception("isr shrink check failed")

    # -- controller round trip -------------------------------------------------------------------

    def submit(self, partition: Partition, proposal: PartitionRegistration) -> None:
        """Send `proposal` (already pending on `partition`) to the controller in a task: the
        partitions' `alter_isr`."""
        task = asyncio.get_running_loop().create_task(self._alter(partition, proposal))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alter(
        self, partition: Partition, proposal: PartitionRegistration
    ) -> None:
        tp = partition.tp
        expand = len(proposal.isr) > len(partition.isr)
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
            self.stats.failed_isr_updates += 1
            partition.isr_change_failed(proposal, self.settings.suspicion_timeout_ms if ineligible else 0)
            return
        except (
            Exception
        ) as e:  # controller unreachable: same as a refusal, retried by the next check
            log.warning(
                "isr change failed topic=%s partition=%d proposed_isr=%s error=%r",
                tp.topic, tp.partition, list(proposal.isr), e,
            )  # fmt: skip
            self.stats.failed_isr_updates += 1
            partition.isr_change_failed(proposal)
            return
        if partition.isr_change_committed(committed):  # False for a partition gone offline since
            if expand:
                self.stats.isr_expands += 1
            else:
                self.stats.isr_shrinks += 1
            self._on_committed(partition)
        else:
            self.stats.failed_isr_updates += 1
