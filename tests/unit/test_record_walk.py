"""protocol/_recordwalk.c against protocol.record_check._walk_py: the C walk over a produced batch's
records gives exactly the Python walk's result, or raises _Invalid with exactly its message, on
valid sections, on crafted malformed fields (overlong and overflowing varints, negative lengths,
wrong offset deltas and counts, header counts), on mutated, truncated and random bytes, at any
`end` inside the buffer and any chunk boundary (final=False), over bytes, bytearray and memoryview.

The import below fails when the extension was not built: `pip install -e .` builds it (setup.py),
and the broker would otherwise walk in Python at several times the CPU per byte.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import record_check
from protocol.record_check import _Invalid, _walk_py
from tests.support.malformed import record, varint

try:
    from protocol import _recordwalk
except ImportError:
    pytest.fail("protocol/_recordwalk.c is not built here: `.venv/bin/pip install -e .` builds it", pytrace=False)

NO_MIN, NO_MAX = 1 << 64, -(1 << 64)
Outcome = tuple[str, object]


def outcome(walk: Callable[..., tuple[int, ...]], data: object, args: tuple[object, ...], last: object) -> Outcome:
    try:
        return "ok", walk(data, *args, last)
    except _Invalid as exc:
        return "invalid", str(exc)


def same(
    data: bytes,
    p: int = 0,
    end: int | None = None,
    z: int = 0,
    zend: int = 0,
    tmin: int = NO_MIN,
    tmax: int = NO_MAX,
    nulls: int = 0,
    final: bool = True,
    kind: type = bytes,
) -> Outcome:
    """Both walks over `data`; asserts they agree and returns what they gave."""
    args = (p, len(data) if end is None else end, z, zend, tmin, tmax, nulls, final)
    python = outcome(_walk_py, data, args, None)
    c = outcome(_recordwalk.walk, kind(data), args, _Invalid)
    assert c == python, (data.hex(), args)
    return c


def test_the_broker_walks_records_in_c() -> None:
    assert record_check.WALK == "c"


# ------------------------------------------------------------------------- generated records

BLOB = st.none() | st.binary(max_size=40)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
TIMESTAMP_DELTA = st.integers(-300, 300) | INT64
RECORD = st.tuples(
    TIMESTAMP_DELTA, BLOB, BLOB, st.lists(st.tuples(st.binary(max_size=8), BLOB), max_size=3)
)


Item = tuple[int, bytes | None, bytes | None, list[tuple[bytes, bytes | None]]]


def section(items: list[Item]) -> bytes:
    return b"".join(
        record(value, key, timestamp_delta=delta, offset_delta=i, headers=headers)
        for i, (delta, key, value, headers) in enumerate(items)
    )


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(RECORD, max_size=20), kind=st.sampled_from([bytes, bytearray, memoryview]))
def test_valid_sections_walk_the_same(items: list[Item], kind: type) -> None:
    data = section(items)
    result = same(data, zend=2 * len(items), kind=kind)
    assert result[0] == "ok"
    p, z, tmin, tmax, nulls, need = result[1]
    assert (p, z, need) == (len(data), 2 * len(items), 0)
    deltas = [delta for delta, *_ in items]
    assert (tmin, tmax) == ((min(deltas), max(deltas)) if items else (NO_MIN, NO_MAX))
    assert nulls == sum(key is None for _, key, _, _ in items)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(RECORD, min_size=1, max_size=12),
    cut=st.integers(0, 10_000),
    lead=st.binary(max_size=8),
    trail=st.binary(max_size=8),
    extra=st.integers(-2, 2),
    state=st.tuples(st.integers(-5, 5), st.integers(-5, 5), st.integers(0, 3)),
)
def test_any_end_and_chunk_boundary_walks_the_same(
    items: list[Item], cut: int, lead: bytes, trail: bytes, extra: int, state: tuple[int, int, int]
) -> None:
    """A section inside a larger buffer (bytes before `p` and after `end`, which the walks may
    read past `end` but not past the buffer), cut anywhere, walked as a streaming chunk (final
    False) and as the last one, with the count off by one either way and a walk in progress."""
    data = section(items)
    end = len(lead) + cut % (len(data) + 1)
    buffer = lead + data + trail
    zend = max(0, 2 * (len(items) + extra))
    tmin, tmax, nulls = state
    for final in (False, True):
        same(buffer, len(lead), end, 0, zend, final=final)
        same(buffer, len(lead), end, 0, zend, tmin, tmax, nulls, final=final, kind=memoryview)


# -------------------------------------------------------------------------- malformed fields


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def raw_varint(raw: int) -> bytes:
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


ODD_VARINTS = st.sampled_from(
    [
        b"\x80" * 5 + b"\x00",  # six bytes: too long for an int32
        b"\x80" * 10 + b"\x00",  # eleven: too long for an int64
        b"\xff\xff\xff\xff\x1f",  # five bytes with bits above 32
        b"\xff\xff\xff\xff\x10",
        b"\xff" * 9 + b"\x02",  # ten bytes with bits above 64
        b"\xff" * 9 + b"\x01",  # the largest ten-byte value
        b"\x80\x00",  # zero in two bytes
        b"\x80\x80\x00",
        b"\x81",  # cut off
        b"\x01",  # -1
        b"\x03",  # -2
        b"\xff\xff\xff\xff\x0f",  # the smallest int32
    ]
)
FIELD = ODD_VARINTS | st.integers(-(1 << 31), (1 << 31) - 1).map(lambda v: raw_varint(zigzag(v) & 0xFFFFFFFF))
SMALL = st.integers(-3, 6).map(varint)


@st.composite
def crafted_record(draw: st.DrawFn, index: int) -> bytes:
    """A record whose every field may be odd: its length, timestamp, offset delta, key and value
    lengths (with that many bytes or not), header count and header fields."""
    timestamp = draw(ODD_VARINTS | INT64.map(lambda v: raw_varint(zigzag(v) & ((1 << 64) - 1))))
    offset = draw(st.just(varint(index)) | FIELD)
    body = bytes([draw(st.integers(0, 255))]) + timestamp + offset
    for _ in range(2):  # key, value
        length = draw(SMALL | FIELD)
        body += length + draw(st.binary(max_size=6))
    count = draw(SMALL | FIELD)
    body += count
    for _ in range(draw(st.integers(0, 3))):
        body += draw(SMALL | FIELD) + draw(st.binary(max_size=4)) + draw(SMALL | FIELD) + draw(st.binary(max_size=4))
    length = draw(st.just(varint(len(body))) | st.integers(-3, len(body) + 3).map(varint) | FIELD)
    return length + body


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=st.integers(1, 4), kind=st.sampled_from([bytes, bytearray, memoryview]))
def test_crafted_malformed_records_fail_the_same(data: st.DataObject, n: int, kind: type) -> None:
    records = b"".join(data.draw(crafted_record(i)) for i in range(n))
    zend = 2 * data.draw(st.integers(0, n + 1))
    final = data.draw(st.booleans())
    same(records, zend=zend, final=final, kind=kind)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(RECORD, min_size=1, max_size=8),
    edits=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=6)), max_size=4),
)
def test_mutated_sections_fail_the_same(items: list[Item], edits: list[tuple[int, int, bytes]]) -> None:
    data = bytearray(section(items))
    for how, where, blob in edits:
        where %= len(data) + 1
        if how == 0:
            data[where : where + len(blob)] = blob  # overwrite
        elif how == 1:
            data[where:where] = blob  # insert
        elif how == 2:
            del data[where : where + len(blob)]  # delete
        else:
            del data[where:]  # truncate
    for final in (True, False):
        same(bytes(data), zend=2 * len(items), final=final)


@settings(max_examples=200)
@given(garbage=st.binary(max_size=64), zend=st.integers(0, 10), final=st.booleans(), over=st.integers(-2, 8))
def test_random_bytes_fail_the_same(garbage: bytes, zend: int, final: bool, over: int) -> None:
    """Also with `end` past the buffer (the walks must stop at the buffer, not at `end`)."""
    same(garbage, end=max(0, len(garbage) + over), zend=2 * zend, final=final)


@pytest.mark.parametrize(
    "data, message",
    [
        (varint(-1), "Invalid record size -1"),
        (varint(20) + b"\x00\x00\x00", "Invalid record size: expected 20 bytes in record payload, but instead the buffer has only 3 remaining bytes."),
        (b"\x80" * 4, "Incorrect declared batch size, premature EOF reached"),
        (b"\x80" * 6 + b"\x00" * 6, "varint at 0 is longer than 5 bytes"),
        (varint(12) + b"\x00" + b"\xff" * 9 + b"\x02" + b"\x00", "varint at 2 overflows"),
        (record(offset_delta=1), "record 0 has offset delta 1: the records of a produced batch must have offset deltas 0, 1, 2, ..."),
        (varint(4) + b"\x00\x00\x00\x05", "Invalid key size -3"),
        (varint(4) + b"\x00\x00\x00\x03", "Invalid key size -2"),
        (varint(5) + b"\x00\x00\x00\x01\x03", "Invalid value size -2"),
        (varint(7) + b"\x00\x00\x00\x01\x01\x02\x01", "Invalid negative header key size -1"),
        (varint(9) + b"\x00\x00\x00\x01\x01\x02\x00\x03\x00", "Invalid negative header value size -2"),
        (record(headers=[(b"k", b"v")], length_delta=1) + b"\x00", "Invalid record size: expected to read 13 bytes in record payload, but instead read 12"),
        (varint(5) + b"\x00\x00\x00\x01\x00", "Found invalid record structure"),
        (
            varint(7) + b"\x00\x00\x00\x01\x01" + varint(2) + b"\x00",  # two headers in one byte
            "Found invalid number of record headers. 2 is larger than the remaining size of the buffer",
        ),
    ],
)
def test_known_messages(data: bytes, message: str) -> None:
    assert same(data, zend=2) == ("invalid", message)


def test_a_large_section_walks_the_same() -> None:
    items = [(i % 7 - 3, b"k%d" % i, b"v" * 200, [(b"h", b"x")]) for i in range(2000)]
    data = section(items)
    assert len(data) > 1 << 18
    result = same(data, zend=2 * len(items), kind=bytearray)
    assert result[1] == (len(data), 4000, -3, 3, 0, 0)
    broken = bytearray(data)
    broken[len(section(items[:1000]))] = 0x01  # record 1000's length: -1
    assert same(bytes(broken), zend=2 * len(items)) == ("invalid", "Invalid record size -1")
    assert same(data[:-1], zend=2 * len(items), final=False)[0] == "ok"


def test_walk_stream_gives_the_same_with_the_python_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The streaming walk (compressed batches) over chunks cut inside records, with either walk."""
    items = [(i, b"key", b"value" * (i % 40), [(b"h", None)] * (i % 3)) for i in range(300)]
    data = section(items)
    chunks = [data[i : i + 777] for i in range(0, len(data), 777)]
    with_c = record_check._walk_stream(iter(chunks), 600, None, None, None)
    monkeypatch.setattr(record_check, "_c_walk", None)
    assert record_check._walk_stream(iter(chunks), 600, None, None, None) == with_c == (0, 299, 0, len(data))
