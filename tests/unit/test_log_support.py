"""Shared helpers for the storage tests (no tests here): batch builders and log openers."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log import LogConfig, UnifiedLog
from protocol.records import (
    BatchHeader,
    NewRecord,
    build_batch,
    decode_batch,
    iter_batch_headers,
)
from protocol.topic_partition import TopicPartition

TP = TopicPartition("orders", 0)
NOW = 1_700_000_000_000


def batch(
    count: int = 1,
    *,
    ts: int = NOW,
    value: bytes = b"v",
    key: bytes | None = b"k",
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    compression: int = 0,
) -> bytes:
    """One v2 batch of `count` records with timestamps ts, ts+1, ... and values value+index."""
    records = [NewRecord(key, value + str(i).encode(), timestamp=ts + i) for i in range(count)]
    return build_batch(
        records,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        compression=compression,  # type: ignore[arg-type]
    )


_opened: list[UnifiedLog] = []


@pytest.fixture(autouse=True)
def close_opened_logs() -> Iterator[None]:
    """Close the file handles of every log `open_log` opened (import it into a test module)."""
    yield
    while _opened:
        _opened.pop().close_handles()


def open_log(path: Path, **overrides: object) -> UnifiedLog:
    """Open a log in `path` with LogConfig overrides and a fixed clock."""
    config = dataclasses.replace(LogConfig(), **overrides)  # type: ignore[arg-type]
    log = UnifiedLog.open(path, config, TP, now_ms=NOW)
    _opened.append(log)
    return log


def headers_of(data: bytes) -> list[BatchHeader]:
    """Headers of every whole batch in `data` (a trailing partial batch is ignored)."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        header = BatchHeader.parse(data, pos)
        if pos + header.size > len(data):
            break
        out.append(header)
        pos += header.size
    return out


def read_all(
    log: UnifiedLog, start: int | None = None, max_offset: int | None = None
) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record from `start` (default log start) to `max_offset`."""
    offset = log.log_start_offset if start is None else start
    end = log.log_end_offset if max_offset is None else max_offset
    out: list[tuple[int, bytes | None]] = []
    while offset < end:
        info = log.read(offset, 1 << 20, end)
        if info.records is None:
            break
        data = info.records.read_bytes()
        advanced = False
        for pos, header in iter_batch_headers(data[: _whole(data)], check_crc=True):
            for record in decode_batch(data, pos):
                if record.offset >= offset:
                    out.append((record.offset, record.value))
            offset = header.next_offset
            advanced = True
        if not advanced:
            break
    return out


def _whole(data: bytes) -> int:
    return sum(h.size for h in headers_of(data))
