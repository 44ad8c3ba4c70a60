"""protocol.compression: every codec round-trips, reads what real clients write, and turns bad
input into CorruptRecordError (unknown codecs into UNSUPPORTED_COMPRESSION_TYPE)."""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import pytest
import snappy
import xxhash
import zstandard
from hypothesis import given
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from protocol.compression import (
    SNAPPY_BLOCK_SIZE,
    XERIAL_MAGIC,
    CompressionType,
    codec_of,
    compress,
    decompress,
    repair_lz4_header_checksum,
    xxh32,
)
from protocol.errors import CorruptRecordError, ErrorCode, KafkaError

ALL_CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c is not CompressionType.NONE]
# Compressible and incompressible data larger than one snappy block and one LZ4 block (64 KiB).
LARGE = b"".join(b"record %d of a large batch|" % i for i in range(6000)) + bytes(range(256)) * 300


@given(codec=st.sampled_from(ALL_CODECS), data=st.binary(max_size=3000))
def test_round_trip(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_round_trip_large_and_any_buffer_type(codec: CompressionType, kind: type) -> None:
    compressed = compress(codec, kind(LARGE))
    assert decompress(codec, kind(compressed)) == LARGE


@pytest.mark.parametrize("bad", [5, 6, 7, -1, 99])
def test_unknown_codec_is_unsupported(bad: int) -> None:
    for call in (compress, decompress):
        with pytest.raises(KafkaError) as info:
            call(bad, b"x")
        assert info.value.code == ErrorCode.unsupported_compression_type
        assert not isinstance(info.value, CorruptRecordError)
    with pytest.raises(KafkaError):
        codec_of(bad)


def test_codec_of_known_ids() -> None:
    assert [codec_of(i) for i in range(5)] == ALL_CODECS


def _xerial_blocks(data: bytes) -> list[bytes]:
    assert data[:8] == XERIAL_MAGIC
    assert struct.unpack(">ii", data[8:16]) == (1, 1)
    blocks, pos = [], 16
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos)
        blocks.append(data[pos + 4 : pos + 4 + length])
        pos += 4 + length
    assert pos == len(data)
    return blocks


def test_snappy_writes_xerial_with_32k_blocks() -> None:
    compressed = compress(CompressionType.SNAPPY, LARGE)
    blocks = _xerial_blocks(compressed)
    sizes = [len(bytes(cramjam.snappy.decompress_raw(block))) for block in blocks]
    assert sizes[:-1] == [SNAPPY_BLOCK_SIZE] * (len(sizes) - 1)
    assert 0 < sizes[-1] <= SNAPPY_BLOCK_SIZE
    assert sum(sizes) == len(LARGE)
    # The Java client's framing as kafka-python implements it reads ours.
    assert kafka_codec.snappy_decode(compressed) == LARGE


@given(data=st.binary(max_size=2000))
def test_snappy_reads_raw_blocks_and_xerial_frames(data: bytes) -> None:
    raw = snappy.compress(data)  # librdkafka / franz-go style: one raw block
    assert decompress(CompressionType.SNAPPY, raw) == data
    xerial = kafka_codec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=512)
    assert xerial.startswith(XERIAL_MAGIC)
    assert decompress(CompressionType.SNAPPY, xerial) == data


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_empty_input_is_readable_by_kafka_python(codec: CompressionType) -> None:
    compressed = compress(codec, b"")
    assert decompress(codec, compressed) == b""
    decoders = {
        CompressionType.NONE: bytes,
        CompressionType.GZIP: kafka_codec.gzip_decode,
        CompressionType.SNAPPY: kafka_codec.snappy_decode,
        CompressionType.LZ4: kafka_codec.lz4_decode,
        CompressionType.ZSTD: kafka_codec.zstd_decode,
    }
    assert decoders[codec](compressed) == b""


def test_snappy_large_raw_and_xerial() -> None:
    assert decompress(CompressionType.SNAPPY, snappy.compress(LARGE)) == LARGE
    assert decompress(CompressionType.SNAPPY, kafka_codec.snappy_encode(LARGE)) == LARGE


def test_lz4_writes_independent_blocks_readable_by_reference_library() -> None:
    compressed = compress(CompressionType.LZ4, LARGE)
    assert compressed[:4] == b"\x04\x22\x4d\x18"
    flags = compressed[4]
    assert flags >> 6 == 0b01, "frame version 01"
    assert flags & 0x20, "block independence: the Java client cannot read linked blocks"
    assert lz4.frame.decompress(compressed) == LARGE
    assert kafka_codec.lz4_decode(compressed) == LARGE


@given(
    data=st.binary(max_size=3000),
    linked=st.booleans(),
    store_size=st.booleans(),
    content_checksum=st.booleans(),
)
def test_lz4_reads_frames_of_reference_library(
    data: bytes, linked: bool, store_size: bool, content_checksum: bool
) -> None:
    frame = lz4.frame.compress(
        data,
        block_linked=linked,
        store_size=store_size,
        content_checksum=content_checksum,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
    )
    assert decompress(CompressionType.LZ4, frame) == data


def test_zstd_reads_frames_without_content_size_and_several_frames() -> None:
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(LARGE)
    assert zstandard.get_frame_parameters(no_size).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, no_size) == LARGE
    streamed = zstandard.ZstdCompressor().compressobj()
    chunks = streamed.compress(LARGE[:1000]) + streamed.compress(LARGE[1000:])
    assert decompress(CompressionType.ZSTD, chunks + streamed.flush()) == LARGE
    two = kafka_codec.zstd_encode(b"first ") + zstandard.ZstdCompressor().compress(b"second")
    assert decompress(CompressionType.ZSTD, two) == b"first second"


def test_gzip_reads_client_output_and_multiple_members() -> None:
    assert decompress(CompressionType.GZIP, kafka_codec.gzip_encode(LARGE)) == LARGE
    members = gzip.compress(b"one ") + gzip.compress(b"two")
    assert decompress(CompressionType.GZIP, members) == b"one two"
    assert kafka_codec.gzip_decode(compress(CompressionType.GZIP, LARGE)) == LARGE


@pytest.mark.parametrize("codec", COMPRESSED)
def test_every_truncation_is_corrupt(codec: CompressionType) -> None:
    data = b"truncate me " * 300 + bytes(range(256))
    compressed = compress(codec, data)
    # Empty data and a bare xerial header are valid empty snappy streams.
    valid_cuts = {0, 16} if codec is CompressionType.SNAPPY else set()
    for cut in range(len(compressed)):
        if cut in valid_cuts:
            assert decompress(codec, compressed[:cut]) == b""
            continue
        with pytest.raises(CorruptRecordError):
            decompress(codec, compressed[:cut])


def test_truncated_raw_snappy_is_corrupt() -> None:
    raw = snappy.compress(b"raw snappy block " * 100)
    for cut in range(1, len(raw)):
        with pytest.raises(CorruptRecordError):
            decompress(CompressionType.SNAPPY, raw[:cut])


def test_bad_xerial_block_length_is_corrupt() -> None:
    compressed = bytearray(compress(CompressionType.SNAPPY, b"abc" * 100))
    struct.pack_into(">i", compressed, 16, -5)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, compressed)
    struct.pack_into(">i", compressed, 16, 1 << 30)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, compressed)


@given(codec=st.sampled_from(COMPRESSED), garbage=st.binary(max_size=300))
def test_garbage_decompresses_or_is_corrupt(codec: CompressionType, garbage: bytes) -> None:
    try:
        result = decompress(codec, garbage)
    except CorruptRecordError:
        return
    assert isinstance(result, bytes)


@given(codec=st.sampled_from(COMPRESSED), data=st.binary(min_size=1, max_size=300))
def test_garbage_after_known_magic_is_corrupt_or_decodes(
    codec: CompressionType, data: bytes
) -> None:
    prefix = {
        CompressionType.GZIP: b"\x1f\x8b\x08\x00",
        CompressionType.SNAPPY: XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01",
        CompressionType.LZ4: b"\x04\x22\x4d\x18",
        CompressionType.ZSTD: b"\x28\xb5\x2f\xfd",
    }[codec]
    try:
        decompress(codec, prefix + data)
    except CorruptRecordError:
        pass


@given(data=st.binary(max_size=100), seed=st.integers(0, 2**32 - 1))
def test_xxh32_matches_reference(data: bytes, seed: int) -> None:
    assert xxh32(data, seed) == xxhash.xxh32_intdigest(data, seed)


def test_repair_lz4_header_checksum_reads_kafka_08_frames() -> None:
    broken = kafka_codec.lz4_encode_old_kafka(LARGE)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.LZ4, broken)
    assert decompress(CompressionType.LZ4, repair_lz4_header_checksum(broken)) == LARGE


@given(store_size=st.booleans(), data=st.binary(max_size=200))
def test_repair_lz4_header_checksum_keeps_valid_frames(store_size: bool, data: bytes) -> None:
    frame = lz4.frame.compress(data, store_size=store_size)
    assert repair_lz4_header_checksum(frame) == frame


def test_repair_lz4_header_checksum_leaves_other_data_alone() -> None:
    assert repair_lz4_header_checksum(b"not lz4 at all") == b"not lz4 at all"
    assert repair_lz4_header_checksum(b"\x04\x22\x4d\x18\x60") == b"\x04\x22\x4d\x18\x60"
