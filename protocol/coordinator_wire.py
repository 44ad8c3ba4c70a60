"""The encoding of coordinator records (the keys and values Kafka's group, share and transaction
coordinators write to their internal topics), for hand-written record codecs.

A key opens with an int16 record type and has classic fields (int16-length strings); a value
opens with an int16 version and, in flexible versions, has compact strings and arrays (unsigned
varint length + 1, 0 for null) and a tagged-field section after every struct.
"""

from __future__ import annotations

import struct
import uuid

from protocol.errors import CorruptRecordError

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


def uvarint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def classic_string(out: bytearray, v: str) -> None:
    data = v.encode("utf-8")
    out += I16.pack(len(data))
    out += data


def compact_string(out: bytearray, v: str | None) -> None:
    if v is None:
        out.append(0)
        return
    data = v.encode("utf-8")
    uvarint(out, len(data) + 1)
    out += data


def compact_int32s(out: bytearray, values: list[int]) -> None:
    uvarint(out, len(values) + 1)
    for v in values:
        out += I32.pack(v)


class Reader:
    """Reads a record's fields from `pos`; any overrun raises CorruptRecordError."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, pos: int, what: str) -> None:
        self.buf = buf
        self.pos = pos
        self.what = what

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise CorruptRecordError(f"{self.what} record truncated at {self.pos}")
        data = self.buf[self.pos : end]
        self.pos = end
        return data

    def unpack(self, s: struct.Struct) -> int:
        return int(s.unpack(self.take(s.size))[0])

    def i32(self) -> int:
        return self.unpack(I32)

    def i64(self) -> int:
        return self.unpack(I64)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise CorruptRecordError(f"unsigned varint too long in a {self.what} record")

    def count(self) -> int:
        """A compact array's length (a null array reads as empty)."""
        return max(self.uvarint() - 1, 0)

    def classic_string(self) -> str:
        return self.take(max(self.unpack(I16), 0)).decode("utf-8", "replace")

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def compact_int32s(self) -> list[int]:
        return [self.i32() for _ in range(self.count())]

    def tagged(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields
