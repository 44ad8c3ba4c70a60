"""protocol.records and protocol.varint: v2 batches round-trip through build/parse/decode for every
codec, agree with kafka-python's encoder and decoder, and malformed input only ever raises
CorruptRecordError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from protocol.records import (
    ATTR_DELETE_HORIZON,
    CRC_OFFSET,
    HEADER_SIZE,
    BatchHeader,
    CompressionType,
    NewRecord,
    Record,
    TimestampType,
    batch_has_null_key,
    build_batch,
    compute_crc,
    decode_batch,
    decode_records,
    iter_batch_headers,
    patch_header,
    set_log_append_time,
    verify_crc,
)
from protocol.varint import read_varint, read_varlong, size_of_varint, write_varint

CODECS = st.sampled_from(list(CompressionType))
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
BLOB = st.none() | st.binary(max_size=40)
TIMESTAMPS = st.integers(0, 2**45)
HEADERS = st.lists(st.tuples(st.text(max_size=10), BLOB), max_size=3).map(tuple)
NEW_RECORDS = st.lists(
    st.builds(NewRecord, key=BLOB, value=BLOB, headers=HEADERS, timestamp=TIMESTAMPS), max_size=8
)


def _expected(records: list[NewRecord], base_offset: int) -> list[Record]:
    return [
        Record(base_offset + i, r.timestamp, r.key, r.value, r.headers)  # type: ignore[arg-type]
        for i, r in enumerate(records)
    ]


def _with_batch_length(batch: bytes, new_size: int) -> bytearray:
    """`batch` cut to `new_size` bytes with batchLength and CRC made to match."""
    cut = bytearray(batch[:new_size])
    struct.pack_into(">i", cut, 8, new_size - 12)
    struct.pack_into(">I", cut, CRC_OFFSET, compute_crc(cut, 0, new_size))
    return cut


# --- varint -----------------------------------------------------------------------------------


@given(INT64)
def test_varlong_round_trip(value: int) -> None:
    out = bytearray(b"\xff")
    write_varint(out, value)
    assert len(out) == 1 + size_of_varint(value)
    assert read_varlong(bytes(out), 1) == (value, len(out))


@given(INT32)
def test_varint_round_trip(value: int) -> None:
    out = bytearray()
    write_varint(out, value)
    assert len(out) <= 5
    assert read_varint(out, 0) == (value, len(out))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
    ],
)
def test_varint_known_encodings(value: int, encoded: bytes) -> None:
    out = bytearray()
    write_varint(out, value)
    assert bytes(out) == encoded


def test_varint_malformed() -> None:
    for bad in (b"", b"\x80", b"\xff\xff"):
        with pytest.raises(CorruptRecordError):
            read_varint(bad, 0)
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xff\xff\xff\xff\xff\x01", 0)  # six bytes
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xfe\xff\xff\xff\x1f", 0)  # 5 bytes but beyond int32
    with pytest.raises(CorruptRecordError):
        read_varlong(b"\xff" * 10 + b"\x01", 0)
    with pytest.raises(ValueError):
        write_varint(bytearray(), 2**63)


# --- build / parse / decode round trips ---------------------------------------------------------


@settings(max_examples=150)
@given(
    records=NEW_RECORDS,
    codec=CODECS,
    base_offset=st.integers(0, 2**62),
    producer_id=st.integers(-1, 2**62),
    producer_epoch=st.integers(-1, 2**15 - 1),
    base_sequence=st.integers(-1, 2**31 - 1),
    leader_epoch=INT32,
    transactional=st.booleans(),
)
def test_build_parse_decode_round_trip(
    records: list[NewRecord],
    codec: CompressionType,
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    leader_epoch: int,
    transactional: bool,
) -> None:
    batch = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=leader_epoch,
        is_transactional=transactional,
    )
    header = BatchHeader.parse(batch)
    assert header.size == len(batch)
    assert verify_crc(batch, 0, header)
    assert header.base_offset == base_offset
    assert header.compression is codec
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert header.is_transactional is transactional
    assert not header.is_control
    assert header.records_count == len(records)
    assert header.last_offset_delta == max(len(records) - 1, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        producer_id,
        producer_epoch,
        base_sequence,
    )
    assert header.partition_leader_epoch == leader_epoch
    timestamps = [r.timestamp for r in records]
    assert header.base_timestamp == (timestamps[0] if records else -1)
    assert header.max_timestamp == max(timestamps, default=-1)
    assert decode_records(batch, 0, header) == _expected(records, base_offset)
    assert decode_batch(batch) == _expected(records, base_offset)


@given(records=NEW_RECORDS, codec=CODECS, base_offset=st.integers(0, 2**40))
def test_kafka_python_reads_our_batches(
    records: list[NewRecord], codec: CompressionType, base_offset: int
) -> None:
    batch = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
    )
    (theirs,) = list(MemoryRecords(batch))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (7, 3, 11)
    decoded = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in theirs]
    assert decoded == [
        (base_offset + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)
    ]


@given(
    records=st.lists(st.tuples(BLOB, BLOB, HEADERS, TIMESTAMPS), min_size=1, max_size=8),
    codec=CODECS,
    first_offset=st.integers(0, 2**20),
    idempotent=st.booleans(),
)
def test_we_read_kafka_python_batches(
    records: list[tuple[bytes | None, bytes | None, tuple, int]],
    codec: CompressionType,
    first_offset: int,
    idempotent: bool,
) -> None:
    # kafka-python writes baseOffset 0 and numbers records from `offset` in the offset deltas.
    builder = MemoryRecordsBuilder(
        magic=2, compression_type=int(codec), batch_size=1 << 20, offset=first_offset
    )
    if idempotent:
        builder.set_producer_state(42, 1, 100, is_transactional=True)
    for key, value, headers, timestamp in records:
        assert builder.append(timestamp, key, value, list(headers)) is not None
    builder.close()
    batch = bytes(builder.buffer())
    header = BatchHeader.parse(batch)
    assert verify_crc(batch, 0, header)
    # kafka-python sends a batch uncompressed when compressing would not make it smaller.
    assert header.compression in (codec, CompressionType.NONE)
    assert header.records_count == len(records)
    assert header.is_transactional is idempotent
    assert header.producer_id == (42 if idempotent else -1)
    assert decode_records(batch, 0, header) == [
        Record(first_offset + i, ts, key, value, headers)  # type: ignore[arg-type]
        for i, (key, value, headers, ts) in enumerate(records)
    ]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_we_read_kafka_python_compressed_batches(codec: CompressionType) -> None:
    builder = MemoryRecordsBuilder(magic=2, compression_type=int(codec), batch_size=1 << 22)
    for i in range(2000):
        builder.append(
            1_700_000_000_000 + i, b"key-%d" % (i % 10), b"value %d " % i * 20, [("n", b"%d" % i)]
        )
    builder.close()
    batch = bytes(builder.buffer())
    header = BatchHeader.parse(batch)
    assert header.compression is codec
    records = decode_records(batch, 0, header)
    assert len(records) == 2000
    assert records[1234] == Record(
        1234,
        1_700_000_000_000 + 1234,
        b"key-4",
        b"value 1234 " * 20,
        (("n", b"1234"),),  # type: ignore[arg-type]
    )


def test_we_read_kafka_python_batch_with_offset_gaps_and_many_records() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=4, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 22,
    )  # fmt: skip
    offsets = [0, 1, 5, 6, 100]
    for offset in offsets:
        builder.append(offset, timestamp=1000 - offset, key=b"k", value=b"v" * offset, headers=[])
    batch = bytes(builder.build())
    records = decode_batch(batch)
    assert [r.offset for r in records] == offsets
    assert [r.timestamp for r in records] == [1000 - o for o in offsets]
    assert BatchHeader.parse(batch).last_offset == 100


def test_build_batch_inputs_and_options() -> None:
    batch = build_batch(
        [(b"a", b"1"), NewRecord(b"b", None, (("h", None),), 50, offset_delta=3),
         Record(99, 60, None, b"3", ())],  # type: ignore[arg-type]
        base_offset=10, base_timestamp=40, last_offset_delta=9, is_control=True,
        timestamp_type=TimestampType.CREATE_TIME,
    )  # fmt: skip
    header = BatchHeader.parse(batch)
    assert header.is_control and header.last_offset_delta == 9 and header.next_offset == 20
    assert header.base_timestamp == 40
    records = decode_batch(batch)
    assert [r.offset for r in records] == [10, 13, 14]
    assert records[1] == Record(13, 50, b"b", None, (("h", None),))  # type: ignore[arg-type]
    assert records[2].timestamp == 60


def test_build_batch_default_timestamp_is_now() -> None:
    import time

    before = int(time.time() * 1000)
    (record,) = decode_batch(build_batch([(b"k", b"v")]))
    assert before <= record.timestamp <= int(time.time() * 1000)


def test_build_empty_batch() -> None:
    batch = build_batch([], base_offset=5, last_offset_delta=3)
    header = BatchHeader.parse(batch)
    assert (header.records_count, header.last_offset, header.max_timestamp) == (0, 8, -1)
    assert decode_batch(batch) == []


def test_build_batch_rejects_bad_offset_deltas() -> None:
    with pytest.raises(ValueError):
        build_batch([NewRecord(b"a", b"", offset_delta=2), NewRecord(b"b", b"", offset_delta=2)])
    with pytest.raises(ValueError):
        build_batch([NewRecord(b"a", b"", offset_delta=-1)])
    with pytest.raises(ValueError):
        build_batch([NewRecord(b"a", b"", offset_delta=2**31)])
    with pytest.raises(ValueError):
        build_batch([(b"a", b""), (b"b", b"")], last_offset_delta=0)


# --- CRC, header patching, iteration ---------------------------------------------------------


@given(records=NEW_RECORDS, codec=CODECS, data=st.data(), flip=st.integers(1, 255))
def test_crc_detects_any_flipped_byte(
    records: list[NewRecord], codec: CompressionType, data: st.DataObject, flip: int
) -> None:
    batch = bytearray(build_batch(records, compression=codec))
    index = data.draw(st.integers(CRC_OFFSET, len(batch) - 1))
    batch[index] ^= flip
    header = BatchHeader.parse(batch)
    assert not verify_crc(batch, 0, header)
    with pytest.raises(CorruptRecordError):
        list(iter_batch_headers(batch, check_crc=True))


@given(records=NEW_RECORDS, codec=CODECS, base_offset=st.integers(0, 2**62), epoch=INT32)
def test_patch_header_keeps_crc_valid(
    records: list[NewRecord], codec: CompressionType, base_offset: int, epoch: int
) -> None:
    batch = bytearray(build_batch(records, compression=codec))
    crc_before = BatchHeader.parse(batch).crc
    patch_header(batch, 0, base_offset, epoch)  # type: ignore[arg-type]
    header = BatchHeader.parse(batch)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (
        base_offset,
        epoch,
        crc_before,
    )
    assert verify_crc(batch, 0, header)
    assert decode_records(batch, 0, header) == _expected(records, base_offset)


@given(batches=st.lists(st.tuples(NEW_RECORDS, CODECS), max_size=5))
def test_iter_batch_headers_over_concatenation(
    batches: list[tuple[list[NewRecord], CompressionType]],
) -> None:
    built = []
    offset = 0
    for records, codec in batches:
        built.append(build_batch(records, base_offset=offset, compression=codec))
        offset += max(len(records), 1)
    blob = b"".join(built)
    found = list(iter_batch_headers(blob, check_crc=True))
    assert [pos for pos, _ in found] == [sum(map(len, built[:i])) for i in range(len(built))]
    assert [h for _, h in found] == [BatchHeader.parse(b) for b in built]
    for (pos, header), (records, _) in zip(found, batches):
        assert [r.key for r in decode_records(blob, pos, header)] == [r.key for r in records]


# --- truncation and garbage --------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(CompressionType))
def test_every_truncation_raises(codec: CompressionType) -> None:
    records = [NewRecord(b"key%d" % i, b"value" * i, (("h", b"x"),), 1000 + i) for i in range(20)]
    batch = build_batch(records, compression=codec)
    for cut in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            decode_batch(batch[:cut])
        if cut:
            with pytest.raises(CorruptRecordError):
                list(iter_batch_headers(batch[:cut]))
    # The records section cut short inside a batch whose length and CRC were made to match.
    for new_size in range(HEADER_SIZE, len(batch)):
        shortened = _with_batch_length(batch, new_size)
        header = BatchHeader.parse(shortened)
        assert verify_crc(shortened, 0, header)
        with pytest.raises(CorruptRecordError):
            decode_records(shortened, 0, header)


def test_records_count_mismatch_is_corrupt() -> None:
    batch = bytearray(build_batch([(b"a", b"1"), (b"b", b"2")]))
    for count in (1, 3, -1, 2**31 - 1):
        struct.pack_into(">i", batch, 57, count)
        with pytest.raises(CorruptRecordError):
            decode_batch(batch)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_in_batch(codec_id: int) -> None:
    batch = bytearray(build_batch([(b"a", b"1")]))
    struct.pack_into(">h", batch, 21, codec_id)
    with pytest.raises(CorruptRecordError):
        decode_batch(batch)
    with pytest.raises(KafkaError) as info:
        _ = BatchHeader.parse(batch).compression
    assert info.value.code == ErrorCode.unsupported_compression_type


def test_malformed_record_fields_are_corrupt() -> None:
    def batch_with_section(section: bytes, count: int = 1) -> bytes:
        good = bytearray(build_batch([(b"k", b"v")]))
        out = good[:HEADER_SIZE] + section
        struct.pack_into(">i", out, 8, len(out) - 12)
        struct.pack_into(">i", out, 57, count)
        return bytes(out)

    def record(body: bytes) -> bytes:
        out = bytearray()
        write_varint(out, len(body))
        return bytes(out) + body

    base = b"\x00\x00\x00"  # attributes, timestampDelta 0, offsetDelta 0
    cases = [
        record(base + b"\x03"),  # key length -2
        record(base + b"\x00\x00\x02\x0a"),  # one header, key length 5 past the end
        record(base + b"\x00\x00\x02\x01\x00"),  # one header with a null key
        record(base + b"\x00\x00\x02\x02\xff\xfe\x00"),  # header key not UTF-8
        record(base + b"\x00\x00\x01"),  # negative header count
        record(base + b"\x00\x00\x00\x00"),  # a byte after the headers
        record(base + b"\x00\x00"),  # headers count missing
        b"\x01",  # record length -1
    ]
    for section in cases:
        with pytest.raises(CorruptRecordError):
            decode_batch(batch_with_section(section))
    # (one batch for both sides: build_batch stamps the current time, which may tick in between)
    valid = batch_with_section(record(base + b"\x01\x01\x00"))
    assert decode_batch(valid) == [Record(0, BatchHeader.parse(valid).base_timestamp, None, None, ())]  # type: ignore[arg-type]


@settings(max_examples=300)
@given(garbage=st.binary(max_size=200))
def test_random_garbage_raises_only_corrupt(garbage: bytes) -> None:
    try:
        records = decode_batch(garbage)
    except CorruptRecordError:
        return
    assert isinstance(records, list)


@settings(max_examples=300)
@given(
    codec_id=st.integers(0, 7),
    count=st.integers(-2, 40),
    timestamp_type=st.booleans(),
    section=st.binary(max_size=300),
)
def test_garbage_records_section_raises_only_corrupt(
    codec_id: int, count: int, timestamp_type: bool, section: bytes
) -> None:
    out = bytearray(build_batch([]))[:HEADER_SIZE] + section
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, codec_id | (0x08 if timestamp_type else 0))
    struct.pack_into(">i", out, 57, count)
    try:
        records = decode_batch(out)
    except CorruptRecordError:
        return
    assert len(records) == count


@settings(max_examples=200)
@given(records=NEW_RECORDS, codec=CODECS, data=st.data())
def test_mutated_batch_raises_only_corrupt(
    records: list[NewRecord], codec: CompressionType, data: st.DataObject
) -> None:
    batch = bytearray(build_batch(records, compression=codec))
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(HEADER_SIZE - 4, len(batch) - 1))
        batch[index] = data.draw(st.integers(0, 255))
    try:
        decode_batch(batch)
    except CorruptRecordError:
        pass


# --- LogAppendTime and null keys ------------------------------------------------------------------


@given(records=NEW_RECORDS, codec=CODECS, now=TIMESTAMPS, transactional=st.booleans())
def test_set_log_append_time(
    records: list[NewRecord], codec: CompressionType, now: int, transactional: bool
) -> None:
    original = build_batch(
        records, compression=codec, is_transactional=transactional,
        producer_id=1 if transactional else -1, producer_epoch=0,
        base_sequence=0 if transactional else -1,
    )  # fmt: skip
    batch = bytearray(original)
    before = BatchHeader.parse(batch)
    after = set_log_append_time(batch, 0, before, now)
    assert after == BatchHeader.parse(batch)
    assert verify_crc(batch, 0, after)
    assert after.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert after.max_timestamp == now
    assert after.base_timestamp == before.base_timestamp
    assert (after.compression, after.is_transactional) == (codec, transactional)
    assert batch[HEADER_SIZE:] == original[HEADER_SIZE:]
    assert [r.timestamp for r in decode_records(batch, 0, after)] == [now] * len(records)
    (theirs,) = list(MemoryRecords(bytes(batch)))
    assert theirs.validate_crc()
    assert [(r.timestamp, r.timestamp_type) for r in theirs] == [(now, 1)] * len(records)
    # Stamping the same time again writes nothing.
    snapshot = bytes(batch)
    assert set_log_append_time(batch, 0, after, now) is after
    assert bytes(batch) == snapshot


def test_set_log_append_time_keeps_other_attributes_and_works_at_an_offset() -> None:
    first = build_batch([(b"a", b"1", (), 5)])
    second = bytearray(build_batch([(b"b", b"2", (), 6)], compression=CompressionType.GZIP))
    struct.pack_into(
        ">h", second, 21, struct.unpack_from(">h", second, 21)[0] | ATTR_DELETE_HORIZON
    )
    struct.pack_into(">I", second, CRC_OFFSET, compute_crc(second, 0, len(second)))
    blob = bytearray(first + second)
    header = BatchHeader.parse(blob, len(first))
    updated = set_log_append_time(blob, len(first), header, 777)
    assert updated.attributes == header.attributes | 0x08
    assert [h for _, h in iter_batch_headers(blob, check_crc=True)][1] == updated
    assert decode_records(blob, len(first), updated)[0].timestamp == 777
    with pytest.raises(CorruptRecordError):
        set_log_append_time(bytearray(first[:-1]), 0, BatchHeader.parse(first), 1)


def test_build_batch_log_append_time() -> None:
    batch = build_batch(
        [(b"a", b"1", (), 5), (b"b", b"2", (), 9)],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        max_timestamp=1234,
    )
    header = BatchHeader.parse(batch)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME and header.max_timestamp == 1234
    assert [r.timestamp for r in decode_batch(batch)] == [1234, 1234]


@given(keys=st.lists(st.none() | st.binary(max_size=5), max_size=6), codec=CODECS)
def test_batch_has_null_key(keys: list[bytes | None], codec: CompressionType) -> None:
    batch = build_batch([(key, b"v") for key in keys], compression=codec)
    assert batch_has_null_key(batch, 0, BatchHeader.parse(batch)) is (None in keys)


def test_decode_records_checks_batch_bounds() -> None:
    batch = build_batch([(b"a", b"1")])
    header = BatchHeader.parse(batch)
    with pytest.raises(CorruptRecordError):
        decode_records(batch[:-1], 0, header)


def test_crc32c_is_the_packages_function_without_its_import_cost() -> None:
    """protocol.crc loads the crc32c package's C extension without the package __init__ (which
    imports importlib.metadata, ~60 ms of start-up): same function, same results."""
    import os
    import subprocess
    import sys

    import crc32c as package

    from protocol.crc import crc32c

    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    for n in (0, 1, 7, 64, 4099):
        data = os.urandom(n)
        assert crc32c(data) == package.crc32c(data)
        assert crc32c(memoryview(bytearray(data))) == package.crc32c(data)
    # (Hypothesis, which kio imports when it can and the broker blocks, would import it itself)
    code = "import sys; sys.modules['hypothesis'] = None; import protocol.records; print('importlib.metadata' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
