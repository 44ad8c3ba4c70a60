"""Opening a partition directory: tidy leftovers, load segments, recover what was not flushed.

Kafka's LogLoader, step by step:

1. Remove leftovers: `*.deleted` (deletion was scheduled), `*.cleaned` (unfinished compaction),
   `*.new` (a segment created to replace all others, before its rename), `*.tmp` (unfinished
   checkpoint writes) and index files without a `.log`. A `.swap` segment is a finished compaction
   output: the segments it replaces are removed and it takes their place.
2. Open every `<20 digits>.log` segment. After a clean shutdown (the log dir held
   `.kafka_cleanshutdown`) every index is used after a sanity check (size a multiple of the entry,
   entries increasing, the last one inside the segment), and the last segment's tail, from its last
   index entry to the end of the file, must be whole CRC-valid batches; otherwise each segment
   holding offsets at or after the recovery point is recovered: scanned batch by batch (header,
   size, offsets, CRC-32C), its indexes rebuilt and any torn or corrupt tail cut off together with
   every later segment. An index that fails its check is rebuilt from its log; a last segment whose
   tail is not whole after a clean shutdown is recovered like after an unclean one, with one log
   line.
3. An empty directory gets one empty segment at the log start offset.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from broker.config import LogConfig
from broker.log.index import IndexCorruptError
from broker.log.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from broker.log.txn_index import TXN_INDEX_SUFFIX
from protocol.errors import CorruptRecordError
from protocol.records import HEADER_SIZE, BatchHeader
from protocol.topic_partition import TopicPartition

log = logging.getLogger("samsa.log")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
NEW_SUFFIX = ".new"
"""A segment created to replace every other one (truncate_fully_and_start_at) before its rename."""
PROGRESS_BYTES = 64 << 20
PROGRESS_SECONDS = 1.0


@dataclass(slots=True)
class LoadedSegments:
    """What loading found: the segments in order and the recovery point to use from now on."""

    segments: list[LogSegment]
    recovery_point: int
    truncated_bytes: int
    recovered: list[LogSegment]
    """Segments scanned by recovery (their aborted-transaction indexes are to be rebuilt)."""


def _base_offset_of(name: str, suffix: str) -> int | None:
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def remove_leftovers(log_dir: Path) -> None:
    """Step 1: delete temporary files and complete or discard swaps."""
    names = set(os.listdir(log_dir))
    for name in sorted(names):
        path = log_dir / name
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, NEW_SUFFIX, ".tmp")):
            log.info("removing leftover file path=%s", path)
            _unlink(path)
    names = set(os.listdir(log_dir))
    for name in sorted(names):
        if name.endswith(SWAP_SUFFIX):
            _complete_swap(log_dir, name)
    names = set(os.listdir(log_dir))
    for name in sorted(names):
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            base = _base_offset_of(name, suffix)
            if base is not None and f"{base:020d}{LOG_SUFFIX}" not in names:
                log.info("removing index without segment path=%s", log_dir / name)
                _unlink(log_dir / name)


def _complete_swap(log_dir: Path, name: str) -> None:
    inner = name[: -len(SWAP_SUFFIX)]
    base = _base_offset_of(inner, LOG_SUFFIX)
    if base is None:
        txn_base = _base_offset_of(inner, TXN_INDEX_SUFFIX)
        if txn_base is not None and (log_dir / f"{txn_base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}").exists():
            return  # completed with its log's swap, below
        _unlink(log_dir / name)  # an index swap: the index is rebuilt from the swapped log anyway
        return
    swap_path = log_dir / name
    size = swap_path.stat().st_size
    next_offset = base
    with open(swap_path, "rb") as f:  # headers only: a swap may be as large as a segment
        pos = 0
        while pos + HEADER_SIZE <= size:
            try:
                header = BatchHeader.parse(os.pread(f.fileno(), HEADER_SIZE, pos), 0)
            except CorruptRecordError:
                break
            if pos + header.size > size:
                break
            next_offset = header.next_offset
            pos += header.size
    for other in sorted(os.listdir(log_dir)):
        other_base = _base_offset_of(other, LOG_SUFFIX)
        if other_base is not None and base <= other_base < next_offset:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                _unlink(log_dir / f"{other_base:020d}{suffix}")
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        _unlink(log_dir / f"{base:020d}{suffix}")
    txn_swap = log_dir / f"{base:020d}{TXN_INDEX_SUFFIX}{SWAP_SUFFIX}"
    if txn_swap.exists():  # the cleaned segment's aborted transactions
        os.replace(txn_swap, log_dir / f"{base:020d}{TXN_INDEX_SUFFIX}")
    os.replace(swap_path, log_dir / inner)
    log.info(
        "completed segment swap dir=%s base_offset=%d next_offset=%d", log_dir, base, next_offset
    )


def load_segments(
    log_dir: Path,
    config: LogConfig,
    topic_partition: TopicPartition,
    *,
    recovery_point: int,
    had_clean_shutdown: bool,
    log_start_offset: int,
    now_ms: int,
    on_recovered_batch: Callable[[BatchHeader], None],
) -> LoadedSegments:
    """Steps 2 and 3; `on_recovered_batch` sees every batch of every recovered segment."""
    remove_leftovers(log_dir)
    bases = sorted(
        b for b in (_base_offset_of(n, LOG_SUFFIX) for n in os.listdir(log_dir)) if b is not None
    )
    segments = [LogSegment(log_dir, base, config, created_ms=now_ms) for base in bases]
    if not segments:
        segment = LogSegment(log_dir, log_start_offset, config, created_ms=now_ms)
        return LoadedSegments([segment], log_start_offset, 0, [])

    to_recover: list[int] = []
    for i, segment in enumerate(segments):
        is_last = i == len(segments) - 1
        upper = segments[i + 1].base_offset if not is_last else None
        unflushed = upper is None or upper > recovery_point
        if not had_clean_shutdown and unflushed:
            to_recover.append(i)
            continue
        try:
            segment.load_indexes(next_base_offset=upper)
        except IndexCorruptError as exc:
            log.warning(
                "rebuilding index topic=%s partition=%d segment=%d reason=%s",
                topic_partition.topic,
                topic_partition.partition,
                segment.base_offset,
                exc,
            )
            if is_last:  # rebuilt by recovery, which also checks the tail
                to_recover.append(i)
                continue
            segment.rebuild_indexes()
            _write_indexes(segment)
        if is_last and not segment.tail_is_whole():
            log.warning(
                "log tail not whole after a clean shutdown, recovering topic=%s partition=%d "
                "segment=%d size=%d",
                topic_partition.topic, topic_partition.partition, segment.base_offset, segment.size,
            )  # fmt: skip
            to_recover.append(i)
            continue
        if is_last:
            segment.next_offset = segment.read_next_offset()
        else:
            segment.next_offset = segments[i + 1].base_offset

    truncated = 0
    if to_recover:
        truncated, kept = _recover(segments, to_recover, topic_partition, on_recovered_batch)
        for dead in segments[kept:]:
            dead.delete_files()
        segments = segments[:kept]
        if not segments:
            segments = [LogSegment(log_dir, log_start_offset, config, created_ms=now_ms)]
    log_end = segments[-1].next_offset
    trusted = had_clean_shutdown and not to_recover
    new_recovery_point = log_end if trusted else min(recovery_point, log_end)
    recovered = [segments[i] for i in to_recover if i < len(segments)]
    return LoadedSegments(segments, new_recovery_point, truncated, recovered)


def _recover(
    segments: list[LogSegment],
    to_recover: list[int],
    tp: TopicPartition,
    on_batch: Callable[[BatchHeader], None],
) -> tuple[int, int]:
    """Recover the given segments in order; returns (bytes truncated, number of segments kept)."""
    total = sum(segments[i].size for i in to_recover) or 1
    done = 0
    last_log = [time.monotonic(), 0]
    started = time.monotonic()

    for i in to_recover:
        segment = segments[i]

        def progress(position: int, segment: LogSegment = segment, done: int = done) -> None:
            current = done + position
            now = time.monotonic()
            if current - last_log[1] >= PROGRESS_BYTES or now - last_log[0] >= PROGRESS_SECONDS:
                last_log[0], last_log[1] = now, current
                log.info(
                    "log recovery topic=%s partition=%d segment=%d progress=%d%%",
                    tp.topic,
                    tp.partition,
                    segment.base_offset,
                    current * 100 // total,
                )

        size_before = segment.size
        truncated = segment.recover(
            check_crc=True, on_batch=lambda _pos, h: on_batch(h), progress=progress
        )
        _write_indexes(segment)
        done += size_before
        if truncated > 0 or (
            i + 1 < len(segments) and segment.next_offset > segments[i + 1].base_offset
        ):
            later = len(segments) - i - 1
            log.warning(
                "log recovery truncated a corrupt tail topic=%s partition=%d segment=%d "
                "truncated_bytes=%d next_offset=%d deleted_later_segments=%d",
                tp.topic,
                tp.partition,
                segment.base_offset,
                truncated,
                segment.next_offset,
                later,
            )
            return truncated, i + 1
        if i + 1 < len(segments):
            segment.next_offset = segments[i + 1].base_offset
    # always said, like Kafka's "Recovering unflushed segment": an operator (and the crash test)
    # must be able to see that an unclean shutdown was recovered from
    log.info(
        "log recovery done topic=%s partition=%d segments=%d bytes=%d seconds=%.3f",
        tp.topic,
        tp.partition,
        len(to_recover),
        done,
        time.monotonic() - started,
    )
    return 0, len(segments)


def _write_indexes(segment: LogSegment) -> None:
    """Write rebuilt indexes now (best effort: a failure leaves them to the next flush)."""
    try:
        segment.index.flush()
        segment.time_index.flush()
    except OSError as exc:
        log.warning("writing rebuilt index failed log=%s error=%s", segment.log_path, exc)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
