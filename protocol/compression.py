"""The compression codecs of Kafka record batches.

A compressed v2 batch carries its records section compressed with the codec named by bits 0-2
of the batch attributes; legacy (magic 0/1) wrapper messages carry a compressed message set as
their value. The wire formats, as written by the clients Samsa serves:

- gzip: a gzip stream (RFC 1952), possibly several members.
- snappy: either one raw snappy block (librdkafka, franz-go, sarama) or the xerial framing of
  the Java client and kafka-python: the magic ``\\x82SNAPPY\\x00``, two big-endian int32s
  (version, minimum compatible version), then repeated [int32 length][raw snappy block].
  Both are read (and empty data, which snappy-java writes for empty input); xerial is
  written, with 32 KiB blocks like the Java client.
- lz4: the standard LZ4 frame format with independent blocks (the Java client cannot read linked
  blocks). Messages of magic 0 carry a frame whose header checksum was computed over the magic
  number too (KAFKA-3160); `repair_lz4_header_checksum` makes such a frame readable.
- zstd: a zstd frame, possibly without the content size (streamed by the producer).

Unknown codecs raise KafkaError(unsupported_compression_type); data that does not decompress
raises CorruptRecordError.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib

import cramjam
import zstandard

from protocol.errors import CorruptRecordError, ErrorCode, KafkaError

__all__ = [
    "CompressionType",
    "codec_of",
    "compress",
    "decompress",
    "repair_lz4_header_checksum",
    "xxh32",
]

Buffer = bytes | bytearray | memoryview


class CompressionType(enum.IntEnum):
    """The codec ids of Kafka's record attributes (bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


GZIP_LEVEL = 6
"""Kafka's default compression.gzip.level (zlib's default)."""
ZSTD_LEVEL = 3
"""Kafka's default compression.zstd.level."""
SNAPPY_BLOCK_SIZE = 32 * 1024
"""Uncompressed bytes per xerial block, as the Java client (snappy-java) writes them."""

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_INT32 = struct.Struct(">i")

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_DICT_ID = 0x01

_CORRUPT_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # gzip.BadGzipFile
    EOFError,  # truncated gzip stream
    zlib.error,
    cramjam.DecompressionError,
    zstandard.ZstdError,
)


def codec_of(codec: int) -> CompressionType:
    """The CompressionType for a codec id; KafkaError(unsupported_compression_type) if unknown."""
    try:
        return CompressionType(codec)
    except ValueError:
        raise KafkaError(
            ErrorCode.unsupported_compression_type, f"unknown compression codec {codec}"
        ) from None


def compress(codec: CompressionType | int, data: Buffer) -> bytes:
    """Compress `data` with `codec` in the format Kafka clients read."""
    codec = codec_of(codec)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
    if codec is CompressionType.SNAPPY:
        return _snappy_xerial_compress(data)
    if codec is CompressionType.LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(bytes(data))
        return bytes(compressor.finish())
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)


def decompress(codec: CompressionType | int, data: Buffer) -> bytes:
    """Decompress `data` written with `codec`; CorruptRecordError if it is not valid."""
    codec = codec_of(codec)
    try:
        if codec is CompressionType.NONE:
            return bytes(data)
        if codec is CompressionType.GZIP:
            if not data:
                raise CorruptRecordError("empty gzip data")
            return gzip.decompress(data)
        if codec is CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if codec is CompressionType.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return _zstd_decompress(data)
    except _CORRUPT_ERRORS as exc:
        raise CorruptRecordError(f"{codec.name} data does not decompress: {exc}") from exc


def _snappy_xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    # Empty input still gets one (empty) block: kafka-python takes a bare header for raw snappy.
    for start in range(0, max(len(view), 1), SNAPPY_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + SNAPPY_BLOCK_SIZE])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: Buffer) -> bytes:
    view = memoryview(data)
    if not view:
        return b""  # what snappy-java writes for empty input
    if view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    if len(view) < len(_XERIAL_HEADER):
        raise CorruptRecordError("xerial snappy header truncated")
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(view):
        if len(view) - pos < _INT32.size:
            raise CorruptRecordError(f"xerial snappy block length truncated at {pos}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += _INT32.size
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError(f"xerial snappy block of {length} bytes at {pos} truncated")
        out += cramjam.snappy.decompress_raw(view[pos : pos + length])
        pos += length
    return bytes(out)


def _zstd_decompress(data: Buffer) -> bytes:
    """Decompress one or more zstd frames, with or without a content size."""
    context = zstandard.ZstdDecompressor()
    out = bytearray()
    remaining = bytes(data)
    while True:
        decompressor = context.decompressobj()
        out += decompressor.decompress(remaining)
        if not decompressor.eof:
            raise CorruptRecordError("zstd frame truncated")
        remaining = decompressor.unused_data
        if not remaining:
            return bytes(out)


def repair_lz4_header_checksum(data: Buffer) -> bytes:
    """Rewrite the header checksum byte of an LZ4 frame to the value the LZ4 spec requires.

    Kafka 0.8-0.9 (message format magic 0) computed it over the frame magic number as well as
    the frame descriptor; Kafka ignores it when reading magic 0, and so does Samsa by repairing
    it before decompressing. Data that is not an LZ4 frame is returned unchanged (the
    decompressor then reports it as corrupt).
    """
    buf = bytearray(data)
    if len(buf) < 7 or buf[:4] != LZ4_FRAME_MAGIC:
        return bytes(buf)
    flg = buf[4]
    end = 6 + (8 if flg & _LZ4_FLG_CONTENT_SIZE else 0) + (4 if flg & _LZ4_FLG_DICT_ID else 0)
    if len(buf) <= end:
        return bytes(buf)
    buf[end] = (xxh32(buf[4:end]) >> 8) & 0xFF
    return bytes(buf)


_P1 = 0x9E3779B1
_P2 = 0x85EBCA77
_P3 = 0xC2B2AE3D
_P4 = 0x27D4EB2F
_P5 = 0x165667B1
_M32 = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _M32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """xxHash32 of `data` (the checksum LZ4 frames use); pure Python, meant for short inputs."""
    data = bytes(data)
    length = len(data)
    pos = 0
    if length >= 16:
        lanes = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= length:
            for i, word in enumerate(struct.unpack_from("<4I", data, pos)):
                lanes[i] = (_rotl((lanes[i] + word * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        acc = (
            _rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)
        ) & _M32
    else:
        acc = (seed + _P5) & _M32
    acc = (acc + length) & _M32
    while pos + 4 <= length:
        (word,) = struct.unpack_from("<I", data, pos)
        acc = (_rotl((acc + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < length:
        acc = (_rotl((acc + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc
