"""protocol.record_check and broker.log.validation.check_records: every record of a produced batch
is checked as Kafka checks it, streaming through compressed batches with a bounded output.

Properties: a batch build_batch writes (any codec, keys, values, headers, timestamps) passes and
reports its records' largest timestamp; any mutation of a batch either passes, and then the
reference decoder (protocol.records.decode_records) reads the same records, or is rejected with
a KafkaError, never another exception; records split at any chunk boundary are walked the same.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import time
import tracemalloc
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.config import LogConfig
from broker.log.validation import (
    CheckedRecords,
    check_records,
    max_decompressed_bytes,
    validate_leader_append,
)
from protocol import record_check
from protocol.compression import (
    CHUNK_SIZE,
    CompressionType,
    DecompressedSizeError,
    compress,
    decompressed_chunks,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.legacy import upconvert
from protocol.record_check import (
    MAX_RECORD_ERRORS,
    OverBudget,
    RecordRules,
    RecordValidationError,
    check_batch_records,
)
from protocol.records import (
    CRC_OFFSET,
    HEADER_SIZE,
    BatchHeader,
    NewRecord,
    TimestampType,
    build_batch,
    compute_crc,
    decode_records,
)
from tests.support import malformed
from tests.support.malformed import COMPACTED, LOG_APPEND_TIME, batch, gz, record, records

NOW = int(time.time() * 1000)
LONG_MAX = (1 << 63) - 1
CODECS = list(CompressionType)
TOPIC_CONFIGS = {
    malformed.PLAIN: LogConfig(),
    COMPACTED: LogConfig(cleanup_policy="compact"),
    LOG_APPEND_TIME: LogConfig(message_timestamp_type="LogAppendTime"),
}
BLOB = st.none() | st.binary(max_size=300)
NEW_RECORDS = st.lists(
    st.builds(
        NewRecord,
        key=BLOB,
        value=BLOB,
        headers=st.lists(st.tuples(st.text(max_size=8), BLOB), max_size=3).map(tuple),
        timestamp=st.integers(NOW - 10**6, NOW + 10**6),
    ),
    min_size=1,
    max_size=40,
)


def rules(**overrides: object) -> RecordRules:
    base = RecordRules(NOW, LONG_MAX, 3_600_000, False, False, 16 << 20)
    return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]


def check(data: bytes, **overrides: object) -> record_check.BatchFacts:
    return check_batch_records(data, 0, BatchHeader.parse(data), rules(**overrides))


def refresh_crc(data: bytes | bytearray) -> bytes:
    out = bytearray(data)
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return bytes(out)


# ----------------------------------------------------------------------------- valid batches


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=150)
@given(items=NEW_RECORDS, codec=st.sampled_from(CODECS))
def test_build_batch_output_passes_with_its_max_timestamp(items: list[NewRecord], codec: CompressionType) -> None:
    data = build_batch(items, compression=codec)
    facts = check(data)
    assert facts.max_timestamp == max(r.timestamp or 0 for r in items)
    section = decode_records(data, 0, BatchHeader.parse(data))
    assert len(section) == len(items)


@pytest.mark.parametrize("codec", CODECS)
def test_large_batches_of_every_codec_pass(codec: CompressionType) -> None:
    items = [NewRecord(b"k%d" % i, bytes([i % 251]) * (i % 3000), (("h", b"v"),), NOW + i) for i in range(2000)]
    data = build_batch(items, compression=codec)
    facts = check(data)
    assert facts.max_timestamp == NOW + 1999
    assert facts.decompressed_bytes > 2 * CHUNK_SIZE  # several chunks, records split between them


@settings(max_examples=200)
@given(sizes=st.lists(st.integers(1, 200), min_size=1, max_size=50), n=st.integers(1, 60))
def test_records_split_at_any_chunk_boundary_walk_the_same(sizes: list[int], n: int) -> None:
    section = records(n, timestamp_step=7) + record(b"x" * 300, offset_delta=n, headers=[(b"h", b"v" * 200)])
    chunks, pos = [], 0
    for size in sizes:
        chunks.append(section[pos : pos + size])
        pos += size
    chunks.append(section[pos:])
    whole = record_check._walk(section, 0, len(section), 0, (n + 1) << 1, 1 << 64, -(1 << 64), 0, True, None)
    streamed = record_check._walk_stream(iter(c for c in chunks if c), (n + 1) << 1, None, None, None)
    assert streamed == (whole[2], whole[3], whole[4], len(section))


# ------------------------------------------------------------------------------- mutations


def _mutate(data: bytes, how: int, where: int, byte: int) -> bytes:
    where = HEADER_SIZE + where % max(1, len(data) - HEADER_SIZE)
    if how == 0:
        out = data[:where] + bytes([byte]) + data[where + 1 :]
    elif how == 1:
        out = data[:where] + bytes([byte]) + data[where:]
    elif how == 2:
        out = data[:where] + data[where + 1 :]
    else:
        out = data[:where]
    mutated = bytearray(out)
    struct.pack_into(">i", mutated, 8, len(mutated) - 12)
    return refresh_crc(mutated)


@settings(max_examples=400)
@given(
    items=NEW_RECORDS,
    codec=st.sampled_from(CODECS),
    how=st.integers(0, 3),
    where=st.integers(0, 10**6),
    byte=st.integers(0, 255),
)
def test_any_mutation_passes_with_the_same_decode_or_is_rejected(
    items: list[NewRecord], codec: CompressionType, how: int, where: int, byte: int
) -> None:
    data = _mutate(build_batch(items, compression=codec), how, where, byte)
    header = BatchHeader.parse(data)
    try:
        facts = check_batch_records(data, 0, header, rules(compacted=True))
    except RecordValidationError as e:
        # null keys, or a mutated timestamp delta past message.timestamp.after.max.ms
        assert e.code in (ErrorCode.invalid_record, ErrorCode.invalid_timestamp) and e.record_errors
        return
    except KafkaError as e:
        assert e.code in (ErrorCode.invalid_record, ErrorCode.message_too_large), e
        return
    try:
        decoded = decode_records(data, 0, header)
    except KafkaError as e:  # the reference decoder also decodes header keys as UTF-8
        assert "utf-8" in str(e.__cause__ or e).lower(), e
        return
    assert len(decoded) == header.records_count
    assert all(r.key is not None for r in decoded)
    assert facts.max_timestamp == max(-1, max(r.timestamp for r in decoded))


@settings(max_examples=300)
@given(garbage=st.binary(max_size=200), count=st.integers(-2, 40), codec=st.sampled_from(CODECS))
def test_garbage_sections_never_crash(garbage: bytes, count: int, codec: CompressionType) -> None:
    data = batch(garbage, count, attributes=int(codec))
    try:
        check(data)
    except KafkaError:
        pass


# -------------------------------------------------------------------- the catalogue of cases


REQUEST_LEVEL = {"two batches", "batchLength past the data", "batchLength short of the data", "baseOffset not 0"}
"""Cases the Produce handler answers before the log's check (tests/integration/test_fuzz_records.py)."""


@pytest.mark.parametrize("case", [c for c in malformed.CASES if c.name not in REQUEST_LEVEL], ids=lambda c: c.name)
def test_catalogue_batches_get_samsas_code(case: malformed.Case) -> None:
    """What check_records (the log's part of the Produce checks) answers for each case."""
    try:
        check_records(case.build(), TOPIC_CONFIGS[case.topic], int(time.time() * 1000), partition="t-0")
    except RecordValidationError as e:
        assert (e.code, tuple(r.batch_index for r in e.record_errors)) == (case.code, case.record_errors)
        return
    except KafkaError as e:
        assert e.code == case.code, e
        assert not case.record_errors
        return
    assert case.code == ErrorCode.none


def test_record_errors_as_kafka_writes_them() -> None:
    data = batch(record(key=b"k") + record(offset_delta=1) + record(key=b"k", offset_delta=2) + record(offset_delta=3), 4)
    with pytest.raises(RecordValidationError) as info:
        check_batch_records(data, 0, BatchHeader.parse(data), rules(compacted=True, partition="t-0"))
    assert info.value.code == ErrorCode.invalid_record
    assert [(e.batch_index, e.message) for e in info.value.record_errors] == [
        (1, "Compacted topic cannot accept message without key in topic partition t-0"),
        (3, "Compacted topic cannot accept message without key in topic partition t-0"),
    ]
    assert info.value.message.startswith("One or more records have been rejected due to 2 record errors")
    ahead = batch(record() + record(offset_delta=1, timestamp_delta=10**8), 2)
    with pytest.raises(RecordValidationError) as info:
        check(ahead)
    assert info.value.code == ErrorCode.invalid_timestamp
    assert info.value.message == "One or more records have been rejected due to invalid timestamp"
    (error,) = info.value.record_errors
    assert error.batch_index == 1
    assert error.message.startswith(f"Timestamp {BatchHeader.parse(ahead).base_timestamp + 10**8} of message with offset 1")


def test_a_key_error_hides_the_timestamp_error_of_its_record() -> None:
    data = batch(record(timestamp_delta=10**8) + record(key=b"k", offset_delta=1, timestamp_delta=10**8), 2)
    with pytest.raises(RecordValidationError) as info:
        check(data, compacted=True)
    assert info.value.code == ErrorCode.invalid_timestamp  # record 1's timestamp decides the code
    assert [e.message.split()[0] for e in info.value.record_errors] == ["Compacted", "Timestamp"]


def test_record_errors_are_capped_but_counted() -> None:
    n = MAX_RECORD_ERRORS + 500
    data = build_batch([NewRecord(None, b"") for _ in range(n)])
    with pytest.raises(RecordValidationError) as info:
        check(data, compacted=True)
    assert len(info.value.record_errors) == MAX_RECORD_ERRORS
    assert info.value.total == n
    assert f"due to {n} record errors" in info.value.message


def test_timestamp_bounds_and_no_timestamp() -> None:
    base = NOW - 1000
    data = batch(record() + record(offset_delta=1, timestamp_delta=500), 2, base_timestamp=base)
    assert check(data, timestamp_before_max_ms=1000, timestamp_after_max_ms=0).max_timestamp == base + 500
    with pytest.raises(RecordValidationError) as info:
        check(data, timestamp_before_max_ms=999)
    assert [e.batch_index for e in info.value.record_errors] == [0]
    undated = batch(record(), 1, base_timestamp=-1, max_timestamp=-1)
    assert check(undated, timestamp_before_max_ms=0, timestamp_after_max_ms=0).max_timestamp == -1


# ---------------------------------------------------------------------------- structure


def test_count_claims_are_not_trusted() -> None:
    for count in (4, 2**31 - 1):
        with pytest.raises(KafkaError) as info:
            check(batch(records(3), count))
        assert info.value.code == ErrorCode.invalid_record
        assert "premature EOF" in info.value.message


def test_offset_deltas_must_count_from_zero() -> None:
    with pytest.raises(KafkaError, match="offset delta 2"):
        check(batch(record(b"a") + record(b"b", offset_delta=2), 2))
    long_run = records(300)  # two- and three-byte deltas (300 << 1 needs two bytes)
    assert check(batch(long_run, 300)).decompressed_bytes == len(long_run)


@pytest.mark.parametrize(
    "section",
    [
        record()[:1] + b"\x00" + b"\xff" * 10 + b"\x01",  # an 11-byte timestamp varlong
        record(key=b"k")[:-1],  # cut
        b"\x0c\x00\x00\x00\x03\x02v\x00\x00\x00\x00\x00",  # key length -2
        record(headers=[(b"h", b"x")])[:-2] + b"\x05" + b"x",  # header value length -3
    ],
)
def test_malformed_fields_are_invalid_record(section: bytes) -> None:
    with pytest.raises(KafkaError) as info:
        check(batch(section, 1))
    assert info.value.code == ErrorCode.invalid_record


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codecs_are_unsupported(codec: int) -> None:
    with pytest.raises(KafkaError) as info:
        check(batch(record(), 1, attributes=codec))
    assert info.value.code == ErrorCode.unsupported_compression_type


# ------------------------------------------------------------------------- bounds and budget


def _bomb(codec: CompressionType, section: bytes, **how: bool) -> bytes:
    if codec is CompressionType.ZSTD:
        return malformed.zstd_frame(section, content_size=how.get("content_size", True))
    if codec is CompressionType.SNAPPY and how.get("raw"):
        return malformed.snappy_raw(section)
    return compress(codec, section)


BOMBS = [
    (CompressionType.GZIP, {}),
    (CompressionType.SNAPPY, {}),  # xerial
    (CompressionType.SNAPPY, {"raw": True}),
    (CompressionType.LZ4, {}),
    (CompressionType.ZSTD, {"content_size": True}),
    (CompressionType.ZSTD, {"content_size": False}),
]
BOUND = 1 << 20


@functools.cache
def _bomb_section(shape: str) -> tuple[bytes, int]:
    """64 MiB of records: one record of zeros, or 50,000 empty records (450 KiB) and zeros the
    walk never reaches (the bound stops it first)."""
    if shape == "one huge record":
        return record(bytes(64 << 20)), 1
    section = _empty_records(50_000)
    return section + bytes((64 << 20) - len(section)), 8_000_000


@pytest.mark.parametrize(("codec", "how"), BOMBS)
@pytest.mark.parametrize("shape", ["one huge record", "millions of empty records"])
def test_bombs_stop_at_the_bound_with_bounded_memory(codec: CompressionType, how: dict[str, bool], shape: str) -> None:
    section, count = _bomb_section(shape)
    data = batch(_bomb(codec, section, **how), count, attributes=int(codec))
    bound = BOUND if shape == "one huge record" else BOUND // 4
    tracemalloc.start()
    try:
        with pytest.raises(KafkaError) as info:
            check(data, max_decompressed_bytes=bound)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.code == ErrorCode.message_too_large
    # Decompressed output is held a chunk at a time, except one record that spans chunks, which
    # is held whole: never more than the bound (raw snappy is refused by its length preamble).
    limit = 8 * CHUNK_SIZE + len(data) + (bound * 5 // 4 if shape == "one huge record" else 0)
    assert peak < limit, peak


def _empty_records(count: int) -> bytes:
    """`count` records with a null key and an empty value."""
    out = bytearray()
    for i in range(count):
        body = b"\x00\x00" + malformed.varint(i) + b"\x01\x00\x00"
        out += malformed.varint(len(body)) + body
    return bytes(out)


@pytest.mark.parametrize("codec", [c for c in CODECS if c is not CompressionType.NONE])
def test_decompressed_chunks_are_bounded_and_exact(codec: CompressionType) -> None:
    data = compress(codec, bytes(range(256)) * 5000)
    chunks = list(decompressed_chunks(codec, data, 1_280_000))
    assert b"".join(chunks) == bytes(range(256)) * 5000
    assert max(len(c) for c in chunks) <= CHUNK_SIZE or codec is CompressionType.SNAPPY
    with pytest.raises(DecompressedSizeError):
        list(decompressed_chunks(codec, data, 1_279_999))


def test_budget_sends_big_batches_elsewhere() -> None:
    data = build_batch([NewRecord(None, b"x" * 1000) for _ in range(100)], compression=CompressionType.ZSTD)
    with pytest.raises(OverBudget):
        check_batch_records(data, 0, BatchHeader.parse(data), rules(), budget=50_000)
    check_batch_records(data, 0, BatchHeader.parse(data), rules(), budget=200_000)
    with pytest.raises(OverBudget):
        check_records(build_batch([NewRecord(None, b"x" * 1000) for _ in range(100)]), LogConfig(), NOW, budget=1000)


def test_the_bound_follows_max_message_bytes() -> None:
    assert max_decompressed_bytes(LogConfig()) == 16 * 1_048_588
    assert max_decompressed_bytes(LogConfig(max_message_bytes=1000)) == 16 << 20
    assert max_decompressed_bytes(LogConfig(max_message_bytes=8 << 20)) == 128 << 20


def _legacy_message(offset: int, attributes: int, value: bytes) -> bytes:
    body = struct.pack(">bbqi", 1, attributes, NOW, -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def test_legacy_upconversion_obeys_the_bound() -> None:
    inner = b"".join(_legacy_message(i, 0, bytes(1 << 20)) for i in range(8))
    wrapper = _legacy_message(7, int(CompressionType.GZIP), gz(inner))
    assert BatchHeader.parse(upconvert(wrapper, max_decompressed=16 << 20)).records_count == 8
    with pytest.raises(DecompressedSizeError):
        upconvert(wrapper, max_decompressed=4 << 20)


# ------------------------------------------------------------------ what check_records stores


def test_max_timestamp_and_timestamp_type_are_rewritten_as_kafka_does() -> None:
    ahead = batch(record() + record(offset_delta=1, timestamp_delta=5), 2, base_timestamp=NOW, max_timestamp=NOW + 10**9)
    (checked,) = check_records(ahead, LogConfig(), NOW).batches
    assert checked.header.max_timestamp == NOW + 5
    producer_lat = batch(record(), 1, attributes=0x08, base_timestamp=NOW - 7, max_timestamp=NOW)
    result = check_records(producer_lat, LogConfig(), NOW)
    assert result.batches[0].header.timestamp_type is TimestampType.CREATE_TIME
    assert result.batches[0].header.max_timestamp == NOW
    assert result.batches[0].header.crc == compute_crc(result.data, 0, len(result))
    untouched = batch(record(), 1, base_timestamp=NOW, max_timestamp=NOW)
    assert check_records(untouched, LogConfig(), NOW).data == untouched


def test_recompression_streams_and_gives_up_past_max_message_bytes() -> None:
    items = [NewRecord(b"k", bytes([i % 7]) * 2000, (), NOW) for i in range(600)]
    sent = build_batch(items, compression=CompressionType.ZSTD)
    stored = check_records(sent, LogConfig(compression_type="gzip"), NOW)
    header = stored.batches[0].header
    assert header.compression is CompressionType.GZIP
    assert [(r.key, r.value) for r in decode_records(stored.data, 0, header)] == [(r.key, r.value) for r in items]
    with pytest.raises(KafkaError) as info:
        check_records(sent, LogConfig(compression_type="uncompressed", max_message_bytes=100_000), NOW)
    assert info.value.code == ErrorCode.message_too_large


def test_checked_records_are_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    config = LogConfig()
    checked = check_records(build_batch([NewRecord(None, b"v", (), NOW)]), config, NOW)
    assert isinstance(checked, CheckedRecords)

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("checked again")

    monkeypatch.setattr("broker.log.validation.check_records", fail)
    valid = validate_leader_append(checked, config, 42, 3, NOW)
    assert (valid.first_offset, valid.last_offset) == (42, 42)
    with pytest.raises(AssertionError, match="checked again"):  # another config: checked again
        validate_leader_append(checked, LogConfig(cleanup_policy="compact"), 42, 3, NOW)
