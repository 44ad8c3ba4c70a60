"""The log cleaner: compaction for every log whose cleanup.policy includes `compact`.

Kafka's LogCleaner and LogCleanerManager, on asyncio. `log.cleaner.threads` coroutines each loop:
pick the filthiest log not being cleaned, plan a pass on the event loop (a few stat calls and
duplicated file descriptors), run the pass in a worker thread (`compaction.clean_log`: map,
filter, write fsynced `.cleaned` segments), and swap the output in on the loop. When no log needs
cleaning a coroutine sleeps log.cleaner.backoff.ms.

Choosing a log (`grab_filthiest_log`), per compacted log:

- first dirty offset: the `cleaner-offset-checkpoint` entry (Kafka's per-log-dir file), or the log
  start offset when there is none or it lies outside [log start offset, log end offset]; a
  truncation below it lowers it.
- first uncleanable offset: the lowest of the active segment's base offset, the high watermark,
  and the base of the first segment with a record newer than min.compaction.lag.ms. (There are no
  transactions yet, so no first unstable offset.)
- dirty ratio = cleanable bytes (segments overlapping [first dirty, first uncleanable)) / (those
  plus the bytes of the fully cleaned segments before them).
- a log qualifies when it has cleanable bytes and its dirty ratio is at least
  min.cleanable.dirty.ratio, or its first dirty segment started longer than max.compaction.lag.ms
  ago; the highest ratio goes first. Samsa adds one trigger Kafka lacks: a log whose earliest
  tombstone delete horizon (remembered from the previous pass, in memory) has passed is cleaned
  even without new dirty data, so tombstones go away about delete.retention.ms after the pass that
  stamped them, not only after more writes.

Swapping in (`_swap_in`, on the loop, no await): the pass is abandoned if the log changed in a
conflicting way while it ran: log closed, deleted or replaced; config changed; a truncation; any
planned segment no longer live, resized or now the active segment (retention, DeleteRecords,
truncation all show up this way). Otherwise `UnifiedLog.replace_segments` renames `.cleaned` ->
`.swap`, splices the segment list, renames the old segments to `.deleted` (their files stay open
for readers until file.delete.delay.ms) and `.swap` -> final; the loader completes or discards
each of those steps after a crash. Then the checkpoint moves to the end of the cleaned range.

Per-log state machine (`LogCleaningState`):

    IDLE --chosen by grab_filthiest_log--> IN_PROGRESS   (files .cleaned being written off the loop)
    IN_PROGRESS --worker done, log unchanged--> SWAPPING --replace_segments--> IDLE
    IN_PROGRESS --abort(tp) / stop() / log changed / error--> ABORTED --outputs deleted--> IDLE
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from broker import clock
from broker.config import LONG_MAX
from broker.log.checkpoints import OffsetCheckpointFile
from broker.log.compaction import (
    KAFKA_BYTES_PER_ENTRY,
    CleaningAborted,
    CleaningPlan,
    CleanResult,
    SegmentSource,
    clean_log,
)
from broker.log.log import UnifiedLog
from broker.tasks import cancel_and_wait
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.config import BrokerConfig

log = logging.getLogger("samsa.log.cleaner")

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"



@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings."""

    enable: bool = True
    threads: int = 1
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 134_217_728
    io_buffer_size: int = 524_288
    io_buffer_load_factor: float = 0.9

    @property
    def max_map_entries(self) -> int:
        """Keys one pass may map: Kafka's arithmetic (buffer / threads / 24 bytes * load factor)."""
        per_thread = self.dedupe_buffer_size // max(1, self.threads)
        return max(1, int(per_thread // KAFKA_BYTES_PER_ENTRY * self.io_buffer_load_factor))

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> CleanerConfig:
        return cls(
            enable=config.log_cleaner_enable,
            threads=config.log_cleaner_threads,
            backoff_ms=config.log_cleaner_backoff_ms,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            io_buffer_size=config.log_cleaner_io_buffer_size,
            io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
        )


class LogCleaningState(enum.Enum):
    IDLE = "idle"
    IN_PROGRESS = "in_progress"
    SWAPPING = "swapping"
    ABORTED = "aborted"


@dataclass(slots=True)
class LogToClean:
    """A compacted log's cleanable range and how dirty it is (Kafka's LogToClean)."""

    topic_partition: TopicPartition
    log: UnifiedLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool = False
    tombstones_due: bool = False

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


@dataclass(slots=True)
class CleaningOutcome:
    """What `clean_once` did (for tests and the log line)."""

    topic_partition: TopicPartition
    swapped: bool
    reason: str
    result: CleanResult | None = None
    bytes_before: int = 0
    bytes_after: int = 0


class LogCleaner:
    """Compacts the logs of one `LogManager` (see the module docstring)."""

    def __init__(
        self,
        logs: Callable[[], Mapping[TopicPartition, UnifiedLog]],
        log_dirs: list[Path],
        config: CleanerConfig,
        *,
        high_watermarks: Callable[[], Mapping[TopicPartition, int]] | None = None,
    ) -> None:
        self._logs = logs
        self.log_dirs = log_dirs
        self.config = config
        self.high_watermarks = high_watermarks
        self.states: dict[TopicPartition, LogCleaningState] = {}
        self._plans: dict[TopicPartition, CleaningPlan] = {}
        self.checkpoints: dict[TopicPartition, int] = {}
        self._delete_horizons: dict[TopicPartition, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._executor: ThreadPoolExecutor | None = None
        self.passes = 0
        for d in log_dirs:
            self.checkpoints.update(OffsetCheckpointFile(d / CLEANER_CHECKPOINT).read_or_empty())

    # ------------------------------------------------------------------ choosing
    def grab_filthiest_log(self, now_ms: int | None = None) -> LogToClean | None:
        """The compacted log most in need of cleaning that is not being cleaned, or None."""
        now = clock.now_ms() if now_ms is None else now_ms
        hws = dict(self.high_watermarks()) if self.high_watermarks is not None else {}
        best: LogToClean | None = None
        for tp, the_log in self._logs().items():
            if self.states.get(tp, LogCleaningState.IDLE) is not LogCleaningState.IDLE:
                continue
            if the_log.closed or not the_log.config.compact:
                continue
            candidate = self.log_to_clean(tp, the_log, now, hws.get(tp))
            if candidate is None:
                continue
            eligible = candidate.cleanable_bytes > 0 and (
                candidate.dirty_ratio >= the_log.config.min_cleanable_dirty_ratio
                or candidate.needs_compaction_now
            )
            if not eligible and not (candidate.tombstones_due and candidate.clean_bytes > 0):
                continue
            if best is None or candidate.dirty_ratio > best.dirty_ratio:
                best = candidate
        return best

    def log_to_clean(
        self, tp: TopicPartition, the_log: UnifiedLog, now_ms: int, high_watermark: int | None
    ) -> LogToClean | None:
        """The cleanable range of one log (Kafka's cleanableOffsets) and its sizes."""
        if the_log.lowest_truncation_offset is not None:
            if tp in self.checkpoints:
                self.checkpoints[tp] = min(self.checkpoints[tp], the_log.lowest_truncation_offset)
            the_log.lowest_truncation_offset = None
        start, end = the_log.log_start_offset, the_log.log_end_offset
        first_dirty = self.checkpoints.get(tp, start)
        if first_dirty < start or first_dirty > end:
            first_dirty = start
        segments = the_log.segments
        if len(segments) < 2:
            return None
        config = the_log.config
        uncleanable = segments[-1].base_offset
        if high_watermark is not None:
            uncleanable = min(uncleanable, high_watermark)
        unstable = the_log.first_unstable_offset  # never clean past the LSO (Kafka's rule)
        if unstable is not None:
            uncleanable = min(uncleanable, unstable)
        if config.min_compaction_lag_ms > 0:
            for i, seg in enumerate(segments[:-1]):
                if segments[i + 1].base_offset > first_dirty and (
                    seg.largest_timestamp > now_ms - config.min_compaction_lag_ms
                ):
                    uncleanable = min(uncleanable, seg.base_offset)
                    break
        clean_bytes = cleanable = 0
        needs_now = False
        first_dirty_seen = False
        for i, seg in enumerate(segments[:-1]):
            upper = segments[i + 1].base_offset
            if upper <= first_dirty:
                clean_bytes += seg.size
            elif seg.base_offset < uncleanable:
                cleanable += seg.size
                if not first_dirty_seen and config.max_compaction_lag_ms < LONG_MAX:
                    first_ts = seg.rolling_based_timestamp()
                    needs_now = (
                        first_ts is not None
                        and first_ts >= 0
                        and first_ts < now_ms - config.max_compaction_lag_ms
                    )
                first_dirty_seen = True
        horizon = self._delete_horizons.get(tp)
        return LogToClean(
            tp,
            the_log,
            first_dirty,
            max(first_dirty, uncleanable),
            clean_bytes,
            cleanable,
            needs_compaction_now=needs_now,
            tombstones_due=horizon is not None and horizon <= now_ms,
        )

    def plan(self, target: LogToClean, now_ms: int | None = None) -> CleaningPlan:
        """Capture what the worker reads: the closed segments below the first uncleanable
        offset, each with its own duplicated descriptor (on the loop, cheap)."""
        the_log = target.log
        segments = the_log.segments
        sources: list[SegmentSource] = []
        dirty_position = 0
        for i, seg in enumerate(segments[:-1]):
            upper = segments[i + 1].base_offset
            if seg.base_offset >= target.first_uncleanable_offset:
                break
            fd = os.dup(seg.reader.fileno())
            sources.append(
                SegmentSource(
                    seg, seg.base_offset, upper, seg.size, len(seg.index), fd,
                    os.fstat(fd).st_mtime_ns,
                )
            )  # fmt: skip
            if seg.base_offset <= target.first_dirty_offset < upper:
                dirty_position = seg.index.lookup(target.first_dirty_offset)[1]
        producers = the_log.producer_state.producers
        upper = sources[-1].upper_offset if sources else target.first_uncleanable_offset
        start = sources[0].base_offset if sources else target.first_dirty_offset
        return CleaningPlan(
            topic_partition=target.topic_partition,
            log_dir=the_log.dir,
            config=the_log.config,
            sources=sources,
            first_dirty_offset=target.first_dirty_offset,
            first_uncleanable_offset=target.first_uncleanable_offset,
            dirty_start_position=dirty_position,
            now_ms=clock.now_ms() if now_ms is None else now_ms,
            producer_last_offsets={pid: e.last_offset for pid, e in producers.items()},
            producer_epochs={pid: e.producer_epoch for pid, e in producers.items()},
            aborted_txns=the_log.collect_aborted_transactions(start, upper),
            max_map_entries=self.config.max_map_entries,
            io_buffer_size=self.config.io_buffer_size,
        )

    # ---------------------------------------------------------------- one pass
    def clean_once(self, now_ms: int | None = None) -> CleaningOutcome | None:
        """Choose, clean and swap in one log synchronously (tests; the loop uses `_run_pass`)."""
        target = self.grab_filthiest_log(now_ms)
        if target is None:
            return None
        plan = self._begin(target, now_ms)
        try:
            result = clean_log(plan)
        except BaseException as exc:  # noqa: BLE001 - _failed logs it and discards the output
            return self._failed(plan, exc)
        return self._swap_in(target.log, plan, result)

    async def _run_pass(self) -> bool:
        """One pass on the loop with the work in a thread; False when nothing needed cleaning."""
        target = self.grab_filthiest_log()
        if target is None:
            return False
        plan = self._begin(target, None)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max(1, self.config.threads), thread_name_prefix="log-cleaner"
            )
        work = asyncio.get_running_loop().run_in_executor(self._executor, clean_log, plan)
        try:
            result = await asyncio.shield(work)
        except asyncio.CancelledError as exc:
            plan.aborted.set()  # the thread stops at its next batch; wait so no file stays open
            await asyncio.wait([work])
            if not work.cancelled():
                work.exception()  # retrieved: the pass's own error is moot now
            self._failed(plan, exc)
            raise
        except Exception as exc:  # noqa: BLE001 - _failed logs it and discards the output
            self._failed(plan, exc)
            return True
        self._swap_in(target.log, plan, result)
        return True

    def _begin(self, target: LogToClean, now_ms: int | None) -> CleaningPlan:
        tp = target.topic_partition
        plan = self.plan(target, now_ms)
        self.states[tp] = LogCleaningState.IN_PROGRESS
        self._plans[tp] = plan
        self.passes += 1
        log.info(
            "cleaning started topic=%s partition=%d first_dirty_offset=%d "
            "first_uncleanable_offset=%d dirty_ratio=%.3f segments=%d bytes=%d",
            tp.topic,
            tp.partition,
            target.first_dirty_offset,
            target.first_uncleanable_offset,
            target.dirty_ratio,
            len(plan.sources),
            sum(s.size for s in plan.sources),
        )
        return plan

    def _failed(self, plan: CleaningPlan, exc: BaseException) -> CleaningOutcome:
        tp = plan.topic_partition
        plan.close_sources()
        self.states[tp] = LogCleaningState.ABORTED
        if isinstance(exc, (CleaningAborted, asyncio.CancelledError)):
            reason = "aborted"
            log.info("cleaning aborted topic=%s partition=%d", tp.topic, tp.partition)
        else:
            reason = f"error: {exc!r}"
            log.error(
                "cleaning failed topic=%s partition=%d error=%r",
                tp.topic,
                tp.partition,
                exc,
                exc_info=exc,
            )
        self._done(tp)
        return CleaningOutcome(tp, False, reason)

    def _done(self, tp: TopicPartition) -> None:
        self._plans.pop(tp, None)
        self.states.pop(tp, None)

    def _conflict(self, the_log: UnifiedLog, plan: CleaningPlan, result: CleanResult) -> str | None:
        """Why the output cannot be swapped in any more, or None."""
        tp = plan.topic_partition
        if plan.aborted.is_set():
            return "aborted"
        if the_log.closed or self._logs().get(tp) is not the_log:
            return "log closed or deleted"
        if the_log.config != plan.config:
            return "config changed"
        if the_log.lowest_truncation_offset is not None:
            return "log truncated"
        live = the_log.segments
        old = [s.segment for g in result.groups for s in g.sources]
        if not old:
            return None
        try:
            first = next(i for i, s in enumerate(live) if s is old[0])
        except StopIteration:
            return "segments deleted"
        if live[first : first + len(old)] != old or first + len(old) >= len(live):
            return "segments deleted or rolled"
        for group in result.groups:
            for source in group.sources:
                if source.segment.size != source.size or source.segment.closed:
                    return "segment changed size"
        return None

    def _swap_in(
        self, the_log: UnifiedLog, plan: CleaningPlan, result: CleanResult
    ) -> CleaningOutcome:
        """Replace the cleaned segments (on the loop, no await) or discard the output."""
        tp = plan.topic_partition
        conflict = self._conflict(the_log, plan, result)
        if conflict is not None:
            result.delete_outputs()
            self.states[tp] = LogCleaningState.ABORTED
            log.info(
                "cleaning aborted topic=%s partition=%d reason=%s", tp.topic, tp.partition, conflict
            )
            self._done(tp)
            return CleaningOutcome(tp, False, conflict, result)
        self.states[tp] = LogCleaningState.SWAPPING
        stats = result.stats
        bytes_before = sum(s.size for g in result.groups for s in g.sources)
        try:
            if result.groups:
                the_log.replace_segments(
                    [g.output for g in result.groups], [s.segment for g in result.groups for s in g.sources]
                )
        except Exception as exc:
            log.exception("cleaning swap failed topic=%s partition=%d", tp.topic, tp.partition)
            self._done(tp)
            return CleaningOutcome(tp, False, f"swap failed: {exc!r}", result)
        bytes_after = sum(g.output.size for g in result.groups)
        self.checkpoints[tp] = result.end_offset
        if result.min_delete_horizon is None:
            self._delete_horizons.pop(tp, None)
        else:
            self._delete_horizons[tp] = result.min_delete_horizon
        self._write_checkpoint(the_log.dir.parent)
        duration_ms = (clock.now_ms() - plan.now_ms)
        log.info(
            "cleaning done topic=%s partition=%d bytes_before=%d bytes_after=%d "
            "records_kept=%d records_removed=%d tombstones_removed=%d segments_before=%d "
            "segments_after=%d map_keys=%d end_offset=%d duration_ms=%d",
            tp.topic,
            tp.partition,
            bytes_before,
            bytes_after,
            stats.records_kept,
            stats.records_removed,
            stats.tombstones_removed,
            sum(len(g.sources) for g in result.groups),
            len(result.groups),
            result.map_size,
            result.end_offset,
            duration_ms,
        )
        self._done(tp)
        return CleaningOutcome(tp, True, "cleaned", result, bytes_before, bytes_after)

    # --------------------------------------------------------------- checkpoint
    def _write_checkpoint(self, log_dir: Path) -> None:
        """Rewrite `cleaner-offset-checkpoint` of one log dir with its live logs' entries."""
        live = self._logs()
        entries = {
            tp: off
            for tp, off in self.checkpoints.items()
            if tp in live and live[tp].dir.parent == log_dir
        }
        try:
            OffsetCheckpointFile(log_dir / CLEANER_CHECKPOINT).write(entries)
        except OSError:
            log.exception("cleaner checkpoint write failed dir=%s", log_dir)

    def forget(self, tp: TopicPartition) -> None:
        """The log was deleted: abort its pass and drop its checkpoint entry."""
        self.abort(tp)
        self.checkpoints.pop(tp, None)
        self._delete_horizons.pop(tp, None)

    def abort(self, tp: TopicPartition) -> None:
        """Ask a running pass over `tp` to stop; its output is discarded."""
        plan = self._plans.get(tp)
        if plan is not None:
            plan.aborted.set()

    # ---------------------------------------------------------------- running
    async def _run(self) -> None:
        backoff = max(self.config.backoff_ms, 1) / 1000
        while True:
            try:
                cleaned = await self._run_pass()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner pass failed")
                cleaned = False
            if not cleaned:
                await asyncio.sleep(backoff)

    def start(self) -> None:
        """Launch log.cleaner.threads cleaner coroutines on the running loop."""
        if self._tasks or not self.config.enable:
            return
        self._tasks = [
            asyncio.create_task(self._run(), name=f"log-cleaner-{i}")
            for i in range(max(1, self.config.threads))
        ]
        log.info(
            "log cleaner started threads=%d backoff_ms=%d max_map_keys=%d",
            len(self._tasks),
            self.config.backoff_ms,
            self.config.max_map_entries,
        )

    async def stop(self) -> None:
        """Abort running passes and wait for the workers (their output is deleted)."""
        for plan in list(self._plans.values()):
            plan.aborted.set()
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None
