"""Appends in two halves around their write, and the writer that takes slow writes off the loop.

A slow disk is made by slowing the segment's write call (`broker.log.segment._pwritev`), as
tests/unit/test_log_faults.py fails it. Checked: the log counts an append only when it completes,
an abandoned one leaves nothing (not even bytes past the accounted size, which recovery would
read back), nothing else changes the log while an append is in flight, and once a write is slow
the writes leave the loop: other work goes on while they wait on the disk.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_log_support import NOW, TP, batch, close_opened_logs, open_log, read_all  # noqa: F401

from broker.log import UnifiedLog, segment, writer
from broker.log.info import LogAppendInfo
from broker.log.log import PendingAppend
from broker.log.writer import LogWriter
from broker.replication.partition import Partition
from controller.model import PartitionRegistration
from protocol.errors import ErrorCode, KafkaError
from protocol.types import BrokerId, LeaderEpoch

SLOW_WRITE_S = writer.INLINE_LIMIT_S * 1.5
"""A write slow enough to send the writes to the threads."""

B1, B2 = BrokerId(1), BrokerId(2)


class SlowDisk:
    def __init__(self) -> None:
        self.delay = 0.0
        self.busy = 0.0
        """seconds each write spends on the CPU without blocking (a preempted write looks so)"""
        self.fail = False
        self.threads: list[str] = []


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowDisk]:
    state = SlowDisk()
    real = segment._pwritev

    def pwritev(fd: int, buffers: list[memoryview], offset: int) -> int:
        state.threads.append(threading.current_thread().name)
        if state.delay:
            time.sleep(state.delay)
        until = time.perf_counter() + state.busy
        while time.perf_counter() < until:
            pass
        if state.fail:
            raise OSError(errno.EIO, "Input/output error")
        return real(fd, buffers, offset)

    monkeypatch.setattr(segment, "_pwritev", pwritev)
    yield state


def prepare(log: UnifiedLog, count: int = 1, ts: int = NOW) -> PendingAppend:
    prepared = log.prepare_append_as_leader(batch(count, ts=ts), 0)
    assert isinstance(prepared, PendingAppend)
    return prepared


def file_size(log: UnifiedLog) -> int:
    return os.path.getsize(log.active_segment.log_path)


# -- the log's halves -------------------------------------------------------------------------------


def test_an_append_counts_only_when_completed(tmp_path: Path) -> None:
    log = open_log(tmp_path / "orders-0")
    log.append_as_leader(batch(2), 0)
    pending = prepare(log, 3)
    pending.write()
    assert log.log_end_offset == 2  # written, not yet counted: readers do not see it
    assert [offset for offset, _ in read_all(log)] == [0, 1]
    info = log.complete_append(pending)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (2, 4, 5)
    assert [offset for offset, _ in read_all(log)] == [0, 1, 2, 3, 4]


def test_an_abandoned_append_leaves_nothing_behind(tmp_path: Path) -> None:
    log = open_log(tmp_path / "orders-0")
    log.append_as_leader(batch(1), 0)
    size = file_size(log)
    pending = prepare(log, 3)
    pending.write()
    assert file_size(log) > size
    log.abandon_append(pending)
    assert (log.log_end_offset, file_size(log)) == (1, size)  # cut off: recovery cannot find it
    assert log.append_as_leader(batch(1, value=b"w"), 0).first_offset == 1
    log.close_handles()
    reopened = UnifiedLog.open(tmp_path / "orders-0", log.config, TP)  # no clean-shutdown marker
    try:
        assert read_all(reopened) == [(0, b"v0"), (1, b"w0")]
    finally:
        reopened.close_handles()


def test_a_failed_write_completes_with_a_storage_error_and_changes_nothing(tmp_path: Path, disk: SlowDisk) -> None:
    log = open_log(tmp_path / "orders-0")
    log.append_as_leader(batch(1), 0)
    size = file_size(log)
    disk.fail = True
    pending = prepare(log, 2)
    pending.write()
    with pytest.raises(KafkaError) as e:
        log.complete_append(pending)
    assert e.value.code == ErrorCode.kafka_storage_error
    assert (log.log_end_offset, file_size(log)) == (1, size)
    disk.fail = False
    assert log.append_as_leader(batch(1), 0).first_offset == 1


def test_nothing_else_changes_the_log_while_an_append_is_in_flight(tmp_path: Path) -> None:
    log = open_log(tmp_path / "orders-0", retention_ms=1)
    log.append_as_leader(batch(1, ts=0), 0)
    pending = prepare(log, ts=0)
    for change in (lambda: log.truncate_to(0), log.roll, lambda: log.prepare_append_as_leader(batch(1), 0)):
        with pytest.raises(RuntimeError, match="in flight"):
            change()
    assert log.delete_retention_segments(now_ms=10**13) == 0  # the expired active segment is not rolled
    assert len(log.segments) == 1
    with pytest.raises(KafkaError) as e:  # a close now is not clean, and happens when the append ends
        log.close()
    assert e.value.code == ErrorCode.kafka_storage_error
    assert not log.closed
    pending.write()
    log.complete_append(pending)
    assert log.closed and log.active_segment.closed


def test_a_log_deleted_while_its_append_is_written_is_deleted_when_it_ends(tmp_path: Path) -> None:
    log = open_log(tmp_path / "orders-0")
    pending = prepare(log)
    log.delete()
    assert (tmp_path / "orders-0").exists()  # the write still holds its descriptor
    pending.write()
    with pytest.raises(KafkaError):
        log.complete_append(pending)
    assert not (tmp_path / "orders-0").exists()


# -- the writer -------------------------------------------------------------------------------------


def leader(tmp_path: Path, log_writer: LogWriter) -> Partition:
    partition = Partition(TP, B1, open_log(tmp_path / "orders-0"), writer=log_writer)
    assert partition.make_leader(PartitionRegistration((B1, B2), (B1, B2), B1, LeaderEpoch(1), 1))
    return partition


def test_slow_writes_leave_the_loop(tmp_path: Path, disk: SlowDisk, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "samsa.log.writer")
    log_writer = LogWriter(threads=2)
    partition = leader(tmp_path, log_writer)
    other = Partition(TP, B1, open_log(tmp_path / "orders-1"), writer=log_writer)
    other.make_leader(PartitionRegistration((B1, B2), (B1, B2), B1, LeaderEpoch(1), 1))

    async def main() -> tuple[float, float]:
        await partition.append_records_to_leader(batch(1), 1)  # fast: inline
        assert disk.threads == [threading.main_thread().name] and not log_writer.threaded
        disk.delay = 0.15
        await partition.append_records_to_leader(batch(1), 1)  # slow, inline: the loop waits once
        assert log_writer.threaded
        gaps: list[float] = []

        async def ticker() -> None:
            last = time.monotonic()
            while True:
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        ticking = asyncio.create_task(ticker())
        started = time.monotonic()
        await asyncio.gather(  # two partitions at once: each waits for its own writes only
            *[p.append_records_to_leader(batch(1), 1) for p in (partition, other) for _ in range(3)]
        )
        elapsed = time.monotonic() - started
        ticking.cancel()
        return max(gaps), elapsed

    try:
        worst_gap, elapsed = asyncio.run(main())
    finally:
        log_writer.shutdown()
    assert worst_gap < 0.08, worst_gap  # the loop went on while the disk took 0.15 s a write
    assert elapsed < 0.15 * 3 + 0.15, elapsed  # 3 writes per partition, the partitions in parallel
    assert all(name.startswith("samsa-log-writer") for name in disk.threads[2:])
    assert partition.log_end_offset == 5 and other.log_end_offset == 3
    assert any("slow log write" in r.getMessage() for r in caplog.records)


def test_writes_come_back_to_the_loop_when_the_disk_is_fast_again(
    tmp_path: Path, disk: SlowDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "THREADED_FOR_S", 0.2)
    log_writer = LogWriter(threads=1)
    partition = leader(tmp_path, log_writer)

    async def main() -> None:
        disk.delay = SLOW_WRITE_S
        await partition.append_records_to_leader(batch(1), 1)
        assert log_writer.threaded
        disk.delay = 0.0
        await partition.append_records_to_leader(batch(1), 1)  # fast, but on a thread still
        await asyncio.sleep(0.25)
        assert not log_writer.threaded
        await partition.append_records_to_leader(batch(1), 1)

    try:
        asyncio.run(main())
    finally:
        log_writer.shutdown()
    assert disk.threads[1].startswith("samsa-log-writer")
    assert disk.threads[2] == threading.main_thread().name


@pytest.mark.skipif(writer._RUSAGE_THREAD is None, reason="the platform cannot tell a blocked thread (Linux can)")
def test_a_write_slow_without_blocking_stays_on_the_loop(tmp_path: Path, disk: SlowDisk) -> None:
    """Slow because the thread had no CPU (a busy machine), not because it waited on the disk."""
    log_writer = LogWriter(threads=1)
    partition = leader(tmp_path, log_writer)

    async def main() -> None:
        disk.busy = SLOW_WRITE_S
        await partition.append_records_to_leader(batch(1), 1)
        assert not log_writer.threaded
        disk.busy, disk.delay = 0.0, SLOW_WRITE_S
        await partition.append_records_to_leader(batch(1), 1)
        assert log_writer.threaded

    try:
        asyncio.run(main())
    finally:
        log_writer.shutdown()
    assert disk.threads == [threading.main_thread().name] * 2


# -- the partition: leadership and callers that go away ---------------------------------------------


def test_leadership_lost_during_the_write_drops_the_append(tmp_path: Path, disk: SlowDisk) -> None:
    log_writer = LogWriter(threads=1)
    partition = leader(tmp_path, log_writer)

    async def main() -> None:
        disk.delay = SLOW_WRITE_S
        await partition.append_records_to_leader(batch(1), 1)  # now on the thread
        disk.delay = 0.1
        append = asyncio.create_task(partition.append_records_to_leader(batch(2), 1))
        await asyncio.sleep(0.03)
        assert partition.make_follower(PartitionRegistration((B1, B2), (B1, B2), B2, LeaderEpoch(2), 2))
        with pytest.raises(KafkaError) as e:
            await append
        assert e.value.code == ErrorCode.not_leader_or_follower
        assert partition.log_end_offset == 1  # the bytes were written and dropped
        disk.delay = 0.0
        assert await partition.truncate_to(partition.log_end_offset) is False  # the log is free again

    try:
        asyncio.run(main())
    finally:
        log_writer.shutdown()


def test_a_caller_that_goes_away_leaves_no_append_in_flight(tmp_path: Path, disk: SlowDisk) -> None:
    log_writer = LogWriter(threads=1)
    partition = leader(tmp_path, log_writer)

    async def main() -> LogAppendInfo:
        disk.delay = SLOW_WRITE_S
        await partition.append_records_to_leader(batch(1), 1)
        disk.delay = 0.1
        append = asyncio.create_task(partition.append_records_to_leader(batch(2), 1))
        await asyncio.sleep(0.03)
        append.cancel()
        with pytest.raises(asyncio.CancelledError):
            await append
        assert partition.log_end_offset == 1
        disk.delay = 0.0
        return await partition.append_records_to_leader(batch(1), 1)

    try:
        info = asyncio.run(main())
    finally:
        log_writer.shutdown()
    assert info.first_offset == 1
