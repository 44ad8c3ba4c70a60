"""The replica manager: every partition this broker hosts, and the produce and fetch paths.

It follows the controller's metadata image: a partition whose registration names this broker
becomes a leader or follower `Partition` backed by a log from the LogManager; a partition that
disappears from the image is taken offline and its log deleted.

Produce: append to each leader partition, then, for acks=all, park in the produce purgatory until
every partition's high watermark covers its batch. Fetch: read from each partition; if fewer than
min_bytes are available, park in the fetch purgatory until an append brings enough or max_wait_ms
passes. Appends and HW moves call `check_and_complete` on the purgatories for their partition.

Replication: partitions this broker follows are handed to the replica fetchers (fetcher.py,
through the fetcher manager this replica manager owns), which truncate and then fetch from their
leader. A fetch from a follower (replica_id >= 0) is the partition's `update_follower_fetch_state`:
the follower's state, an ISR expansion sent through the ISR manager (isr.py, also owned here) and
the HW, which completes acks=all produces and consumer fetches. A leadership change completes
waiting produces (NOT_LEADER_OR_FOLLOWER) and fetches.

Metrics (broker/metrics): each produced partition entry and each partition a fetch reads are
counted once per request in the broker's BrokerTopicMetrics (`metrics.topics`), as Kafka's
appendToLocalLog and fetchMessages count them; the ISR manager and the replica fetchers count
ISR changes and replicated bytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from broker import clock
from broker.log.info import AppendOrigin
from broker.metrics.stats import BrokerMetrics
from broker.replication.alter_log_dirs import ReplicaAlterLogDirsManager
from broker.replication.fetcher_manager import ReplicaFetcherManager
from broker.replication.isr import AlterPartition, IsrManager
from broker.replication.partition import FetchIsolation, Partition, ReadResult
from broker.replication.purgatory import Purgatory
from broker.replication.record_checker import RecordChecker
from broker.replication.settings import FetcherSettings, IsrSettings
from broker.replication.throttle import ReplicationQuota, throttled
from controller.model import ClusterImage, TopicRegistration
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId, Offset

if TYPE_CHECKING:
    from pathlib import Path

    from broker.config import LogConfig
    from broker.log.info import LogAppendInfo, LogOffsetMetadata
    from broker.log.manager import LogManager
    from broker.log.validation import CheckedRecords
    from protocol.record_check import RecordError
    from protocol.schemas.fetch_v12_chain import ChainReport

log = logging.getLogger("samsa.replica_manager")



@dataclass(frozen=True, slots=True)
class ProduceResult:
    error: ErrorCode
    info: LogAppendInfo | None = None
    message: str | None = None
    record_errors: tuple[RecordError, ...] = ()
    """KIP-467: the records of a rejected batch at fault."""


@dataclass(frozen=True, slots=True)
class FetchRequestPartition:
    tp: TopicPartition
    fetch_offset: Offset
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: Offset = Offset(-1)
    chain_reports: tuple[ChainReport, ...] = ()
    """a follower's fetch: its chain successors' states (broker/replication/chain.py)"""


@dataclass(frozen=True, slots=True)
class FetchResult:
    tp: TopicPartition
    error: ErrorCode
    read: ReadResult | None = None


class DelayedFetch:
    """A fetch waiting in the purgatory for min_bytes (Kafka's DelayedFetch.tryComplete).

    It completes as soon as any partition: is gone or no longer led here (cases A-C), fails to
    answer (storage, case D), fences the request's leader epoch (case E), or has its fetch offset
    on another segment than the offset the fetch may read up to (case F: the fetch is behind the
    active segment, or the log was truncated below it; the data is there, or an error is); or
    when the bytes between each fetch offset and its bound, on the same segment, capped by the
    partition's max_bytes, add up to min_bytes (case G). A fetch behind the active segment thus
    never waits, however small the batches there: a compacted topic's sparse tail or an older
    segment's last bytes are answered at once, as by Kafka.
    """

    def __init__(
        self,
        partitions: Callable[[TopicPartition], Partition | None],
        requests: Sequence[FetchRequestPartition],
        isolation: FetchIsolation,
        min_bytes: int,
        fetch_only_from_leader: bool,
        leader_throttled: Callable[[Partition], bool] | None = None,
        replica_id: int = -1,
    ) -> None:
        """`leader_throttled`: a follower's fetch only, whether a partition gets it no records now
        (a replication throttle); its bytes then do not count, as in Kafka's tryComplete.
        `replica_id`: a follower's fetch, which a follower serves if it is its chain predecessor."""
        self._replica_id = replica_id
        self._partitions = partitions
        self._leader_throttled = leader_throttled
        self._requests = requests
        self._isolation = isolation
        self._min_bytes = min_bytes
        self._fetch_only_from_leader = fetch_only_from_leader
        self._start: dict[TopicPartition, LogOffsetMetadata] = {}
        """Where each fetch offset lay when first checked (Kafka's startOffsetMetadata)."""

    def try_complete(self) -> bool:
        accumulated = 0
        for req in self._requests:
            partition = self._partitions(req.tp)
            if partition is None:
                return True  # cases B, C
            try:
                only_leader = self._fetch_only_from_leader
                if self._replica_id >= 0 and not partition.is_leader:  # a chain successor's
                    partition.check_serves_chain(BrokerId(self._replica_id), req.current_leader_epoch)
                    only_leader = False
                snapshot = partition.fetch_offset_snapshot(
                    req.current_leader_epoch, fetch_only_from_leader=only_leader
                )
                fetch_offset = self._start.get(req.tp)
                if fetch_offset is None:
                    fetch_offset = self._start[req.tp] = partition.offset_metadata(req.fetch_offset)
            except KafkaError:
                return True  # cases A, D, E
            if fetch_offset.message_offset_only:
                return True  # outside the log: the read answers OFFSET_OUT_OF_RANGE
            end = snapshot.end_offset(self._isolation)
            # equal offsets go to case G: after a roll the end offset lies on the old segment
            if end.message_offset != fetch_offset.message_offset:
                if end.on_older_segment(fetch_offset) or fetch_offset.on_older_segment(end):
                    return True  # case F
                if fetch_offset.message_offset < end.message_offset and not (
                    self._leader_throttled is not None and self._leader_throttled(partition)
                ):
                    accumulated += min(end.position_diff(fetch_offset), req.max_bytes)
        return accumulated >= self._min_bytes  # case G


class ReplicaManager:
    def __init__(
        self,
        broker_id: BrokerId,
        log_manager: LogManager,
        log_config_for: Callable[[TopicRegistration], LogConfig],
        initial_high_watermarks: Mapping[TopicPartition, int],
        *,
        alter_partition: AlterPartition,
        isr_settings: IsrSettings,
        fetcher_settings: FetcherSettings,
        metrics: BrokerMetrics | None = None,
        report_offline_replicas: Callable[[frozenset[TopicPartition]], Coroutine[Any, Any, None]] | None = None,
        on_all_log_dirs_failed: Callable[[], None] | None = None,
    ) -> None:
        """`alter_partition` is the controller's (ISR changes); the replica manager builds and
        owns the ISR manager and the replica fetchers with them. `metrics`: the broker's
        counters (a fresh set when not given). When a log dir fails, `report_offline_replicas`
        tells the controller which replicas went offline with it; `on_all_log_dirs_failed`
        stops the broker once none is left."""
        self.broker_id = broker_id
        self.metrics = metrics if metrics is not None else BrokerMetrics()
        self._topic_stats = self.metrics.topics
        self.log_manager = log_manager
        self._log_config_for = log_config_for
        self._initial_hw = dict(initial_high_watermarks)
        self.partitions: dict[TopicPartition, Partition] = {}
        self._image: ClusterImage | None = None
        self._report_offline_replicas = report_offline_replicas
        self._on_all_log_dirs_failed = on_all_log_dirs_failed
        self.offline_partitions: set[TopicPartition] = set()
        """Partitions whose log was in a failed log dir (Kafka's HostedPartition.Offline): they
        answer KAFKA_STORAGE_ERROR until the broker restarts."""
        self._background: set[asyncio.Task[None]] = set()
        self._logs_not_created: set[TopicPartition] = set()
        """Partitions of the image whose log could not be created (a full disk): they answer
        KAFKA_STORAGE_ERROR and are tried again on the next image or request for them."""
        self.delayed_produce: Purgatory[TopicPartition] = Purgatory("produce")
        self.delayed_fetch: Purgatory[TopicPartition] = Purgatory("fetch")
        self._leadership_listeners: list[Callable[[TopicPartition, bool], None]] = []
        self.isr_manager = IsrManager(
            alter_partition,
            lambda: self.partitions.values(),
            self._on_isr_committed,
            isr_settings,
            self.metrics.replica,
        )
        """Sends ISR changes to the controller and runs the leader's shrink check."""
        self.leader_quota = ReplicationQuota()
        """The leader's replication throttle (leader.replication.throttled.rate, throttle.py)."""
        self.fetcher_manager = ReplicaFetcherManager(
            fetcher_settings, self.partitions.get, stats=self.metrics.topics,
            on_append=self.delayed_fetch.check_and_complete)
        """Replica fetchers for the partitions this broker follows (and the follower's throttle)."""
        self._record_checker = RecordChecker()
        self.alter_log_dirs_manager = ReplicaAlterLogDirsManager(
            log_manager.replace_current_with_future_log, fetcher_settings.max_bytes, fetcher_settings.backoff_ms)
        """The copiers of replicas moving between this broker's log dirs (AlterReplicaLogDirs)."""
        log_manager.on_log_dir_failure = self.handle_log_dir_failure

    def start(self) -> None:
        """Start the ISR checks (on the running loop)."""
        self.isr_manager.start()

    async def shutdown(self) -> None:
        """Stop fetching and checking, let every append in progress end, and end every waiting
        produce and fetch."""
        await self.fetcher_manager.shutdown()
        await self.alter_log_dirs_manager.shutdown()  # future logs stay: the copies resume at start-up
        for partition in list(self.partitions.values()):
            await partition.quiesce()
        await self.isr_manager.stop()
        self._record_checker.shutdown()
        self.delayed_fetch.wake_all()
        self.delayed_produce.wake_all()

    # -- metadata ------------------------------------------------------------------------------

    def add_leadership_listener(self, listener: Callable[[TopicPartition, bool], None]) -> None:
        """Called with (tp, is_leader) whenever this broker gains or loses leadership of tp."""
        self._leadership_listeners.append(listener)

    def on_image(self, old: ClusterImage | None, new: ClusterImage) -> None:
        """Apply a new metadata image: create, lead, follow or drop partitions. No awaits."""
        self._image = new
        seen: set[TopicPartition] = set()
        newly_offline = False
        for topic in new.topics.values():
            old_topic = None if old is None else old.topics.get(topic.name)
            config = self._log_config_for(topic)
            config_changed = old_topic is not None and old_topic.configs != topic.configs
            for index, reg in topic.partitions.items():
                if self.broker_id not in reg.replicas:
                    continue
                tp = TopicPartition(topic.name, index)
                seen.add(tp)
                if tp in self.offline_partitions:
                    continue
                partition = self.partitions.get(tp)
                if partition is None and self._maybe_offline_for_lost_log(tp, old, old_topic, index):
                    newly_offline = True
                    continue
                if partition is None:
                    try:
                        log_ = self.log_manager.get_or_create_log(tp, config, topic.topic_id)
                    except KafkaError:  # logged by the log manager
                        self._logs_not_created.add(tp)
                        continue
                    self._logs_not_created.discard(tp)
                    partition = Partition(
                        tp,
                        self.broker_id,
                        log_,
                        initial_high_watermark=Offset(self._initial_hw.pop(tp, 0)),
                        on_high_watermark=self._on_high_watermark,
                        alter_isr=self.isr_manager.submit,
                        writer=self.log_manager.writer,
                    )
                    self.partitions[tp] = partition
                    future = self.log_manager.get_future_log(tp)
                    if future is not None:  # a move interrupted by a restart resumes (Kafka)
                        partition.add_future_replica(future)
                        self.alter_log_dirs_manager.start(partition)
                elif config_changed:
                    partition.update_log_config(config)
                was_leader = partition.is_leader
                old_epoch = partition.leader_epoch
                if reg.leader == self.broker_id:
                    partition.make_leader(reg)
                else:
                    partition.make_follower(reg)
                if partition.is_leader != was_leader or partition.leader_epoch != old_epoch:
                    # waiting acks=all produces end (NOT_LEADER_OR_FOLLOWER), fetches re-check
                    self.delayed_produce.check_and_complete(tp)
                    self.delayed_fetch.check_and_complete(tp)
                if partition.is_leader != was_leader:
                    for listener in self._leadership_listeners:
                        listener(tp, partition.is_leader)
        if old is None:
            # First image after start-up: logs on disk for partitions the cluster no longer assigns
            # here (deleted while this broker was down, or it died mid-delete) are strays.
            for tp in [tp for tp in self.log_manager.all_logs() if tp not in seen]:
                log.info("deleting stray log topic=%s partition=%d", tp.topic, tp.partition)
                self.log_manager.delete_log(tp)
        self._logs_not_created &= seen
        self.offline_partitions &= seen
        for tp in [tp for tp in self.partitions if tp not in seen]:
            partition = self.partitions.pop(tp)
            was_leader = partition.is_leader
            self.alter_log_dirs_manager.stop(tp)
            partition.remove_future_replica()
            partition.make_offline()
            self.log_manager.delete_log(tp)
            self.delayed_fetch.check_and_complete(tp)
            self.delayed_produce.check_and_complete(tp)
            if was_leader:
                for listener in self._leadership_listeners:
                    listener(tp, False)
            log.info("partition removed topic=%s partition=%d", tp.topic, tp.partition)
        self.fetcher_manager.update(new, self.partitions)
        if newly_offline:
            self._report_offline()

    def _maybe_offline_for_lost_log(self, tp: TopicPartition, old: ClusterImage | None,
                                    old_topic: TopicRegistration | None, index: int) -> bool:
        """Kafka's getOrCreateLog(isNew=false) while a log dir is offline: a replica this broker
        had already (in the image before, or before it started) with no log in a live dir may have
        it in the offline one: it is taken offline (True), not created empty; a new one is created."""
        if not self.log_manager.offline_dirs or self.log_manager.get_log(tp) is not None:
            return False
        old_reg = None if old_topic is None else old_topic.partitions.get(index)
        if old is not None and (old_reg is None or self.broker_id not in old_reg.replicas):
            return False  # new here: a new topic or partition, a reassignment
        log.warning("partition offline: its log may be in an offline log dir partition=%s", tp)
        self.offline_partitions.add(tp)
        return True

    def _report_offline(self) -> None:
        """Tell the controller every replica of this broker that is offline so far."""
        if self._report_offline_replicas is not None:
            task = asyncio.get_running_loop().create_task(
                self._report_offline_replicas(frozenset(self.offline_partitions)), name="report-offline-replicas")
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        """Kafka's ReplicaManager.handleLogDirFailure: the partitions whose log was in the failed
        dir stop being served here (KAFKA_STORAGE_ERROR; their fetchers, moves, waiting produces
        and fetches end, leadership listeners hear they are no longer led here) and the controller
        is told, so that it moves their leadership to other ISR members and takes this replica
        out of their ISRs; moves into the dir are dropped. With no log dir left the broker stops
        (Kafka halts)."""
        moving_in = {tp for tp in self.partitions if self.log_manager.future_log_dir_of(tp) == log_dir}
        lost = self.log_manager.handle_log_dir_failure(log_dir)
        for tp in moving_in | lost:
            self.alter_log_dirs_manager.stop(tp)
            if tp in self.partitions:
                self.partitions[tp].remove_future_replica()
        for tp in lost:
            partition = self.partitions.pop(tp, None)
            self.offline_partitions.add(tp)
            if partition is None:
                continue
            was_leader = partition.is_leader
            partition.make_offline()
            self.delayed_fetch.check_and_complete(tp)
            self.delayed_produce.check_and_complete(tp)
            if was_leader:
                for listener in self._leadership_listeners:
                    listener(tp, False)
        if self._image is not None:
            self.fetcher_manager.update(self._image, self.partitions)
        live = self.log_manager.live_log_dirs
        log.error("partitions offline after a log dir failure dir=%s partitions=%d live_dirs=%d",
                  log_dir, len(lost), len(live))  # fmt: skip
        if not live:
            log.critical("stopping the broker: every log dir has failed dirs=%s",
                         ",".join(str(d) for d in self.log_manager.log_dirs))  # fmt: skip
            if self._on_all_log_dirs_failed is not None:
                self._on_all_log_dirs_failed()
            return
        self._report_offline()

    def alter_replica_log_dirs(self, dirs: Mapping[TopicPartition, str]) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ReplicaManager.alterReplicaLogDirs: per partition, move this broker's replica to
        the log dir named (its absolute path). LOG_DIR_NOT_FOUND for a dir not in log.dirs,
        KAFKA_STORAGE_ERROR for an offline one; a move elsewhere in progress is cancelled; the dir
        is remembered for the partition's next log; then REPLICA_NOT_AVAILABLE if the partition
        has no replica here (UNKNOWN_TOPIC_OR_PARTITION if it does not exist), nothing to do if the
        replica is already there or moving there, else a future log is created there and a
        copier started."""
        results: dict[TopicPartition, ErrorCode] = {}
        for tp, path in dirs.items():
            try:
                if len(f"{tp}.{'0' * 32}-future") > 255:
                    raise KafkaError(ErrorCode.invalid_topic_exception, "The topic name is too long.")
                log_dir = self.log_manager.log_dir_named(path)
                partition = self.partitions.get(tp)
                future_dir = self.log_manager.future_log_dir_of(tp)
                if partition is not None and future_dir is not None and future_dir != log_dir:
                    log.info("cancelling replica move partition=%s from_dir=%s", tp, future_dir)
                    self.alter_log_dirs_manager.stop(tp)
                    partition.remove_future_replica()
                    self.log_manager.remove_future_log(tp)
                self.log_manager.maybe_update_preferred_log_dir(tp, log_dir)
                partition = self.get_partition(tp)
                if self.log_manager.log_dir_of(tp) != log_dir and self.log_manager.get_future_log(tp) is None:
                    partition.add_future_replica(self.log_manager.get_or_create_future_log(tp, log_dir))
                    self.alter_log_dirs_manager.start(partition)
                results[tp] = ErrorCode.none
            except KafkaError as e:
                code = ErrorCode.replica_not_available if e.code == ErrorCode.not_leader_or_follower else e.code
                log.warning("cannot alter log dir partition=%s dir=%s error=%s", tp, path, code.name)
                results[tp] = code
        return results

    def update_replication_throttles(self, leader_rate: int, follower_rate: int, samples: int, window_ms: int) -> None:
        """leader/follower.replication.throttled.rate and the rate windows (dynamic broker configs)."""
        self.leader_quota.configure(leader_rate, samples, window_ms)
        self.fetcher_manager.quota.configure(follower_rate, samples, window_ms)

    def update_log_configs(self) -> None:
        """The broker's topic defaults changed (dynamic broker configs): every hosted partition's
        log obeys its topic's config as it is now."""
        if self._image is None:
            return
        for tp, partition in self.partitions.items():
            topic = self._image.topics.get(tp.topic)
            if topic is not None:
                partition.update_log_config(self._log_config_for(topic))

    def _on_isr_committed(self, partition: Partition) -> None:
        self.delayed_produce.check_and_complete(partition.tp)

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.high_watermark for tp, p in self.partitions.items()}

    def _on_high_watermark(self, tp: TopicPartition) -> None:
        self.delayed_produce.check_and_complete(tp)
        self.delayed_fetch.check_and_complete(tp)

    def get_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None and tp in self.offline_partitions:
            raise KafkaError(ErrorCode.kafka_storage_error, f"Partition {tp} is offline: its log dir failed")
        if partition is None and tp in self._logs_not_created and self._image is not None:
            self.on_image(self._image, self._image)  # try creating the log again
            partition = self.partitions.get(tp)
        if partition is None:
            if tp in self._logs_not_created:
                raise KafkaError(
                    ErrorCode.kafka_storage_error, f"The log of {tp} could not be created."
                )
            if self._image is not None and self._image.partition(tp.topic, tp.partition) is not None:
                # the partition exists but has no replica here (Kafka's getPartitionOrError): the
                # client is to refresh its metadata and go to the leader
                raise KafkaError(ErrorCode.not_leader_or_follower, f"This broker is not a replica of {tp}")
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        return partition

    def leader_partition(self, tp: TopicPartition) -> Partition:
        partition = self.get_partition(tp)
        if not partition.is_leader:
            raise KafkaError(
                ErrorCode.not_leader_or_follower, f"This broker is not the leader for {tp}"
            )
        return partition

    # -- produce -------------------------------------------------------------------------------

    async def append_local(
        self,
        entries: Iterable[tuple[TopicPartition, CheckedRecords | bytes | memoryview]],
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> dict[TopicPartition, ProduceResult]:
        results: dict[TopicPartition, ProduceResult] = {}
        for tp, records in entries:
            try:
                partition = self.get_partition(tp)
                info = await partition.append_records_to_leader(records, required_acks, origin)
                results[tp] = ProduceResult(ErrorCode.none, info)
                self.delayed_fetch.check_and_complete(tp)
            except KafkaError as e:
                results[tp] = ProduceResult(e.code, None, e.message)
        return results

    async def append_records(
        self,
        entries: Sequence[tuple[TopicPartition, bytes | memoryview]],
        required_acks: int,
        timeout_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        appended: Callable[[], None] | None = None,
    ) -> dict[TopicPartition, ProduceResult]:
        """Kafka's appendRecords: check each leader partition's records (the record checker, off
        the loop when large), append them, and for acks=all wait until the HW covers them. A
        coordinator's records (transaction markers, built here) are checked by the log.
        `appended` is called when the appends are done and the wait for the replicas begins."""
        if origin is AppendOrigin.COORDINATOR:
            results = await self.append_local(entries, required_acks, origin)
        else:
            checked, rejected = await self._check_records(entries)
            results = await self.append_local(checked, required_acks)
            results.update(rejected)
        stats = self._topic_stats
        for tp, records in entries:
            r = results[tp]
            stats.produced(tp.topic, r.error, len(records), r.info.num_messages if r.info is not None else 0)
        if required_acks != -1:
            return results
        # (next offset, leader epoch of the append): a later epoch means the batch may be gone
        pending = {
            tp: (Offset(r.info.last_offset + 1), self.partitions[tp].leader_epoch)
            for tp, r in results.items()
            if r.error == ErrorCode.none and r.info is not None and tp in self.partitions
        }
        if not pending:
            return results

        def acks_done() -> bool:
            return all(self._acks_status(tp, *want)[0] for tp, want in pending.items())

        if appended is not None:
            appended()
        await self.delayed_produce.wait(pending.keys(), acks_done, timeout_ms / 1000)
        for tp, want in pending.items():
            done, error = self._acks_status(tp, *want)
            if not done:
                results[tp] = ProduceResult(ErrorCode.request_timed_out, results[tp].info)
            elif error != ErrorCode.none:
                results[tp] = ProduceResult(error, results[tp].info)
        return results

    async def _check_records(
        self, entries: Sequence[tuple[TopicPartition, bytes | memoryview]]
    ) -> tuple[list[tuple[TopicPartition, CheckedRecords | bytes | memoryview]], dict[TopicPartition, ProduceResult]]:
        """The entries with their records checked against their partitions' topic configs
        (one this broker does not lead is left to the append, which answers for it), and the
        rejected ones' results."""
        to_check = [
            (tp, partition.log_config, records)
            for tp, records in entries
            if (partition := self.partitions.get(tp)) is not None and partition.is_leader
        ]
        outcomes = dict(zip((tp for tp, _, _ in to_check), await self._record_checker.check(to_check)))
        checked: list[tuple[TopicPartition, CheckedRecords | bytes | memoryview]] = []
        rejected: dict[TopicPartition, ProduceResult] = {}
        for tp, records in entries:
            outcome = outcomes.get(tp, records)
            if isinstance(outcome, KafkaError):
                rejected[tp] = ProduceResult(
                    outcome.code, None, outcome.message, getattr(outcome, "record_errors", ())
                )
            else:
                checked.append((tp, outcome))
        return checked, rejected

    def _acks_status(
        self, tp: TopicPartition, required_offset: Offset, leader_epoch: int
    ) -> tuple[bool, ErrorCode]:
        partition = self.partitions.get(tp)
        if partition is None:
            return True, ErrorCode.not_leader_or_follower
        return partition.acks_satisfied(required_offset, leader_epoch)

    # -- fetch ---------------------------------------------------------------------------------

    def read_local(
        self,
        requests: Sequence[FetchRequestPartition],
        isolation: FetchIsolation,
        max_bytes: int,
        *,
        fetch_only_from_leader: bool = True,
        replica_id: int = -1,
        chain_reports: bool = True,
    ) -> list[FetchResult]:
        """Read each partition in order; the response budget is max_bytes, but the first
        non-empty partition always returns at least one batch (KIP-74). A follower's read
        (replica_id >= 0) also records its fetch state on the leader partition, and gets no records
        for a partition throttled on the leader side while it is outside the ISR and the leader's
        throttle is exceeded (Kafka's shouldLeaderThrottle: throttle.py). `chain_reports`: apply
        the chain reports the requests carry (once per request: on the read that ends a long
        poll, their ages would date them later than they are)."""
        results: list[FetchResult] = []
        remaining = max_bytes
        min_one = True
        for req in requests:
            try:
                partition = self.get_partition(req.tp)
                chain = replica_id >= 0 and not partition.is_leader
                if chain:  # a chain successor fetching from this follower
                    partition.check_serves_chain(BrokerId(replica_id), req.current_leader_epoch)
                read = partition.read_records(
                    req.fetch_offset,
                    max(0, min(req.max_bytes, remaining)),
                    isolation,
                    current_leader_epoch=req.current_leader_epoch,
                    fetch_only_from_leader=fetch_only_from_leader and not chain,
                    min_one_message=min_one,
                )
                if chain:
                    partition.update_chain_successor_fetch_state(
                        BrokerId(replica_id), req.fetch_offset, clock.now_ms(), req.chain_reports if chain_reports else ()
                    )
                elif replica_id >= 0:
                    now = clock.now_ms()
                    if self._leader_throttled(partition, replica_id, now):
                        read = replace(read, info=None)
                    elif read.info is not None and self._throttled_as_leader(partition):
                        self.leader_quota.record(read.info.size, now)
                    partition.update_follower_fetch_state(
                        BrokerId(replica_id), req.fetch_offset, now, read.log_end_offset
                    )
                    if req.chain_reports and chain_reports:
                        partition.update_chain_fetch_states(BrokerId(replica_id), req.chain_reports, now)
                size = read.info.size if read.info is not None else 0
                if size:
                    remaining -= size
                    min_one = False
                results.append(FetchResult(req.tp, ErrorCode.none, read))
            except KafkaError as e:
                results.append(FetchResult(req.tp, e.code, self._error_read(req.tp)))
        return results

    def _throttled_as_leader(self, partition: Partition) -> bool:
        """Whether the topic's leader.replication.throttled.replicas names this broker's replica."""
        replicas = partition.log_config.leader_replication_throttled_replicas
        return bool(replicas) and throttled(replicas, partition.tp.partition, self.broker_id)

    def _leader_throttled(self, partition: Partition, replica_id: int, now_ms: int) -> bool:
        """Kafka's shouldLeaderThrottle: a throttled partition, a follower outside the ISR, and
        the leader's throttle exceeded."""
        return (
            BrokerId(replica_id) not in partition.isr
            and self._throttled_as_leader(partition)
            and self.leader_quota.exceeded(now_ms)
        )

    def _error_read(self, tp: TopicPartition) -> ReadResult | None:
        partition = self.partitions.get(tp)
        if partition is None:
            return None
        return ReadResult(
            info=None,
            high_watermark=partition.high_watermark,
            last_stable_offset=partition.last_stable_offset,
            log_start_offset=partition.log_start_offset,
            log_end_offset=partition.log_end_offset,
        )

    async def fetch_messages(
        self,
        requests: Sequence[FetchRequestPartition],
        isolation: FetchIsolation,
        *,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        fetch_only_from_leader: bool = True,
        replica_id: int = -1,
    ) -> list[FetchResult]:
        """Read now; if fewer than min_bytes are there and no partition errored, long-poll."""
        results = self.read_local(
            requests, isolation, max_bytes, fetch_only_from_leader=fetch_only_from_leader, replica_id=replica_id
        )
        if max_wait_ms <= 0 or not requests or self._fetch_satisfied(results, min_bytes):
            return self._count_fetch(results, replica_id)

        throttled_now = None if replica_id < 0 else lambda p: self._leader_throttled(p, replica_id, clock.now_ms())
        delayed = DelayedFetch(
            self.partitions.get, requests, isolation, min_bytes, fetch_only_from_leader, throttled_now, replica_id
        )
        await self.delayed_fetch.wait([r.tp for r in requests], delayed.try_complete, max_wait_ms / 1000)
        return self._count_fetch(self.read_local(
            requests, isolation, max_bytes, fetch_only_from_leader=fetch_only_from_leader, replica_id=replica_id,
            chain_reports=False,
        ), replica_id)

    def _count_fetch(self, results: list[FetchResult], replica_id: int) -> list[FetchResult]:
        """Count each partition of a fetch's response (TotalFetchRequests, FailedFetchRequests,
        BytesOut or, for a follower, ReplicationBytesOut)."""
        stats = self._topic_stats
        follower = replica_id >= 0
        for r in results:
            info = r.read.info if r.read is not None else None
            stats.fetched(r.tp.topic, r.error, info.size if info is not None else 0, follower)
        return results

    @staticmethod
    def _fetch_satisfied(results: Sequence[FetchResult], min_bytes: int) -> bool:
        total = 0
        for r in results:
            if r.error != ErrorCode.none:
                return True
            if r.read is not None and r.read.info is not None:
                total += r.read.info.size
        return total >= min_bytes
