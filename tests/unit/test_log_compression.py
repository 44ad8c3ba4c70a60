"""Topic compression.type: the leader stores produced batches in the topic's codec (LogValidator)."""

from __future__ import annotations

import pytest
from test_log_support import (
    NOW,
    close_opened_logs,  # noqa: F401  (autouse fixture)
    headers_of,
    open_log,
)

from broker.log import LogConfig
from broker.log.validation import validate_leader_append
from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    BatchHeader,
    CompressionType,
    NewRecord,
    TimestampType,
    build_batch,
    decode_batch,
    verify_crc,
)

PID, EPOCH, SEQ = 4000, 3, 17


def produced(compression: CompressionType, *, transactional: bool = False) -> bytes:
    """An idempotent producer's batch: keys, null key and value, headers, uneven timestamps."""
    records = [
        NewRecord(b"k0", b"v0" * 50, (("h", b"1"), ("empty", b"")), NOW),
        NewRecord(None, b"v1", (), NOW + 7),
        NewRecord(b"k2", None, (("nil", None),), NOW - 3),
        NewRecord(b"k3", b"v3" * 200, (), NOW + 2),
    ]
    return build_batch(
        records,
        compression=compression,
        producer_id=PID,
        producer_epoch=EPOCH,
        base_sequence=SEQ,
        is_transactional=transactional,
    )


def stored(log) -> bytes:
    return log.read(0, 1 << 20).records.read_bytes()


def record_fields(data: bytes, pos: int = 0) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_batch(data, pos)]


@pytest.mark.parametrize("source", [CompressionType.GZIP, CompressionType.NONE])
def test_zstd_topic_stores_other_codecs_as_zstd_with_the_same_records(tmp_path, source):
    log = open_log(tmp_path / "p", compression_type="zstd")
    log.append_as_leader(build_batch([NewRecord(b"a", b"b", (), NOW)]), 5, now_ms=NOW)
    sent = produced(source)
    info = log.append_as_leader(sent, 5, now_ms=NOW)
    assert (info.first_offset, info.last_offset, info.num_messages) == (1, 4, 4)
    data = stored(log)
    first, second = headers_of(data)
    assert first.compression is CompressionType.ZSTD
    assert second.compression is CompressionType.ZSTD
    assert (second.base_offset, second.partition_leader_epoch) == (1, 5)
    assert (second.producer_id, second.producer_epoch, second.base_sequence) == (PID, EPOCH, SEQ)
    assert (second.records_count, second.last_offset_delta) == (4, 3)
    original = BatchHeader.parse(sent)
    assert (second.base_timestamp, second.max_timestamp) == (
        original.base_timestamp,
        original.max_timestamp,
    ) == (NOW, NOW + 7)
    assert info.max_timestamp == NOW + 7
    assert second.timestamp_type is TimestampType.CREATE_TIME
    assert not second.is_transactional
    assert verify_crc(data, first.size, second)
    expected = [(o + 1, *rest) for o, *rest in record_fields(sent)]
    assert record_fields(data, first.size) == expected
    assert [r[2] for r in expected] == [b"k0", None, b"k2", b"k3"]
    assert expected[0][4] == (("h", b"1"), ("empty", b""))
    assert expected[2][3] is None and expected[2][4] == (("nil", None),)
    # the producer state saw the same sequence numbers: a retry is a duplicate
    retry = log.append_as_leader(sent, 5, now_ms=NOW)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (1, 4)
    assert log.log_end_offset == 5


def test_recompressed_batch_keeps_the_transactional_bit(tmp_path):
    log = open_log(tmp_path / "p", compression_type="lz4")
    log.append_as_leader(produced(CompressionType.SNAPPY, transactional=True), 0, now_ms=NOW)
    data = stored(log)
    (header,) = headers_of(data)
    assert header.compression is CompressionType.LZ4
    assert header.is_transactional
    assert header.producer_id == PID
    assert record_fields(data) == record_fields(produced(CompressionType.SNAPPY))


def test_uncompressed_topic_decompresses(tmp_path):
    log = open_log(tmp_path / "p", compression_type="uncompressed")
    sent = produced(CompressionType.ZSTD)
    log.append_as_leader(sent, 0, now_ms=NOW)
    data = stored(log)
    (header,) = headers_of(data)
    assert header.compression is CompressionType.NONE
    assert header.attributes & 0x07 == 0
    assert record_fields(data) == record_fields(sent)
    assert data[61:] == build_batch(decode_batch(sent), compression=CompressionType.NONE)[61:]


@pytest.mark.parametrize(
    ("topic", "codec"),
    [
        ("producer", CompressionType.GZIP),
        ("producer", CompressionType.NONE),
        ("zstd", CompressionType.ZSTD),
        ("gzip", CompressionType.GZIP),
        ("uncompressed", CompressionType.NONE),
    ],
)
def test_batches_in_the_target_codec_or_producer_topics_are_stored_byte_for_byte(
    tmp_path, topic, codec
):
    log = open_log(tmp_path / "p", compression_type=topic)
    sent = produced(codec)
    log.append_as_leader(sent, 9, now_ms=NOW)
    data = stored(log)
    # only baseOffset (0 already) and partitionLeaderEpoch (outside the CRC) differ
    assert data[:12] == sent[:12]
    assert data[16:] == sent[16:]
    assert headers_of(data)[0].partition_leader_epoch == 9


def test_validator_keeps_the_opaque_path_for_the_target_codec():
    sent = produced(CompressionType.ZSTD)
    config = LogConfig(compression_type="zstd")
    (batch,) = validate_leader_append(sent, config, 10, 0, NOW).batches
    assert len(batch.buffers) == 2  # prefix + the request's own bytes, not a rebuilt copy
    assert isinstance(batch.buffers[1], memoryview)


def test_recompression_with_log_append_time(tmp_path):
    log = open_log(
        tmp_path / "p", compression_type="gzip", message_timestamp_type="LogAppendTime"
    )
    sent = produced(CompressionType.NONE)
    info = log.append_as_leader(sent, 0, now_ms=NOW + 99)
    assert info.log_append_time == NOW + 99
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW + 99, 0)
    data = stored(log)
    (header,) = headers_of(data)
    assert header.compression is CompressionType.GZIP
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == NOW + 99
    assert verify_crc(data, 0, header)
    assert {r.timestamp for r in decode_batch(data)} == {NOW + 99}
    assert [(r.key, r.value) for r in decode_batch(data)] == [
        (r.key, r.value) for r in decode_batch(sent)
    ]


def test_several_batches_in_one_append_are_each_recompressed(tmp_path):
    log = open_log(tmp_path / "p", compression_type="snappy")
    a = build_batch([NewRecord(b"a", b"1", (), NOW)], compression=CompressionType.GZIP)
    b = build_batch([NewRecord(b"b", b"2", (), NOW)], compression=CompressionType.SNAPPY)
    c = build_batch([NewRecord(b"c", b"3", (), NOW)] * 2)
    info = log.append_as_leader(a + b + c, 0, now_ms=NOW)
    assert (info.first_offset, info.last_offset) == (0, 3)
    data = stored(log)
    headers = headers_of(data)
    assert [h.compression for h in headers] == [CompressionType.SNAPPY] * 3
    assert [h.base_offset for h in headers] == [0, 1, 2]
    assert data[headers[0].size + 16 : headers[0].size + headers[1].size] == b[16:]
    assert log.segments[-1].size == len(data)
    values = []
    pos = 0
    for h in headers:
        values += [(r.offset, r.value) for r in decode_batch(data, pos)]
        pos += h.size
    assert values == [(0, b"1"), (1, b"2"), (2, b"3"), (3, b"3")]


def test_batch_that_grows_past_max_message_bytes_when_recompressed_is_rejected(tmp_path):
    big = build_batch([NewRecord(b"k", b"x" * 5000, (), NOW)], compression=CompressionType.ZSTD)
    log = open_log(tmp_path / "p", compression_type="uncompressed", max_message_bytes=1000)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(big, 0, now_ms=NOW)
    assert err.value.code == ErrorCode.message_too_large
    assert log.log_end_offset == 0


def test_follower_stores_the_leaders_bytes_whatever_its_compression_type(tmp_path):
    leader = open_log(tmp_path / "leader", compression_type="zstd")
    leader.append_as_leader(produced(CompressionType.GZIP), 2, now_ms=NOW)
    leader_bytes = stored(leader)
    follower = open_log(tmp_path / "follower", compression_type="gzip")
    follower.append_as_follower(leader_bytes, now_ms=NOW)
    assert stored(follower) == leader_bytes
