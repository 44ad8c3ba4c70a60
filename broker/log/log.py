# Over 700 lines: UnifiedLog is one state (LEO, log start, recovery point, epochs, producer state) that changes together.
"""`UnifiedLog`: one partition's log, `<log.dir>/<topic>-<partition>/`.

A sequence of `LogSegment`s (only the last, the active segment, is written), a log start offset
(advanced by retention and DeleteRecords), a recovery point (everything below it is fsynced), the
leader-epoch cache and the producer state (idempotence and open transactions, from which the
partition derives its last stable offset), and each segment's aborted-transaction index,
written when an ABORT marker is appended and rebuilt by recovery. It is synchronous and single-threaded: the
broker calls it from its event loop and nothing here awaits. Work that must wait (deleting files
of removed segments after file.delete.delay.ms, flushing a rolled segment) goes through the
`scheduler` callable given at open: `scheduler(delay_ms, fn)`; the default runs `fn` at once.
The high watermark is not kept here: the partition owns it and passes it to `read` as
`max_offset` and to `delete_retention_segments`.

Storage faults (a full disk, an I/O error, no file descriptor left): an operation that fails
changes nothing it does not account for. An append whose write fails is cut back and raises
KafkaError(KAFKA_STORAGE_ERROR) with nothing appended; the next append tries again, so writes
resume by themselves at the right offset when space returns. Reads go on throughout. A flush that
fails leaves the recovery point where it was; the leader-epoch checkpoint and producer snapshots,
which the log can rebuild, are retried or skipped with one log line. The first failure of a run of
failures is logged with the error and the run's end with the number of failures in it.
"""

from __future__ import annotations

import bisect
import errno
import logging
import shutil
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from broker import clock
from broker.config import DEFAULT_PRODUCER_ID_EXPIRATION_MS, LogConfig
from broker.log.checkpoints import LEADER_EPOCH_CHECKPOINT, fsync_path
from broker.log.epoch_cache import LeaderEpochFileCache
from broker.log.info import (
    AppendOrigin,
    FetchDataInfo,
    LogAppendInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from broker.log.loader import CLEANED_SUFFIX, NEW_SUFFIX, SWAP_SUFFIX, load_segments
from broker.log.producer_state import CompletedTxn, ProducerAppendInfo, ProducerStateManager
from broker.log.segment import DELETED_SUFFIX, AppendedBatch, LogSegment
from broker.log.txn_index import AbortedTxn
from broker.log.validation import (
    CheckedRecords,
    ValidRecords,
    validate_follower_append,
    validate_leader_append,
)
from broker.metrics.stats import LOG_FLUSH_MICROS
from protocol.control import EndTxnMarker, read_end_txn_marker
from protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from protocol.records import BatchHeader
from protocol.topic_partition import TopicPartition
from protocol.types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    LeaderEpoch,
    Offset,
)

log = logging.getLogger("samsa.log")

Scheduler = Callable[[int, Callable[[], None]], None]
Syncer = Callable[[Path, Callable[[], None]], None]
"""syncer(path, then): fsync the file at `path` off the event loop, then run `then` on the loop."""
"""`scheduler(delay_ms, fn)`: run `fn` later on the broker's loop."""


def run_now(delay_ms: int, fn: Callable[[], None]) -> None:
    """The default scheduler: no loop, so do it immediately."""
    fn()



@dataclass(eq=False, slots=True)
class PendingAppend:
    """An append between its halves. `prepare_append_as_leader` / `_as_follower` (on the loop)
    validated the records, assigned offsets and staged the producer state; `write` puts the bytes
    in the segment and may run on any thread; `complete_append` (on the loop) accounts them, or
    `abandon_append` forgets them.

        prepared --write--> written --complete_append--> appended (LEO moved)
                                    --abandon_append--> nothing changed (bytes cut off)
        prepared --write fails--> failed --complete_append--> KAFKA_STORAGE_ERROR, nothing changed
    """

    segment: LogSegment
    buffers: list[bytes | bytearray | memoryview]
    valid: ValidRecords
    staged: dict[int, ProducerAppendInfo]
    completed: list[CompletedTxn]
    """Transactions the append's markers end (their aborted-index entries are written when it
    completes)."""
    now_ms: int
    sync: bool
    info: LogAppendInfo
    error: OSError | None = None

    def write(self) -> None:
        """The I/O (blocking; callable from any thread): a failure is kept for `complete_append`."""
        try:
            self.segment.write(self.buffers, self.valid.valid_bytes, sync=self.sync)
        except OSError as exc:
            self.error = exc


class UnifiedLog:
    """One partition's log. Construct with `UnifiedLog.open`.

    Appends come in two halves around their I/O (`PendingAppend`), so that the caller may write
    off the event loop; one append at a time is in flight, and while it is, nothing else may
    truncate, roll or close the log (truncation raises; a retention roll waits for the next pass;
    close and delete are done when the append ends). `append_as_leader` and `append_as_follower`
    do all three halves at once.
    """

    def __init__(
        self,
        log_dir: Path,
        config: LogConfig,
        topic_partition: TopicPartition,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        epoch_cache: LeaderEpochFileCache,
        producer_state: ProducerStateManager,
        scheduler: Scheduler,
        now_ms: int,
        syncer: Syncer | None = None,
    ) -> None:
        self._dir = log_dir
        self._config = config
        self.topic_partition = topic_partition
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.leader_epoch_cache = epoch_cache
        self.producer_state = producer_state
        self._scheduler = scheduler
        self._syncer = syncer
        """Pre-syncs a rolled segment off the loop (LogManager.sync_then); None: the flush after a
        roll does all its fsyncs on the loop."""
        self.last_flush_ms = now_ms
        self.unflushed_messages = 0
        self.closed = False
        self._deleted_segments: list[LogSegment] = []
        self._storage_failures = 0
        """Storage operations failed since the last one that succeeded (0: healthy)."""
        self.on_storage_error: Callable[[OSError], None] | None = None
        """Told of every failed storage operation (the log manager: a failed log dir)."""
        self._pending: PendingAppend | None = None
        """The append whose bytes are being written (see PendingAppend)."""
        self._when_appended: list[Callable[[], None]] = []
        """Close or delete asked for while an append was in flight: done when it ends."""
        self.lowest_truncation_offset: int | None = None
        """The lowest log end offset a truncation left since the log cleaner last looked (the
        cleaner lowers its checkpoint to it and then resets this to None)."""

    # ------------------------------------------------------------------- open
    @classmethod
    def open(
        cls,
        log_dir: Path,
        config: LogConfig,
        topic_partition: TopicPartition,
        *,
        now_ms: int | None = None,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        had_clean_shutdown: bool = False,
        scheduler: Scheduler = run_now,
        syncer: Syncer | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> UnifiedLog:
        """Load (and if needed recover) the log in `log_dir`, creating the directory if missing.

        `recovery_point` and `log_start_offset` come from the log dir's checkpoints; without a
        clean shutdown every segment holding offsets at or after the recovery point is scanned.
        """
        now = clock.now_ms() if now_ms is None else now_ms
        log_dir.mkdir(parents=True, exist_ok=True)
        epoch_cache = LeaderEpochFileCache(log_dir / LEADER_EPOCH_CHECKPOINT)
        producer_state = ProducerStateManager(
            log_dir, producer_id_expiration_ms=producer_id_expiration_ms
        )

        def on_recovered_batch(header: BatchHeader) -> None:
            epoch_cache.assign(header.partition_leader_epoch, header.base_offset)

        loaded = load_segments(
            log_dir,
            config,
            topic_partition,
            recovery_point=recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            log_start_offset=log_start_offset,
            now_ms=now,
            on_recovered_batch=on_recovered_batch,
        )
        start = max(log_start_offset, loaded.segments[0].base_offset)
        start = min(start, loaded.segments[-1].next_offset)
        self = cls(
            log_dir,
            config,
            topic_partition,
            loaded.segments,
            log_start_offset=start,
            recovery_point=loaded.recovery_point,
            epoch_cache=epoch_cache,
            producer_state=producer_state,
            scheduler=scheduler,
            now_ms=now,
            syncer=syncer,
        )
        epoch_cache.truncate_from_end(self.log_end_offset)
        epoch_cache.truncate_from_start(start)
        recovered = {s.base_offset for s in loaded.recovered}
        if recovered:  # replay through every recovered segment, rebuilding its txn index
            producer_state.delete_snapshots_after(min(recovered))
        self._rebuild_producer_state(now, recovered)
        log.info(
            "log loaded topic=%s partition=%d segments=%d log_start_offset=%d log_end_offset=%d "
            "recovery_point=%d clean_shutdown=%s",
            topic_partition.topic,
            topic_partition.partition,
            len(self._segments),
            start,
            self.log_end_offset,
            self.recovery_point,
            had_clean_shutdown,
        )
        return self

    def _rebuild_producer_state(self, now_ms: int, recovered: AbstractSet[int] = frozenset()) -> None:
        """Load the newest snapshot and replay every batch after it (Kafka's loadProducerState);
        the ABORT markers of `recovered` segments (their bases) go into their txn indexes again."""
        end = self.log_end_offset
        replay_from = self.producer_state.load(self.log_start_offset, end, now_ms)
        if replay_from < end:
            first = max(0, bisect.bisect_right(self._bases, replay_from) - 1)
            for segment in self._segments[first:]:
                index = segment.base_offset in recovered
                for header, marker in segment.iter_producer_batches(0):
                    if header.last_offset < replay_from:
                        continue
                    completed = self.producer_state.replay(header, marker)
                    if completed is not None:
                        self._complete_txn(segment, completed, index=index)
        self.producer_state.update_map_end_offset(end)
        self.producer_state.remove_expired_producers(now_ms)

    def _complete_txn(self, segment: LogSegment, completed: CompletedTxn, *, index: bool = True) -> None:
        """Kafka's order: the aborted-transaction index entry (with the LSO of the moment), then
        the transaction leaves the ongoing ones."""
        if index and completed.is_aborted:
            txn = AbortedTxn(
                completed.producer_id,
                completed.first_offset,
                completed.last_offset,
                self.producer_state.last_stable_offset(completed),
            )
            try:
                segment.txn_index.append(txn)
            except OSError as exc:
                log.warning(
                    "writing the aborted transaction index failed topic=%s partition=%d "
                    "producer_id=%d error=%s",
                    self.topic_partition.topic, self.topic_partition.partition, txn.producer_id, exc,
                )  # fmt: skip
        self.producer_state.complete_txn(completed)

    # ------------------------------------------------------------- properties
    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    @property
    def log_start_offset(self) -> Offset:
        return Offset(self._log_start_offset)

    @property
    def log_end_offset(self) -> Offset:
        return Offset(self._segments[-1].next_offset)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        """The live segments, oldest first (a copy)."""
        return list(self._segments)

    @property
    def size(self) -> int:
        """Bytes in all live segments."""
        return sum(s.size for s in self._segments)

    @property
    def latest_epoch(self) -> LeaderEpoch | None:
        epoch = self.leader_epoch_cache.latest_epoch
        return None if epoch is None else LeaderEpoch(epoch)

    # ---------------------------------------------------------------- append
    def append_as_leader(
        self,
        records: CheckedRecords | bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Validate, assign offsets and append a produced records blob (see broker/log/validation.py),
        writing on this thread. A coordinator's records may hold transaction markers (control
        batches)."""
        return self._append_now(
            self.prepare_append_as_leader(records, leader_epoch, now_ms=now_ms, origin=origin)
        )

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, *, now_ms: int | None = None
    ) -> LogAppendInfo:
        """Append replicated batches keeping the leader's offsets and epochs, writing on this
        thread. A trailing partial batch (the leader cut its region at max_bytes) is ignored."""
        return self._append_now(self.prepare_append_as_follower(records, now_ms=now_ms))

    def _append_now(self, prepared: PendingAppend | LogAppendInfo) -> LogAppendInfo:
        if isinstance(prepared, LogAppendInfo):
            return prepared
        prepared.write()
        return self.complete_append(prepared)

    def prepare_append_as_leader(
        self,
        records: CheckedRecords | bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> PendingAppend | LogAppendInfo:
        """The first half of a leader append: validate, assign offsets at the LEO and stage the
        producer state. Returns the answer itself when nothing is to be written (no records, or
        a duplicate of an idempotent producer's batch)."""
        self._check_appendable()
        now = clock.now_ms() if now_ms is None else now_ms
        if len(records) == 0:
            return LogAppendInfo(
                Offset(-1), Offset(-1), -1, Offset(-1), -1, self.log_start_offset, 0, 0
            )
        valid = validate_leader_append(
            records, self._config, self.log_end_offset, leader_epoch, now,
            allow_control=origin is AppendOrigin.COORDINATOR,
        )  # fmt: skip
        staged: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in valid.batches:
            header = batch.header
            if header.producer_id < 0:
                continue
            if header.is_control:
                info = self.producer_state.prepare(header.producer_id, staged, validate=True)
                marker = _marker_of(batch.buffers, header)
                if marker is not None:
                    done = info.append_end_txn_marker(
                        marker, header.producer_epoch, batch.base_offset, batch.max_timestamp
                    )
                    if done is not None:
                        completed.append(done)
                continue
            from_client = origin is AppendOrigin.CLIENT
            entry = self.producer_state.last_entry(header.producer_id)
            if from_client and entry is not None and header.producer_id not in staged:
                duplicate = entry.find_duplicate(
                    header.producer_epoch, header.base_sequence, header.last_sequence
                )
                if duplicate is not None:
                    return LogAppendInfo(
                        Offset(duplicate.first_offset),
                        Offset(duplicate.last_offset),
                        duplicate.timestamp,
                        Offset(duplicate.last_offset),
                        duplicate.timestamp if self._config.log_append_time else -1,
                        self.log_start_offset,
                        0,
                        0,
                        duplicate=True,
                    )
            info = self.producer_state.prepare(
                header.producer_id, staged, validate=True, check_sequence=from_client
            )
            info.append_data_batch(
                header.producer_epoch,
                header.base_sequence,
                header.last_sequence,
                batch.max_timestamp,
                batch.base_offset,
                batch.last_offset,
                header.is_transactional,
            )
        return self._prepare(valid, staged, completed, now, now if self._config.log_append_time else -1)

    def prepare_append_as_follower(
        self, records: bytes | bytearray | memoryview, *, now_ms: int | None = None
    ) -> PendingAppend | LogAppendInfo:
        """The first half of a follower append (the leader's offsets and epochs kept); the answer
        itself when there is no whole batch."""
        self._check_appendable()
        now = clock.now_ms() if now_ms is None else now_ms
        valid = validate_follower_append(records, self.log_end_offset)
        if not valid.batches:
            return LogAppendInfo(
                Offset(-1), Offset(-1), -1, Offset(-1), -1, self.log_start_offset, 0, 0
            )
        staged: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in valid.batches:
            header = batch.header
            if header.producer_id < 0:
                continue
            info = self.producer_state.prepare(header.producer_id, staged, validate=False)
            marker = _marker_of(batch.buffers, header) if header.is_control else None
            done = info.append_replicated(header, marker)
            if done is not None:
                completed.append(done)
        return self._prepare(valid, staged, completed, now, -1)

    def _prepare(
        self,
        valid: ValidRecords,
        staged: dict[int, ProducerAppendInfo],
        completed: list[CompletedTxn],
        now_ms: int,
        log_append_time: int,
    ) -> PendingAppend:
        segment = self._maybe_roll(valid, now_ms)
        try:
            segment.open_for_write()
        except OSError as exc:
            raise self._storage_failed("append", exc) from None
        pending = PendingAppend(
            segment,
            [buf for batch in valid.batches for buf in batch.buffers],
            valid,
            staged,
            completed,
            now_ms,
            self.unflushed_messages + valid.num_messages >= self._config.flush_messages,
            LogAppendInfo(
                Offset(valid.first_offset),
                Offset(valid.last_offset),
                valid.max_timestamp,
                Offset(valid.offset_of_max_timestamp),
                log_append_time,
                self.log_start_offset,
                valid.num_messages,
                valid.valid_bytes,
            ),
        )
        segment.writing = True
        self._pending = pending
        return pending

    def complete_append(self, pending: PendingAppend) -> LogAppendInfo:
        """The last half: account the written bytes (offsets, producer state, epochs move only
        now); KAFKA_STORAGE_ERROR with nothing changed if the write failed. With flush.messages
        reached the bytes were fsynced before they count, and the log is flushed."""
        self._end_pending(pending)
        try:
            if pending.error is not None:
                raise self._storage_failed("append", pending.error) from None
            if self.closed:  # closed or deleted while the bytes were written
                raise KafkaError(ErrorCode.kafka_storage_error, f"log {self.topic_partition} is closed")
            self._storage_succeeded()
            valid = pending.valid
            pending.segment.account(
                [
                    AppendedBatch(b.size, b.last_offset, b.max_timestamp, b.offset_of_max_timestamp)
                    for b in valid.batches
                ],
                sync=pending.sync,
            )
            for batch in valid.batches:
                self.leader_epoch_cache.assign(batch.leader_epoch, batch.base_offset)
            for staged in pending.staged.values():
                self.producer_state.update(staged)
            for txn in pending.completed:
                self._complete_txn(pending.segment, txn)
            self.producer_state.update_map_end_offset(self.log_end_offset)
            self.unflushed_messages += valid.num_messages
            if pending.sync:
                self._flush_quietly()
            return pending.info
        finally:
            self._run_deferred()

    def abandon_append(self, pending: PendingAppend) -> None:
        """Forget an append whose bytes are written but must not count (its partition's
        leadership changed meanwhile): they are cut off again, nothing else changed."""
        self._end_pending(pending)
        try:
            if pending.error is None and not self.closed:
                pending.segment.discard_write()
        finally:
            self._run_deferred()

    def _end_pending(self, pending: PendingAppend) -> None:
        if pending is not self._pending:
            raise RuntimeError(f"{self.topic_partition}: not the append in flight")
        self._pending = None
        pending.segment.writing = False

    def _run_deferred(self) -> None:
        deferred, self._when_appended = self._when_appended, []
        for action in deferred:
            action()

    def _check_appendable(self) -> None:
        self._check_open()
        if self._pending is not None:
            raise RuntimeError(f"{self.topic_partition}: an append is already in flight")

    def _maybe_roll(self, valid: ValidRecords, now_ms: int) -> LogSegment:
        segment = self._segments[-1]
        if segment.should_roll(
            self._config, valid.valid_bytes, valid.max_timestamp, valid.last_offset, now_ms
        ):
            return self.roll(now_ms=now_ms, expected_next_offset=valid.first_offset)
        return segment

    # ------------------------------------------------------------------ roll
    def roll(
        self, *, now_ms: int | None = None, expected_next_offset: int | None = None
    ) -> LogSegment:
        """Start a new active segment at the log end offset (Kafka's roll)."""
        self._check_appendable()
        now = clock.now_ms() if now_ms is None else now_ms
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self._segments[-1]
        if active.base_offset == new_base and active.size == 0:
            return active
        active.on_become_inactive()
        self.producer_state.update_map_end_offset(new_base)
        self._take_producer_snapshot()
        try:
            segment = LogSegment(self._dir, new_base, self._config, created_ms=now)
        except OSError as exc:
            raise self._storage_failed("roll", exc) from None
        segment.next_offset = new_base
        self._segments.append(segment)
        self._bases.append(new_base)
        log.info(
            "segment rolled topic=%s partition=%d base_offset=%d",
            self.topic_partition.topic,
            self.topic_partition.partition,
            new_base,
        )
        if self._syncer is not None and active.unsynced:
            # the rolled segment's bytes (up to segment.bytes of them, much still dirty in the page
            # cache) reach the disk on a thread first, so that the flush's own fsync of them, on
            # the loop, finds little left to write (Kafka flushes a rolled segment on its
            # scheduler thread)
            self._syncer(active.log_path, lambda: self._flush_if_open(new_base))
        else:
            self._scheduler(0, lambda: self._flush_if_open(new_base))
        return segment

    def _take_producer_snapshot(self) -> None:
        """Snapshot the producer state; a failure is logged and skipped (loading replays the log
        from the newest snapshot that exists, so a missing one costs time, not state)."""
        try:
            self.producer_state.take_snapshot()
        except OSError as exc:
            log.warning(
                "producer state snapshot failed, the log will be replayed on load topic=%s "
                "partition=%d error=%s",
                self.topic_partition.topic, self.topic_partition.partition, exc,
            )  # fmt: skip

    # ------------------------------------------------------------------ read
    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Read from `start_offset`, at most `max_bytes` (one batch more with min_one_message).

        `max_offset` is exclusive (the HW for consumers, the LEO for followers; default the LEO):
        only batches lying wholly below it are returned. Raises KafkaError(offset_out_of_range)
        when start_offset < log start offset or > log end offset.
        """
        self._check_open()
        end = self.log_end_offset
        if start_offset < self._log_start_offset or start_offset > end:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {start_offset} is outside [{self._log_start_offset}, {end}] of {self.topic_partition}",
            )
        bound = end if max_offset is None else min(max_offset, end)
        empty = FetchDataInfo(Offset(start_offset), None, LogOffsetMetadata(Offset(start_offset)))
        if start_offset >= bound:
            return empty
        try:
            limit_index, limit_position = self._position_of(bound)
            i = bisect.bisect_right(self._bases, start_offset) - 1
            while 0 <= i <= limit_index:
                segment = self._segments[i]
                max_position = limit_position if i == limit_index else None
                info = segment.read(start_offset, max_bytes, max_position, min_one_message)
                if info is not None:
                    return info
                i += 1
        except OSError as exc:  # no descriptor left to open the segment, an I/O error
            raise self._storage_failed("read", exc) from None
        return empty

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where `offset` lies (Kafka's convertToOffsetMetadataOrThrow): its segment's base offset
        and the position of the batch holding it; the log end offset lies at the end of the
        active segment, and an offset no batch of its segment holds (a compacted gap) at that
        segment's end."""
        self._check_open()
        try:
            i, position = self._position_of(offset)
        except OSError as exc:
            raise self._storage_failed("read", exc) from None
        segment = self._segments[i]
        return LogOffsetMetadata(
            Offset(offset), Offset(segment.base_offset), segment.size if position is None else position
        )

    def _position_of(self, offset: int) -> tuple[int, int | None]:
        """(segment index, byte position) where the batch holding `offset` starts (None = end)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if offset >= self.log_end_offset or i < 0:
            return len(self._segments) - 1, None
        found = self._segments[i].translate_offset(offset)
        return i, (found[0] if found is not None else None)

    # ----------------------------------------------------------- transactions
    @property
    def first_unstable_offset(self) -> Offset | None:
        """The first offset of the oldest open (or ended, marker not yet below the high
        watermark) transaction; None when there is none."""
        first = self.producer_state.first_unstable_offset()
        return None if first is None else Offset(first)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """The partition's high watermark moved: ended transactions below it are stable."""
        self.producer_state.on_high_watermark_updated(high_watermark)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), from the segment
        holding `start_offset` on, until an entry's last stable offset shows no later segment
        can add one (Kafka's UnifiedLog.collectAbortedTransactions)."""
        i = max(0, bisect.bisect_right(self._bases, start_offset) - 1)
        found: list[AbortedTxn] = []
        for segment in self._segments[i:]:
            result = segment.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
            found += result.aborted
            if result.is_complete:
                break
        return found

    def fetch_upper_bound_offset(self, start_offset: int) -> Offset:
        """An offset at or past the end of what a read from `start_offset` returns: the next
        segment's base, or the log end offset (Kafka's fallback for fetchUpperBoundOffset)."""
        i = bisect.bisect_right(self._bases, start_offset)
        return Offset(self._bases[i]) if i < len(self._bases) else self.log_end_offset

    # ------------------------------------------------------- epochs and times
    def end_offset_for_epoch(self, epoch: int) -> tuple[LeaderEpoch, Offset]:
        """OffsetsForLeaderEpoch: (epoch, end offset) per Kafka's LeaderEpochFileCache.endOffsetFor."""
        e, o = self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)
        return LeaderEpoch(e), Offset(o)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose timestamp is >= `timestamp`; None if there is none.

        EARLIEST_TIMESTAMP gives the log start offset, LATEST_TIMESTAMP the log end offset (the
        caller caps it to the HW) and MAX_TIMESTAMP the record with the largest timestamp.
        """
        self._check_open()
        if timestamp == EARLIEST_TIMESTAMP:
            earliest = self.leader_epoch_cache.earliest_entry
            epoch = (
                earliest[0]
                if earliest is not None and earliest[1] <= self._log_start_offset
                else -1
            )
            return TimestampAndOffset(-1, self.log_start_offset, epoch)
        if timestamp == LATEST_TIMESTAMP:
            latest = self.leader_epoch_cache.latest_epoch
            return TimestampAndOffset(-1, self.log_end_offset, -1 if latest is None else latest)
        if timestamp == MAX_TIMESTAMP:
            best = max(self._segments, key=lambda s: s.max_timestamp_so_far)
            if best.max_timestamp_so_far < 0:
                return None
            return best.find_offset_by_timestamp(best.max_timestamp_so_far, self._log_start_offset)
        if timestamp < 0:
            return None
        for segment in self._segments:
            if (
                segment.max_timestamp_so_far >= timestamp
                and segment.next_offset > self._log_start_offset
            ):
                found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
                if found is not None:
                    return found
        return None

    # ------------------------------------------------------ start offset moves
    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """DeleteRecords (and retention): move the log start offset forward; True if it moved.

        The caller checks the bound against the high watermark; beyond the LEO is rejected here.
        """
        self._check_open()
        if new_start > self.log_end_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"cannot move log start offset to {new_start} past log end offset {self.log_end_offset}",
            )
        if new_start <= self._log_start_offset:
            return False
        self._log_start_offset = new_start
        self.leader_epoch_cache.truncate_from_start(new_start)
        log.info(
            "log start offset incremented topic=%s partition=%d log_start_offset=%d",
            self.topic_partition.topic,
            self.topic_partition.partition,
            new_start,
        )
        return True

    def delete_retention_segments(
        self, now_ms: int | None = None, *, high_watermark: int | None = None
    ) -> int:
        """Delete whole old segments by log start offset, retention.bytes and retention.ms.

        Never deletes the active segment or data at or above the high watermark (default: LEO);
        an active segment that breaches retention is rolled so the next pass can delete it.
        Returns the number of segments deleted.
        """
        self._check_open()
        now = clock.now_ms() if now_ms is None else now_ms
        hw = (
            self.log_end_offset
            if high_watermark is None
            else min(high_watermark, self.log_end_offset)
        )
        deleted = self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset,
            hw,
            "log start offset",
        )
        if self._config.delete:
            if self._config.retention_bytes >= 0 and self.size > self._config.retention_bytes:
                excess = [self.size - self._config.retention_bytes]

                def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                    if excess[0] - seg.size >= 0:
                        excess[0] -= seg.size
                        return True
                    return False

                deleted += self._delete_old_segments(over_size, hw, "retention.bytes")
            if self._config.retention_ms >= 0:
                retention_ms = self._config.retention_ms
                deleted += self._delete_old_segments(
                    lambda seg, nxt: now - seg.largest_timestamp > retention_ms, hw, "retention.ms"
                )
        return deleted

    def _delete_old_segments(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], hw: int, reason: str
    ) -> int:
        deletable: list[LogSegment] = []
        should_roll = False
        for i, segment in enumerate(self._segments):
            nxt = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if not (hw >= upper and predicate(segment, nxt)):
                break
            if nxt is None:
                should_roll = segment.size > 0
                break
            deletable.append(segment)
        if should_roll and self._pending is None:  # else the next pass rolls it
            self.roll()
        if not deletable:
            return 0
        del self._segments[: len(deletable)]
        del self._bases[: len(deletable)]
        log.info(
            "deleting segments topic=%s partition=%d reason=%s base_offsets=%s",
            self.topic_partition.topic,
            self.topic_partition.partition,
            reason,
            [s.base_offset for s in deletable],
        )
        self._schedule_segment_deletion(deletable)
        self.maybe_increment_log_start_offset(self._segments[0].base_offset)
        self.producer_state.delete_snapshots_before(self._segments[0].base_offset)
        return len(deletable)

    def _schedule_segment_deletion(self, segments: list[LogSegment]) -> None:
        """Rename to `.deleted` now, close and unlink after file.delete.delay.ms."""
        for segment in segments:
            segment.rename_suffix(DELETED_SUFFIX)
            self._deleted_segments.append(segment)

        def delete_files() -> None:
            for segment in segments:
                segment.delete_files()
                if segment in self._deleted_segments:
                    self._deleted_segments.remove(segment)

        self._scheduler(self._config.file_delete_delay_ms, delete_files)

    # --------------------------------------------------------------- truncate
    def truncate_to(self, target: int, *, now_ms: int | None = None) -> bool:
        """Remove every batch from the one holding `target` on (follower truncation).

        Like Kafka: returns True if anything was removed; when the first segment starts after
        `target` the log is emptied and restarts at `target`; the log start offset never ends
        above the log end offset. The cut is at a batch boundary, so the new log end offset is
        the base offset of the batch holding `target` when `target` lies inside a batch.
        """
        self._check_appendable()
        if target < 0:
            raise ValueError(f"cannot truncate to negative offset {target}")
        if target >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if self._segments[0].base_offset > target:
            self.truncate_fully_and_start_at(target)
            return True
        keep = bisect.bisect_right(self._bases, target)
        doomed = self._segments[keep:]
        del self._segments[keep:]
        del self._bases[keep:]
        if doomed:
            self._schedule_segment_deletion(doomed)
        try:
            self._segments[-1].truncate_to(target)
        except OSError as exc:
            raise self._storage_failed("truncate", exc) from None
        end = self.log_end_offset
        self._note_truncation(end)
        self._log_start_offset = min(self._log_start_offset, end)
        self.leader_epoch_cache.truncate_from_end(end)
        self.producer_state.delete_snapshots_after(end)
        self._rebuild_producer_state(clock.now_ms() if now_ms is None else now_ms)
        self.recovery_point = min(self.recovery_point, end)
        log.info(
            "log truncated topic=%s partition=%d target=%d log_end_offset=%d",
            self.topic_partition.topic,
            self.topic_partition.partition,
            target,
            end,
        )
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and restart the log, empty, at `new_offset`."""
        self._check_appendable()
        try:  # created under a suffix first: it may share its name with a doomed segment
            segment = LogSegment(
                self._dir, new_offset, self._config, created_ms=clock.now_ms(), file_suffix=NEW_SUFFIX
            )
        except OSError as exc:
            raise self._storage_failed("truncate", exc) from None
        doomed = self._segments
        self._segments = [segment]
        self._bases = [new_offset]
        self._schedule_segment_deletion(doomed)
        segment.change_file_suffixes(NEW_SUFFIX, "")
        self.leader_epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(new_offset)
        self._log_start_offset = new_offset
        self.recovery_point = new_offset
        self._note_truncation(new_offset)
        log.info(
            "log truncated fully topic=%s partition=%d start_offset=%d",
            self.topic_partition.topic,
            self.topic_partition.partition,
            new_offset,
        )

    def _note_truncation(self, end: int) -> None:
        if self.lowest_truncation_offset is None or end < self.lowest_truncation_offset:
            self.lowest_truncation_offset = end

    # --------------------------------------------------------------- cleaning
    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """Swap the log cleaner's output in for `old_segments` (Kafka's replaceSegments).

        `new_segments` are written, fsynced and named `<base>.log.cleaned` (+ indexes);
        `old_segments` are consecutive live segments, none of them the active one, and the new
        ones cover exactly their offset range. Every step leaves a state the loader repairs:
        1. every new segment `.cleaned` -> `.swap` (from here a restart completes the swap);
        2. the in-memory segment list is spliced (readers holding an old segment's FileRecords
           keep their open file until file.delete.delay.ms);
        3. old segments -> `.deleted`, deleted after file.delete.delay.ms;
        4. every new segment `.swap` -> its final name.
        """
        self._check_open()
        if not old_segments or not new_segments:
            raise ValueError("replace_segments needs old and new segments")
        first = next(i for i, s in enumerate(self._segments) if s is old_segments[0])
        if self._segments[first : first + len(old_segments)] != old_segments or (
            first + len(old_segments) >= len(self._segments)
        ):
            raise ValueError("old segments are not consecutive closed segments of this log")
        for segment in new_segments:
            segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_path(self._dir)
        self._segments[first : first + len(old_segments)] = new_segments
        self._bases[first : first + len(old_segments)] = [s.base_offset for s in new_segments]
        self._schedule_segment_deletion(old_segments)
        for segment in new_segments:
            segment.change_file_suffixes(SWAP_SUFFIX, "")
        fsync_path(self._dir)

    # ------------------------------------------------------------------ flush
    def flush(self, up_to: int | None = None, *, now_ms: int | None = None) -> None:
        """fsync segments and indexes holding offsets below `up_to` (default LEO); advance the recovery point."""
        self._check_open()
        end = self.log_end_offset
        offset = end if up_to is None else min(up_to, end)
        self.last_flush_ms = clock.now_ms() if now_ms is None else now_ms
        if offset >= end:
            self.unflushed_messages = 0
        if offset <= self.recovery_point:
            return
        first = max(0, bisect.bisect_right(self._bases, self.recovery_point) - 1)
        started = time.monotonic()
        try:
            self.leader_epoch_cache.persist()
            for segment in self._segments[first:]:
                if segment.base_offset >= offset:
                    break
                segment.flush()
        except OSError as exc:
            raise self._storage_failed("flush", exc) from None
        done = time.monotonic()
        LOG_FLUSH_MICROS.update(round((done - started) * 1_000_000), done)
        self._storage_succeeded()
        self.recovery_point = offset

    def _flush_quietly(self, up_to: int | None = None) -> None:
        """flush(), where a failure (already logged) only leaves the recovery point behind."""
        if self.closed:
            return
        try:
            self.flush(up_to)
        except KafkaError:
            pass

    def _flush_if_open(self, up_to: int) -> None:
        self._flush_quietly(up_to)

    # --------------------------------------------------------- storage faults
    def _storage_failed(self, operation: str, exc: OSError) -> KafkaError:
        """Count a failed storage operation, log the first of a run, and return the error the
        client gets."""
        self._storage_failures += 1
        if self.on_storage_error is not None:
            self.on_storage_error(exc)
        reason = errno.errorcode.get(exc.errno, type(exc).__name__) if exc.errno else type(exc).__name__
        if self._storage_failures == 1:
            log.warning(
                "log storage error topic=%s partition=%d operation=%s error=%s detail=%s "
                "log_end_offset=%d",
                self.topic_partition.topic, self.topic_partition.partition, operation, reason,
                exc.strerror or exc, self.log_end_offset,
            )  # fmt: skip
        return KafkaError(
            ErrorCode.kafka_storage_error,
            f"{operation} failed on {self.topic_partition}: {reason} ({exc.strerror or exc})",
        )

    def _storage_succeeded(self) -> None:
        if self._storage_failures:
            log.info(
                "log storage recovered topic=%s partition=%d failed_operations=%d log_end_offset=%d",
                self.topic_partition.topic, self.topic_partition.partition,
                self._storage_failures, self.log_end_offset,
            )  # fmt: skip
            self._storage_failures = 0

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget idle producers (producer.id.expiration.ms)."""
        return self.producer_state.remove_expired_producers(clock.now_ms() if now_ms is None else now_ms)

    # ------------------------------------------------------------ life cycle
    def close(self) -> None:
        """Flush, snapshot producer state, close every segment; pending deletions happen now.

        Every handle is closed even when something fails; then KafkaError(KAFKA_STORAGE_ERROR)
        says the files are not all up to date (no clean-shutdown marker may be written); so
        does an append in flight, after which the log closes."""
        if self.closed:
            return
        if self._pending is not None:
            self._when_appended.append(self._close_quietly)
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"log {self.topic_partition} closed with an append in flight",
            )
        failure: KafkaError | None = None
        try:
            self.flush()
        except KafkaError as exc:
            failure = exc
        self.producer_state.update_map_end_offset(self.log_end_offset)
        self._take_producer_snapshot()
        for segment in self._segments:
            try:
                segment.close()
            except OSError as exc:
                failure = failure or self._storage_failed("close", exc)
        for segment in list(self._deleted_segments):
            segment.delete_files()
        self._deleted_segments.clear()
        self.closed = True
        if failure is not None:
            raise failure

    def _close_quietly(self) -> None:
        try:
            self.close()
        except KafkaError:
            pass  # logged

    def close_handles(self) -> None:
        """Close every file handle without flushing (the directory is about to be removed);
        with an append in flight, once it ends (its write may not lose its descriptor)."""
        if self._pending is not None:
            self.closed = True
            self._when_appended.append(self.close_handles)
            return
        for segment in self._segments + self._deleted_segments:
            segment.close_handles()
        self.closed = True

    def renamed_dir(self, new_dir: Path) -> None:
        """The directory was renamed (delete_log); keep handles, forget paths (read-only from now)."""
        self._dir = new_dir
        self.closed = True

    def delete(self) -> None:
        """Close all handles and remove the directory with everything in it (once an append in
        flight ends)."""
        if self._pending is not None:
            self.closed = True
            self._when_appended.append(self.delete)
            return
        self.close_handles()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log {self.topic_partition} is closed")

    def __repr__(self) -> str:
        return (
            f"UnifiedLog({self.topic_partition}, start={self._log_start_offset}, end={self.log_end_offset}, "
            f"segments={len(self._segments)})"
        )


def _marker_of(buffers: list[bytes | bytearray | memoryview], header: BatchHeader) -> EndTxnMarker | None:
    """The COMMIT or ABORT marker a control batch about to be appended holds (None: none)."""
    try:
        return read_end_txn_marker(b"".join(buffers), 0, header)
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.corrupt_message, f"unreadable control batch: {exc}") from None
