"""protocol.legacy: magic 0/1 message sets written by kafka-python's legacy builder upconvert to v2
batches holding the same records; bad CRCs, truncation and malformed wrappers are rejected."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from protocol.compression import CompressionType, compress
from protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from protocol.legacy import LegacyRecord, decode_message_set, upconvert
from protocol.records import BatchHeader, Record, TimestampType, decode_batch, verify_crc

LEGACY_CODECS = [
    CompressionType.NONE,
    CompressionType.GZIP,
    CompressionType.SNAPPY,
    CompressionType.LZ4,
]
BLOB = st.none() | st.binary(max_size=40)
MESSAGES = st.lists(st.tuples(BLOB, BLOB, st.integers(0, 2**45)), min_size=1, max_size=8)


def kafka_python_set(
    magic: int, codec: CompressionType, messages: list[tuple], first_offset: int = 0
) -> bytes:
    """A message set as kafka-python's producer writes it for Produce v0-v2."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 22)
    for i, (key, value, timestamp) in enumerate(messages):
        assert builder.append(first_offset + i, timestamp, key, value) is not None
    return bytes(builder.build())


def message(
    magic: int,
    key: bytes | None,
    value: bytes | None,
    *,
    offset: int = 0,
    attributes: int = 0,
    timestamp: int = -1,
) -> bytes:
    """One legacy message, written by hand for the cases no client writes."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def boundaries(message_set: bytes) -> set[int]:
    positions, pos = {0}, 0
    while pos < len(message_set):
        pos += 12 + struct.unpack_from(">i", message_set, pos + 8)[0]
        positions.add(pos)
    return positions


@settings(max_examples=150)
@given(magic=st.sampled_from([0, 1]), codec=st.sampled_from(LEGACY_CODECS), messages=MESSAGES)
def test_upconvert_kafka_python_message_sets(
    magic: int, codec: CompressionType, messages: list[tuple]
) -> None:
    batch = upconvert(kafka_python_set(magic, codec, messages, first_offset=7))
    header = BatchHeader.parse(batch)
    assert header.size == len(batch)
    assert verify_crc(batch, 0, header)
    assert header.compression is codec
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert (header.base_offset, header.records_count) == (0, len(messages))
    assert header.producer_id == -1
    expected = [
        Record(i, timestamp if magic == 1 else -1, key, value, ())  # type: ignore[arg-type]
        for i, (key, value, timestamp) in enumerate(messages)
    ]
    assert decode_batch(batch) == expected
    # And a real client's decoder agrees.
    (theirs,) = list(MemoryRecords(batch))
    assert theirs.validate_crc()
    assert [(r.offset, r.timestamp, r.key, r.value) for r in theirs] == [
        (r.offset, r.timestamp, r.key, r.value) for r in expected
    ]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_decode_message_set_offsets_and_types(magic: int, codec: CompressionType) -> None:
    messages = [(b"k%d" % i, b"v%d" % i, 1000 + i) for i in range(3)]
    records = decode_message_set(kafka_python_set(magic, codec, messages))
    if magic == 1 and codec is not CompressionType.NONE:
        # kafka-python writes the wrapper at offset 0 with inner relative offsets 0..2, so the
        # absolute offsets Kafka computes (wrapper - last inner + inner) are -2..0.
        assert [r.offset for r in records] == [-2, -1, 0]
    else:
        assert [r.offset for r in records] == [0, 1, 2]
    expected_type = TimestampType.CREATE_TIME if magic == 1 else TimestampType.NO_TIMESTAMP_TYPE
    assert {r.timestamp_type for r in records} == {expected_type}
    assert {r.compression for r in records} == {codec}
    assert {r.magic for r in records} == {magic}


def test_magic_1_wrapper_offset_makes_inner_offsets_absolute() -> None:
    inner = b"".join(message(1, b"k", b"%d" % i, offset=i, timestamp=10 + i) for i in range(3))
    wrapper = message(
        1, None, compress(CompressionType.GZIP, inner), offset=52, attributes=1, timestamp=12
    )
    assert [r.offset for r in decode_message_set(wrapper)] == [50, 51, 52]


def test_magic_0_inner_offsets_are_absolute() -> None:
    inner = b"".join(message(0, b"k", b"%d" % i, offset=100 + i) for i in range(3))
    wrapper = message(0, None, compress(CompressionType.SNAPPY, inner), offset=102, attributes=2)
    assert [r.offset for r in decode_message_set(wrapper)] == [100, 101, 102]


def test_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    inner = b"".join(message(1, b"k", b"v", offset=i, timestamp=10 + i) for i in range(2))
    wrapper = message(
        1, None, compress(CompressionType.LZ4, inner), offset=1, attributes=3 | 0x08, timestamp=999
    )
    records = decode_message_set(wrapper)
    assert [(r.timestamp, r.timestamp_type) for r in records] == [
        (999, TimestampType.LOG_APPEND_TIME)
    ] * 2
    batch = upconvert(wrapper)
    assert BatchHeader.parse(batch).timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in decode_batch(batch)] == [999, 999]


def test_several_wrappers_and_plain_messages_make_one_batch() -> None:
    gzip_set = kafka_python_set(1, CompressionType.GZIP, [(b"a", b"1", 1), (b"b", b"2", 2)])
    plain = message(1, b"c", b"3", timestamp=3)
    snappy_set = kafka_python_set(1, CompressionType.SNAPPY, [(None, b"4", 4)])
    batch = upconvert(gzip_set + plain + snappy_set)
    header = BatchHeader.parse(batch)
    assert header.size == len(batch)
    assert header.compression is CompressionType.SNAPPY  # the last wrapper's codec, as Kafka
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decode_batch(batch)] == [
        (0, b"a", b"1", 1), (1, b"b", b"2", 2), (2, b"c", b"3", 3), (3, None, b"4", 4),
    ]  # fmt: skip
    forced = upconvert(gzip_set + plain, compression=CompressionType.ZSTD)
    assert BatchHeader.parse(forced).compression is CompressionType.ZSTD
    assert len(decode_batch(forced)) == 3


def test_empty_message_set() -> None:
    assert upconvert(b"") == b""
    assert decode_message_set(b"") == []


@given(
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS),
    messages=MESSAGES,
    data=st.data(),
    flip=st.integers(1, 255),
)
def test_bad_crc_is_corrupt(
    magic: int, codec: CompressionType, messages: list[tuple], data: st.DataObject, flip: int
) -> None:
    message_set = bytearray(kafka_python_set(magic, codec, messages))
    starts = sorted(boundaries(bytes(message_set)) - {len(message_set)})
    start = data.draw(st.sampled_from(starts))
    end = start + 12 + struct.unpack_from(">i", message_set, start + 8)[0]
    # Anything from the CRC field to the end of the message: CRC, magic, attributes, ..., value.
    message_set[data.draw(st.integers(start + 12, end - 1))] ^= flip
    with pytest.raises(CorruptRecordError):
        upconvert(message_set)
    with pytest.raises(CorruptRecordError):
        upconvert(message_set, strict=False)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_truncation(magic: int, codec: CompressionType) -> None:
    messages = [(b"key", b"value %d" % i, 50 + i) for i in range(3)]
    message_set = kafka_python_set(magic, codec, messages)
    message_set += kafka_python_set(magic, codec, messages)  # two wrappers when compressed
    whole = boundaries(message_set)
    complete = decode_message_set(message_set)
    for cut in range(len(message_set)):
        prefix = message_set[:cut]
        if cut in whole:
            assert upconvert(prefix) == upconvert(prefix, strict=False)
            continue
        with pytest.raises(CorruptRecordError):
            upconvert(prefix)
        # Fetch-style input: the partial trailing message is dropped.
        kept = decode_message_set(prefix, strict=False)
        previous = max(b for b in whole if b < cut)
        assert kept == decode_message_set(message_set[:previous])
        assert kept == complete[: len(kept)]
        if kept:
            assert decode_batch(upconvert(prefix, strict=False))[-1].value == kept[-1].value
        else:
            assert upconvert(prefix, strict=False) == b""


def test_truncated_inner_message_set_is_corrupt_even_for_fetch() -> None:
    inner = b"".join(message(1, b"k", b"v", offset=i) for i in range(2))
    wrapper = message(1, None, compress(CompressionType.GZIP, inner[:-3]), attributes=1)
    for strict in (True, False):
        with pytest.raises(CorruptRecordError):
            decode_message_set(wrapper, strict=strict)


@pytest.mark.parametrize(
    "wrapper",
    [
        # nested compression
        message(
            1,
            None,
            compress(
                CompressionType.GZIP,
                message(
                    1, None, compress(CompressionType.GZIP, message(1, b"k", b"v")), attributes=1
                ),
            ),
            attributes=1,
        ),
        # inner magic differs from the wrapper's
        message(1, None, compress(CompressionType.GZIP, message(0, b"k", b"v")), attributes=1),
        # a wrapper with a null value, or with no messages inside
        message(0, None, None, attributes=1),
        message(0, None, compress(CompressionType.GZIP, b""), attributes=1),
        # a value that does not decompress
        message(1, None, b"not gzip", attributes=1),
        # an unknown codec id
        message(1, None, b"x", attributes=5),
        # magic 2 where a legacy message was expected
        message(1, b"k", b"v")[:16] + b"\x02" + message(1, b"k", b"v")[17:],
        # a message size below the minimum, and one too small for magic 1
        struct.pack(">qi", 0, 3) + b"\x00" * 3,
        message(0, b"k", b"v")[:8]
        + struct.pack(">i", 14)
        + message(0, b"k", b"v")[12:16]
        + b"\x01\x00"
        + b"\xff" * 12,
        # a key length past the end of the message, and bytes after the value
        struct.pack(">qiI", 0, 14, zlib.crc32(b"\x00\x00\x00\x00\x00\x09\xff\xff\xff\xff"))
        + b"\x00\x00\x00\x00\x00\x09\xff\xff\xff\xff",
        struct.pack(">qiI", 0, 15, zlib.crc32(b"\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x00"))
        + b"\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x00",
    ],
)
def test_malformed_message_sets_are_corrupt(wrapper: bytes) -> None:
    for strict in (True, False):
        with pytest.raises(CorruptRecordError):
            upconvert(wrapper, strict=strict)


def test_zstd_in_a_legacy_message_is_unsupported() -> None:
    wrapper = message(1, None, compress(CompressionType.ZSTD, message(1, b"k", b"v")), attributes=4)
    with pytest.raises(KafkaError) as info:
        upconvert(wrapper)
    assert info.value.code == ErrorCode.unsupported_compression_type


def test_hand_written_messages_match_kafka_python() -> None:
    """The test helper writes what the client writes, so the crafted cases above are realistic."""
    for magic in (0, 1):
        ours = message(magic, b"key", b"value", offset=3, timestamp=77 if magic else -1)
        assert ours == kafka_python_set(magic, CompressionType.NONE, [(b"key", b"value", 77)], 3)
        assert decode_message_set(ours) == [
            LegacyRecord(3, magic, 77 if magic else -1,
                         TimestampType.CREATE_TIME if magic else TimestampType.NO_TIMESTAMP_TYPE,
                         b"key", b"value")
        ]  # fmt: skip


@settings(max_examples=300)
@given(garbage=st.binary(max_size=200), strict=st.booleans())
def test_random_garbage_raises_only_corrupt(garbage: bytes, strict: bool) -> None:
    try:
        result = upconvert(garbage, strict=strict)
    except CorruptRecordError:
        return
    assert isinstance(result, bytes)
