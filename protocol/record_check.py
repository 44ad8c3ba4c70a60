"""Checking every record of a produced batch, as Kafka's DefaultRecord reader and LogValidator do.

A v2 records section is a sequence of records, each

    length varint (bytes after it), attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
    headerCount varint, headerCount x [keyLength varint (>= 0), key, valueLength varint, value]

`check_batch_records` walks the section of one batch, decompressing it in bounded chunks
(`protocol.compression.decompressed_chunks`, at most `max_decompressed_bytes` in all), and
rejects what Kafka's reader rejects, with Kafka's codes:

- structure (INVALID_RECORD, no record errors, as Kafka's InvalidRecordException from the
  iterator): a record length past the section, a record whose fields do not end exactly at its
  length, varints longer than 5 (10 for the timestamp) bytes, negative header counts or header key
  lengths, fewer records than recordsCount, bytes left after the last record; Samsa also refuses
  key, value and header value lengths below -1 (Kafka reads them as null) and offset deltas other
  than 0, 1, 2, ... (Kafka stores an uncompressed batch's deltas as given, so consumers skip or
  repeat records, and rebuilds a compressed one);
- data that does not decompress: INVALID_RECORD (Kafka answers UNKNOWN_SERVER_ERROR); more than
  `max_decompressed_bytes` decompressed: MESSAGE_TOO_LARGE;
- per record, KIP-467 record errors collected over the whole batch (`RecordValidationError`):
  a null key on a compacted topic (INVALID_RECORD); on a CreateTime topic a timestamp outside
  [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms] (-1 is allowed);
  a batch the producer marked LogAppendTime (INVALID_TIMESTAMP on a LogAppendTime topic, or with
  no timestamp; in range on a CreateTime topic it is taken as Kafka takes it). Any timestamp error
  makes the batch's code INVALID_TIMESTAMP, else INVALID_RECORD.

Record attributes are read and not checked (unused in v2; Kafka ignores them too), header keys
are not decoded (Kafka decodes them lazily, so bad UTF-8 is accepted).

Speed: the walk is one pass of plain integer work on a bytes-like buffer (no object per record);
the per-record rules are checked from the smallest and largest timestamp delta and the count of
null keys, and only a batch that fails them is walked again to name the records (`_RecordJudge`).
The first walk is C (protocol/_recordwalk.c, built by `pip install`; `WALK` says which is in use),
the same contract as `_walk_py`, which walks when the extension was not built and for the judge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from protocol.compression import CompressionType, decompressed_chunks
from protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    HEADER_SIZE,
    BatchHeader,
)

__all__ = [
    "MAX_RECORD_ERRORS",
    "BatchFacts",
    "OverBudget",
    "RecordError",
    "RecordRules",
    "RecordValidationError",
    "check_batch_records",
]

Buffer = bytes | bytearray | memoryview

MAX_RECORD_ERRORS = 1000
"""Record errors kept for the response (all are counted); Kafka sends every one, which for a
batch of a million bad records is a response of tens of megabytes."""
NO_TIMESTAMP = -1
_INT64 = 1 << 64
_INT64_MAX = (1 << 63) - 1
_NO_MIN = 1 << 64
_NO_MAX = -(1 << 64)


def _load_c_walk() -> Callable[..., tuple[int, int, int, int, int, int]] | None:
    try:
        from protocol._recordwalk import walk
    except ImportError:  # installed without a C compiler: the Python walk
        return None
    return walk


_c_walk = _load_c_walk()
WALK = "python" if _c_walk is None else "c"
"""Which first walk checks records: "c" (protocol/_recordwalk.c) or "python" (`_walk_py`)."""


def _java_long(value: int) -> int:
    """`value` wrapped to a Java long, as Kafka's arithmetic on timestamps wraps."""
    return (value + (1 << 63)) % _INT64 - (1 << 63)


@dataclass(frozen=True, slots=True)
class RecordRules:
    """What the records of a produced batch are checked against (the topic's config and now)."""

    now_ms: int
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int
    log_append_time: bool
    """The topic's message.timestamp.type is LogAppendTime."""
    compacted: bool
    max_decompressed_bytes: int
    partition: str | None = None
    """`topic-partition`, for the record error messages (as Kafka's name the partition)."""

    def timestamp_out_of_range(self, timestamp: int) -> bool:
        """Kafka's LogValidator.recordHasInvalidTimestamp, with Java's wrapping arithmetic."""
        diff = _java_long(self.now_ms - timestamp)
        return diff > self.timestamp_before_max_ms or _java_long(-diff) > self.timestamp_after_max_ms


@dataclass(frozen=True, slots=True)
class BatchFacts:
    """What walking a valid batch found."""

    max_timestamp: int
    """The largest record timestamp, computed as Kafka's LogValidator does (at least -1); Kafka
    writes it into the batch header in place of the producer's maxTimestamp."""
    decompressed_bytes: int


@dataclass(frozen=True, slots=True)
class RecordError:
    """One KIP-467 record error: the record's index in its batch and why it was rejected."""

    batch_index: int
    message: str


class RecordValidationError(KafkaError):
    """Records of a batch broke per-record rules: the batch's code, a summary, and record errors
    (the first MAX_RECORD_ERRORS of `total`)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: tuple[RecordError, ...], total: int) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors
        self.total = total


class OverBudget(Exception):
    """The batch needs more work than the caller's budget (it is checked again without one)."""


class _Invalid(Exception):
    """A malformed record section (INVALID_RECORD); caught and reported by check_batch_records."""


def check_batch_records(
    buf: Buffer,
    pos: int,
    header: BatchHeader,
    rules: RecordRules,
    *,
    budget: int | None = None,
    sink: Callable[[bytes | memoryview], None] | None = None,
) -> BatchFacts:
    """Check every record of the batch at `pos` (header already parsed and CRC-checked).

    `budget` bounds the records bytes (decompressed) walked here: past it, OverBudget. `sink`, if
    given, receives the records section uncompressed, chunk by chunk, as it is walked (the
    recompression path compresses it again as it goes). Raises KafkaError (INVALID_RECORD,
    MESSAGE_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE) or RecordValidationError.
    """
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if codec > CompressionType.ZSTD:
        raise KafkaError(
            ErrorCode.unsupported_compression_type, f"unknown compression codec id {codec} in record batch"
        )
    count = header.records_count
    try:
        tmin, tmax, nulls, size = _walk_batch(buf, pos, header, rules, budget, sink, None)
        lat_batch = header.attributes & ATTR_TIMESTAMP_TYPE
        if (rules.compacted and nulls) or _timestamps_suspect(header, rules, tmin, tmax, lat_batch):
            judge = _RecordJudge(header, rules, lat_batch)
            _walk_batch(buf, pos, header, rules, None, None, judge)
            judge.raise_errors()
    except _Invalid as exc:
        raise KafkaError(ErrorCode.invalid_record, f"{exc} (record batch of {count} records)") from None
    except CorruptRecordError as exc:  # compressed data that does not decompress
        raise KafkaError(ErrorCode.invalid_record, exc.message) from None
    if lat_batch:
        max_timestamp = header.max_timestamp
    elif tmax == _NO_MAX:  # no records
        max_timestamp = NO_TIMESTAMP
    else:
        max_timestamp = max(NO_TIMESTAMP, _java_long(header.base_timestamp + tmax))
    return BatchFacts(max_timestamp, size)


def _timestamps_suspect(header: BatchHeader, rules: RecordRules, tmin: int, tmax: int, lat_batch: int) -> bool:
    """Whether some record may break a timestamp rule (then every record is judged)."""
    if lat_batch:
        return (
            rules.log_append_time
            or header.max_timestamp == NO_TIMESTAMP
            or rules.timestamp_out_of_range(header.max_timestamp)
        )
    if rules.log_append_time:
        return False
    lowest, highest = header.base_timestamp + tmin, header.base_timestamp + tmax
    return (
        lowest < rules.now_ms - rules.timestamp_before_max_ms
        or highest > rules.now_ms + rules.timestamp_after_max_ms
        or not -_INT64_MAX <= lowest <= highest <= _INT64_MAX
    )


Judge = Callable[[int, int, int], None]
"""judge(record index, timestamp delta, null keys so far) in the second walk."""


def _walk_batch(
    buf: Buffer,
    pos: int,
    header: BatchHeader,
    rules: RecordRules,
    budget: int | None,
    sink: Callable[[bytes | memoryview], None] | None,
    judge: Judge | None,
) -> tuple[int, int, int, int]:
    """Walk the records of the batch: (smallest and largest timestamp delta, null keys, bytes)."""
    start = pos + HEADER_SIZE
    end = pos + header.size
    zend = header.records_count << 1
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if codec == CompressionType.NONE:
        size = end - start
        if budget is not None and size > budget:
            raise OverBudget
        if size > rules.max_decompressed_bytes:  # only when max.message.bytes exceeds the bound
            raise KafkaError(ErrorCode.message_too_large, f"records section of {size} bytes")
        p, z, tmin, tmax, nulls, _ = _walk(buf, start, end, 0, zend, _NO_MIN, _NO_MAX, 0, True, judge)
        if p != end:
            raise _Invalid("Incorrect declared batch size, records still remaining in file")
        if sink is not None:
            sink(memoryview(buf)[start:end])
        return tmin, tmax, nulls, size
    chunks = decompressed_chunks(codec, memoryview(buf)[start:end], rules.max_decompressed_bytes)
    return _walk_stream(chunks, zend, budget, sink, judge)


def _walk_stream(
    chunks: Iterator[bytes],
    zend: int,
    budget: int | None,
    sink: Callable[[bytes | memoryview], None] | None,
    judge: Judge | None,
) -> tuple[int, int, int, int]:
    """Walk records arriving in chunks; a record split between chunks waits for the rest."""
    pending = bytearray()
    need = 0
    z = 0
    tmin, tmax, nulls = _NO_MIN, _NO_MAX, 0
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if budget is not None and size > budget:
            raise OverBudget
        if z == zend:
            raise _Invalid("Incorrect declared batch size, records still remaining in file")
        if sink is not None:
            sink(chunk)
        pending += chunk
        if len(pending) < need:
            continue
        p, z, tmin, tmax, nulls, need = _walk(pending, 0, len(pending), z, zend, tmin, tmax, nulls, False, judge)
        del pending[:p]
        if z == zend and pending:
            raise _Invalid("Incorrect declared batch size, records still remaining in file")
    if z < zend:  # what is left must hold the remaining records (the final walk says what is not)
        p, z, tmin, tmax, nulls, _ = _walk(pending, 0, len(pending), z, zend, tmin, tmax, nulls, True, judge)
        if p != len(pending):
            raise _Invalid("Incorrect declared batch size, records still remaining in file")
    return tmin, tmax, nulls, size


def _varint(data: Buffer, p: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint's raw (unsigned) value at `p` of at most `max_bytes` bytes, and the
    position after it: Kafka reads an int32 in up to 5 bytes and an int64 in up to 10 (a value
    that does not fit is refused here; Java would drop the high bits)."""
    raw = 0
    shift = 0
    for q in range(p, p + max_bytes):
        byte = data[q]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            if raw >> (32 if max_bytes == 5 else 64):
                raise _Invalid(f"varint at {p} overflows")
            return raw, q + 1
        shift += 7
    raise _Invalid(f"varint at {p} is longer than {max_bytes} bytes")


def _walk(
    data: Buffer,
    p: int,
    end: int,
    z: int,
    zend: int,
    tmin: int,
    tmax: int,
    nulls: int,
    final: bool,
    judge: Judge | None,
) -> tuple[int, int, int, int, int, int]:
    """`_walk_py`, in C when the extension is built and no judge is called."""
    if judge is None and _c_walk is not None:
        return _c_walk(data, p, end, z, zend, tmin, tmax, nulls, final, _Invalid)
    return _walk_py(data, p, end, z, zend, tmin, tmax, nulls, final, judge)


def _walk_py(
    data: Buffer,
    p: int,
    end: int,
    z: int,
    zend: int,
    tmin: int,
    tmax: int,
    nulls: int,
    final: bool,
    judge: Judge | None,
) -> tuple[int, int, int, int, int, int]:
    """Walk whole records of data[p:end]; `z` is twice the index of the next record (the raw
    zigzag of its expected offset delta) and `zend` twice the records count.

    Returns (position, z, smallest and largest timestamp delta, null keys, need): the walk stops
    at zend, or, unless `final`, at a record that is not all there yet (`need`: how many bytes
    from that record's start it takes). Raises _Invalid for a malformed record, and when `final`
    for a record cut off.
    """
    try:
        while z < zend:
            if p + 5 > end:  # near the end: the length varint itself may be cut off
                q = p
                while q < end and data[q] >= 0x80:
                    q += 1
                if q >= end:
                    if final:
                        raise _Invalid("Incorrect declared batch size, premature EOF reached")
                    return p, z, tmin, tmax, nulls, end - p + 1
            start = p
            n = data[p]
            if n < 0x80:
                p += 1
            else:
                b = data[p + 1]
                if b < 0x80:
                    n = (n & 0x7F) | (b << 7)
                    p += 2
                else:
                    n, p = _varint(data, p, 5)
            if n & 1:
                raise _Invalid(f"Invalid record size {(n >> 1) ^ -1}")
            rend = p + (n >> 1)
            if rend > end:
                if final:
                    raise _Invalid(
                        f"Invalid record size: expected {n >> 1} bytes in record payload, but "
                        f"instead the buffer has only {end - p} remaining bytes."
                    )
                return start, z, tmin, tmax, nulls, rend - start
            # attributes (unused), then the timestamp delta
            t = data[p + 1]
            if t < 0x80:
                p += 2
            else:
                b = data[p + 2]
                if b < 0x80:
                    t = (t & 0x7F) | (b << 7)
                    p += 3
                else:
                    t, p = _varint(data, p + 1, 10)
            t = (t >> 1) ^ -(t & 1)
            if t < tmin:
                tmin = t
            if t > tmax:
                tmax = t
            # offset delta: must be this record's index
            o = data[p]
            if o < 0x80:
                p += 1
            else:
                b = data[p + 1]
                if b < 0x80:
                    o = (o & 0x7F) | (b << 7)
                    p += 2
                else:
                    c = data[p + 2]
                    if c < 0x80:
                        o = (o & 0x7F) | ((b & 0x7F) << 7) | (c << 14)
                        p += 3
                    else:
                        o, p = _varint(data, p, 5)
            if o != z:
                raise _Invalid(
                    f"record {z >> 1} has offset delta {(o >> 1) ^ -(o & 1)}: the records of a "
                    f"produced batch must have offset deltas 0, 1, 2, ..."
                )
            # key: length (-1 is null)
            k = data[p]
            if k < 0x80:
                p += 1
            else:
                b = data[p + 1]
                if b < 0x80:
                    k = (k & 0x7F) | (b << 7)
                    p += 2
                else:
                    k, p = _varint(data, p, 5)
            if k & 1:
                if k != 1:
                    raise _Invalid(f"Invalid key size {(k >> 1) ^ -1}")
                nulls += 1
            else:
                p += k >> 1
            # value: length (-1 is null)
            v = data[p]
            if v < 0x80:
                p += 1
            else:
                b = data[p + 1]
                if b < 0x80:
                    v = (v & 0x7F) | (b << 7)
                    p += 2
                else:
                    v, p = _varint(data, p, 5)
            if v & 1:
                if v != 1:
                    raise _Invalid(f"Invalid value size {(v >> 1) ^ -1}")
            else:
                p += v >> 1
            # headers
            h = data[p]
            if h < 0x80:
                p += 1
            else:
                h, p = _varint(data, p, 5)
            if h:
                if h & 1:
                    raise _Invalid(f"Found invalid number of record headers {(h >> 1) ^ -1}")
                h >>= 1
                if h > rend - p:
                    raise _Invalid(
                        f"Found invalid number of record headers. {h} is larger than the "
                        f"remaining size of the buffer"
                    )
                for _ in range(h):
                    k = data[p]
                    if k < 0x80:
                        p += 1
                    else:
                        k, p = _varint(data, p, 5)
                    if k & 1:
                        raise _Invalid(f"Invalid negative header key size {(k >> 1) ^ -1}")
                    p += k >> 1
                    v = data[p]
                    if v < 0x80:
                        p += 1
                    else:
                        v, p = _varint(data, p, 5)
                    if v & 1:
                        if v != 1:
                            raise _Invalid(f"Invalid negative header value size {(v >> 1) ^ -1}")
                    else:
                        p += v >> 1
            if p != rend:
                raise _Invalid(
                    f"Invalid record size: expected to read {rend - start} bytes in record "
                    f"payload, but instead read {p - start}"
                )
            if judge is not None:
                judge(z >> 1, t, nulls)
            z += 2
    except IndexError:
        raise _Invalid("Found invalid record structure") from None
    return p, z, tmin, tmax, nulls, 0


class _RecordJudge:
    """The second walk over a batch that may break per-record rules: each record's errors as
    Kafka's LogValidator.validateRecord finds them (a key error first, else a timestamp error)."""

    def __init__(self, header: BatchHeader, rules: RecordRules, lat_batch: int) -> None:
        self.header = header
        self.rules = rules
        self.lat_batch = lat_batch
        self.nulls = 0
        self.errors: list[RecordError] = []
        self.total = 0
        self.timestamp_errors = 0
        self.suffix = f" in topic partition {rules.partition}" if rules.partition else ""

    def __call__(self, index: int, delta: int, nulls: int) -> None:
        null_key = nulls > self.nulls
        self.nulls = nulls
        rules = self.rules
        message = None
        if null_key and rules.compacted:
            message = f"Compacted topic cannot accept message without key{self.suffix}"
        elif self.lat_batch:
            timestamp = self.header.max_timestamp
            if rules.log_append_time or timestamp == NO_TIMESTAMP:
                message = (
                    f"Invalid timestamp type in message {index}. Producer should not set "
                    f"timestamp type to LogAppendTime."
                )
            elif rules.timestamp_out_of_range(timestamp):
                message = self._out_of_range(index, timestamp)
            if message is not None:
                self.timestamp_errors += 1
        elif not rules.log_append_time:
            timestamp = _java_long(self.header.base_timestamp + delta)
            if timestamp != NO_TIMESTAMP and rules.timestamp_out_of_range(timestamp):
                message = self._out_of_range(index, timestamp)
                self.timestamp_errors += 1
        if message is not None:
            self.total += 1
            if len(self.errors) < MAX_RECORD_ERRORS:
                self.errors.append(RecordError(index, message))

    def _out_of_range(self, index: int, timestamp: int) -> str:
        rules = self.rules
        low = _java_long(rules.now_ms - rules.timestamp_before_max_ms)
        high = _java_long(rules.now_ms + rules.timestamp_after_max_ms)
        return (
            f"Timestamp {timestamp} of message with offset {index} is out of range. "
            f"The timestamp should be within [{low}, {high}]"
        )

    def raise_errors(self) -> None:
        """Kafka's LogValidator.processRecordErrors: INVALID_TIMESTAMP if any record has a
        timestamp error, else INVALID_RECORD with the first three errors in the message."""
        if not self.total:
            return
        errors = tuple(self.errors)
        if self.timestamp_errors:
            raise RecordValidationError(
                ErrorCode.invalid_timestamp,
                "One or more records have been rejected due to invalid timestamp",
                errors,
                self.total,
            )
        shown = ", ".join(f"RecordError(batchIndex={e.batch_index}, message='{e.message}')" for e in errors[:3])
        raise RecordValidationError(
            ErrorCode.invalid_record,
            f"One or more records have been rejected due to {self.total} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]",
            errors,
            self.total,
        )
