"""Moving replicas between this broker's log dirs (AlterReplicaLogDirs; Kafka's
ReplicaAlterLogDirsManager and ReplicaAlterLogDirsThread).

One copier task per moving partition, on the event loop; its file work runs on threads (the
reads, and the writes as the log writer runs them). Each step copies up to `max_bytes`
(replica.fetch.max.bytes, as Kafka's alter-log-dirs fetches) from the partition's current log
into its future log (`Partition.append_records_to_future_replica`). The steps of every move count
against one throttle, replica.alter.log.dirs.io.max.bytes.per.second (Kafka's
ReplicaAlterLogDirsThread quota): while the bytes copied are above it over the
alter.log.dirs.replication.quota.window.* windows, no step starts and the copier waits
replica.fetch.backoff.ms (Kafka's fetcher thread with nothing to fetch); once
the future log has caught up, the partition swaps it in under its log lock
(`Partition.maybe_replace_current_with_future_replica`) and the log manager deletes the old dir's
copy.

States of a move:

    (none) --start--> COPYING --caught up, swapped--> (none: the replica lives in the new dir)
    COPYING --stop (cancelled, partition gone, shutdown)--> (none; the future log is kept on
                 shutdown and reloaded, so the copy resumes after a restart, as in Kafka)
    COPYING --step fails--> COPYING (logged, retried after RETRY_BACKOFF_S)
    COPYING --throttle exceeded--> COPYING (no step until the rate is back under the limit)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker import clock
from broker.log.log import UnifiedLog
from broker.replication.partition import Partition
from broker.replication.throttle import ReplicationQuota
from broker.tasks import cancel_and_wait
from protocol.topic_partition import TopicPartition

log = logging.getLogger("samsa.replication")

CAUGHT_UP_BACKOFF_S = 0.001
"""A caught-up copy that could not swap (an append came first) copies again after this."""
RETRY_BACKOFF_S = 1.0


class ReplicaAlterLogDirsManager:
    """The copier tasks, one per partition whose replica is moving to another log dir."""

    def __init__(
        self, replace: Callable[[TopicPartition], UnifiedLog], max_bytes: int = 1_048_576, backoff_ms: int = 1000
    ) -> None:
        """`replace(tp)`: the log manager's swap of the future log into place; `max_bytes` what
        one copy step reads (replica.fetch.max.bytes); `backoff_ms` the wait while throttled
        (replica.fetch.backoff.ms)."""
        self._replace = replace
        self._max_bytes = max_bytes
        self._backoff_s = backoff_ms / 1000
        self.quota = ReplicationQuota()
        """replica.alter.log.dirs.io.max.bytes.per.second (dynamic: the broker configures it)."""
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}

    def moving(self, tp: TopicPartition) -> bool:
        return tp in self._tasks

    def start(self, partition: Partition) -> None:
        """Copy `partition`'s log into its future log until swapped (no-op if already copying)."""
        if partition.tp in self._tasks:
            return
        task = asyncio.get_running_loop().create_task(
            self._copy(partition), name=f"alter-log-dirs {partition.tp}"
        )
        self._tasks[partition.tp] = task
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        for tp, t in list(self._tasks.items()):
            if t is task:
                del self._tasks[tp]

    def stop(self, tp: TopicPartition) -> None:
        """Stop copying `tp` (the move was cancelled or the partition left this broker); a write
        in flight ends first (Partition._write waits for it) and does not count."""
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()

    async def shutdown(self) -> None:
        tasks, self._tasks = list(self._tasks.values()), {}
        await cancel_and_wait(tasks)

    async def _copy(self, partition: Partition) -> None:
        tp = partition.tp
        log.info("moving replica partition=%s future_log_end_offset=%s", tp, partition.future_log_end_offset)
        while True:
            try:
                if self.quota.exceeded(clock.now_ms()):
                    await asyncio.sleep(self._backoff_s)
                    continue
                copied = await partition.append_records_to_future_replica(max(self._max_bytes, 1))
                if copied:
                    self.quota.record(copied, clock.now_ms())
                    continue
                if partition.future_log_end_offset is None:
                    return  # removed meanwhile
                if await partition.maybe_replace_current_with_future_replica(lambda: self._replace(tp)):
                    log.info("replica moved partition=%s log_end_offset=%d", tp, partition.log_end_offset)
                    return
                await asyncio.sleep(CAUGHT_UP_BACKOFF_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a storage error: logged, retried
                log.warning("moving replica failed partition=%s error=%r", tp, exc)
                await asyncio.sleep(RETRY_BACKOFF_S)
