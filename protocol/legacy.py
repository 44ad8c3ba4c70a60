"""Kafka's legacy message formats (magic 0 and 1) and their conversion to v2 record batches.

Produce v0-v2 carries a message set: a sequence of messages, each

    offset int64, messageSize int32 (bytes after this field), crc uint32 (CRC-32 (IEEE) of
    magic..end), magic int8, attributes int8 (bits 0-2 codec, bit 3 LogAppendTime in magic 1),
    timestamp int64 (magic 1 only), key (int32 length, -1 = null), value (int32 length, -1 = null)

A compressed message is a wrapper whose value is a compressed message set of the same magic.
In magic 0 the inner messages carry absolute offsets; in magic 1 they are relative (0..n-1) and
the wrapper carries the absolute offset of the last one. Magic 0 has no timestamps, and its LZ4
frames have the header checksum Kafka 0.8/0.9 computed wrongly (see
`protocol.compression.repair_lz4_header_checksum`).

Samsa stores only v2 batches: `upconvert` turns a legacy message set into one v2 batch, one
message at a time (no list of every message), decompressing wrappers with at most
`max_decompressed` bytes in all, the bound produced v2 batches get.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from protocol.compression import CompressionType, decompress, repair_lz4_header_checksum
from protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from protocol.records import NO_TIMESTAMP, BatchBuilder, TimestampType

__all__ = ["LegacyRecord", "decode_message_set", "upconvert"]

Buffer = bytes | bytearray | memoryview

LOG_OVERHEAD = 12
"""offset + messageSize: the bytes not counted in messageSize."""
_OFFSET_AND_SIZE = struct.Struct(">qi")
_CRC_MAGIC_ATTRIBUTES = struct.Struct(">Ibb")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_CRC_OFFSET = 12
_MAGIC_OFFSET = 16
_MIN_MESSAGE_SIZE = {0: 14, 1: 22}
"""messageSize of a message with null key and value: crc, magic, attributes, [timestamp], lengths."""
_ATTR_COMPRESSION_MASK = 0x07
_ATTR_TIMESTAMP_TYPE = 0x08
_LEGACY_CODECS = (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4)


@dataclass(frozen=True, slots=True)
class LegacyRecord:
    """One message of a legacy message set, compressed wrappers expanded.

    `offset` is absolute as Kafka computes it (for magic 1 inner messages: the wrapper's offset
    minus the last inner relative offset plus this one's); `compression` is the codec of the
    wrapper the message came from, NONE if it was not wrapped.
    """

    offset: int
    magic: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    compression: CompressionType = CompressionType.NONE


@dataclass(frozen=True, slots=True)
class _Message:
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> int:
        return self.attributes & _ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & _ATTR_TIMESTAMP_TYPE:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME


def _iter_messages(buf: Buffer, *, strict: bool) -> Iterator[_Message]:
    """Yield the (shallow) messages of a message set, each CRC-checked.

    A truncated trailing message raises CorruptRecordError when `strict`, else ends the set
    (a fetch response may cut the last message short).
    """
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            if strict:
                raise CorruptRecordError(f"message set truncated at {pos}")
            return
        offset, size = _OFFSET_AND_SIZE.unpack_from(buf, pos)
        if size < _MIN_MESSAGE_SIZE[0]:
            raise CorruptRecordError(f"message at {pos} has size {size}, below the minimum")
        message_end = pos + LOG_OVERHEAD + size
        if message_end > end:
            if strict:
                raise CorruptRecordError(f"message at {pos} truncated: {size} bytes declared")
            return
        yield _read_message(buf, pos, offset, message_end)
        pos = message_end


def _read_message(buf: Buffer, pos: int, offset: int, end: int) -> _Message:
    crc, magic, attributes = _CRC_MAGIC_ATTRIBUTES.unpack_from(buf, pos + _CRC_OFFSET)
    if magic not in _MIN_MESSAGE_SIZE:
        raise CorruptRecordError(f"message at {pos} has magic {magic}, not a legacy format")
    if end - pos - LOG_OVERHEAD < _MIN_MESSAGE_SIZE[magic]:
        raise CorruptRecordError(f"magic {magic} message at {pos} too small")
    if zlib.crc32(memoryview(buf)[pos + _MAGIC_OFFSET : end]) != crc:
        raise CorruptRecordError(f"message at {pos} failed its CRC check")
    cursor = pos + _MAGIC_OFFSET + 2
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _INT64.unpack_from(buf, cursor)
        cursor += _INT64.size
    key, cursor = _read_bytes(buf, cursor, end)
    value, cursor = _read_bytes(buf, cursor, end)
    if cursor != end:
        raise CorruptRecordError(f"message at {pos} has {end - cursor} bytes after its value")
    return _Message(offset, magic, attributes, timestamp, key, value)


def _read_bytes(buf: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < _INT32.size:
        raise CorruptRecordError(f"message field length truncated at {pos}")
    (length,) = _INT32.unpack_from(buf, pos)
    pos += _INT32.size
    if length == -1:
        return None, pos
    if length < -1 or pos + length > end:
        raise CorruptRecordError(f"message field length {length} at {pos} exceeds its message")
    return bytes(buf[pos : pos + length]), pos + length


def _unwrap(wrapper: _Message, max_size: int | None) -> bytes:
    """The decompressed message set inside a compressed wrapper message (at most `max_size`
    bytes: DecompressedSizeError past it)."""
    codec = wrapper.codec
    if codec not in _LEGACY_CODECS:
        if codec == CompressionType.ZSTD:
            raise KafkaError(
                ErrorCode.unsupported_compression_type,
                f"zstd needs message format v2, not magic {wrapper.magic}",
            )
        raise CorruptRecordError(f"message names unknown compression codec {codec}")
    if wrapper.value is None:
        raise CorruptRecordError("compressed wrapper message has a null value")
    data: bytes = wrapper.value
    if codec == CompressionType.LZ4 and wrapper.magic == 0:
        data = repair_lz4_header_checksum(data)
    return decompress(codec, data, max_size)


def _inner_messages(wrapper: _Message, data: bytes) -> Iterator[_Message]:
    """The messages of a wrapper's decompressed message set, one at a time."""
    empty = True
    for message in _iter_messages(data, strict=True):
        if message.magic != wrapper.magic:
            raise CorruptRecordError(
                f"inner message magic {message.magic} differs from its wrapper's {wrapper.magic}"
            )
        if message.codec != CompressionType.NONE:
            raise CorruptRecordError("compressed message inside a compressed message")
        empty = False
        yield message
    if empty:
        raise CorruptRecordError("compressed wrapper message holds no messages")


class _Budget:
    """Decompressed bytes left to the wrappers of one message set."""

    def __init__(self, max_size: int | None) -> None:
        self.left = max_size

    def unwrap(self, wrapper: _Message) -> bytes:
        data = _unwrap(wrapper, self.left)
        if self.left is not None:
            self.left -= len(data)
        return data


def decode_message_set(
    buf: Buffer, *, strict: bool = True, max_decompressed: int | None = None
) -> list[LegacyRecord]:
    """Every message of a magic 0/1 message set, compressed wrappers expanded, CRCs checked.

    `strict` (produce input) makes a truncated trailing message an error; without it (fetch
    input) such a message is dropped. Malformed input raises CorruptRecordError; zstd in a
    legacy message raises KafkaError(unsupported_compression_type); wrappers decompressing to
    more than `max_decompressed` bytes in all raise DecompressedSizeError.
    """
    budget = _Budget(max_decompressed)
    records: list[LegacyRecord] = []
    for message in _iter_messages(buf, strict=strict):
        if message.codec == CompressionType.NONE:
            records.append(
                LegacyRecord(
                    message.offset, message.magic, message.timestamp, message.timestamp_type,
                    message.key, message.value,
                )
            )  # fmt: skip
            continue
        inner = list(_inner_messages(message, budget.unwrap(message)))
        codec = CompressionType(message.codec)
        log_append_time = message.timestamp_type is TimestampType.LOG_APPEND_TIME
        offset_shift = message.offset - inner[-1].offset if message.magic == 1 else 0
        for item in inner:
            records.append(
                LegacyRecord(
                    offset=item.offset + offset_shift,
                    magic=item.magic,
                    timestamp=message.timestamp if log_append_time else item.timestamp,
                    timestamp_type=message.timestamp_type
                    if log_append_time
                    else item.timestamp_type,
                    key=item.key,
                    value=item.value,
                    compression=codec,
                )
            )
    return records


def upconvert(
    buf: Buffer,
    *,
    strict: bool = True,
    compression: CompressionType | None = None,
    max_decompressed: int | None = None,
) -> bytes:
    """Convert a magic 0/1 message set into one v2 record batch (b"" if it holds no message).

    Offsets are renumbered from 0 (the log assigns the real ones), timestamps are kept (-1 for
    magic 0, with create-time type), keys and values are kept; the batch is compressed with
    `compression`, or by default with the codec of the last compressed wrapper (as Kafka picks
    the source codec), NONE if there was none. It is LogAppendTime only if every message was.
    Messages are converted as they are read; wrappers may decompress to `max_decompressed`
    bytes in all (DecompressedSizeError past it).
    """
    budget = _Budget(max_decompressed)
    builder = BatchBuilder()
    source = CompressionType.NONE
    every_log_append_time = True
    for message in _iter_messages(buf, strict=strict):
        log_append_time = message.timestamp_type is TimestampType.LOG_APPEND_TIME
        every_log_append_time &= log_append_time
        if message.codec == CompressionType.NONE:
            builder.append(message.key, message.value, (), message.timestamp)
            continue
        for item in _inner_messages(message, budget.unwrap(message)):
            builder.append(item.key, item.value, (), message.timestamp if log_append_time else item.timestamp)
        source = CompressionType(message.codec)
    if not builder.count:
        return b""
    return builder.build(
        compression=source if compression is None else compression,
        timestamp_type=(
            TimestampType.LOG_APPEND_TIME if every_log_append_time else TimestampType.CREATE_TIME
        ),
    )
