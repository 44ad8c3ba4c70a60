"""Checking produced batches and assigning their offsets (Kafka's LogValidator, magic v2 only).

A produced batch is opaque here: the header and CRC are checked, offsets are assigned by patching
the 16-byte prefix (baseOffset, batchLength, partitionLeaderEpoch) which the CRC does not cover,
and the body is written straight from the request buffer. Only LogAppendTime topics rewrite a
batch in place (maxTimestamp, the timestamp-type bit and the CRC), and only compacted topics look
inside records (to reject null keys). A topic whose compression.type names a codec (anything but
`producer`) has each batch in another codec rebuilt with that codec (`recompress_batch`: same
records, producer fields and flags, new CRC), as Kafka's LogValidator does; a batch already in
that codec takes the opaque path. Followers never recompress: they store the leader's bytes.
Magic v0/v1 message sets must be up-converted before they get here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from broker.log.config import LogConfig
from protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    batch_has_null_key,
    magic_of,
    recompress_batch,
    set_log_append_time,
    verify_crc,
)

PREFIX_SIZE = 16
"""baseOffset, batchLength and partitionLeaderEpoch: the bytes rewritten on append."""
_PREFIX = struct.Struct(">qii")
NO_TIMESTAMP = -1


@dataclass(slots=True)
class ValidBatch:
    """One batch ready to write: the buffers to writev and the facts indexes and state need."""

    header: BatchHeader
    """The header as received (offsets not yet assigned), or of the rebuilt batch when it was
    recompressed (same producer fields and record count, its own size)."""
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


def validate_leader_append(
    records: bytes | bytearray | memoryview,
    config: LogConfig,
    next_offset: int,
    leader_epoch: int,
    now_ms: int,
) -> ValidRecords:
    """Validate a produced records blob and assign offsets from `next_offset`.

    Raises KafkaError with RECORD_LIST_TOO_LARGE, MESSAGE_TOO_LARGE, CORRUPT_MESSAGE,
    INVALID_RECORD or INVALID_TIMESTAMP.
    """
    buf = memoryview(records)
    if len(buf) > config.segment_bytes:
        raise KafkaError(
            ErrorCode.record_list_too_large,
            f"records of {len(buf)} bytes exceed segment.bytes {config.segment_bytes}",
        )
    result = ValidRecords()
    offset = next_offset
    target = config.target_compression
    for pos, header in parse_batches(buf, allow_partial_tail=False):
        _check_batch(buf, pos, header, config, now_ms)
        base = offset
        last = base + header.last_offset_delta
        buffers: list[bytes | bytearray | memoryview]
        if target is not None and header.compression is not target:
            rebuilt = recompress_batch(
                buf, pos, header, target, base_offset=base, partition_leader_epoch=leader_epoch,
                log_append_time=now_ms if config.log_append_time else None,
            )  # fmt: skip
            header = BatchHeader.parse(rebuilt)
            if header.size > config.max_message_bytes:
                raise KafkaError(
                    ErrorCode.message_too_large,
                    f"record batch of {header.size} bytes recompressed with compression.type "
                    f"{config.compression_type} exceeds max.message.bytes {config.max_message_bytes}",
                )
            buffers = [rebuilt]
            max_ts = header.max_timestamp
            offset_of_max = base if config.log_append_time else last
        elif config.log_append_time:
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
    buf: memoryview, pos: int, header: BatchHeader, config: LogConfig, now_ms: int
) -> None:
    if header.size > config.max_message_bytes:
        raise KafkaError(
            ErrorCode.message_too_large,
            f"record batch of {header.size} bytes exceeds max.message.bytes {config.max_message_bytes}",
        )
    if not verify_crc(buf, pos, header):
        raise CorruptRecordError(f"record batch at {pos} failed its CRC check")
    if header.records_count <= 0 or header.last_offset_delta + 1 != header.records_count:
        raise KafkaError(
            ErrorCode.invalid_record,
            f"record count {header.records_count} inconsistent with lastOffsetDelta {header.last_offset_delta}",
        )
    if header.is_control:
        raise KafkaError(ErrorCode.invalid_record, "clients may not write control batches")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise KafkaError(
            ErrorCode.invalid_record, f"invalid sequence number {header.base_sequence}"
        )
    if not config.log_append_time:
        _check_timestamp(header.max_timestamp, config, now_ms)
        _check_timestamp(header.base_timestamp, config, now_ms)
    if config.compact and batch_has_null_key(buf, pos, header):
        raise KafkaError(
            ErrorCode.invalid_record, "compacted topic cannot accept a record without a key"
        )


def _check_timestamp(ts: int, config: LogConfig, now_ms: int) -> None:
    if ts == NO_TIMESTAMP:
        return
    if (
        ts < now_ms - config.message_timestamp_before_max_ms
        or ts > now_ms + config.message_timestamp_after_max_ms
    ):
        raise KafkaError(
            ErrorCode.invalid_timestamp,
            f"timestamp {ts} is out of range (now {now_ms}, before.max.ms "
            f"{config.message_timestamp_before_max_ms}, after.max.ms {config.message_timestamp_after_max_ms})",
        )


assert LOG_OVERHEAD + 4 == PREFIX_SIZE
