# Over 700 lines: a segment owns its log file and its three indexes (offset, time, aborted
# transactions), which roll, truncate, rename and delete together.
"""`LogSegment`: one `.log` file of whole record batches plus its offset and time indexes.

Files (base offset as 20 digits): `00000000000000000000.log`, `.index`, `.timeindex`. `size` is
the segment's accounted length: every byte below it belongs to a whole, indexed batch, and every
read and index entry stays below it. A write goes with `pwritev` at `size` (never O_APPEND), and
`size` moves only once every byte is written; a failed or short write (ENOSPC, EIO) cuts the file
back to `size` and raises, so the log never holds bytes it does not account for, and if even the
cut fails the next write lands at `size` over the leftover and the file is cut at roll and close.

Descriptors are opened on first use: a write descriptor while the segment is active, a read-only
file object (for `pread` and `sendfile`) once something reads it. A partition that is neither
written nor read holds none, so thousands of partitions fit in the open-file limit. Segments are
synchronous and owned by one `UnifiedLog`.
"""

from __future__ import annotations

import errno
import logging
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from broker.config import INT_MAX, LogConfig
from broker.log.index import IndexCorruptError, OffsetIndex, TimeIndex
from broker.log.info import (
    FetchDataInfo,
    FileRecords,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from broker.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from protocol.control import EndTxnMarker, read_end_txn_marker
from protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from protocol.records import HEADER_SIZE, BatchHeader, decode_records, verify_crc
from protocol.types import Offset

log = logging.getLogger("samsa.log")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
_FIRST_WINDOW = 8 << 10
_MAX_WINDOW = 1 << 20
_IOV_MAX = 1024


def segment_file_name(base_offset: int, suffix: str) -> str:
    """`00000000000000000042.log` and friends."""
    return f"{base_offset:020d}{suffix}"


class _IndexMismatch(Exception):
    """A lookup found a batch other than the one the offset index names, or none that parses."""


@dataclass(frozen=True, slots=True)
class AppendedBatch:
    """Where one batch of an append lands and what the indexes need to know about it."""

    size: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int


class LogSegment:
    """One segment: its files, its in-memory indexes and the facts needed for roll and retention."""

    def __init__(
        self,
        log_dir: Path,
        base_offset: int,
        config: LogConfig,
        *,
        created_ms: int,
        file_suffix: str = "",
    ) -> None:
        """`file_suffix` (e.g. `.cleaned`) is appended to all three file names; the log cleaner
        writes its output under a suffix and renames it with `change_file_suffixes`."""
        self.dir = log_dir
        self.base_offset = base_offset
        self.created_ms = created_ms
        self.log_path = log_dir / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        self.index = OffsetIndex(
            log_dir / (segment_file_name(base_offset, INDEX_SUFFIX) + file_suffix),
            base_offset,
            config.max_offset_index_entries,
        )
        self.time_index = TimeIndex(
            log_dir / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix),
            base_offset,
            config.max_time_index_entries,
        )
        self.txn_index = TransactionIndex(
            log_dir / (segment_file_name(base_offset, TXN_INDEX_SUFFIX) + file_suffix)
        )
        """The aborted transactions whose ABORT marker lies in this segment."""
        fd = os.open(self.log_path, os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            self.size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        self._writer: int | None = None
        self._reader: BinaryIO | None = None
        self._unsynced = self.size > 0
        """Bytes or a truncation since the last fsync (a loaded segment may have unsynced bytes)."""
        self._tail_garbage = False
        """The file may extend past `size`: a failed write whose cut-back failed too."""
        self.writing = False
        """A `write` may be in flight on another thread (set and cleared by the log, on the loop)."""
        self.next_offset = base_offset
        """One past the last offset in this segment (kept current by append/recover/truncate)."""
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = base_offset
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self.index_interval_bytes = config.index_interval_bytes
        jitter = min(config.segment_jitter_ms, config.max_segment_ms)
        self.roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
        """Kafka's per-segment random share of segment.jitter.ms, so segments do not all roll at once."""
        self.closed = False

    # --------------------------------------------------------------- load paths
    def load_indexes(self, *, next_base_offset: int | None = None) -> None:
        """Read the index files of a flushed segment (`next_base_offset`: the next segment's base,
        None for the last segment); raises IndexCorruptError if they fail their sanity checks."""
        self.index.load(self.size)
        self.time_index.load(next_base_offset)
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = (
            self.time_index.last_entry()
        )

    def rebuild_indexes(self) -> None:
        """Scan the log file (headers only) and rebuild both indexes, without cutting anything:
        a corrupt batch ends the indexing, the bytes stay where they are."""
        self._scan_and_index(check_crc=False)

    def recover(
        self,
        *,
        check_crc: bool = True,
        on_batch: Callable[[int, BatchHeader], None] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Rebuild indexes from the log; stop at the first torn or corrupt batch and cut it off.

        Returns the number of bytes truncated. `on_batch(position, header)` sees every valid batch
        (leader epoch cache, producer state); `progress(position)` is called now and then.
        """
        self.txn_index.reset()  # rebuilt by the log's producer state replay
        valid, expected = self._scan_and_index(
            check_crc=check_crc, on_batch=on_batch, progress=progress
        )
        truncated = self.size - valid
        if truncated > 0:
            os.truncate(self.log_path, valid)
            self.size = valid
            self._unsynced = True
        self.next_offset = expected
        return truncated

    def tail_is_whole(self) -> bool:
        """After a clean shutdown: whether the bytes from the last index entry to the end of the
        file are whole, CRC-valid batches (the last index entry itself pointing at a batch that
        ends exactly at its offset). False means recover this segment."""
        entry_offset, position = self.index.lookup(Offset(1 << 62))
        try:
            for i, (_, header, batch) in enumerate(self._iter_batches(position, check_crc=True)):
                if i == 0 and len(self.index) and header.last_offset != entry_offset:
                    return False
                if batch is not None and not verify_crc(batch, 0, header):
                    return False
        except CorruptRecordError:
            return False
        return True

    def _scan_and_index(
        self,
        *,
        check_crc: bool,
        on_batch: Callable[[int, BatchHeader], None] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> tuple[int, int]:
        """Reset and rebuild both indexes from the batches, up to the first torn or corrupt one;
        returns (end position of the last valid batch, the offset after it)."""
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = -1, self.base_offset
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        valid = 0
        expected = self.base_offset
        try:
            for pos, header, batch in self._iter_batches(0, check_crc=check_crc):
                if header.base_offset < expected or header.last_offset < header.base_offset:
                    raise CorruptRecordError(
                        f"batch at {pos} has offsets {header.base_offset}..{header.last_offset}, expected >= {expected}"
                    )
                if header.last_offset - self.base_offset > INT_MAX:
                    raise CorruptRecordError(
                        f"batch at {pos} offset {header.last_offset} does not fit the segment"
                    )
                if check_crc and batch is not None and not verify_crc(batch, 0, header):
                    raise CorruptRecordError(f"batch at {pos} failed its CRC check")
                self._index_batch(
                    pos, header.size, header.last_offset, header.max_timestamp, header.last_offset
                )
                expected = header.next_offset
                valid = pos + header.size
                if on_batch is not None:
                    on_batch(pos, header)
                if progress is not None:
                    progress(valid)
        except CorruptRecordError as exc:
            log.warning(
                "corrupt record batch found log=%s position=%d error=%s", self.log_path, valid, exc
            )
        return valid, expected

    # ------------------------------------------------------------------ append
    def append(
        self,
        buffers: Sequence[bytes | bytearray | memoryview],
        batches: Sequence[AppendedBatch],
        *,
        sync: bool = False,
    ) -> None:
        """Write the batches' bytes (as given in `buffers`) at `size` and index them; with `sync`
        the bytes are fsynced before they count.

        Raises OSError with nothing changed: a failed or short write (or fsync) is cut back to
        `size` before the error goes up.
        """
        self.open_for_write()
        self.write(buffers, sum(b.size for b in batches), sync=sync)
        self.account(batches, sync=sync)

    def write(
        self, buffers: Sequence[bytes | bytearray | memoryview], total: int, *, sync: bool = False
    ) -> None:
        """The I/O half of `append`, which may run on another thread: the bytes at `size` (and
        fdatasync with `sync`); nothing in memory changes. Raises OSError after cutting a failed
        write back to `size`. The write descriptor must be open (`open_for_write`), and nothing
        else may write, cut, roll or close this segment until `account` (the log sees to it)."""
        fd = self._writer
        if fd is None:
            raise ValueError(f"segment {self.log_path} is not open for writing")
        try:
            _pwritev_all(fd, buffers, self.size, total)
            if sync:
                os.fdatasync(fd)
        except OSError:
            self._cut_back(fd)
            raise

    def account(self, batches: Sequence[AppendedBatch], *, sync: bool = False) -> None:
        """The bookkeeping half of `append`, once `write` succeeded: index the batches and move
        `size` past them."""
        self._unsynced = not sync
        pos = self.size
        for batch in batches:
            self._index_batch(
                pos,
                batch.size,
                batch.last_offset,
                batch.max_timestamp,
                batch.offset_of_max_timestamp,
            )
            pos += batch.size
            self.next_offset = batch.last_offset + 1
        self.size = pos

    def discard_write(self) -> None:
        """A `write` whose batches will not be accounted (the log abandoned the append): cut its
        bytes off again."""
        if self._writer is not None:
            self._cut_back(self._writer)

    def _index_batch(
        self, pos: int, size: int, last_offset: int, max_ts: int, offset_of_max_ts: int
    ) -> None:
        if pos == 0:
            self._rolling_based_timestamp = max_ts
        if max_ts > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_ts
            self.offset_of_max_timestamp_so_far = offset_of_max_ts
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.index.append(last_offset, pos)
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
            )
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    # ------------------------------------------------------------- descriptors
    @property
    def reader(self) -> BinaryIO:
        """The read-only file object (opened on first use, kept until close)."""
        if self._reader is None:
            if self.closed:
                raise ValueError(f"segment {self.log_path} is closed")
            self._reader = open(self.log_path, "rb", buffering=0)  # noqa: SIM115
        return self._reader

    def open_for_write(self) -> None:
        """Open the write descriptor now (on the loop), before a `write` that may run elsewhere."""
        self._write_fd()

    def _write_fd(self) -> int:
        if self._writer is None:
            if self.closed:
                raise ValueError(f"segment {self.log_path} is closed")
            self._writer = os.open(self.log_path, os.O_WRONLY)
        return self._writer

    def _cut_back(self, fd: int) -> None:
        """Remove whatever a failed write left past `size` (best effort: remembered if it fails)."""
        try:
            os.ftruncate(fd, self.size)
        except OSError:
            self._tail_garbage = True

    def _trim_tail(self) -> None:
        """Cut a leftover of a failed write off the file (roll, flush and close); not while a
        write is in flight (`writing`): its bytes lie past `size` too."""
        if self._tail_garbage and not self.writing:
            os.truncate(self.log_path, self.size)
            self._tail_garbage = False
            self._unsynced = True

    def _close_writer(self) -> None:
        if self._writer is not None:
            fd, self._writer = self._writer, None
            os.close(fd)

    # ------------------------------------------------------------------- reads
    def iter_headers(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch from `start_position` (no CRC check)."""
        for pos, header, _ in self._iter_batches(start_position, check_crc=False):
            yield pos, header

    def iter_producer_batches(
        self, start_position: int = 0
    ) -> Iterator[tuple[BatchHeader, EndTxnMarker | None]]:
        """(header, marker) of each whole batch that carries a producer id, from
        `start_position`; a control batch's COMMIT or ABORT marker is read (None for data
        batches and empty or unreadable control batches). What producer state replays."""
        for pos, header, batch in self._iter_batches(start_position, check_crc=False, with_control=True):
            if header.producer_id < 0:
                continue
            marker = None
            if header.is_control and batch is not None:
                try:
                    marker = read_end_txn_marker(batch, 0, header)
                except CorruptRecordError as exc:
                    log.warning("unreadable control batch log=%s position=%d error=%s", self.log_path, pos, exc)
            yield header, marker

    def _iter_batches(
        self, start: int, *, check_crc: bool, with_control: bool = False
    ) -> Iterator[tuple[int, BatchHeader, bytes | memoryview | None]]:
        """Scan batches; with check_crc each batch's bytes are returned too (with with_control,
        those of control batches). Stops at a torn tail.

        Without an open reader (loading, recovery) the scan uses a descriptor of its own, closed
        with the scan, so loading thousands of partitions keeps no descriptor open."""
        if self._reader is not None:
            yield from self._scan(self._reader.fileno(), start, check_crc, with_control)
            return
        fd = os.open(self.log_path, os.O_RDONLY)
        try:
            yield from self._scan(fd, start, check_crc, with_control)
        finally:
            os.close(fd)

    def _scan(
        self, fd: int, start: int, check_crc: bool, with_control: bool = False
    ) -> Iterator[tuple[int, BatchHeader, bytes | memoryview | None]]:
        end = self.size
        window = b""
        window_start = start
        window_size = _FIRST_WINDOW  # small for lookups, growing for long scans
        pos = start
        while pos + HEADER_SIZE <= end:
            if pos + HEADER_SIZE > window_start + len(window):
                window_start = pos
                window = os.pread(fd, min(window_size, end - pos), pos)
                window_size = min(window_size * 2, _MAX_WINDOW)
            header = BatchHeader.parse(window, pos - window_start)
            if pos + header.size > end:
                raise CorruptRecordError(
                    f"batch at {pos} truncated: needs {header.size} bytes, {end - pos} left"
                )
            batch: bytes | memoryview | None = None
            if check_crc or (with_control and header.is_control):
                rel = pos - window_start
                if rel + header.size <= len(window):
                    batch = memoryview(window)[rel : rel + header.size]
                else:
                    batch = os.pread(fd, header.size, pos)
            yield pos, header, batch
            pos += header.size
        if pos < end:
            raise CorruptRecordError(
                f"{end - pos} trailing bytes at {pos} are not a whole batch header"
            )

    def translate_offset(
        self, offset: int, start_position: int = 0
    ) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= `offset`, as (position, header); None if none.

        The offset index is checked as it is used: the batch at an entry's position must end at
        the entry's offset. An index that lies (a damaged file that passed the load checks) is
        rebuilt from the log, with one log line, and the lookup repeated, so no read ever skips a
        record. A batch that does not parse on the way raises CORRUPT_MESSAGE.
        """
        try:
            return self._translate(offset, start_position)
        except _IndexMismatch:
            log.warning(
                "offset index does not match its log, rebuilding log=%s offset=%d",
                self.log_path, offset,
            )  # fmt: skip
        self.rebuild_indexes()
        try:
            return self._translate(offset, start_position)
        except _IndexMismatch:
            raise KafkaError(
                ErrorCode.corrupt_message,
                f"record batches of {self.log_path} do not parse before offset {offset}",
            ) from None

    def _translate(self, offset: int, start_position: int) -> tuple[int, BatchHeader] | None:
        """translate_offset's scan; _IndexMismatch when the index lied or a batch did not parse."""
        entry_offset, index_pos = self.index.lookup(offset)
        check_entry = index_pos > 0 or entry_offset != self.base_offset
        start = max(index_pos, start_position)
        try:
            for pos, header in self.iter_headers(start):
                if check_entry and pos == index_pos and header.last_offset != entry_offset:
                    raise _IndexMismatch
                check_entry = False
                if header.last_offset >= offset:
                    return pos, header
        except CorruptRecordError:
            raise _IndexMismatch from None
        return None

    def read_next_offset(self) -> int:
        """Scan from the last index entry to the end for the next offset (Kafka's readNextOffset)."""
        _, pos = self.index.lookup(Offset(1 << 62))
        next_offset = self.base_offset
        try:
            for _, header in self.iter_headers(pos):
                next_offset = header.next_offset
        except CorruptRecordError:
            pass
        return next_offset

    def read(
        self, start_offset: int, max_size: int, max_position: int | None, min_one_message: bool
    ) -> FetchDataInfo | None:
        """Kafka's LogSegment.read: bytes from the batch holding `start_offset`; None if beyond."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, header = found
        metadata = LogOffsetMetadata(Offset(start_offset), Offset(self.base_offset), position)
        adjusted = max(max_size, header.size) if min_one_message else max_size
        limit = self.size if max_position is None else max_position
        if adjusted == 0 or limit <= position:
            return FetchDataInfo(
                Offset(start_offset), None, metadata, first_entry_incomplete=adjusted < header.size
            )
        fetch_size = min(limit - position, adjusted)
        if fetch_size < header.size and not min_one_message:
            return FetchDataInfo(Offset(start_offset), None, metadata, first_entry_incomplete=True)
        return FetchDataInfo(
            Offset(start_offset), FileRecords(self.reader, position, fetch_size), metadata
        )

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        """The whole batch at `position`."""
        return os.pread(self.reader.fileno(), header.size, position)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record with timestamp >= `timestamp` and offset >= `starting_offset`."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, position = self.index.lookup(max(ts_offset, starting_offset))
        for pos, header in self.iter_headers(position):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            for record in decode_records(self.read_batch(pos, header), 0, header):
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return TimestampAndOffset(
                        record.timestamp, record.offset, header.partition_leader_epoch
                    )
        return None

    # ------------------------------------------------------------------- roll
    def rolling_based_timestamp(self) -> int | None:
        """maxTimestamp of the first batch (loaded lazily), the clock segment.ms rolls by."""
        if self._rolling_based_timestamp is None and self.size > 0:
            for _, header in self.iter_headers(0):
                self._rolling_based_timestamp = header.max_timestamp
                break
        return self._rolling_based_timestamp

    def should_roll(
        self,
        config: LogConfig,
        incoming_size: int,
        max_timestamp: int,
        max_offset: int,
        now_ms: int,
    ) -> bool:
        """Kafka's LogSegment.shouldRoll."""
        if self.size == 0:
            return False
        first_ts = self.rolling_based_timestamp()
        waited = (
            max_timestamp - first_ts
            if first_ts is not None and first_ts >= 0
            else now_ms - self.created_ms
        )
        return (
            self.size > config.segment_bytes - incoming_size
            or waited > config.max_segment_ms - self.roll_jitter_ms
            or self.index.is_full
            or self.time_index.is_full
            or max_offset - self.base_offset > INT_MAX
        )

    @property
    def unsynced(self) -> bool:
        """Bytes were written to the log file since its last fsync."""
        return self._unsynced

    def on_become_inactive(self) -> None:
        """Called when a newer segment takes over: pin the final max timestamp in the time index,
        cut a leftover of a failed write, and let the write descriptor go."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        try:
            self._trim_tail()
        except OSError as exc:
            log.warning("cutting a failed write off failed log=%s error=%s", self.log_path, exc)
        self._close_writer()

    @property
    def largest_timestamp(self) -> int:
        """The retention clock: max record timestamp, or the file's mtime when there is none."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    # --------------------------------------------------------------- mutation
    def truncate_to(self, offset: int) -> int:
        """Cut off every batch from the one holding `offset` on; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, _ = found
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self.size - position
        os.truncate(self.log_path, position)
        self.size = position
        self._tail_garbage = False
        self._unsynced = True
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = (
            self.time_index.last_entry()
        )
        self.bytes_since_last_index_entry = 0
        if position == 0:
            self._rolling_based_timestamp = None
        self.next_offset = self.read_next_offset()
        return removed

    def flush(self) -> None:
        """fsync the log (if anything changed since the last fsync) and write and fsync both
        indexes; raises OSError."""
        self._trim_tail()
        if self._unsynced:
            fd = self._writer if self._writer is not None else os.open(self.log_path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                if fd != self._writer:
                    os.close(fd)
            self._unsynced = False
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def rename_suffix(self, suffix: str) -> None:
        """Rename all three files by adding `suffix` (e.g. `.deleted`); open handles stay valid."""
        new_log = self.log_path.with_name(self.log_path.name + suffix)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self.index.rename_to(self.index.path.with_name(self.index.path.name + suffix))
        self.time_index.rename_to(
            self.time_index.path.with_name(self.time_index.path.name + suffix)
        )
        self.txn_index.rename_to(self.txn_index.path.with_name(self.txn_index.path.name + suffix))

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all three files from `<name><old_suffix>` to `<name><new_suffix>` (Kafka's
        changeFileSuffixes: `.cleaned` -> `.swap` -> ``); open handles stay valid."""

        def renamed(path: Path) -> Path:
            if old_suffix and not path.name.endswith(old_suffix):
                raise ValueError(f"{path} does not end with {old_suffix!r}")
            stem = path.name[: len(path.name) - len(old_suffix)] if old_suffix else path.name
            return path.with_name(stem + new_suffix)

        new_log = renamed(self.log_path)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self.index.rename_to(renamed(self.index.path))
        self.time_index.rename_to(renamed(self.time_index.path))
        self.txn_index.rename_to(renamed(self.txn_index.path))

    def close(self) -> None:
        """Pin the final time index entry, write the indexes and close every handle; raises
        OSError (after closing the handles) if the files could not be brought up to date."""
        if self.closed:
            return
        try:
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
            )
            self._trim_tail()
            self.index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        finally:
            self.close_handles()

    def close_handles(self) -> None:
        """Close descriptors without touching the files (a reader holding a FileRecords keeps
        the file object alive until it is done with it)."""
        if self.closed:
            return
        self.closed = True
        self._close_writer()
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self.index.close()
        self.time_index.close()

    def delete_files(self) -> None:
        """Close handles and unlink all three files."""
        self.close_handles()
        for path in (self.log_path, self.index.path, self.time_index.path, self.txn_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"


def _pwritev_all(
    fd: int, buffers: Sequence[bytes | bytearray | memoryview], position: int, total: int
) -> None:
    """pwritev every buffer at `position`, continuing after short writes; a write that makes no
    progress raises OSError(ENOSPC)."""
    pending = [memoryview(b) for b in buffers if len(b)]
    first = 0
    written_total = 0
    while first < len(pending):
        written = _pwritev(fd, pending[first : first + _IOV_MAX], position + written_total)
        if written <= 0:
            raise OSError(errno.ENOSPC, f"no progress writing {total - written_total} bytes")
        written_total += written
        while written > 0 and first < len(pending):
            head = pending[first]
            if written >= len(head):
                written -= len(head)
                first += 1
            else:
                pending[first] = head[written:]
                written = 0
    if written_total != total:
        raise OSError(errno.EIO, f"short write: {written_total} of {total} bytes")


_pwritev = os.pwritev
"""The segment's write call; tests replace it to inject ENOSPC and short writes."""


__all__ = ["AppendedBatch", "IndexCorruptError", "LogSegment", "segment_file_name"]
