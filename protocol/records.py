"""The record batch (magic v2) as it travels on the wire and lies on disk.

A batch is opaque to the broker on the hot path: `BatchHeader.parse` reads the 61-byte header,
`verify_crc` checks CRC-32C over attributes..end, and `patch_header` rewrites baseOffset and
partitionLeaderEpoch (both outside the CRC) without touching the record bytes.

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

import enum
import struct
from dataclasses import dataclass
from typing import Iterator

import crc32c as _crc32c

from protocol.errors import CorruptRecordError
from protocol.types import LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence

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


class CompressionType(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


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
        header = cls(*fields)  # type: ignore[arg-type]
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
        return CompressionType(self.attributes & ATTR_COMPRESSION_MASK)

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
    return _crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


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
            raise CorruptRecordError(f"record batch at {pos} truncated: {header.size} > {end - pos}")
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
