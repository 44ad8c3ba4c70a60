"""Hand-built record batches, well-formed and malformed, for the record-check tests.

`record()` writes one v2 record field by field (any length can be made wrong), `batch()` wraps a
records section in a batch header with a correct CRC (any header field can be made wrong), and
`CASES` is the catalogue of malformed produce batches with the answer Apache Kafka 4.3.1 gives
for each, as observed with compat/test_malformed_records.py (which sends them to both brokers),
and Samsa's where it deliberately differs (compat/differences.py says why). The fuzz test
(tests/integration/test_fuzz_records.py) and the unit tests use the same catalogue.
"""

from __future__ import annotations

import gzip
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cramjam
import lz4.frame
import zstandard

from protocol.errors import ErrorCode
from protocol.records import CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD, compute_crc
from protocol.varint import write_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")


def varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def record(
    value: bytes | None = b"v",
    key: bytes | None = None,
    *,
    timestamp_delta: int = 0,
    offset_delta: int = 0,
    attributes: int = 0,
    headers: Sequence[tuple[bytes | None, bytes | None]] = (),
    length_delta: int = 0,
    length: int | None = None,
    tail: bytes = b"",
) -> bytes:
    """One record: its length varint (off by `length_delta`, or `length` outright) and body."""
    body = bytes([attributes]) + varint(timestamp_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for header_key, header_value in headers:
        body += varint(-1) if header_key is None else varint(len(header_key)) + header_key
        body += varint(-1) if header_value is None else varint(len(header_value)) + header_value
    body += tail
    return varint(len(body) + length_delta if length is None else length) + body


def records(n: int, *, timestamp_step: int = 0) -> bytes:
    """`n` well-formed records with values b"r0", b"r1", ..."""
    return b"".join(record(b"r%d" % i, offset_delta=i, timestamp_delta=i * timestamp_step) for i in range(n))


def batch(
    section: bytes,
    count: int,
    *,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    length_delta: int = 0,
    base_offset: int = 0,
) -> bytes:
    """A v2 batch around `section` with a correct CRC (batchLength off by `length_delta`)."""
    now = int(time.time() * 1000)
    base_timestamp = now if base_timestamp is None else base_timestamp
    max_timestamp = base_timestamp if max_timestamp is None else max_timestamp
    last_offset_delta = count - 1 if last_offset_delta is None else last_offset_delta
    out = bytearray(HEADER_SIZE + len(section))
    _HEADER.pack_into(
        out, 0, base_offset, len(out) - LOG_OVERHEAD + length_delta, -1, 2, 0, attributes,
        last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
        base_sequence, count,
    )  # fmt: skip
    out[HEADER_SIZE:] = section
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return bytes(out)


def _ahead(now: int) -> bytes:
    return batch(record(timestamp_delta=10**11), 1, base_timestamp=now, max_timestamp=now + 10**11)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def snappy_raw(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


def lz4_frame(data: bytes) -> bytes:
    return lz4.frame.compress(data, block_linked=False, content_checksum=False)


def zstd_frame(data: bytes, *, content_size: bool = True) -> bytes:
    if content_size:
        return zstandard.ZstdCompressor().compress(data)
    streamed = zstandard.ZstdCompressor().compressobj()
    return streamed.compress(data) + streamed.flush()


def with_crc_flipped(data: bytes) -> bytes:
    out = bytearray(data)
    out[CRC_OFFSET] ^= 1
    return bytes(out)


PLAIN, COMPACTED, LOG_APPEND_TIME = "plain", "compacted", "log-append-time"
"""The topic a case is sent to: default configs, cleanup.policy=compact, or LogAppendTime."""


@dataclass(frozen=True)
class Case:
    """A produced batch and how it is answered: Kafka 4.3.1's code and, where Samsa deliberately
    answers otherwise, Samsa's (`samsa_code`); `record_errors` are the batch indexes Kafka names."""

    name: str
    build: Callable[[], bytes]
    kafka_code: ErrorCode
    topic: str = PLAIN
    samsa_code: ErrorCode | None = None
    record_errors: tuple[int, ...] = ()
    appended: int = 0
    """Records appended when accepted."""

    @property
    def code(self) -> ErrorCode:
        """What Samsa answers."""
        return self.kafka_code if self.samsa_code is None else self.samsa_code


def _three() -> bytes:
    return records(3)


def _now() -> int:
    return int(time.time() * 1000)


INVALID = ErrorCode.invalid_record
CORRUPT = ErrorCode.corrupt_message
UNKNOWN = ErrorCode.unknown_server_error
OK = ErrorCode.none

CASES: list[Case] = [
    Case("well-formed", lambda: batch(_three(), 3), OK, appended=3),
    Case("garbage records section", lambda: batch(b"\x13\x99garbage-garbage-garbage\xff\xff", 1), INVALID),
    Case("count larger than records present", lambda: batch(_three(), 5), INVALID),
    Case("3 records claiming 2^31-1", lambda: batch(_three(), 2**31 - 1), INVALID),
    Case("count smaller than records present", lambda: batch(_three(), 2), INVALID),
    Case("lastOffsetDelta against count", lambda: batch(_three(), 3, last_offset_delta=5), INVALID),
    Case("no records", lambda: batch(b"", 0, last_offset_delta=0), INVALID),
    Case("negative count", lambda: batch(_three(), -1, last_offset_delta=2), INVALID),
    Case("record length past the section", lambda: batch(record(length_delta=50), 1), INVALID),
    Case("record length short", lambda: batch(record(length_delta=-2), 1), INVALID),
    Case("record length long", lambda: batch(record(length_delta=1) + record(offset_delta=1), 2), INVALID),
    Case("negative record length", lambda: batch(record(length=-5), 1), INVALID),
    # Kafka reads the length varint outside its try block: the IllegalArgumentException escapes
    Case("overlong length varint", lambda: batch(b"\xff" * 6 + record(), 1), UNKNOWN, samsa_code=INVALID),
    Case("overlong timestamp varlong", lambda: batch(b"\x20\x00" + b"\xff" * 11 + b"\x00" * 20, 1), INVALID),
    Case("record attributes set", lambda: batch(record(attributes=0x7F), 1), OK, appended=1),
    Case("key length past the record", lambda: batch(varint(6) + b"\x00\x00\x00" + varint(40) + b"kk", 1), INVALID),
    Case("value length past the record", lambda: batch(varint(6) + b"\x00\x00\x00\x01" + varint(60) + b"v", 1), INVALID),
    Case("negative header count", lambda: batch(varint(6) + b"\x00\x00\x00\x01\x02v" + varint(-1), 1), INVALID),
    Case("huge header count", lambda: batch(varint(9) + b"\x00\x00\x00\x01\x02v" + varint(1 << 30), 1), INVALID),
    Case("null header key", lambda: batch(record(headers=[(None, b"x")]), 1), INVALID),
    Case("header key not UTF-8", lambda: batch(record(headers=[(b"\xff\xfe", b"x")]), 1), OK, appended=1),
    Case("bytes after the last record", lambda: batch(record() + b"\x00\x00\x00", 1), INVALID),
    # Kafka stores an uncompressed batch's offset deltas as given (consumers then skip records)
    Case(
        "repeated offset deltas",
        lambda: batch(record(b"a") + record(b"b") + record(b"c"), 3),
        OK, samsa_code=INVALID, appended=3,
    ),
    Case(
        "offset delta past lastOffsetDelta",
        lambda: batch(record(b"a") + record(b"b", offset_delta=1) + record(b"c", offset_delta=100), 3),
        OK, samsa_code=INVALID, appended=3,
    ),
    # CompressionType.forId throws IllegalArgumentException: Kafka answers UNKNOWN_SERVER_ERROR
    Case("codec id 5", lambda: batch(record(), 1, attributes=5), UNKNOWN, samsa_code=ErrorCode.unsupported_compression_type),
    Case("codec id 6", lambda: batch(record(), 1, attributes=6), UNKNOWN, samsa_code=ErrorCode.unsupported_compression_type),
    Case("codec id 7", lambda: batch(record(), 1, attributes=7), UNKNOWN, samsa_code=ErrorCode.unsupported_compression_type),
    # a decompression failure escapes as a KafkaException: UNKNOWN_SERVER_ERROR
    Case("gzip garbage", lambda: batch(b"this is not gzip at all", 1, attributes=1), UNKNOWN, samsa_code=INVALID),
    Case("gzip truncated", lambda: batch(gz(_three())[:-10], 3, attributes=1), UNKNOWN, samsa_code=INVALID),
    Case("gzip empty", lambda: batch(b"", 1, attributes=1), UNKNOWN, samsa_code=INVALID),
    Case("snappy garbage", lambda: batch(b"\xff\xff\xff\xff\xff\x00garbage", 1, attributes=2), UNKNOWN, samsa_code=INVALID),
    Case("lz4 garbage", lambda: batch(b"\x04\x22\x4d\x18garbage-garbage", 1, attributes=3), UNKNOWN, samsa_code=INVALID),
    Case("zstd garbage", lambda: batch(b"\x28\xb5\x2f\xfdgarbage-garbage", 1, attributes=4), UNKNOWN, samsa_code=INVALID),
    Case("gzip count larger than records", lambda: batch(gz(_three()), 5, attributes=1), INVALID),
    Case("zstd count larger than records", lambda: batch(zstd_frame(_three()), 4, attributes=4), INVALID),
    Case("gzip bytes after the records", lambda: batch(gz(_three() + b"\x00\x00"), 3, attributes=1), INVALID),
    # Kafka's skipping iterator does not see that the record runs past the stream
    Case("gzip record length past the stream", lambda: batch(gz(record(length_delta=50)), 1, attributes=1), OK, samsa_code=INVALID, appended=1),
    Case("gzip well-formed", lambda: batch(gz(_three()), 3, attributes=1), OK, appended=3),
    Case("snappy well-formed", lambda: batch(snappy_raw(_three()), 3, attributes=2), OK, appended=3),
    Case("lz4 well-formed", lambda: batch(lz4_frame(_three()), 3, attributes=3), OK, appended=3),
    Case("zstd well-formed", lambda: batch(zstd_frame(_three()), 3, attributes=4), OK, appended=3),
    Case("control batch", lambda: batch(record(b"\x00" * 6, key=b"\x00" * 4), 1, attributes=0x20), INVALID),
    Case("producer id without sequence", lambda: batch(record(), 1, producer_id=1000, producer_epoch=0), INVALID),
    Case("CRC mismatch", lambda: with_crc_flipped(batch(record(), 1)), CORRUPT),
    Case("batchLength past the data", lambda: batch(record(), 1, length_delta=10), INVALID),
    Case("batchLength short of the data", lambda: batch(record(), 1, length_delta=-3), CORRUPT),
    Case("baseOffset not 0", lambda: batch(record(), 1, base_offset=5), INVALID),
    Case("two batches", lambda: batch(record(), 1) + batch(record(), 1), INVALID),
    Case("no timestamps", lambda: batch(record(), 1, base_timestamp=-1, max_timestamp=-1), OK, appended=1),
    Case(
        "timestamp an hour and more ahead",
        lambda: batch(record(b"a") + record(b"b", offset_delta=1, timestamp_delta=10**11), 2),
        ErrorCode.invalid_timestamp, record_errors=(1,),
    ),
    Case("old timestamp (before.max.ms is unlimited)", lambda: batch(record(), 1, base_timestamp=_now() - 10**13), OK, appended=1),
    Case(
        "maxTimestamp ahead, records not",
        lambda: batch(record(), 1, max_timestamp=_now() + 10**10),
        OK, appended=1,
    ),
    Case("producer sets LogAppendTime, in range", lambda: batch(record(), 1, attributes=0x08), OK, appended=1),
    Case(
        "producer sets LogAppendTime, no timestamp",
        lambda: batch(record(), 1, attributes=0x08, base_timestamp=-1, max_timestamp=-1),
        ErrorCode.invalid_timestamp, record_errors=(0,),
    ),
    Case(
        "producer sets LogAppendTime, ahead",
        lambda: batch(record() + record(offset_delta=1), 2, attributes=0x08, max_timestamp=_now() + 10**10),
        ErrorCode.invalid_timestamp, record_errors=(0, 1),
    ),
    Case(
        "null keys on a compacted topic",
        lambda: batch(
            record(key=b"k") + record(offset_delta=1) + record(key=b"k", offset_delta=2) + record(offset_delta=3), 4
        ),
        INVALID, topic=COMPACTED, record_errors=(1, 3),
    ),
    Case(
        "gzip null key on a compacted topic",
        lambda: batch(gz(record(key=b"k") + record(offset_delta=1)), 2, attributes=1),
        INVALID, topic=COMPACTED, record_errors=(1,),
    ),
    Case("keys on a compacted topic", lambda: batch(record(key=b"k"), 1), OK, topic=COMPACTED, appended=1),
    Case(
        "producer sets LogAppendTime on a LogAppendTime topic",
        lambda: batch(record(), 1, attributes=0x08),
        ErrorCode.invalid_timestamp, topic=LOG_APPEND_TIME, record_errors=(0,),
    ),
    Case(
        "timestamp ahead on a LogAppendTime topic",
        # maxTimestamp set to the record's own (not the build time, which the broker's stamp can
        # equal to the millisecond)
        lambda: _ahead(int(time.time() * 1000)),
        OK, topic=LOG_APPEND_TIME, appended=1,
    ),
]
