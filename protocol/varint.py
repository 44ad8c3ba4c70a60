"""Zigzag variable-length integers as Kafka's record format (magic v2) uses them.

A value is zigzag-mapped (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...) and written seven bits at a
time, least significant group first, with the high bit of each byte set when more follow.
A varint holds an int32 (at most 5 bytes), a varlong an int64 (at most 10 bytes).
"""

from __future__ import annotations

from protocol.errors import CorruptRecordError

__all__ = [
    "read_varint",
    "read_varlong",
    "size_of_varint",
    "write_varint",
]

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def write_varint(out: bytearray, value: int) -> None:
    """Append the zigzag varint (or varlong: same encoding) of an int64 `value` to `out`."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} does not fit in a varlong")
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def size_of_varint(value: int) -> int:
    """Bytes `write_varint` takes for `value`."""
    zigzag = (value << 1) ^ (value >> 63)
    return max(1, (zigzag.bit_length() + 6) // 7)


def _read(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    zigzag = 0
    shift = 0
    for index in range(max_bytes):
        try:
            byte = buf[pos + index]
        except IndexError:
            raise CorruptRecordError(f"varint truncated at {pos}") from None
        zigzag |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (zigzag >> 1) ^ -(zigzag & 1), pos + index + 1
        shift += 7
    raise CorruptRecordError(f"varint at {pos} longer than {max_bytes} bytes")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read an int32 varint at `pos`; returns (value, position after it)."""
    value, end = _read(buf, pos, 5)
    if not INT32_MIN <= value <= INT32_MAX:
        raise CorruptRecordError(f"varint at {pos} overflows an int32")
    return value, end


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read an int64 varlong at `pos`; returns (value, position after it)."""
    value, end = _read(buf, pos, 10)
    if not INT64_MIN <= value <= INT64_MAX:
        raise CorruptRecordError(f"varlong at {pos} overflows an int64")
    return value, end
