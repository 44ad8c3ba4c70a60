"""Checking produced batches and assigning their offsets (Kafka's LogValidator, magic v2 only).

Two steps, so the expensive one can run off the event loop:

1. `check_records` (pure, thread-safe, no log state) checks every batch as Kafka's
   UnifiedLog.analyzeAndValidateRecords and LogValidator do: size (`max.message.bytes`,
   MESSAGE_TOO_LARGE), CRC-32C (CORRUPT_MESSAGE), codec id (UNSUPPORTED_COMPRESSION_TYPE for 5-7),
   records count against lastOffsetDelta, control batches and a producer id without a sequence
   (INVALID_RECORD), then every record (`protocol.record_check`: structure, offset deltas,
   timestamps against message.timestamp.before/after.max.ms, keys on compacted topics, KIP-467
   record errors), decompressing in bounded chunks with at most `max_decompressed_bytes(config)`
   bytes (MESSAGE_TOO_LARGE past it). It returns `CheckedRecords`: the bytes to store and their
   headers. The bytes are the producer's, except where Kafka rewrites too: a batch whose
   maxTimestamp is not its records' largest timestamp, or that the producer marked LogAppendTime
   on a CreateTime topic, gets the computed maxTimestamp and CreateTime (a new CRC); a topic whose
   compression.type names a codec has each batch in another codec recompressed while it is
   walked (same records, header fields and flags; MESSAGE_TOO_LARGE if it outgrows
   max.message.bytes), as Kafka's LogValidator does. A batch already in that codec stays as is.
2. `validate_leader_append` (on the loop, inside the append) assigns offsets: it patches
   baseOffset and partitionLeaderEpoch (outside the CRC) and, on LogAppendTime topics, stamps
   each batch (maxTimestamp and the timestamp type, new CRC). Given `CheckedRecords` checked for
   the same config it does nothing else; given plain bytes (internal appends, tests, or a topic
   config that changed in between) it runs step 1 first.

Followers never check records nor recompress: they store the leader's bytes
(`validate_follower_append`). Magic v0/v1 message sets must be up-converted before they get here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from broker.config import LogConfig
from protocol.compression import CompressionType, Compressor
from protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from protocol.record_check import RecordRules, check_batch_records
from protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    TimestampType,
    compute_crc,
    magic_of,
    set_log_append_time,
    set_max_timestamp,
    verify_crc,
)

PREFIX_SIZE = 16
"""baseOffset, batchLength and partitionLeaderEpoch: the bytes rewritten on append."""
_PREFIX = struct.Struct(">qii")
_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
NO_TIMESTAMP = -1

DECOMPRESSION_BOUND_FACTOR = 16
"""A produced batch may decompress to at most this many times max(max.message.bytes, 1 MiB)."""
_MIB = 1 << 20


def max_decompressed_bytes(config: LogConfig) -> int:
    """The most a produced batch's records may decompress to: 16 x max(max.message.bytes, 1 MiB)
    (16 MiB by default). Compressed batches legitimately expand a lot (the Java producer fills
    batch.size with compressed bytes, and repetitive JSON compresses 10-20x), so the bound is
    far above what clients send; a bomb (the issue's 33 KB of zstd that expanded to 2 GB) stops
    at it. Past it: MESSAGE_TOO_LARGE, on which the Java producer splits the batch and retries."""
    return DECOMPRESSION_BOUND_FACTOR * max(config.max_message_bytes, _MIB)


@dataclass(frozen=True, slots=True)
class CheckedBatch:
    """One batch of `CheckedRecords`: where it starts and its header (as it will be stored,
    before offsets are assigned)."""

    pos: int
    header: BatchHeader


@dataclass(frozen=True, slots=True)
class CheckedRecords:
    """Records that passed `check_records` for `config`: the bytes to append (the request's own
    buffer unless a batch was rewritten) and their batches. The partition hands it to the log,
    whose `validate_leader_append` then only assigns offsets."""

    data: bytes | memoryview
    config: LogConfig
    batches: tuple[CheckedBatch, ...]

    def __len__(self) -> int:
        return len(self.data)


@dataclass(slots=True)
class ValidBatch:
    """One batch ready to write: the buffers to writev and the facts indexes and state need."""

    header: BatchHeader
    """The header as stored (offsets not yet assigned)."""
    buffers: list[bytes | bytearray | memoryview]
    """The bytes to write, `header.size` of them."""
    base_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    leader_epoch: int

    @property
    def size(self) -> int:
        return self.header.size


@dataclass(slots=True)
class ValidRecords:
    """All batches of one append, in order."""

    batches: list[ValidBatch] = field(default_factory=list)
    valid_bytes: int = 0
    num_messages: int = 0

    @property
    def first_offset(self) -> int:
        return self.batches[0].base_offset

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset

    @property
    def max_timestamp(self) -> int:
        return max((b.max_timestamp for b in self.batches), default=NO_TIMESTAMP)

    @property
    def offset_of_max_timestamp(self) -> int:
        best = self.batches[0]
        for batch in self.batches[1:]:
            if batch.max_timestamp > best.max_timestamp:
                best = batch
        return best.offset_of_max_timestamp


def parse_batches(
    records: bytes | bytearray | memoryview, *, allow_partial_tail: bool
) -> list[tuple[int, BatchHeader]]:
    """Split a records blob into (position, header); CORRUPT_MESSAGE on anything malformed.

    A follower's fetch may end in a truncated batch (the leader cut the region at max_bytes);
    with `allow_partial_tail` that tail is ignored like Kafka's record iterator does.
    """
    buf = memoryview(records)
    out: list[tuple[int, BatchHeader]] = []
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE:
            if allow_partial_tail:
                break
            raise CorruptRecordError(f"record batch at {pos} truncated: {end - pos} bytes")
        if magic_of(buf, pos) != 2:
            raise KafkaError(
                ErrorCode.corrupt_message,
                f"magic {magic_of(buf, pos)} batches must be up-converted to v2",
            )
        header = BatchHeader.parse(buf, pos)
        if pos + header.size > end:
            if allow_partial_tail:
                break
            raise CorruptRecordError(
                f"record batch at {pos} truncated: {header.size} > {end - pos}"
            )
        out.append((pos, header))
        pos += header.size
    return out


def check_records(
    records: bytes | bytearray | memoryview,
    config: LogConfig,
    now_ms: int,
    *,
    partition: str | None = None,
    budget: int | None = None,
    allow_control: bool = False,
) -> CheckedRecords:
    """Check every batch and record of a produced records blob (step 1 of the module docstring).

    `partition` names the topic-partition in record error messages. `budget` bounds the records
    bytes (decompressed) walked: past it, `protocol.record_check.OverBudget`, so the caller can
    run the check again off the event loop. Raises KafkaError with RECORD_LIST_TOO_LARGE,
    MESSAGE_TOO_LARGE, CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP or
    UNSUPPORTED_COMPRESSION_TYPE (RecordValidationError with record errors). Control batches
    are refused unless `allow_control` (the transaction coordinator's markers).
    """
    buf = memoryview(records)
    if len(buf) > config.segment_bytes:
        raise KafkaError(
            ErrorCode.record_list_too_large,
            f"records of {len(buf)} bytes exceed segment.bytes {config.segment_bytes}",
        )
    rules = RecordRules(
        now_ms=now_ms,
        timestamp_before_max_ms=config.message_timestamp_before_max_ms,
        timestamp_after_max_ms=config.message_timestamp_after_max_ms,
        log_append_time=config.log_append_time,
        compacted=config.compact,
        max_decompressed_bytes=max_decompressed_bytes(config),
        partition=partition,
    )
    target = config.target_compression
    parts: list[bytes | bytearray | memoryview] = []
    batches: list[CheckedBatch] = []
    size = 0
    rewritten = False
    for pos, header in parse_batches(buf, allow_partial_tail=False):
        _check_batch(buf, pos, header, config, allow_control)
        data: bytes | bytearray | memoryview = buf[pos : pos + header.size]
        if target is not None and header.attributes & ATTR_COMPRESSION_MASK != target:
            compressor = _BoundedCompressor(target, config.max_message_bytes - HEADER_SIZE)
            facts = check_batch_records(buf, pos, header, rules, budget=budget, sink=compressor.feed)
            data = _with_section(buf, pos, header, target, compressor.finish())
            header = BatchHeader.parse(data)
        else:
            facts = check_batch_records(buf, pos, header, rules, budget=budget)
        if budget is not None:
            budget -= facts.decompressed_bytes
        if not config.log_append_time and (
            header.max_timestamp != facts.max_timestamp or header.attributes & ATTR_TIMESTAMP_TYPE
        ):
            data = bytearray(data)
            header = set_max_timestamp(data, 0, header, TimestampType.CREATE_TIME, facts.max_timestamp)
        rewritten |= not isinstance(data, memoryview)
        batches.append(CheckedBatch(size, header))
        parts.append(data)
        size += header.size
    return CheckedRecords(b"".join(parts) if rewritten else buf, config, tuple(batches))


class _BoundedCompressor:
    """The recompression sink: compresses the records section as it is walked and gives up as
    soon as the output cannot fit max.message.bytes."""

    def __init__(self, codec: CompressionType, max_size: int) -> None:
        self.compressor = Compressor(codec)
        self.max_size = max_size

    def feed(self, chunk: bytes | memoryview) -> None:
        self.compressor.feed(chunk)
        self._check()

    def finish(self) -> bytes:
        section = self.compressor.finish()
        self._check(len(section))
        return section

    def _check(self, size: int | None = None) -> None:
        size = len(self.compressor) if size is None else size
        if size > self.max_size:
            raise KafkaError(
                ErrorCode.message_too_large,
                f"record batch recompressed with {self.compressor.codec.name} exceeds "
                f"max.message.bytes {self.max_size + HEADER_SIZE}",
            )


def _with_section(
    buf: memoryview, pos: int, header: BatchHeader, codec: CompressionType, section: bytes
) -> bytearray:
    """The batch at `pos` with its records section replaced by `section` in `codec`: the same
    header fields (records count, offsets, timestamps, producer fields, flags), a new length and
    CRC."""
    out = bytearray(HEADER_SIZE + len(section))
    out[:HEADER_SIZE] = buf[pos : pos + HEADER_SIZE]
    out[HEADER_SIZE:] = section
    _LENGTH.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _ATTRIBUTES.pack_into(out, 21, (header.attributes & ~ATTR_COMPRESSION_MASK) | codec)
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return out


def validate_leader_append(
    records: CheckedRecords | bytes | bytearray | memoryview,
    config: LogConfig,
    next_offset: int,
    leader_epoch: int,
    now_ms: int,
    *,
    allow_control: bool = False,
) -> ValidRecords:
    """Assign offsets from `next_offset` to produced records (checking them first unless they
    are CheckedRecords for this config); see the module docstring. `allow_control`: the records
    come from a coordinator and may hold control batches (transaction markers)."""
    if isinstance(records, CheckedRecords):
        same = records.config is config or records.config == config
        checked = records if same else check_records(records.data, config, now_ms, allow_control=allow_control)
    else:
        checked = check_records(records, config, now_ms, allow_control=allow_control)
    buf = memoryview(checked.data)
    result = ValidRecords()
    offset = next_offset
    for batch in checked.batches:
        header, pos = batch.header, batch.pos
        base = offset
        last = base + header.last_offset_delta
        buffers: list[bytes | bytearray | memoryview]
        if config.log_append_time:
            copy = bytearray(buf[pos : pos + header.size])
            set_log_append_time(copy, 0, header, now_ms)
            _PREFIX.pack_into(copy, 0, base, header.batch_length, leader_epoch)
            buffers = [copy]
            max_ts, offset_of_max = now_ms, base
        else:
            prefix = _PREFIX.pack(base, header.batch_length, leader_epoch)
            buffers = [prefix, buf[pos + PREFIX_SIZE : pos + header.size]]
            max_ts, offset_of_max = header.max_timestamp, last
        result.batches.append(
            ValidBatch(header, buffers, base, last, max_ts, offset_of_max, leader_epoch)
        )
        result.valid_bytes += header.size
        result.num_messages += header.records_count
        offset = last + 1
    return result


def validate_follower_append(
    records: bytes | bytearray | memoryview, log_end_offset: int
) -> ValidRecords:
    """Check a replicated records blob (CRC, offsets increasing from the log end); keep its offsets."""
    buf = memoryview(records)
    result = ValidRecords()
    expected = log_end_offset
    for pos, header in parse_batches(buf, allow_partial_tail=True):
        if not verify_crc(buf, pos, header):
            raise CorruptRecordError(
                f"replicated record batch at offset {header.base_offset} failed its CRC check"
            )
        if header.base_offset < expected or header.last_offset_delta < 0:
            raise KafkaError(
                ErrorCode.unknown_server_error,
                f"unexpected append offset {header.base_offset}, log end offset is {expected}",
            )
        offset_of_max = header.base_offset if header.timestamp_type == 1 else header.last_offset
        result.batches.append(
            ValidBatch(
                header,
                [buf[pos : pos + header.size]],
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
                offset_of_max,
                header.partition_leader_epoch,
            )
        )
        result.valid_bytes += header.size
        result.num_messages += header.records_count
        expected = header.next_offset
    return result


def _check_batch(
    buf: memoryview, pos: int, header: BatchHeader, config: LogConfig, allow_control: bool = False
) -> None:
    """The batch-level checks, in Kafka's order (analyzeAndValidateRecords, then
    LogValidator.validateBatch for a client's append)."""
    if header.size > config.max_message_bytes:
        raise KafkaError(
            ErrorCode.message_too_large,
            f"record batch of {header.size} bytes exceeds max.message.bytes {config.max_message_bytes}",
        )
    if not verify_crc(buf, pos, header):
        raise CorruptRecordError(f"record batch at {pos} failed its CRC check")
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if codec > CompressionType.ZSTD:
        raise KafkaError(ErrorCode.unsupported_compression_type, f"unknown compression codec id {codec}")
    if header.records_count <= 0 or header.last_offset_delta + 1 != header.records_count:
        raise KafkaError(
            ErrorCode.invalid_record,
            f"record count {header.records_count} inconsistent with lastOffsetDelta {header.last_offset_delta}",
        )
    if header.is_control and not allow_control:
        raise KafkaError(ErrorCode.invalid_record, "clients may not write control batches")
    if header.producer_id >= 0 and header.base_sequence < 0 and not header.is_control:
        raise KafkaError(
            ErrorCode.invalid_record, f"invalid sequence number {header.base_sequence}"
        )


assert LOG_OVERHEAD + 4 == PREFIX_SIZE
