"""Storage faults under the log: ENOSPC, short writes, failed fsyncs and checkpoints, damaged
indexes, descriptors.

The write call of every segment (`broker.log.segment._pwritev`) is replaced by one that fails the
way a full disk does: a short write, then ENOSPC. The invariant checked throughout: an append either
counts every byte or changes nothing (file size, log end offset, producer state), and whatever was
acknowledged is read back, in order, before and after a reopen (clean and unclean).
"""

from __future__ import annotations

import errno
import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_log_support import NOW, TP, batch, close_opened_logs, open_log, read_all  # noqa: F401

from broker.log import LogConfig, UnifiedLog, segment
from broker.log.checkpoints import LeaderEpochCheckpointFile
from protocol.errors import ErrorCode, KafkaError

SEG = "00000000000000000000"


class Disk:
    """The fault switch: `free` bytes may still be written (None: unlimited), `fsync_fails`."""

    def __init__(self) -> None:
        self.free: int | None = None
        self.fsync_fails = False
        self.truncate_fails = False


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    state = Disk()
    real_pwritev, real_fdatasync, real_ftruncate = os.pwritev, os.fdatasync, os.ftruncate

    def pwritev(fd: int, buffers: list[memoryview], offset: int) -> int:
        if state.free is None:
            return real_pwritev(fd, buffers, offset)
        if state.free == 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        data = b"".join(bytes(b) for b in buffers)[: state.free]
        written = os.pwrite(fd, data, offset)  # a short write: what fits
        state.free -= written
        return written

    def fdatasync(fd: int) -> None:
        if state.fsync_fails:
            raise OSError(errno.EIO, "Input/output error")
        real_fdatasync(fd)

    def ftruncate(fd: int, length: int) -> None:
        if state.truncate_fails:
            raise OSError(errno.EIO, "Input/output error")
        real_ftruncate(fd, length)

    monkeypatch.setattr(segment, "_pwritev", pwritev)
    monkeypatch.setattr(segment.os, "fdatasync", fdatasync)
    monkeypatch.setattr(segment.os, "ftruncate", ftruncate)
    yield state


def _append_ok(log: UnifiedLog, count: int, value: bytes) -> list[int]:
    info = log.append_as_leader(batch(count, value=value), 0, now_ms=NOW)
    return list(range(info.first_offset, info.last_offset + 1))


def _storage_error(log: UnifiedLog, count: int = 3) -> None:
    before_size = (log.dir / f"{SEG}.log").stat().st_size
    before_end = log.log_end_offset
    with pytest.raises(KafkaError) as info:
        log.append_as_leader(batch(count, value=b"lost"), 0, now_ms=NOW)
    assert info.value.code == ErrorCode.kafka_storage_error
    assert log.log_end_offset == before_end
    assert log.active_segment.size == before_size


def test_short_write_then_enospc_is_cut_back_and_writes_resume(tmp_path: Path, disk: Disk) -> None:
    log = open_log(tmp_path / "p")
    acked = _append_ok(log, 5, b"a")
    disk.free = 30  # the next batch is written in part, then the disk is full
    _storage_error(log)
    assert (tmp_path / "p" / f"{SEG}.log").stat().st_size == log.active_segment.size
    _storage_error(log)
    disk.free = None  # space is back: the next append lands right after the last good one
    acked += _append_ok(log, 4, b"b")
    assert acked == list(range(9))
    assert [o for o, _ in read_all(log)] == acked
    log.close()
    for clean in (True, False):
        reopened = UnifiedLog.open(tmp_path / "p", LogConfig(), TP, now_ms=NOW, had_clean_shutdown=clean)
        assert [o for o, _ in read_all(reopened)] == acked
        assert reopened.log_end_offset == 9
        reopened.close_handles()


def test_leftover_of_a_failed_write_is_overwritten_then_cut(tmp_path: Path, disk: Disk) -> None:
    log = open_log(tmp_path / "p")
    acked = _append_ok(log, 3, b"a")
    good = log.active_segment.size
    disk.free, disk.truncate_fails = 40, True  # the cut-back fails too: garbage past `size`
    _storage_error(log)
    assert (tmp_path / "p" / f"{SEG}.log").stat().st_size == good + 40
    disk.free, disk.truncate_fails = None, False
    acked += _append_ok(log, 1, b"b")  # written at `size`, over the leftover
    assert [o for o, _ in read_all(log)] == acked
    log.close()  # cuts what is left of the leftover
    assert (tmp_path / "p" / f"{SEG}.log").stat().st_size == log.active_segment.size
    reopened = UnifiedLog.open(tmp_path / "p", LogConfig(), TP, now_ms=NOW, had_clean_shutdown=True)
    assert [o for o, _ in read_all(reopened)] == acked
    reopened.close_handles()


def test_crash_after_a_failed_write_recovers_every_acknowledged_batch(
    tmp_path: Path, disk: Disk
) -> None:
    log = open_log(tmp_path / "p")
    acked = _append_ok(log, 3, b"a")
    disk.free, disk.truncate_fails = 40, True
    _storage_error(log)
    log.close_handles()  # kill -9: no close, the partial batch stays in the file
    recovered = UnifiedLog.open(tmp_path / "p", LogConfig(), TP, now_ms=NOW, had_clean_shutdown=False)
    assert [o for o, _ in read_all(recovered)] == acked
    recovered.close_handles()


def test_failed_fsync_with_flush_messages_appends_nothing(tmp_path: Path, disk: Disk) -> None:
    log = open_log(tmp_path / "p", flush_messages=1)
    acked = _append_ok(log, 2, b"a")
    assert log.recovery_point == 2
    disk.fsync_fails = True
    _storage_error(log)
    assert log.recovery_point == 2
    disk.fsync_fails = False
    acked += _append_ok(log, 2, b"b")
    assert [o for o, _ in read_all(log)] == acked and log.recovery_point == 4


def test_epoch_checkpoint_failure_keeps_the_recovery_point_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(tmp_path / "p")
    _append_ok(log, 2, b"a")
    log.flush()
    real_write = LeaderEpochCheckpointFile.write

    def full(self: LeaderEpochCheckpointFile, entries: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LeaderEpochCheckpointFile, "write", full)
    with caplog.at_level(logging.WARNING, logger="samsa.log"):
        info = log.append_as_leader(batch(2, value=b"e1"), 1, now_ms=NOW)  # a new leader epoch
        assert info.first_offset == 2  # the append itself succeeds
        with pytest.raises(KafkaError) as error:
            log.flush()
    assert error.value.code == ErrorCode.kafka_storage_error
    assert log.recovery_point == 2  # never past an epoch the checkpoint file does not have
    assert sum("leader epoch checkpoint write failed" in r.message for r in caplog.records) == 1
    monkeypatch.setattr(LeaderEpochCheckpointFile, "write", real_write)
    log.flush()
    assert log.recovery_point == 4
    assert LeaderEpochCheckpointFile(tmp_path / "p" / "leader-epoch-checkpoint").read() == [(0, 0), (1, 2)]


def test_close_that_cannot_write_its_indexes_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(tmp_path / "p", index_interval_bytes=1)
    for i in range(5):
        _append_ok(log, 1, b"%d" % i)

    def full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment.os, "pwrite", full)
    with pytest.raises(KafkaError) as error:
        log.close()
    assert error.value.code == ErrorCode.kafka_storage_error
    assert log.closed


def _flip_index_position(path: Path, entry: int, delta: int) -> None:
    data = bytearray(path.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, entry * 8)
    struct.pack_into(">ii", data, entry * 8, rel, pos + delta)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("delta", [1, -1])
def test_an_index_that_lies_never_makes_a_read_skip(
    tmp_path: Path, delta: int, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(tmp_path / "p", index_interval_bytes=1)
    for i in range(40):
        _append_ok(log, 3, b"%d-" % i)
    expected = read_all(log)
    log.close()
    index = tmp_path / "p" / f"{SEG}.index"
    # a position moved by one byte: still increasing, still inside the log, so it passes the
    # load checks, but the entry no longer points at the start of its batch
    _flip_index_position(index, 20, delta * 7)
    reopened = UnifiedLog.open(tmp_path / "p", LogConfig(index_interval_bytes=1), TP, now_ms=NOW,
                               had_clean_shutdown=True)  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="samsa.log"):
        for start in range(120):
            got = read_all(reopened, start)
            assert got == [r for r in expected if r[0] >= start], f"read from {start} skipped records"
    assert sum("offset index does not match its log" in r.message for r in caplog.records) == 1
    reopened.close_handles()


def test_an_index_out_of_order_is_rebuilt_on_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = open_log(tmp_path / "p", index_interval_bytes=1, segment_bytes=2000)
    for i in range(60):
        _append_ok(log, 2, b"%d" % i)
    expected = read_all(log)
    assert len(log.segments) > 2
    log.close()
    index = tmp_path / "p" / f"{SEG}.index"
    data = bytearray(index.read_bytes())
    data[8 * 3 + 5] ^= 0x40  # one flipped byte in the position of an entry in the middle
    index.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="samsa.log"):
        reopened = UnifiedLog.open(tmp_path / "p", LogConfig(index_interval_bytes=1, segment_bytes=2000),
                                   TP, now_ms=NOW, had_clean_shutdown=True)  # fmt: skip
    assert any("rebuilding index" in r.message for r in caplog.records)
    assert read_all(reopened) == expected
    reopened.close_handles()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_idle_segments_hold_no_file_descriptors(tmp_path: Path) -> None:
    for p in range(20):
        log = open_log(tmp_path / f"t-{p}", segment_bytes=300)
        for i in range(10):
            _append_ok(log, 2, b"%d" % i)
        log.close()
    before = _open_fds()
    logs = [
        UnifiedLog.open(tmp_path / f"t-{p}", LogConfig(segment_bytes=300), TP, now_ms=NOW, had_clean_shutdown=True)
        for p in range(20)
    ]
    assert sum(len(lg.segments) for lg in logs) > 40
    assert _open_fds() == before  # loading opens nothing it keeps
    _append_ok(logs[0], 1, b"x")
    assert _open_fds() == before + 1  # the active segment's write descriptor
    read_all(logs[1])
    assert _open_fds() > before + 1  # readers open on first read
    for lg in logs:
        lg.close()
    assert _open_fds() == before


def test_truncate_fully_to_the_active_segments_own_base(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p", segment_bytes=300)
    for i in range(6):
        _append_ok(log, 2, b"%d" % i)
    log.roll(now_ms=NOW)
    base = log.active_segment.base_offset
    assert log.active_segment.size == 0
    log.truncate_fully_and_start_at(base)  # the new segment has the name of a doomed one
    assert log.log_start_offset == log.log_end_offset == base
    assert _append_ok(log, 1, b"after") == [base]
    log.close()
    reopened = UnifiedLog.open(tmp_path / "p", LogConfig(segment_bytes=300), TP, now_ms=NOW,
                               had_clean_shutdown=True, log_start_offset=base)  # fmt: skip
    assert [o for o, _ in read_all(reopened)] == [base]
    reopened.close_handles()
