"""The record batch (magic v2) as it travels on the wire and lies on disk.

`BatchHeader.parse` reads the 61-byte header, `verify_crc` checks CRC-32C over attributes..end,
and `patch_header` rewrites baseOffset and partitionLeaderEpoch (both outside the CRC) without
touching the record bytes.

Where a feature needs the records themselves (compaction, the group coordinator, tests),
`decode_records` decompresses (bounded by `max_size` where given) and parses them; `build_batch`
and `BatchBuilder` write a batch; `set_max_timestamp` rewrites maxTimestamp and the timestamp
type the way Kafka's DefaultRecordBatch.setMaxTimestamp does. Checking every record of a
produced batch without decoding it is `protocol.record_check`.

Layout (big-endian), offsets from the start of the batch:

    0  baseOffset            int64
    8  batchLength           int32   bytes after this field
   12  partitionLeaderEpoch  int32
   16  magic                 int8    (2)
   17  crc                   uint32  CRC-32C of bytes 21..end
   21  attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
   23  lastOffsetDelta       int32
   27  baseTimestamp         int64
   35  maxTimestamp          int64
   43  producerId            int64
   51  producerEpoch         int16
   53  baseSequence          int32
   57  recordsCount          int32
   61  records...
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from protocol.compression import CompressionType, codec_of, compress, decompress
from protocol.crc import crc32c
from protocol.errors import CorruptRecordError
from protocol.types import LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence
from protocol.varint import INT32_MAX, read_varint, read_varlong, write_varint

HEADER_SIZE = 61
"""Size of the v2 batch header, up to and including recordsCount."""
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes not counted in batchLength."""
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
CURRENT_MAGIC = 2

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
MAX_TIMESTAMP_OFFSET = 35
NO_TIMESTAMP = -1
"""The timestamp of a record that has none (magic 0 messages, empty batches)."""

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]


class TimestampType(enum.IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The parsed header of one v2 record batch."""

    base_offset: Offset
    batch_length: int
    partition_leader_epoch: LeaderEpoch
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: ProducerId
    producer_epoch: ProducerEpoch
    base_sequence: Sequence
    records_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Parse the header at `pos`; raises CorruptRecordError if it is truncated or not v2."""
        if len(buf) - pos < HEADER_SIZE:
            raise CorruptRecordError(f"record batch header truncated at {pos}")
        fields = _HEADER.unpack_from(buf, pos)
        header = cls(*fields)
        if header.magic != CURRENT_MAGIC:
            raise CorruptRecordError(f"unsupported record batch magic {header.magic}")
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"record batch length {header.batch_length} too small")
        return header

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> Offset:
        return Offset(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> Offset:
        return Offset(self.base_offset + self.last_offset_delta + 1)

    @property
    def compression(self) -> CompressionType:
        """The codec; KafkaError(unsupported_compression_type) for ids 5-7."""
        return codec_of(self.attributes & ATTR_COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & ATTR_TIMESTAMP_TYPE
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> Sequence:
        """Sequence of the last record; wraps at 2**31 like Kafka's DefaultRecordBatch."""
        if self.base_sequence < 0:
            return Sequence(-1)
        return Sequence((self.base_sequence + self.last_offset_delta) % (1 << 31))


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C over attributes..end of the batch at `pos` of total `size` bytes."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def verify_crc(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def iter_batch_headers(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = False
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole batch in a records blob.

    Raises CorruptRecordError on a truncated batch, a non-v2 batch or (with check_crc) a bad CRC.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        header = BatchHeader.parse(buf, pos)
        if pos + header.size > end:
            raise CorruptRecordError(
                f"record batch at {pos} truncated: {header.size} > {end - pos}"
            )
        if check_crc and not verify_crc(buf, pos, header):
            raise CorruptRecordError(f"record batch at {pos} failed its CRC check")
        yield pos, header
        pos += header.size


def patch_header(
    buf: bytearray | memoryview, pos: int, base_offset: Offset, leader_epoch: LeaderEpoch
) -> None:
    """Rewrite baseOffset and partitionLeaderEpoch in place; neither is covered by the CRC."""
    struct.pack_into(">q", buf, pos, base_offset)
    struct.pack_into(">i", buf, pos + 12, leader_epoch)


def magic_of(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """The magic byte of the batch or legacy message set entry at `pos` (same place in all formats)."""
    if len(buf) - pos <= MAGIC_OFFSET:
        raise CorruptRecordError("records too short to hold a magic byte")
    return buf[pos + MAGIC_OFFSET]


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: Offset
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to write with `build_batch`.

    `timestamp` None means now; `offset_delta` None means one more than the previous record's
    (0 for the first).
    """

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None
    offset_delta: int | None = None


def decode_records(
    buf: Buffer, pos: int, header: BatchHeader, max_size: int | None = None
) -> list[Record]:
    """Decompress and parse the records of the batch at `pos` whose header is `header`.

    The CRC is not checked here (see `verify_crc`). In a LogAppendTime batch every record's
    timestamp is the batch's maxTimestamp, as Kafka reads it. Anything malformed, including a
    records count that does not match the records section or a codec id outside 0-4, raises
    CorruptRecordError; a records section that decompresses to more than `max_size` bytes
    raises DecompressedSizeError (MESSAGE_TOO_LARGE).
    """
    end = pos + header.size
    if pos < 0 or end > len(buf):
        raise CorruptRecordError(f"record batch at {pos} truncated: needs {header.size} bytes")
    if header.records_count < 0:
        raise CorruptRecordError(f"negative records count {header.records_count}")
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if codec > CompressionType.ZSTD:
        raise CorruptRecordError(f"batch at {pos} names unknown compression codec {codec}")
    data = decompress(codec, memoryview(buf)[pos + HEADER_SIZE : end], max_size)
    log_append_time = (
        header.max_timestamp if header.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    )
    records: list[Record] = []
    position = 0
    try:
        for _ in range(header.records_count):
            record, position = _read_record(data, position, header, log_append_time)
            records.append(record)
    except (IndexError, ValueError, struct.error) as exc:  # UnicodeDecodeError is a ValueError
        raise CorruptRecordError(f"malformed record in batch at {pos}: {exc}") from exc
    if position != len(data):
        raise CorruptRecordError(
            f"batch at {pos} has {len(data) - position} bytes after its "
            f"{header.records_count} records"
        )
    return records


def decode_batch(buf: Buffer, pos: int = 0) -> list[Record]:
    """Parse the header of the batch at `pos` and decode its records."""
    return decode_records(buf, pos, BatchHeader.parse(buf, pos))


def batch_has_null_key(buf: Buffer, pos: int, header: BatchHeader) -> bool:
    """Whether any record of the batch has a null key (rejected on compacted topics)."""
    return any(record.key is None for record in decode_records(buf, pos, header))


def _read_record(
    data: bytes, pos: int, header: BatchHeader, log_append_time: int | None
) -> tuple[Record, int]:
    length, pos = read_varint(data, pos)
    end = pos + length
    if length < 0 or end > len(data):
        raise CorruptRecordError(f"record length {length} at {pos} exceeds the records section")
    pos += 1  # attributes: unused
    timestamp_delta, pos = read_varlong(data, pos)
    offset_delta, pos = read_varint(data, pos)
    key, pos = _read_bytes(data, pos, end)
    value, pos = _read_bytes(data, pos, end)
    header_count, pos = read_varint(data, pos)
    if header_count < 0:
        raise CorruptRecordError(f"negative header count {header_count}")
    headers: list[Header] = []
    for _ in range(header_count):
        header_key, pos = _read_bytes(data, pos, end)
        if header_key is None:
            raise CorruptRecordError("null record header key")
        header_value, pos = _read_bytes(data, pos, end)
        headers.append((header_key.decode("utf-8"), header_value))
    if pos != end:
        raise CorruptRecordError(f"record ends at {pos}, its length says {end}")
    timestamp = (
        log_append_time if log_append_time is not None else header.base_timestamp + timestamp_delta
    )
    record = Record(
        Offset(header.base_offset + offset_delta), timestamp, key, value, tuple(headers)
    )
    return record, pos


def _read_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    """A varint length and that many bytes (None for -1), which must end by `end`."""
    length, pos = read_varint(data, pos)
    if length == -1:
        return None, pos
    if length < -1 or pos + length > end:
        raise CorruptRecordError(f"field length {length} at {pos} exceeds its record")
    return data[pos : pos + length], pos + length


def _write_bytes(out: bytearray, value: Buffer | None) -> None:
    if value is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(value))
        out += value


def _as_new_record(item: NewRecord | Record | tuple[Any, ...]) -> NewRecord:
    if isinstance(item, NewRecord):
        return item
    if isinstance(item, tuple):
        return NewRecord(*item)
    return NewRecord(item.key, item.value, tuple(item.headers), item.timestamp)


class BatchBuilder:
    """Writes the records of one v2 batch as they come, then the batch (`build`).

    The first record's timestamp is the baseTimestamp unless one is given; offset deltas count
    from 0 unless a record names its own (increasing). Used by `build_batch` and by legacy
    up-conversion, which streams messages in without holding them all."""

    def __init__(self, base_timestamp: int | None = None) -> None:
        self.body = bytearray()
        self.count = 0
        self.next_delta = 0
        self.base_timestamp = base_timestamp
        self.max_timestamp = NO_TIMESTAMP
        self._record = bytearray()

    def append(
        self,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[Header] = (),
        timestamp: int | None = None,
        offset_delta: int | None = None,
    ) -> None:
        timestamp = int(time.time() * 1000) if timestamp is None else timestamp
        if self.base_timestamp is None:
            self.base_timestamp = timestamp
        self.max_timestamp = timestamp if self.count == 0 else max(self.max_timestamp, timestamp)
        delta = self.next_delta if offset_delta is None else offset_delta
        if not self.next_delta <= delta <= INT32_MAX:
            raise ValueError(f"offset delta {delta} is not increasing or does not fit an int32")
        self.next_delta = delta + 1
        record = self._record
        record.clear()
        record.append(0)  # attributes
        write_varint(record, timestamp - self.base_timestamp)
        write_varint(record, delta)
        _write_bytes(record, key)
        _write_bytes(record, value)
        headers = tuple(headers)
        write_varint(record, len(headers))
        for header_key, header_value in headers:
            _write_bytes(record, header_key.encode("utf-8"))
            _write_bytes(record, header_value)
        write_varint(self.body, len(record))
        self.body += record
        self.count += 1

    def build(
        self,
        *,
        base_offset: int = 0,
        compression: CompressionType = CompressionType.NONE,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        partition_leader_epoch: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        max_timestamp: int | None = None,
        last_offset_delta: int | None = None,
    ) -> bytes:
        """The batch, CRC included; maxTimestamp defaults to the largest record timestamp and
        lastOffsetDelta to the last record's (it may be given larger: a compacted batch keeps
        its last offset)."""
        if last_offset_delta is None:
            last_offset_delta = max(self.next_delta - 1, 0)
        elif last_offset_delta < self.next_delta - 1:
            raise ValueError(f"last offset delta {last_offset_delta} < last record's {self.next_delta - 1}")
        section = self.body if compression == CompressionType.NONE else compress(compression, self.body)
        attributes = int(codec_of(compression))
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= ATTR_TIMESTAMP_TYPE
        if is_transactional:
            attributes |= ATTR_TRANSACTIONAL
        if is_control:
            attributes |= ATTR_CONTROL
        out = bytearray(HEADER_SIZE + len(section))
        _HEADER.pack_into(
            out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, CURRENT_MAGIC, 0,
            attributes, last_offset_delta,
            NO_TIMESTAMP if self.base_timestamp is None else self.base_timestamp,
            self.max_timestamp if max_timestamp is None else max_timestamp,
            producer_id, producer_epoch, base_sequence, self.count,
        )  # fmt: skip
        out[HEADER_SIZE:] = section
        _CRC.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
        return bytes(out)


def build_batch(
    records: Iterable[NewRecord | Record | tuple[Any, ...]],
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Write one v2 record batch, CRC included.

    `records` are NewRecords, tuples of NewRecord's fields, or Records (whose offset is ignored:
    they are numbered from 0). baseTimestamp defaults to the first record's timestamp and
    maxTimestamp to the largest (both -1 for an empty batch); lastOffsetDelta defaults to the
    last record's offset delta and may be given larger (a compacted batch keeps its last offset).
    """
    builder = BatchBuilder(base_timestamp)
    now = int(time.time() * 1000)
    for item in records:
        record = _as_new_record(item)
        builder.append(
            record.key,
            record.value,
            record.headers,
            now if record.timestamp is None else record.timestamp,
            record.offset_delta,
        )
    return builder.build(
        base_offset=base_offset,
        compression=compression,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=is_transactional,
        is_control=is_control,
        max_timestamp=max_timestamp,
        last_offset_delta=last_offset_delta,
    )


def set_max_timestamp(
    buf: bytearray | memoryview,
    pos: int,
    header: BatchHeader,
    timestamp_type: TimestampType,
    max_timestamp: int,
) -> BatchHeader:
    """Kafka's DefaultRecordBatch.setMaxTimestamp: write the timestamp-type attribute bit (other
    attributes kept) and maxTimestamp of the batch at `pos`, recompute the CRC, and return the
    updated header; nothing is written when the batch already has both. baseTimestamp and the
    records are left as they are (in a LogAppendTime batch every record reads as maxTimestamp)."""
    if pos < 0 or pos + header.size > len(buf):
        raise CorruptRecordError(f"record batch at {pos} truncated: needs {header.size} bytes")
    attributes = header.attributes & ~ATTR_TIMESTAMP_TYPE
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= ATTR_TIMESTAMP_TYPE
    if attributes == header.attributes and header.max_timestamp == max_timestamp:
        return header
    _ATTRIBUTES.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _TIMESTAMP.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    crc = compute_crc(buf, pos, header.size)
    _CRC.pack_into(buf, pos + CRC_OFFSET, crc)
    return dataclasses.replace(header, attributes=attributes, max_timestamp=max_timestamp, crc=crc)


def set_log_append_time(
    buf: bytearray | memoryview, pos: int, header: BatchHeader, timestamp_ms: int
) -> BatchHeader:
    """Stamp the batch at `pos` with LogAppendTime `timestamp_ms` (see `set_max_timestamp`)."""
    return set_max_timestamp(buf, pos, header, TimestampType.LOG_APPEND_TIME, timestamp_ms)
