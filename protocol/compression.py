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

Decompression is bounded: `decompressed_chunks` yields the output in chunks of about
`CHUNK_SIZE` bytes and raises `DecompressedSizeError` as soon as more than `max_size` bytes would
come out, so a compression bomb costs at most `max_size` bytes of output and never a buffer
larger than one chunk (raw snappy, which cannot be streamed, announces its length first and is
refused before it is decompressed). Each codec through its library's bounded API: zlib's
`max_length`, python-lz4's `LZ4FrameDecompressor(max_length)`, zstd fed one group of blocks at a
time (the block headers bound what each call can produce, and tell a truncated frame), snappy's
length preamble.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Iterator

import cramjam
import zstandard

from protocol.errors import CorruptRecordError, ErrorCode, KafkaError

__all__ = [
    "CHUNK_SIZE",
    "CompressionType",
    "Compressor",
    "DecompressedSizeError",
    "codec_of",
    "compress",
    "decompress",
    "decompressed_chunks",
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

CHUNK_SIZE = 256 * 1024
"""About how many decompressed bytes `decompressed_chunks` yields at a time."""

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_MAX_BLOCK = 128 * 1024
"""The most a zstd block can regenerate (RFC 8878, Block_Maximum_Size)."""
_LE32 = struct.Struct("<I")

_CORRUPT_ERRORS: tuple[type[BaseException], ...] = (
    zlib.error,
    cramjam.DecompressionError,
    zstandard.ZstdError,
    RuntimeError,  # python-lz4: "LZ4F_decompress failed with code: ..."
)


class DecompressedSizeError(KafkaError):
    """Decompressing would produce more than the bytes allowed (a compression bomb, or a batch
    that expands past the broker's bound): MESSAGE_TOO_LARGE, the code for a batch too large to
    take, which makes the Java producer split the batch and send the halves."""

    def __init__(self, codec: CompressionType, max_size: int) -> None:
        super().__init__(
            ErrorCode.message_too_large,
            f"{codec.name} records decompress to more than {max_size} bytes",
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
    compressor = Compressor(codec, size=len(data))
    compressor.feed(data)
    return compressor.finish()


class Compressor:
    """Compresses data fed in pieces with `codec` (what `compress` writes for the whole):
    gzip, xerial snappy in 32 KiB blocks, an LZ4 frame of independent blocks, a zstd frame (with
    its content size when `size` is given). `len()` is the compressed bytes so far."""

    def __init__(self, codec: CompressionType | int, size: int | None = None) -> None:
        self.codec = codec_of(codec)
        self._out = bytearray()
        self._pending = bytearray()  # snappy: input not yet a whole block
        self._gzip: zlib._Compress | None = None
        self._lz4: cramjam.lz4.Compressor | None = None
        self._zstd: zstandard.ZstdCompressionObj | None = None
        if self.codec is CompressionType.GZIP:
            self._gzip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
        elif self.codec is CompressionType.SNAPPY:
            self._out += _XERIAL_HEADER
        elif self.codec is CompressionType.LZ4:
            self._lz4 = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        elif self.codec is CompressionType.ZSTD:
            self._zstd = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj(size=-1 if size is None else size)

    def __len__(self) -> int:
        return len(self._out)

    def feed(self, data: Buffer) -> None:
        if self._gzip is not None:
            self._out += self._gzip.compress(data)
        elif self._lz4 is not None:
            self._lz4.compress(bytes(data))
        elif self._zstd is not None:
            self._out += self._zstd.compress(data)
        elif self.codec is CompressionType.SNAPPY:
            self._pending += data
            whole = len(self._pending) - len(self._pending) % SNAPPY_BLOCK_SIZE
            for start in range(0, whole, SNAPPY_BLOCK_SIZE):
                self._snappy_block(memoryview(self._pending)[start : start + SNAPPY_BLOCK_SIZE])
            del self._pending[:whole]
        else:
            self._out += data

    def finish(self) -> bytes:
        if self._gzip is not None:
            self._out += self._gzip.flush()
        elif self._lz4 is not None:
            self._out += self._lz4.finish()
        elif self._zstd is not None:
            self._out += self._zstd.flush()
        elif self.codec is CompressionType.SNAPPY and (self._pending or len(self._out) == len(_XERIAL_HEADER)):
            # Empty input still gets one (empty) block: kafka-python takes a bare header for raw snappy.
            self._snappy_block(memoryview(self._pending))
        return bytes(self._out)

    def _snappy_block(self, block: memoryview) -> None:
        raw = cramjam.snappy.compress_raw(block)
        self._out += _INT32.pack(len(raw))
        self._out += raw


def decompress(codec: CompressionType | int, data: Buffer, max_size: int | None = None) -> bytes:
    """Decompress `data` written with `codec`; CorruptRecordError if it is not valid,
    DecompressedSizeError past `max_size` output bytes (None: no bound)."""
    codec = codec_of(codec)
    if codec is CompressionType.NONE:
        if max_size is not None and len(data) > max_size:
            raise DecompressedSizeError(codec, max_size)
        return bytes(data)
    return b"".join(decompressed_chunks(codec, data, max_size))


def decompressed_chunks(
    codec: CompressionType | int, data: Buffer, max_size: int | None = None
) -> Iterator[bytes]:
    """The decompressed `data`, in chunks of about CHUNK_SIZE bytes (a raw snappy block comes
    whole); CorruptRecordError if `data` is not valid, DecompressedSizeError once the output
    would pass `max_size` bytes (None: no bound). Nothing is decompressed before the first
    chunk is asked for."""
    codec = codec_of(codec)
    limit = 1 << 64 if max_size is None else max_size  # zstd content sizes are below 2**64
    view = memoryview(data).cast("B")
    if codec is CompressionType.NONE:
        if len(view) > limit:
            raise DecompressedSizeError(codec, limit)
        if view:
            yield bytes(view)
        return
    chunks = {
        CompressionType.GZIP: _gzip_chunks,
        CompressionType.SNAPPY: _snappy_chunks,
        CompressionType.LZ4: _lz4_chunks,
        CompressionType.ZSTD: _zstd_chunks,
    }[codec](view, limit)
    total = 0
    try:
        for chunk in chunks:
            total += len(chunk)
            if total > limit:
                raise DecompressedSizeError(codec, limit)
            if chunk:
                yield chunk
    except _CORRUPT_ERRORS as exc:
        raise CorruptRecordError(f"{codec.name} data does not decompress: {exc}") from exc


def _gzip_chunks(view: memoryview, limit: int) -> Iterator[bytes]:
    """One gzip member after another (as Java's GZIPInputStream reads them); trailing zero
    bytes (padding) are allowed, anything else after the last member is not."""
    if not view:
        raise CorruptRecordError("empty gzip data")
    rest: Buffer = view
    while True:
        member = zlib.decompressobj(wbits=31)
        pending: Buffer = rest
        while not member.eof:
            out = member.decompress(pending, min(CHUNK_SIZE, limit + 1))
            pending = member.unconsumed_tail
            if out:
                yield out
            elif not pending and not member.eof:
                raise CorruptRecordError("gzip stream truncated")
        rest = member.unused_data
        if not rest.strip(b"\x00"):
            return


def _snappy_chunks(view: memoryview, limit: int) -> Iterator[bytes]:
    if not view:
        return  # what snappy-java writes for empty input
    if view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        yield _snappy_block(view, limit)
        return
    if len(view) < len(_XERIAL_HEADER):
        raise CorruptRecordError("xerial snappy header truncated")
    pos = len(_XERIAL_HEADER)
    total = 0
    while pos < len(view):
        if len(view) - pos < _INT32.size:
            raise CorruptRecordError(f"xerial snappy block length truncated at {pos}")
        (length,) = _INT32.unpack_from(view, pos)
        pos += _INT32.size
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError(f"xerial snappy block of {length} bytes at {pos} truncated")
        block = _snappy_block(view[pos : pos + length], limit - total)
        total += len(block)
        yield block
        pos += length


def _snappy_block(block: memoryview, limit: int) -> bytes:
    """One raw snappy block, refused by its length preamble if it would pass `limit`."""
    if cramjam.snappy.decompress_raw_len(block) > limit:
        raise DecompressedSizeError(CompressionType.SNAPPY, limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _lz4_chunks(view: memoryview, limit: int) -> Iterator[bytes]:
    """One LZ4 frame (checksums verified by the reference library); nothing may follow it."""
    import lz4.frame  # noqa: PLC0415 - 2.4 ms of start-up for the first LZ4 batch instead

    frame = lz4.frame.LZ4FrameDecompressor()
    pending: Buffer = view
    while not frame.eof:
        out = frame.decompress(pending, min(CHUNK_SIZE, limit + 1))
        pending = b""
        if out:
            yield out
        elif frame.needs_input and not frame.eof:
            raise CorruptRecordError("lz4 frame truncated")
    if frame.unused_data:
        raise CorruptRecordError(f"{len(frame.unused_data)} bytes after the lz4 frame")


_ZSTD_MIN_WINDOW = 1 << 20
"""A smaller decompression bound still lets frames with zstd's usual windows through."""
_ZSTD_MAX_WINDOW = 1 << 31
"""zstd's largest window (ZSTD_WINDOWLOG_MAX on 64-bit): the window when there is no bound."""


def _zstd_chunks(view: memoryview, limit: int) -> Iterator[bytes]:
    """Every zstd frame of `view` (skippable frames skipped). The frame header and block headers
    are read here (RFC 8878) so that each call to the decompressor gets whole blocks that can
    regenerate at most about CHUNK_SIZE bytes, and a frame that ends early is seen as truncated:
    zstd's streaming reader would return its data so far without an error."""
    # the window is memory the decoder reserves before it writes a byte: no more than the bound
    window_limit = min(max(limit, _ZSTD_MIN_WINDOW), _ZSTD_MAX_WINDOW)
    context = zstandard.ZstdDecompressor(max_window_size=window_limit)
    end = len(view)
    pos = 0
    if not end:
        raise CorruptRecordError("empty zstd data")
    while pos < end:
        if end - pos < 8:
            raise CorruptRecordError(f"zstd frame header truncated at {pos}")
        magic = bytes(view[pos : pos + 4])
        if magic[1:] == b"\x2a\x4d\x18" and magic[0] & 0xF0 == 0x50:  # skippable frame
            pos += 8 + _LE32.unpack_from(view, pos + 4)[0]
            if pos > end:
                raise CorruptRecordError("zstd skippable frame truncated")
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError(f"no zstd frame at {pos}")
        descriptor = view[pos + 4]
        content_size_bytes = (0, 2, 4, 8)[descriptor >> 6]
        single_segment = descriptor & 0x20
        if single_segment and not content_size_bytes:
            content_size_bytes = 1
        header = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
        if not single_segment:  # the window descriptor: memory the decoder must reserve
            exponent, mantissa = view[pos + 5] >> 3, view[pos + 5] & 7
            window = (1 << (exponent + 10)) + (1 << (exponent + 7)) * mantissa
            if window > _ZSTD_MAX_WINDOW:
                raise CorruptRecordError(f"zstd window of {window} bytes is past zstd's largest")
            if window > window_limit:
                raise DecompressedSizeError(CompressionType.ZSTD, limit)
        if content_size_bytes:
            content_size = zstandard.frame_content_size(view[pos : pos + header + content_size_bytes])
            if content_size > limit:
                raise DecompressedSizeError(CompressionType.ZSTD, limit)
        frame = context.decompressobj()
        start = pos
        block = pos + header + content_size_bytes
        bound = 0
        while True:
            if end - block < 3:
                raise CorruptRecordError("zstd frame truncated")
            block_header = view[block] | view[block + 1] << 8 | view[block + 2] << 16
            size = block_header >> 3
            kind = (block_header >> 1) & 3
            block += 3 + (1 if kind == 1 else size)
            bound += size if kind < 2 else _ZSTD_MAX_BLOCK
            last = block_header & 1
            if last and descriptor & 0x04:
                block += 4  # content checksum
            if block > end:
                raise CorruptRecordError("zstd frame truncated")
            if last or bound >= CHUNK_SIZE:
                yield frame.decompress(view[start:block])
                start = block
                bound = 0
                if last:
                    break
        if not frame.eof:
            raise CorruptRecordError("zstd frame truncated")
        pos = block


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
