"""Recovery on open and the LogManager: torn tails, corruption, lost indexes, clean shutdown."""

from __future__ import annotations

import asyncio
import logging
import os

from test_log_support import (
    NOW,
    TP,
    batch,
    close_opened_logs,  # noqa: F401  (autouse fixture)
    open_log,
    read_all,
)

from broker.log import LogConfig, LogManager, UnifiedLog
from broker.log.checkpoints import OffsetCheckpointFile
from broker.log.manager import CLEAN_SHUTDOWN_FILE
from protocol.topic_partition import TopicPartition

SEG = f"{0:020d}"


def _fill(path, batches=10, **overrides):
    log = open_log(path, index_interval_bytes=1, **overrides)
    for i in range(batches):
        log.append_as_leader(batch(2, ts=NOW + i), i // 4, now_ms=NOW)
    return log


def test_torn_tail_is_truncated_on_unclean_open(tmp_path, caplog):
    log = _fill(tmp_path / "p")
    size = log.active_segment.size
    os.truncate(tmp_path / "p" / f"{SEG}.log", size - 7)  # kill -9 mid-write: no close()
    with caplog.at_level(logging.WARNING, logger="samsa.log"):
        reopened = open_log(tmp_path / "p", index_interval_bytes=1)
    assert reopened.log_end_offset == 18
    assert [o for o, _ in read_all(reopened)] == list(range(18))
    assert "truncated" in caplog.text
    assert reopened.append_as_leader(batch(1), 9, now_ms=NOW).first_offset == 18
    assert [o for o, _ in read_all(reopened)] == list(range(19))


def test_flipped_byte_in_last_batch_is_cut_off(tmp_path):
    _fill(tmp_path / "p")  # no close: a crash
    path = tmp_path / "p" / f"{SEG}.log"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x40
    path.write_bytes(bytes(data))
    reopened = open_log(tmp_path / "p", index_interval_bytes=1)
    assert reopened.log_end_offset == 18
    assert os.path.getsize(path) == len(data) - len(batch(2, ts=NOW + 9))
    assert reopened.leader_epoch_cache.entries() == [(0, 0), (1, 8), (2, 16)]


def test_corruption_in_middle_segment_drops_later_segments(tmp_path):
    one = len(batch(2))
    log = _fill(tmp_path / "p", segment_bytes=one * 3)
    bases = [s.base_offset for s in log.segments]
    assert bases == [0, 6, 12, 18]
    middle = tmp_path / "p" / f"{6:020d}.log"
    data = bytearray(middle.read_bytes())
    data[one + 30] ^= 0xFF  # second batch of the middle segment
    middle.write_bytes(bytes(data))
    reopened = open_log(tmp_path / "p", index_interval_bytes=1, segment_bytes=one * 3)
    assert reopened.log_end_offset == 8
    assert [s.base_offset for s in reopened.segments] == [0, 6]
    assert not (tmp_path / "p" / f"{12:020d}.log").exists()
    assert [o for o, _ in read_all(reopened)] == list(range(8))


def test_missing_index_files_are_rebuilt(tmp_path):
    log = _fill(tmp_path / "p")
    entries = log.active_segment.index.entries()
    time_entries = log.active_segment.time_index.entries()
    log.close()
    os.unlink(tmp_path / "p" / f"{SEG}.index")
    os.unlink(tmp_path / "p" / f"{SEG}.timeindex")
    reopened = UnifiedLog.open(
        tmp_path / "p", LogConfig(index_interval_bytes=1), TP, now_ms=NOW, had_clean_shutdown=True
    )
    assert reopened.active_segment.index.entries() == entries
    assert (
        reopened.active_segment.time_index.entries()[: len(time_entries) - 1] == time_entries[:-1]
    )
    assert (tmp_path / "p" / f"{SEG}.index").stat().st_size == 8 * len(entries)
    assert [o for o, _ in read_all(reopened, 7)] == list(range(7, 20))
    assert (
        reopened.fetch_offset_by_timestamp(NOW + 5).offset == 9
    )  # batch 4 = offsets 8,9 at ts +4,+5
    reopened.close_handles()


def test_short_index_file_is_rebuilt(tmp_path):
    log = _fill(tmp_path / "p")
    entries = log.active_segment.index.entries()
    log.close()
    index = tmp_path / "p" / f"{SEG}.index"
    os.truncate(index, index.stat().st_size - 3)
    reopened = UnifiedLog.open(
        tmp_path / "p", LogConfig(index_interval_bytes=1), TP, now_ms=NOW, had_clean_shutdown=True
    )
    assert reopened.active_segment.index.entries() == entries
    reopened.close_handles()


def test_leftover_files_are_removed(tmp_path):
    log = _fill(tmp_path / "p")
    log.close()
    d = tmp_path / "p"
    (d / f"{5:020d}.log.deleted").write_bytes(b"old")
    (d / f"{5:020d}.log.cleaned").write_bytes(b"half")
    (d / f"{30:020d}.index").write_bytes(b"")
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"x")
    open_log(d)
    names = {p.name for p in d.iterdir()}
    assert not any(n.endswith((".deleted", ".cleaned", ".tmp")) for n in names)
    assert f"{30:020d}.index" not in names


def test_swap_segment_replaces_what_it_covers(tmp_path):
    log = _fill(tmp_path / "p", batches=4)
    cleaned = log.read(0, 1 << 20).records.read_bytes()
    log.close()
    d = tmp_path / "p"
    (d / f"{SEG}.log.swap").write_bytes(cleaned[: len(batch(2)) * 2])  # offsets 0-3 only
    reopened = open_log(d)
    assert [o for o, _ in read_all(reopened)] == [0, 1, 2, 3]
    assert not (d / f"{SEG}.log.swap").exists()


def test_recovery_point_limits_the_scan(tmp_path):
    one = len(batch(2))
    log = _fill(tmp_path / "p", segment_bytes=one * 3)
    log.flush()
    first = tmp_path / "p" / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[-3] ^= 0xFF  # corruption below the recovery point is not scanned for
    first.write_bytes(bytes(data))
    reopened = UnifiedLog.open(
        tmp_path / "p", LogConfig(segment_bytes=one * 3), TP, now_ms=NOW, recovery_point=18
    )
    assert reopened.log_end_offset == 20
    reopened.close_handles()
    scanned = UnifiedLog.open(
        tmp_path / "p", LogConfig(segment_bytes=one * 3), TP, now_ms=NOW, recovery_point=0
    )
    assert scanned.log_end_offset == 4
    assert [s.base_offset for s in scanned.segments] == [0]
    scanned.close_handles()


def test_recovery_logs_progress(tmp_path, caplog, monkeypatch):
    from broker.log import loader

    monkeypatch.setattr(loader, "PROGRESS_BYTES", 1)
    _fill(tmp_path / "p")
    with caplog.at_level(logging.INFO, logger="samsa.log"):
        open_log(tmp_path / "p")
    assert "log recovery topic=orders partition=0 segment=0 progress=" in caplog.text


def test_manager_clean_shutdown_skips_recovery(tmp_path, caplog):
    tp = TopicPartition("t", 0)
    manager = LogManager([tmp_path / "d1"], LogConfig())
    manager.load_logs()
    log = manager.get_or_create_log(tp)
    for _ in range(3):
        log.append_as_leader(batch(2), 0)
    manager.close()
    assert (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()
    assert OffsetCheckpointFile(tmp_path / "d1" / "recovery-point-offset-checkpoint").read() == {
        tp: 6
    }
    # a corrupt tail after a clean shutdown (a torn last batch) is recovered like after a crash,
    # with one log line, instead of being trusted
    seg = tmp_path / "d1" / "t-0" / f"{SEG}.log"
    data = bytearray(seg.read_bytes())
    data[-1] ^= 0xFF
    seg.write_bytes(bytes(data))
    manager = LogManager([tmp_path / "d1"], LogConfig())
    with caplog.at_level(logging.WARNING, logger="samsa.log"):
        manager.load_logs()
    assert manager.had_clean_shutdown[tmp_path / "d1"]
    assert not (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()
    assert manager.get_log(tp).log_end_offset == 4
    assert sum("log tail not whole after a clean shutdown" in r.message for r in caplog.records) == 1
    manager.close()


def test_manager_checkpoints_and_log_start_offset_survive(tmp_path):
    tp = TopicPartition("t", 3)
    hws = {tp: 2}
    manager = LogManager([tmp_path / "a", tmp_path / "b"], LogConfig(), high_watermarks=lambda: hws)
    manager.load_logs()
    log = manager.get_or_create_log(tp)
    log.append_as_leader(batch(5), 0)
    log.maybe_increment_log_start_offset(2)
    manager.close()
    manager = LogManager([tmp_path / "a", tmp_path / "b"], LogConfig())
    manager.load_logs()
    assert manager.get_log(tp).log_start_offset == 2
    assert manager.read_high_watermarks() == {tp: 2}
    other = manager.get_or_create_log(TopicPartition("t", 4))
    assert other.dir.parent != manager.get_log(tp).dir.parent  # spread over the log dirs
    manager.close()


def test_manager_delete_log_renames_then_removes(tmp_path):
    tp = TopicPartition("gone", 0)

    async def scenario() -> None:
        manager = LogManager([tmp_path], LogConfig(file_delete_delay_ms=50))
        manager.load_logs()
        log = manager.get_or_create_log(tp, LogConfig(file_delete_delay_ms=50))
        log.append_as_leader(batch(1), 0)
        region = log.read(0, 1000).records
        assert manager.delete_log(tp)
        assert manager.get_log(tp) is None
        [renamed] = [p for p in tmp_path.iterdir() if p.is_dir()]
        assert renamed.name.startswith("gone-0.") and renamed.name.endswith("-delete")
        assert region.read_bytes()  # still readable during the delay
        await asyncio.sleep(0.2)
        assert not renamed.exists()
        manager.close()

    asyncio.run(scenario())


def test_manager_background_tasks_run_retention_and_stop(tmp_path):
    tp = TopicPartition("r", 0)
    one = len(batch(1))

    async def scenario() -> None:
        config = LogConfig(segment_bytes=one, retention_bytes=one, file_delete_delay_ms=0)
        manager = LogManager(
            [tmp_path], config, retention_check_interval_ms=20, flush_check_interval_ms=20
        )
        manager.load_logs()
        log = manager.get_or_create_log(tp)
        for _ in range(4):
            log.append_as_leader(batch(1), 0)
        manager.start()
        await asyncio.sleep(0.15)
        assert log.log_start_offset >= 3
        await manager.stop()
        assert all(t.done() for t in asyncio.all_tasks() if t is not asyncio.current_task())
        manager.close()

    asyncio.run(scenario())


def test_manager_flushes_logs_after_flush_ms(tmp_path):
    tp = TopicPartition("f", 0)
    manager = LogManager([tmp_path], LogConfig(flush_ms=1000))
    log = manager.get_or_create_log(tp)
    log.append_as_leader(batch(2), 0)
    assert log.recovery_point == 0
    assert manager.flush_dirty_logs(log.last_flush_ms + 999) == 0
    assert manager.flush_dirty_logs(log.last_flush_ms + 1000) == 1
    assert log.recovery_point == 2
    manager.close()


def test_manager_removes_directories_left_for_deletion(tmp_path):
    (tmp_path / "x-0.abc-delete").mkdir()
    (tmp_path / "not a partition").mkdir()
    manager = LogManager([tmp_path], LogConfig())
    manager.load_logs()
    assert not (tmp_path / "x-0.abc-delete").exists()
    assert manager.all_logs() == {}


def test_first_retention_pass_comes_soon_after_startup(tmp_path):
    """Like Kafka, expired data goes shortly after a start (log.initial.task.delay.ms), not only
    after a whole log.retention.check.interval.ms."""
    tp = TopicPartition("t", 0)
    manager = LogManager(
        [tmp_path / "d"],
        LogConfig(retention_ms=1000, segment_bytes=len(batch(1)) * 2, file_delete_delay_ms=0),
        retention_check_interval_ms=300_000,
        initial_task_delay_ms=100,
    )
    manager.load_logs()
    log = manager.get_or_create_log(tp)
    for _ in range(6):
        log.append_as_leader(batch(1, ts=1_000), 0)  # timestamps far in the past

    async def run() -> None:
        task = asyncio.create_task(manager.run_retention())
        await asyncio.sleep(1.0)
        task.cancel()

    asyncio.run(run())
    assert log.log_start_offset >= 4
    manager.close()


def test_manager_writes_each_checkpoint_at_its_own_interval(tmp_path):
    """log.flush.offset.checkpoint.interval.ms, log.flush.start.offset.checkpoint.interval.ms and
    replica.high.watermark.checkpoint.interval.ms each time their own file; 0 means only at
    shutdown."""
    tp = TopicPartition("c", 0)
    hws = {tp: 3}
    d = tmp_path / "d"

    async def scenario() -> None:
        manager = LogManager(
            [d], LogConfig(), high_watermarks=lambda: hws, checkpoint_interval_ms=40,
            log_start_offset_checkpoint_interval_ms=0,
            high_watermark_checkpoint_interval_ms=3_600_000,
        )
        manager.load_logs()
        log = manager.get_or_create_log(tp)
        log.append_as_leader(batch(5), 0)
        log.flush()
        log.maybe_increment_log_start_offset(2)
        manager.start()
        names = sorted(t.get_name() for t in manager._tasks)
        assert names == ["checkpoint-high-watermark", "checkpoint-recovery-point",
                         "log-flush", "log-retention"]
        await asyncio.sleep(0.3)
        assert OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read() == {tp: 5}
        assert not (d / "log-start-offset-checkpoint").exists()
        assert not (d / "replication-offset-checkpoint").exists()
        await manager.stop()
        manager.close()
        assert OffsetCheckpointFile(d / "log-start-offset-checkpoint").read() == {tp: 2}
        assert OffsetCheckpointFile(d / "replication-offset-checkpoint").read() == {tp: 3}

    asyncio.run(scenario())


def test_a_rolled_segment_is_synced_off_the_loop_before_its_flush(tmp_path, monkeypatch):
    """Rolling hands the old segment's fsync to a thread; the flush that advances the recovery
    point runs on the loop after it (and finds nothing left to write)."""
    import threading

    from broker.log import manager as manager_module

    tp = TopicPartition("rolled", 0)
    events: list[tuple[str, str]] = []
    real_presync = manager_module.fsync_path

    def presync(path):
        events.append(("presync", threading.current_thread().name))
        real_presync(path)

    monkeypatch.setattr(manager_module, "fsync_path", presync)

    async def scenario() -> None:
        manager = LogManager([tmp_path], LogConfig(segment_bytes=100))
        manager.load_logs()
        log = manager.get_or_create_log(tp, LogConfig(segment_bytes=100))
        log.append_as_leader(batch(3), 0)
        assert log.recovery_point == 0
        log.append_as_leader(batch(3), 0)  # the first segment is full: this append rolls
        assert len(log.segments) == 2 and log.recovery_point == 0
        for _ in range(100):
            await asyncio.sleep(0.01)
            if log.recovery_point:
                break
        events.append(("flushed", threading.current_thread().name))
        assert log.recovery_point == 3
        await manager.stop()
        manager.close()

    asyncio.run(scenario())
    assert events[0][0] == "presync" and events[0][1] != threading.main_thread().name
    assert events[1] == ("flushed", threading.main_thread().name)
