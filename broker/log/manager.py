"""`LogManager`: every partition log of this broker across its log dirs.

Startup: `load_logs()` opens each `<topic>-<partition>` directory (recovering where needed, with
progress logged), using each log dir's checkpoints (`recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`) and its clean-shutdown marker `.kafka_cleanshutdown`, which is
removed once loading is done so that a crash from then on counts as unclean.

Running: `start()` launches background tasks on the event loop (retention, flush, checkpoints,
and the log cleaner when a `cleaner_config` enables it) and `stop()` cancels them. Shutdown:
`close()` stops the tasks, flushes and closes every log, writes the checkpoints and finally the
clean-shutdown markers.

Life of a log directory:

    (absent) --get_or_create_log--> LIVE --delete_log--> `<tp>.<uuid>-delete` --file.delete.delay.ms--> (absent)
    LIVE --close--> CLOSED (marker written) --load_logs--> LIVE

A replica moving to another log dir (AlterReplicaLogDirs) has a second, future log there:

    (absent) --get_or_create_future_log--> `<tp>.<uuid>-future` (FUTURE; reloaded by load_logs)
    FUTURE --replace_current_with_future_log--> `<tp>` (LIVE; the old dir's log goes to `-delete`)
    FUTURE --remove_future_log / delete_log--> `<tp>.<uuid>-delete` --> (absent)
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from broker import clock
from broker.config import DEFAULT_PRODUCER_ID_EXPIRATION_MS, LogConfig
from broker.log.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_path,
)
from broker.log.cleaner import CleanerConfig, LogCleaner
from broker.log.log import UnifiedLog
from broker.log.partition_metadata import read_topic_id, write_topic_id
from broker.log.writer import LogWriter
from broker.tasks import cancel_and_wait
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition

log = logging.getLogger("samsa.log")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
INITIAL_TASK_DELAY_MS = 30_000
"""Kafka's LogManager.InitialTaskDelayMs, the default of log.initial.task.delay.ms."""
"""Kafka's LogManager.InitialTaskDelayMs: the first retention pass after start-up."""
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
NOT_A_FAILED_DIR = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE})
"""Errors that leave a log dir online: a full disk (the log refuses the write and resumes when
space is back, docs/architecture.md, Storage faults) and no file descriptor left (the process's
limit, not the disk's). Any other I/O error takes the dir offline."""


def future_dir_name(tp: TopicPartition) -> str:
    """Kafka's UnifiedLog.logFutureDirName: `<topic>-<partition>.<uuid>-future`."""
    return f"{tp}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_future_dir_name(name: str) -> TopicPartition:
    """The partition of a `<topic>-<partition>.<uuid>-future` directory (ValueError otherwise)."""
    stem, dot, _ = name.removesuffix(FUTURE_DIR_SUFFIX).rpartition(".")
    if not dot:
        raise ValueError(f"not a future log directory: {name!r}")
    return TopicPartition.parse(stem)



class LogManager:
    """Owns the log dirs and the `UnifiedLog` of every partition hosted here."""

    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        retention_check_interval_ms: int = 300_000,
        initial_task_delay_ms: int = INITIAL_TASK_DELAY_MS,
        flush_check_interval_ms: int = 1_000,
        checkpoint_interval_ms: int = 60_000,
        log_start_offset_checkpoint_interval_ms: int = 60_000,
        high_watermark_checkpoint_interval_ms: int = 5_000,
        high_watermarks: Callable[[], Mapping[TopicPartition, int]] | None = None,
        cleaner_config: CleanerConfig | None = None,
        io_threads: int = 0,
    ) -> None:
        """`io_threads` (num.io.threads) write appends' bytes when the disk is slow
        (broker/log/writer.py); 0 writes them inline."""
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.initial_task_delay_ms = initial_task_delay_ms
        self.flush_check_interval_ms = flush_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        """log.flush.offset.checkpoint.interval.ms: how often recovery points are written."""
        self.log_start_offset_checkpoint_interval_ms = log_start_offset_checkpoint_interval_ms
        """log.flush.start.offset.checkpoint.interval.ms: how often log start offsets are written."""
        self.high_watermark_checkpoint_interval_ms = high_watermark_checkpoint_interval_ms
        """replica.high.watermark.checkpoint.interval.ms: how often high watermarks are written."""
        self.high_watermarks = high_watermarks
        self.writer = LogWriter(io_threads)
        """Where partitions write their appends' bytes."""
        self._logs: dict[TopicPartition, UnifiedLog] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._future_logs: dict[TopicPartition, UnifiedLog] = {}
        """Logs of replicas moving to another dir (`<tp>.<uuid>-future` there)."""
        self.offline_dirs: set[Path] = set()
        """Log dirs taken offline by an I/O error (Kafka's LogDirFailureChannel); their logs are
        no longer served, nothing is created in them again until a restart."""
        self.on_log_dir_failure: Callable[[Path], None] | None = None
        """Told, on the loop, of each log dir that fails (the replica manager), until `stop`."""
        self._closing = False
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        """Where a partition's next log is to be created (AlterReplicaLogDirs for a replica this
        broker does not hold yet: Kafka's preferredLogDirs)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._timers: dict[asyncio.TimerHandle, Callable[[], None]] = {}
        self._syncs: set[asyncio.Task[None]] = set()
        """Rolled segments being synced off the loop (`sync_then`)."""
        self.had_clean_shutdown: dict[Path, bool] = {}
        for d in self.log_dirs:
            self._validate_log_dir(d)
        if not self.live_log_dirs:  # Kafka's createAndValidateLogDirs refuses to start too
            raise RuntimeError(
                "none of the log dirs can be created or read: " + ",".join(str(d) for d in self.log_dirs))
        self.cleaner: LogCleaner | None = None
        """Compaction (broker/log/cleaner.py); None when log.cleaner.enable is false or no
        cleaner config was given. It reads the high watermarks through this manager."""
        if cleaner_config is not None and cleaner_config.enable:
            self.cleaner = LogCleaner(
                self.all_logs,
                self.live_log_dirs,
                cleaner_config,
                high_watermarks=lambda: (
                    self.high_watermarks() if self.high_watermarks is not None else {}
                ),
            )

    # -------------------------------------------------------------- scheduler
    def schedule(self, delay_ms: int, fn: Callable[[], None]) -> None:
        """Run `fn` after `delay_ms` on the running loop, or at once when no loop runs."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            fn()
            return
        handles: list[asyncio.TimerHandle] = []

        def run() -> None:
            for h in handles:
                self._timers.pop(h, None)
            try:
                fn()
            except Exception:
                log.exception("scheduled log task failed")

        handle = loop.call_later(max(0, delay_ms) / 1000, run)
        handles.append(handle)
        self._timers[handle] = run

    def sync_then(self, path: Path, then: Callable[[], None]) -> None:
        """fsync the file at `path` on a thread, then run `then` on the loop (at once when no
        loop runs). A failure here is left to `then`, the flush that fsyncs the file again and
        reports it; the thread opens a descriptor of its own, so whatever happens to the segment
        meanwhile (closed, renamed for deletion) does not touch it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            then()
            return

        async def run() -> None:
            await loop.run_in_executor(None, fsync_path, path)
            then()

        task = loop.create_task(run(), name=f"presync {path.name}")
        self._syncs.add(task)
        task.add_done_callback(self._syncs.discard)

    # ---------------------------------------------------------------- loading
    def _validate_log_dir(self, log_dir: Path) -> None:
        """Kafka's createAndValidateLogDirs: a log dir that cannot be created, is not a directory
        or cannot be read and written is offline from the start; the broker starts without it."""
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            if not (log_dir.is_dir() and os.access(log_dir, os.R_OK | os.W_OK | os.X_OK)):
                raise OSError(errno.EACCES, f"{log_dir} is not a readable and writable directory")
        except OSError as exc:
            self.offline_dirs.add(log_dir)
            log.error("log dir offline at start-up dir=%s error=%s detail=%s", log_dir,
                      errno.errorcode.get(exc.errno or 0, type(exc).__name__), exc.strerror or exc)

    def load_logs(self, config_for: Callable[[TopicPartition], LogConfig] | None = None) -> None:
        """Open every partition directory in every live log dir (startup). A dir whose loading
        fails with an I/O error goes offline and its logs are dropped (Kafka's loadLogs); with
        none left, RuntimeError."""
        started = time.monotonic()
        for log_dir in self.live_log_dirs:
            try:
                self._load_dir(log_dir, config_for)
            except OSError as exc:
                log.error("log dir offline at start-up: loading failed dir=%s error=%s detail=%s", log_dir,
                          errno.errorcode.get(exc.errno or 0, type(exc).__name__), exc.strerror or exc)
                self.handle_log_dir_failure(log_dir)
        if not self.live_log_dirs:
            raise RuntimeError("no log dir could be loaded: " + ",".join(str(d) for d in self.log_dirs))
        for tp in [tp for tp in self._future_logs if tp not in self._logs]:
            # the swap renamed the future log into place and the old one away: nothing to move
            log.warning("removing future log without a current log partition=%s", tp)
            self.remove_future_log(tp)
        log.info("logs loaded count=%d future=%d seconds=%.3f", len(self._logs),
                 len(self._future_logs), time.monotonic() - started)

    def _load_dir(self, log_dir: Path, config_for: Callable[[TopicPartition], LogConfig] | None) -> None:
        """Load one log dir's logs (an OSError: the dir failed)."""
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[log_dir] = clean
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read_or_empty()
        start_offsets = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read_or_empty()
        entries = sorted(p for p in log_dir.iterdir() if p.is_dir())
        partitions: list[tuple[TopicPartition, Path, bool]] = []
        for path in entries:
            if path.name.endswith(DELETE_DIR_SUFFIX):
                log.info("removing log directory left for deletion path=%s", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            future = path.name.endswith(FUTURE_DIR_SUFFIX)
            try:
                tp = parse_future_dir_name(path.name) if future else TopicPartition.parse(path.name)
            except ValueError:
                log.warning("ignoring directory that is not a partition path=%s", path)
                continue
            partitions.append((tp, path, future))
        log.info("loading logs dir=%s partitions=%d clean_shutdown=%s", log_dir, len(partitions), clean)
        for n, (tp, path, future) in enumerate(partitions, 1):
            logs = self._future_logs if future else self._logs
            if tp in logs:
                # Kafka refuses to start too: a failure between the two renames of a swap
                raise RuntimeError(
                    f"duplicate {'future ' if future else ''}log directories for {tp}: "
                    f"{logs[tp].dir} and {path}"
                )
            config = config_for(tp) if config_for is not None else self.default_config
            logs[tp] = UnifiedLog.open(
                path, config, tp, recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0), had_clean_shutdown=clean, scheduler=self.schedule,
                syncer=self.sync_then, producer_id_expiration_ms=self.producer_id_expiration_ms,
            )  # fmt: skip
            self._watch(logs[tp], log_dir)
            if not future:
                self._log_dir_of[tp] = log_dir
            log.info(
                "loaded log dir=%s partition=%s future=%s progress=%d/%d",
                log_dir, tp, future, n, len(partitions),
            )
        if clean:
            marker.unlink()

    # ----------------------------------------------------------------- access
    def get_log(self, tp: TopicPartition) -> UnifiedLog | None:
        return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, UnifiedLog]:
        return dict(self._logs)

    def get_or_create_log(
        self, tp: TopicPartition, config: LogConfig | None = None, topic_id: uuid.UUID | None = None
    ) -> UnifiedLog:
        """The log of `tp`, created empty in the least-loaded log dir if it does not exist.

        With a `topic_id`, an existing log recorded for another id (a leftover of a deleted topic
        of the same name) is deleted and a fresh one created; the id is recorded in the directory.
        """
        existing = self._logs.get(tp)
        if existing is not None and topic_id is not None:
            recorded = read_topic_id(existing.dir)
            if recorded is not None and recorded != topic_id:
                log.warning(
                    "deleting stale log of an earlier topic partition=%s recorded_topic_id=%s topic_id=%s",
                    tp,
                    recorded,
                    topic_id,
                )
                self.delete_log(tp)
                existing = None
            elif recorded is None:
                write_topic_id(existing.dir, topic_id)
        if existing is not None:
            if config is not None:
                existing.config = config
            return existing
        live = self.live_log_dirs
        if not live:
            raise KafkaError(ErrorCode.kafka_storage_error, f"no log dir is online for {tp}")
        preferred = self._preferred_dirs.pop(tp, None)
        log_dir = preferred if preferred in live else min(
            live, key=lambda d: sum(1 for v in self._log_dir_of.values() if v == d)
        )
        try:
            created = UnifiedLog.open(
                log_dir / str(tp),
                config or self.default_config,
                tp,
                scheduler=self.schedule,
                syncer=self.sync_then,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
            )
            if topic_id is not None:
                write_topic_id(created.dir, topic_id)
        except OSError as exc:
            log.warning(
                "creating log failed partition=%s dir=%s error=%s", tp, log_dir, exc.strerror or exc
            )
            raise KafkaError(
                ErrorCode.kafka_storage_error, f"cannot create the log of {tp}: {exc.strerror or exc}"
            ) from None
        self._logs[tp] = self._watch(created, log_dir)
        self._log_dir_of[tp] = log_dir
        log.info("created log partition=%s dir=%s", tp, log_dir)
        return created

    def delete_log(self, tp: TopicPartition) -> bool:
        """Rename the directory to `<tp>.<uuid>-delete` now and remove it after file.delete.delay.ms
        (the partition's future log too, if it has one)."""
        self.remove_future_log(tp)
        self._preferred_dirs.pop(tp, None)
        removed = self._logs.pop(tp, None)
        self._log_dir_of.pop(tp, None)
        if removed is None:
            return False
        if self.cleaner is not None:
            self.cleaner.forget(tp)
        self._schedule_deletion(tp, removed)
        return True

    def _schedule_deletion(self, tp: TopicPartition, removed: UnifiedLog) -> None:
        target = removed.dir.with_name(f"{tp}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(removed.dir, target)
        removed.renamed_dir(target)
        log.info("log scheduled for deletion partition=%s path=%s", tp, target)
        self.schedule(removed.config.file_delete_delay_ms, removed.delete)

    # ------------------------------------------------- moving between log dirs
    def log_dir_named(self, path: str) -> Path:
        """The configured log dir whose absolute path is `path` (Kafka compares the request's
        string with each dir's absolute path); LOG_DIR_NOT_FOUND for any other, and
        KAFKA_STORAGE_ERROR for one that is no longer a writable directory (offline)."""
        for d in self.log_dirs:
            if str(d.absolute()) == path:
                if d in self.offline_dirs or not (d.is_dir() and os.access(d, os.W_OK | os.X_OK)):
                    raise KafkaError(ErrorCode.kafka_storage_error, f"Log directory {path} is offline")
                return d
        raise KafkaError(ErrorCode.log_dir_not_found, f"Failed to find the log directory {path} in log.dirs")

    # ------------------------------------------------------------ failed dirs
    @property
    def live_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def _watch(self, the_log: UnifiedLog, log_dir: Path) -> UnifiedLog:
        the_log.on_storage_error = lambda exc: self.log_dir_failed(log_dir, exc)
        return the_log

    def log_dir_failed(self, log_dir: Path, exc: OSError) -> None:
        """Kafka's LogDirFailureChannel.maybeAddOfflineLogDir: an I/O error on a log of `log_dir`
        takes the dir offline, once, unless the disk is only full (NOT_A_FAILED_DIR); the listener
        (`on_log_dir_failure`) is told on the loop, after the failed operation has returned."""
        if exc.errno in NOT_A_FAILED_DIR or log_dir in self.offline_dirs:
            return
        self.offline_dirs.add(log_dir)
        log.error("log dir failed dir=%s error=%s detail=%s", log_dir,
                  errno.errorcode.get(exc.errno or 0, type(exc).__name__), exc.strerror or exc)
        listener = self.on_log_dir_failure
        if listener is None or self._closing:
            return
        try:
            asyncio.get_running_loop().call_soon(listener, log_dir)
        except RuntimeError:
            listener(log_dir)

    def handle_log_dir_failure(self, log_dir: Path) -> set[TopicPartition]:
        """Kafka's LogManager.handleLogDirFailure: forget every log, current or future, of the
        failed dir (their handles closed, their files left as they are); the partitions whose
        current log was there."""
        self.offline_dirs.add(log_dir)
        lost = {tp for tp, d in self._log_dir_of.items() if d == log_dir}
        gone = [self._logs.pop(tp) for tp in lost]
        for tp in lost:
            del self._log_dir_of[tp]
            if self.cleaner is not None:
                self.cleaner.forget(tp)
        for tp, future in list(self._future_logs.items()):
            if tp in lost or future.dir.parent == log_dir:
                gone.append(self._future_logs.pop(tp))
        for the_log in gone:
            try:
                the_log.close_handles()
            except OSError as exc:
                log.warning("closing log of a failed dir partition=%s error=%s", the_log.topic_partition, exc)
        return lost

    def log_dir_of(self, tp: TopicPartition) -> Path | None:
        """The log dir holding the current log of `tp` (None: no log here)."""
        return self._log_dir_of.get(tp)

    def future_log_dir_of(self, tp: TopicPartition) -> Path | None:
        future = self._future_logs.get(tp)
        return None if future is None else future.dir.parent

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, log_dir: Path) -> None:
        """Kafka's maybeUpdatePreferredLogDir: remember `log_dir` for the next log of `tp` to be
        created, unless its current or future log already lies there."""
        if self._log_dir_of.get(tp) != log_dir and self.future_log_dir_of(tp) != log_dir:
            self._preferred_dirs[tp] = log_dir

    def get_future_log(self, tp: TopicPartition) -> UnifiedLog | None:
        return self._future_logs.get(tp)

    def all_future_logs(self) -> dict[TopicPartition, UnifiedLog]:
        return dict(self._future_logs)

    def get_or_create_future_log(self, tp: TopicPartition, log_dir: Path) -> UnifiedLog:
        """The future log of `tp`, created empty as `<log_dir>/<tp>.<uuid>-future` when it has
        none (KAFKA_STORAGE_ERROR if it cannot be); its topic id is the current log's."""
        existing = self._future_logs.get(tp)
        if existing is not None:
            return existing
        self._preferred_dirs.pop(tp, None)
        current = self._logs[tp]
        try:
            created = UnifiedLog.open(
                log_dir / future_dir_name(tp),
                current.config,
                tp,
                scheduler=self.schedule,
                syncer=self.sync_then,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
            )
            topic_id = read_topic_id(current.dir)
            if topic_id is not None:
                write_topic_id(created.dir, topic_id)
        except OSError as exc:
            log.warning("creating future log failed partition=%s dir=%s error=%s", tp, log_dir,
                        exc.strerror or exc)
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"cannot create the future log of {tp}: {exc.strerror or exc}",
            ) from None
        self._future_logs[tp] = self._watch(created, log_dir)
        log.info("created future log partition=%s dir=%s", tp, log_dir)
        return created

    def remove_future_log(self, tp: TopicPartition) -> bool:
        """Delete the future log of `tp` (the move was cancelled or the partition deleted)."""
        removed = self._future_logs.pop(tp, None)
        if removed is None:
            return False
        self._schedule_deletion(tp, removed)
        return True

    def replace_current_with_future_log(self, tp: TopicPartition) -> UnifiedLog:
        """Kafka's replaceCurrentWithFutureLog: the future log becomes `<its dir>/<tp>` and the
        current one is renamed for deletion. The caller (the partition, under its log lock) has
        checked that both logs end at the same offset. The future log is renamed first, as in
        Kafka: a crash between the two renames leaves two current logs, which start-up refuses
        (no copy is ever deleted before the other is in place)."""
        future = self._future_logs[tp]
        current = self._logs[tp]
        future.close()  # flushed, producer state snapshotted: the reopen below is a clean load
        del self._future_logs[tp]
        target = future.dir.parent / str(tp)
        os.replace(future.dir, target)
        fsync_path(target.parent)
        moved = UnifiedLog.open(
            target,
            current.config,
            tp,
            recovery_point=future.log_end_offset,
            log_start_offset=future.log_start_offset,
            had_clean_shutdown=True,
            scheduler=self.schedule,
            syncer=self.sync_then,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
        )
        if self.cleaner is not None:
            self.cleaner.forget(tp)
        self._schedule_deletion(tp, current)
        self._logs[tp] = self._watch(moved, target.parent)
        self._log_dir_of[tp] = target.parent
        log.info("replaced current log with future log partition=%s dir=%s", tp, target.parent)
        return moved

    # ------------------------------------------------------------ maintenance
    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention for every log plus producer-id expiration; returns segments deleted."""
        now = clock.now_ms() if now_ms is None else now_ms
        hws = dict(self.high_watermarks()) if self.high_watermarks is not None else {}
        deleted = 0
        for tp, the_log in list(self._logs.items()):
            try:
                deleted += the_log.delete_retention_segments(now, high_watermark=hws.get(tp))
                the_log.remove_expired_producers(now)
            except Exception:
                log.exception("retention failed partition=%s", tp)
        return deleted

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """Flush logs whose flush.ms has elapsed since their last flush; returns how many."""
        now = clock.now_ms() if now_ms is None else now_ms
        flushed = 0
        for tp, the_log in list(self._logs.items()):
            if now - the_log.last_flush_ms >= the_log.config.flush_ms:
                try:
                    the_log.flush(now_ms=now)
                    flushed += 1
                except KafkaError:
                    pass  # logged by the log; its recovery point stays behind
                except Exception:
                    log.exception("flush failed partition=%s", tp)
        return flushed

    def _by_dir(self, value: Callable[[UnifiedLog], int]) -> dict[Path, dict[TopicPartition, int]]:
        """Per log dir, `value` of each log there (future logs in theirs: a partition has at most
        one log in a dir)."""
        result: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.live_log_dirs}
        for tp, the_log in self._logs.items():
            result[self._log_dir_of[tp]][tp] = value(the_log)
        for tp, the_log in self._future_logs.items():
            result.setdefault(the_log.dir.parent, {})[tp] = value(the_log)
        return result

    def _write_checkpoints(self, name: str, per_dir: dict[Path, dict[TopicPartition, int]]) -> None:
        """Write checkpoint file `name` in each dir; a dir whose write fails may be a failed dir
        (as in Kafka); the first failure is raised once every dir was tried."""
        failure: OSError | None = None
        for d, offsets in per_dir.items():
            try:
                OffsetCheckpointFile(d / name).write(offsets)
            except OSError as exc:
                self.log_dir_failed(d, exc)
                failure = failure or exc
        if failure is not None:
            raise failure

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoints(RECOVERY_POINT_CHECKPOINT, self._by_dir(lambda lg: lg.recovery_point))

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT, self._by_dir(lambda lg: lg.log_start_offset))

    def checkpoint_high_watermarks(
        self, high_watermarks: Mapping[TopicPartition, int] | None = None
    ) -> None:
        """Write `replication-offset-checkpoint` from the given HWs (or the callback)."""
        hws = (
            high_watermarks
            if high_watermarks is not None
            else (self.high_watermarks() if self.high_watermarks is not None else None)
        )
        if hws is None:
            return
        per_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.live_log_dirs}
        for tp, hw in hws.items():
            d = self._log_dir_of.get(tp)
            if d in per_dir:
                per_dir[d][tp] = hw
        self._write_checkpoints(REPLICATION_OFFSET_CHECKPOINT, per_dir)

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """The HWs checkpointed in every live log dir (partition state starts from these)."""
        result: dict[TopicPartition, int] = {}
        for d in self.live_log_dirs:
            result.update(OffsetCheckpointFile(d / REPLICATION_OFFSET_CHECKPOINT).read_or_empty())
        return result

    # ------------------------------------------------------- background tasks
    async def run_retention(self, interval_ms: int | None = None) -> None:
        """Retention and producer expiry: first log.initial.task.delay.ms after start-up (or
        sooner if the interval is shorter), then every log.retention.check.interval.ms."""
        interval = (interval_ms or self.retention_check_interval_ms) / 1000
        delay = min(self.initial_task_delay_ms / 1000, interval)
        while True:
            await asyncio.sleep(delay)
            self.cleanup_logs()
            delay = interval

    async def run_flush(self, interval_ms: int | None = None) -> None:
        """Every log.flush.scheduler.interval.ms: flush logs past their flush.ms."""
        interval = (interval_ms or self.flush_check_interval_ms) / 1000
        while True:
            await asyncio.sleep(interval)
            self.flush_dirty_logs()

    @staticmethod
    async def run_checkpoint(name: str, interval_ms: int, write: Callable[[], None]) -> None:
        """Write one checkpoint file every `interval_ms`; a failed write is logged and retried
        at the next interval."""
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                write()
            except OSError as exc:
                log.warning("checkpoint write failed checkpoint=%s error=%s", name, exc)
            except Exception:
                log.exception("checkpoint write failed checkpoint=%s", name)

    def start(self) -> None:
        """Launch the background tasks on the running loop. Each checkpoint has its own
        interval, as in Kafka; an interval of 0 or less writes that checkpoint only at shutdown."""
        if self._tasks:
            return
        self._tasks = [
            asyncio.create_task(self.run_retention(), name="log-retention"),
            asyncio.create_task(self.run_flush(), name="log-flush"),
        ]
        for name, interval_ms, write in (
            ("recovery-point", self.checkpoint_interval_ms, self.checkpoint_recovery_points),
            ("log-start-offset", self.log_start_offset_checkpoint_interval_ms,
             self.checkpoint_log_start_offsets),
            ("high-watermark", self.high_watermark_checkpoint_interval_ms,
             self.checkpoint_high_watermarks),
        ):
            if interval_ms > 0:
                self._tasks.append(asyncio.create_task(
                    self.run_checkpoint(name, interval_ms, write), name=f"checkpoint-{name}"))
        if self.cleaner is not None:
            self.cleaner.start()

    async def stop(self) -> None:
        """Cancel the background tasks and wait for them to end; let the writer threads go. A dir
        failing from now on is no longer reported (the broker is stopping)."""
        self._closing = True
        if self.cleaner is not None:
            await self.cleaner.stop()
        tasks, self._tasks = [*self._tasks, *self._syncs], []
        await cancel_and_wait(tasks)  # a cancelled pre-sync leaves its flush to close()
        self.writer.shutdown()

    def close(self) -> None:
        """Clean shutdown: close every log, write checkpoints and the clean-shutdown markers.

        Call `await stop()` first when the background tasks were started.
        """
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        for handle, run in list(self._timers.items()):
            handle.cancel()
            run()  # pending deletions finish now
        self._timers.clear()
        failed: list[str] = []
        for tp, the_log in [*self._logs.items(), *self._future_logs.items()]:
            try:
                the_log.close()
            except KafkaError:
                failed.append(str(tp))  # the log said why
            except Exception:
                failed.append(str(tp))
                log.exception("closing log failed partition=%s", tp)
        for name, write in (
            (RECOVERY_POINT_CHECKPOINT, self.checkpoint_recovery_points),
            (LOG_START_OFFSET_CHECKPOINT, self.checkpoint_log_start_offsets),
            (REPLICATION_OFFSET_CHECKPOINT, self.checkpoint_high_watermarks),
        ):
            try:
                write()
            except OSError as exc:
                failed.append(name)
                log.warning("checkpoint write failed checkpoint=%s error=%s", name, exc)
        if failed:
            # the next start recovers every log from its last good recovery point
            log.warning(
                "not writing clean shutdown markers: logs or checkpoints not up to date failed=%s",
                ",".join(failed[:10]) + (f",... ({len(failed)} in all)" if len(failed) > 10 else ""),
            )
            return
        for d in self.live_log_dirs:
            try:
                (d / CLEAN_SHUTDOWN_FILE).touch()
            except OSError as exc:
                log.warning("clean shutdown marker not written dir=%s error=%s", d, exc)
        log.info("log manager closed logs=%d", len(self._logs))
