"""The work of one log-cleaner pass, done off the event loop (Kafka's Cleaner).

Everything here runs in a worker thread and touches only immutable things: closed segments
through file descriptors duplicated for the pass (so a segment deleted or renamed meanwhile keeps
its bytes), and new `<base>.log.cleaned` files nobody else knows about. The loop-side half
(choosing the log, swapping the output in) is `broker/log/cleaner.py`.

A pass over one log, given the cleanable range [first dirty offset, first uncleanable offset):

1. **Offset map.** Read the dirty batches and remember, for every key, the offset of its last
   record (`OffsetMap`). Control batches add no keys. The map is bounded
   (log.cleaner.dedupe.buffer.size); when it fills up, the pass maps only a prefix of the dirty
   section and `OffsetMap.latest_offset` says where it stopped.
2. **Group** the segments from the start of the log up to the end of the mapped range into runs
   whose total size stays under segment.bytes (and whose offsets and index entries fit one
   segment), so repeated cleaning merges small segments.
3. **Filter** every batch of a group (`filter_batch`) into one new segment per group, named
   `<base of the group's first segment>.log.cleaned` plus indexes, then fsync it. A record is kept
   when it lies past the mapped range, or it is the latest of its key and is not an expired
   tombstone. Offsets never change: a kept batch keeps its base offset and lastOffsetDelta.

Batch rules (Kafka 3.x, `MemoryRecords.filterTo` and `LogCleaner`):

- A batch whose records all stay and which needs no new delete horizon is copied byte for byte.
- Otherwise it is rebuilt with the same base offset, lastOffsetDelta, producer id/epoch/base
  sequence, partition leader epoch, timestamp type, transactional flag and codec (decompressed,
  filtered, recompressed with the same codec).
- **Delete horizon (KIP-534).** The first time a batch holding a tombstone is cleaned it gets the
  delete-horizon attribute bit (0x40) and baseTimestamp = now + delete.retention.ms (record
  timestamps are re-based on it, so they read back unchanged). A later pass drops the tombstone
  once the horizon has passed. Batches that never held tombstones never get the bit.
- A batch with no record left disappears, except the last batch of a producer the partition still
  tracks: it stays as an empty batch (header only, same offsets and sequences) so the producer's
  sequence state survives a reload, as Kafka keeps it.
- **Transactions** (Kafka's CleanedTransactionMetadata; the range never passes the LSO). The
  batches of aborted transactions (from the aborted-transaction indexes) add no keys to the map
  and are dropped (the last batch of a tracked producer stays empty). An ABORT marker stays while
  this pass dropped data of its transaction, and its index entry is written to the output; a
  COMMIT marker stays while data of its transaction remains. A marker whose transaction has no
  data left gets a delete horizon (now + delete.retention.ms, as tombstones do) and goes once it
  passes, unless it is the last batch of a tracked producer (it carries the producer's epoch).
- Records without a key (possible only in topics switched to compact later) are dropped, as Kafka
  does.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from broker.config import INT_MAX, LogConfig
from broker.log.loader import CLEANED_SUFFIX
from broker.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    AppendedBatch,
    LogSegment,
    segment_file_name,
)
from broker.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from broker.log.validation import max_decompressed_bytes
from protocol.compression import DecompressedSizeError
from protocol.control import ControlRecordType, EndTxnMarker, read_end_txn_marker
from protocol.errors import CorruptRecordError
from protocol.records import (
    ATTR_DELETE_HORIZON,
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    BatchHeader,
    NewRecord,
    Record,
    TimestampType,
    build_batch,
    compute_crc,
    decode_records,
)
from protocol.topic_partition import TopicPartition

log = logging.getLogger("samsa.log.cleaner")

SHORT_KEY_BYTES = 32
"""Keys up to this long are map keys as they are; longer ones are stored by a 20-byte digest."""
KAFKA_BYTES_PER_ENTRY = 24
"""What one map entry costs in Kafka's SkimpyOffsetMap (16-byte MD5 + 8-byte offset)."""
PROGRESS_SECONDS = 2.0


class CleaningAborted(Exception):
    """The pass was asked to stop (log deleted, cleaner shutting down)."""


class OffsetMap:
    """key -> offset of the key's last record in the mapped part of the dirty section.

    Kafka hashes every key into a fixed array; here short keys are dict keys as they are and
    longer keys are replaced by a 20-byte BLAKE2b digest (kept in a separate dict, so a digest can
    never equal a real key). `capacity` bounds the number of keys.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._short: dict[bytes, int] = {}
        self._long: dict[bytes, int] = {}
        self.latest_offset = -1
        """The last offset read into the map (every batch counts, even without keys)."""

    def __len__(self) -> int:
        return len(self._short) + len(self._long)

    @property
    def full(self) -> bool:
        return len(self) >= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        if len(key) <= SHORT_KEY_BYTES:
            self._short[key] = offset
        else:
            self._long[hashlib.blake2b(key, digest_size=20).digest()] = offset

    def get(self, key: bytes) -> int:
        """The mapped offset of `key`, or -1."""
        if len(key) <= SHORT_KEY_BYTES:
            return self._short.get(key, -1)
        return self._long.get(hashlib.blake2b(key, digest_size=20).digest(), -1)


@dataclass(slots=True)
class SegmentSource:
    """A closed segment as the pass sees it: its own descriptor and the size it had at the start."""

    segment: LogSegment
    """The live object, compared by identity when the output is swapped in."""
    base_offset: int
    upper_offset: int
    """Base offset of the next segment: this one holds offsets below it."""
    size: int
    index_entries: int
    fd: int
    mtime_ns: int


@dataclass(slots=True)
class CleaningPlan:
    """Everything the worker needs, captured on the event loop."""

    topic_partition: TopicPartition
    log_dir: Path
    config: LogConfig
    sources: list[SegmentSource]
    """Closed segments from the start of the log through the last one holding cleanable offsets."""
    first_dirty_offset: int
    first_uncleanable_offset: int
    dirty_start_position: int
    """Byte position in the segment holding first_dirty_offset where mapping starts."""
    now_ms: int
    producer_last_offsets: dict[int, int]
    """Active producers' last data offsets (their last batch survives as an empty batch)."""
    producer_epochs: dict[int, int]
    """Active producers' epochs (their last marker, when it ends their log, survives)."""
    aborted_txns: list[AbortedTxn]
    """The aborted transactions overlapping the cleanable range."""
    max_map_entries: int
    io_buffer_size: int
    aborted: threading.Event = field(default_factory=threading.Event)

    def close_sources(self) -> None:
        for source in self.sources:
            if source.fd >= 0:
                os.close(source.fd)
                source.fd = -1


@dataclass(slots=True)
class CleanerStats:
    """Counters for one pass (logged when it ends)."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_removed: int = 0
    batches_copied: int = 0
    batches_rebuilt: int = 0
    batches_emptied: int = 0
    map_bytes_read: int = 0

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_kept


@dataclass(slots=True)
class CleanedGroup:
    """One output segment and the closed segments it replaces."""

    sources: list[SegmentSource]
    output: LogSegment


@dataclass(slots=True)
class CleanResult:
    """What a pass produced: the groups to swap in and where the next pass starts."""

    groups: list[CleanedGroup]
    end_offset: int
    """The new cleaner checkpoint: everything below it has been cleaned."""
    stats: CleanerStats
    min_delete_horizon: int | None
    """The earliest delete horizon of a tombstone still in the cleaned part, if any."""
    map_size: int = 0

    def delete_outputs(self) -> None:
        for group in self.groups:
            group.output.delete_files()


# ------------------------------------------------------------------------------ reading
def iter_file_batches(
    fd: int, start: int, end: int, buffer_size: int
) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """(position, header, bytes) of every whole batch in [start, end) of a segment file."""
    buffer_size = max(buffer_size, 64 << 10)
    window = b""
    window_start = start
    pos = start
    while pos + HEADER_SIZE <= end:
        rel = pos - window_start
        if rel + HEADER_SIZE > len(window):
            window_start, rel = pos, 0
            window = os.pread(fd, min(buffer_size, end - pos), pos)
        header = BatchHeader.parse(window, rel)
        if pos + header.size > end:
            raise CorruptRecordError(f"batch at {pos} runs past the segment end {end}")
        if rel + header.size > len(window):
            window_start, rel = pos, 0
            window = os.pread(fd, max(header.size, min(buffer_size, end - pos)), pos)
            if len(window) < header.size:
                raise CorruptRecordError(f"short read of the batch at {pos}")
        yield pos, header, memoryview(window)[rel : rel + header.size]
        pos += header.size
    if pos != end:
        raise CorruptRecordError(f"{end - pos} trailing bytes at {pos} are not a whole batch")


# -------------------------------------------------------------------- transactions
class CleanedTransactionMetadata:
    """Which batches belong to aborted transactions and which markers may go, as the batches
    are read in offset order (Kafka's CleanedTransactionMetadata)."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self.ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        """Producer id -> (its aborted transaction, whether a batch of it was seen)."""
        self.ongoing_committed: set[int] = set()
        self.cleaned_index: list[AbortedTxn] | None = None
        """Where entries of kept ABORT markers go (the output segment's index), when filtering."""

    def _consume_up_to(self, offset: int) -> None:
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            txn = self._pending[self._next]
            self._next += 1
            self.ongoing_aborted.setdefault(txn.producer_id, (txn, False))

    def on_control_batch_read(self, header: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """True if the marker may be discarded (its transaction has no data left here)."""
        self._consume_up_to(header.last_offset)
        if marker is None:
            return True  # an empty control batch was already cleaned
        pid = header.producer_id
        if marker.control_type is ControlRecordType.ABORT:
            found = self.ongoing_aborted.pop(pid, None)
            if found is not None and found[1]:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(found[0])
                return False
            return True
        if marker.control_type is ControlRecordType.COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, header: BatchHeader) -> bool:
        """True if the data batch belongs to an aborted transaction."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        found = self.ongoing_aborted.get(header.producer_id)
        if found is not None:
            self.ongoing_aborted[header.producer_id] = (found[0], True)
            return True
        self.ongoing_committed.add(header.producer_id)
        return False


def _marker(batch: memoryview | bytes, header: BatchHeader) -> EndTxnMarker | None:
    try:
        return read_end_txn_marker(batch, 0, header)
    except CorruptRecordError:
        return None


# --------------------------------------------------------------------------- the map
def build_offset_map(plan: CleaningPlan, offset_map: OffsetMap, stats: CleanerStats) -> None:
    """Map the dirty section from first_dirty_offset up to first_uncleanable_offset or a full
    map; records of aborted transactions are not mapped."""
    txns = CleanedTransactionMetadata(plan.aborted_txns)
    started = False
    for source in plan.sources:
        if source.upper_offset <= plan.first_dirty_offset:
            continue
        start = plan.dirty_start_position if not started else 0
        started = True
        for _pos, header, batch in iter_file_batches(
            source.fd, start, source.size, plan.io_buffer_size
        ):
            if plan.aborted.is_set():
                raise CleaningAborted()
            if header.last_offset < plan.first_dirty_offset:
                continue
            if header.last_offset >= plan.first_uncleanable_offset or offset_map.full:
                return
            stats.map_bytes_read += header.size
            if header.is_control:
                txns.on_control_batch_read(header, _marker(batch, header))
            elif not txns.on_batch_read(header):
                for record in _decode_bounded(batch, header, plan.config) or ():
                    if record.key is not None:
                        offset_map.put(record.key, record.offset)
            offset_map.latest_offset = header.last_offset


# ------------------------------------------------------------------------- filtering
@dataclass(slots=True)
class FilteredBatch:
    """What filtering one batch produced: bytes to write (None: drop it) and facts about them."""

    data: bytes | memoryview | None
    records_read: int
    records_kept: int
    tombstones_removed: int
    delete_horizon: int | None
    """The delete horizon of a kept batch that holds tombstones."""


def _decode_bounded(batch: memoryview | bytes, header: BatchHeader, config: LogConfig) -> list[Record] | None:
    """The batch's records, or None if they decompress past the bound a produced batch gets
    (`validation.max_decompressed_bytes`; only a batch stored before that bound existed, or
    replicated from a leader without it): such a batch is kept as it is and its keys are not
    mapped, so nothing is removed because of it."""
    try:
        return decode_records(batch, 0, header, max_decompressed_bytes(config))
    except DecompressedSizeError:
        return None


def filter_batch(
    batch: memoryview | bytes,
    header: BatchHeader,
    offset_map: OffsetMap,
    *,
    now_ms: int,
    delete_retention_ms: int,
    producer_last_offsets: dict[int, int],
    config: LogConfig,
    txns: CleanedTransactionMetadata | None = None,
    producer_epochs: dict[int, int] | None = None,
) -> FilteredBatch:
    """Apply the retention rules (module docstring) to one batch."""
    if header.is_control:
        return _filter_marker(batch, header, now_ms, delete_retention_ms, producer_last_offsets, txns, producer_epochs)
    is_last_of_producer = header.producer_id >= 0 and producer_last_offsets.get(header.producer_id) == header.last_offset
    if txns is not None and txns.on_batch_read(header):  # an aborted transaction's batch
        n = header.records_count
        if is_last_of_producer:
            return FilteredBatch(_empty_like(header), n, 0, 0, None)
        return FilteredBatch(None, n, 0, 0, None)
    records = _decode_bounded(batch, header, config)
    if records is None:
        return FilteredBatch(batch, header.records_count, header.records_count, 0, None)
    has_horizon = bool(header.attributes & ATTR_DELETE_HORIZON)
    horizon_passed = has_horizon and now_ms >= header.base_timestamp
    kept = []
    tombstones_removed = 0
    kept_tombstone = False
    for record in records:
        if record.offset > offset_map.latest_offset:
            keep = True
        elif record.key is None:
            keep = False
        else:
            keep = record.offset >= offset_map.get(record.key) and (
                record.value is not None or not horizon_passed
            )
            if not keep and record.value is None and record.offset >= offset_map.get(record.key):
                tombstones_removed += 1
        if keep:
            kept.append(record)
            kept_tombstone = kept_tombstone or record.value is None
    set_horizon = kept_tombstone and not has_horizon
    horizon = (
        (now_ms + delete_retention_ms if set_horizon else header.base_timestamp)
        if kept_tombstone
        else None
    )
    n = len(records)
    if len(kept) == n and not set_horizon:
        return FilteredBatch(batch, n, n, 0, horizon)
    if not kept:
        if is_last_of_producer:
            return FilteredBatch(_empty_like(header), n, 0, tombstones_removed, None)
        return FilteredBatch(None, n, 0, tombstones_removed, None)
    rebuilt = build_batch(
        [
            NewRecord(r.key, r.value, r.headers, r.timestamp, r.offset - header.base_offset)
            for r in kept
        ],
        base_offset=header.base_offset,
        compression=header.compression,
        timestamp_type=header.timestamp_type,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        base_timestamp=horizon,
        max_timestamp=(
            header.max_timestamp
            if header.timestamp_type is TimestampType.LOG_APPEND_TIME
            else None
        ),
        last_offset_delta=header.last_offset_delta,
    )
    if horizon is not None:
        rebuilt = with_delete_horizon_bit(rebuilt)
    return FilteredBatch(rebuilt, n, len(kept), tombstones_removed, horizon)


def _empty_like(header: BatchHeader) -> bytes:
    """The batch with no record left: same offsets, producer fields, sequence and flags."""
    return build_batch(
        [],
        base_offset=header.base_offset,
        last_offset_delta=header.last_offset_delta,
        timestamp_type=header.timestamp_type,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
    )


def _filter_marker(
    batch: memoryview | bytes,
    header: BatchHeader,
    now_ms: int,
    delete_retention_ms: int,
    producer_last_offsets: dict[int, int],
    txns: CleanedTransactionMetadata | None,
    producer_epochs: dict[int, int] | None,
) -> FilteredBatch:
    """A control batch (Kafka's checkBatchRetention for markers): kept while its transaction
    has data here; otherwise it gets a delete horizon and goes once that has passed, unless it
    is what ends a tracked producer's log (its epoch is needed for fencing)."""
    if txns is None:
        return FilteredBatch(batch, 0, 0, 0, None)
    marker = _marker(batch, header)
    discardable = txns.on_control_batch_read(header, marker)
    if not discardable:
        return FilteredBatch(batch, 0, 0, 0, None)
    has_horizon = bool(header.attributes & ATTR_DELETE_HORIZON)
    pid = header.producer_id
    last_data = producer_last_offsets.get(pid)
    keeps_epoch = (
        producer_epochs is not None
        and pid in producer_epochs
        and (last_data is None or last_data < 0)
        and producer_epochs[pid] == header.producer_epoch
    )
    if has_horizon and now_ms >= header.base_timestamp and not keeps_epoch:
        return FilteredBatch(None, 0, 0, 0, None)
    if has_horizon or marker is None:
        horizon = header.base_timestamp if has_horizon else None
        return FilteredBatch(batch, 0, 0, 0, horizon)
    horizon = now_ms + delete_retention_ms
    records = decode_records(batch, 0, header)
    rebuilt = build_batch(
        [NewRecord(r.key, r.value, r.headers, r.timestamp, r.offset - header.base_offset) for r in records],
        base_offset=header.base_offset,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=True,
        is_control=True,
        base_timestamp=horizon,
        last_offset_delta=header.last_offset_delta,
    )
    return FilteredBatch(with_delete_horizon_bit(rebuilt), 0, 0, 0, horizon)


def with_delete_horizon_bit(batch: bytes) -> bytes:
    """Set the delete-horizon attribute bit (baseTimestamp already holds the horizon); new CRC."""
    out = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, attributes | ATTR_DELETE_HORIZON)
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return bytes(out)


# --------------------------------------------------------------------------- grouping
def group_segments_by_size(
    sources: list[SegmentSource], max_size: int, max_index_entries: int
) -> list[list[SegmentSource]]:
    """Runs of consecutive segments that fit one segment (Kafka's groupSegmentsBySize)."""
    groups: list[list[SegmentSource]] = []
    current: list[SegmentSource] = []
    size = entries = 0
    for source in sources:
        fits = (
            current
            and size + source.size <= max_size
            and entries + source.index_entries <= max_index_entries
            and source.upper_offset - 1 - current[0].base_offset <= INT_MAX
        )
        if current and not fits:
            groups.append(current)
            current, size, entries = [], 0, 0
        current.append(source)
        size += source.size
        entries += source.index_entries
    if current:
        groups.append(current)
    return groups


# ------------------------------------------------------------------------------ a pass
def clean_log(plan: CleaningPlan) -> CleanResult:
    """One pass over one log (runs in a worker thread). Outputs are fsynced `.cleaned` segments.

    Raises CleaningAborted (or an I/O or corruption error); outputs written so far are deleted
    first. The plan's descriptors are closed in every case.
    """
    stats = CleanerStats()
    groups: list[CleanedGroup] = []
    try:
        offset_map = OffsetMap(plan.max_map_entries)
        build_offset_map(plan, offset_map, stats)
        end_offset = max(plan.first_dirty_offset, offset_map.latest_offset + 1)
        to_clean = [s for s in plan.sources if s.base_offset < end_offset]
        if offset_map.latest_offset < 0:  # nothing dirty mapped: expire tombstones only
            offset_map.latest_offset = plan.first_dirty_offset - 1
        min_horizon: int | None = None
        total = sum(s.size for s in to_clean) or 1
        last_progress = time.monotonic()
        txns = CleanedTransactionMetadata(plan.aborted_txns)
        for group in group_segments_by_size(
            to_clean, plan.config.segment_bytes, plan.config.max_offset_index_entries
        ):
            output = _new_output(plan, group[0].base_offset)
            groups.append(CleanedGroup(group, output))
            kept_aborted: list[AbortedTxn] = []
            txns.cleaned_index = kept_aborted
            for source in group:
                pending: list[bytes | memoryview] = []
                appended: list[AppendedBatch] = []
                pending_bytes = 0
                for _pos, header, batch in iter_file_batches(
                    source.fd, 0, source.size, plan.io_buffer_size
                ):
                    if plan.aborted.is_set():
                        raise CleaningAborted()
                    result = filter_batch(
                        batch,
                        header,
                        offset_map,
                        now_ms=plan.now_ms,
                        delete_retention_ms=plan.config.delete_retention_ms,
                        producer_last_offsets=plan.producer_last_offsets,
                        config=plan.config,
                        txns=txns,
                        producer_epochs=plan.producer_epochs,
                    )
                    stats.records_read += result.records_read
                    stats.records_kept += result.records_kept
                    stats.tombstones_removed += result.tombstones_removed
                    if result.delete_horizon is not None:
                        min_horizon = (
                            result.delete_horizon
                            if min_horizon is None
                            else min(min_horizon, result.delete_horizon)
                        )
                    if result.data is None:
                        continue
                    if result.data is batch:
                        stats.batches_copied += 1
                        data: bytes | memoryview = bytes(batch)
                        out_header = header
                    else:
                        data = result.data
                        out_header = BatchHeader.parse(data, 0)
                        if out_header.records_count:
                            stats.batches_rebuilt += 1
                        else:
                            stats.batches_emptied += 1
                    pending.append(data)
                    appended.append(
                        AppendedBatch(
                            out_header.size,
                            out_header.last_offset,
                            out_header.max_timestamp,
                            out_header.last_offset,
                        )
                    )
                    pending_bytes += out_header.size
                    if pending_bytes >= plan.io_buffer_size:
                        output.append(pending, appended)
                        pending, appended, pending_bytes = [], [], 0
                if pending:
                    output.append(pending, appended)
                stats.bytes_read += source.size
                now = time.monotonic()
                if now - last_progress >= PROGRESS_SECONDS:
                    last_progress = now
                    log.info(
                        "cleaning progress topic=%s partition=%d progress=%d%%",
                        plan.topic_partition.topic,
                        plan.topic_partition.partition,
                        stats.bytes_read * 100 // total,
                    )
            if kept_aborted:
                output.txn_index.replace_with(kept_aborted)
            _finish_output(output, group)
            stats.bytes_written += output.size
        return CleanResult(groups, end_offset, stats, min_horizon, len(offset_map))
    except BaseException:
        for done in groups:
            done.output.delete_files()
        raise
    finally:
        plan.close_sources()


def _new_output(plan: CleaningPlan, base_offset: int) -> LogSegment:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):  # a stale attempt's files
        try:
            os.unlink(plan.log_dir / (segment_file_name(base_offset, suffix) + CLEANED_SUFFIX))
        except FileNotFoundError:
            pass
    return LogSegment(
        plan.log_dir,
        base_offset,
        plan.config,
        created_ms=plan.now_ms,
        file_suffix=CLEANED_SUFFIX,
    )


def _finish_output(output: LogSegment, group: list[SegmentSource]) -> None:
    """Pin the time index, make sure both index files exist, fsync, keep the old mtime."""
    output.on_become_inactive()
    for path in (output.index.path, output.time_index.path):
        path.touch(exist_ok=True)
    output.flush()
    output.next_offset = group[-1].upper_offset
    mtime = group[-1].mtime_ns
    os.utime(output.log_path, ns=(mtime, mtime))
