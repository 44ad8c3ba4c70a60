"""Length checks on a request body before kio decodes it.

kio's native reader reserves memory for an array from its declared element count before it reads
a single element. One frame that declares 2^32 elements (five bytes of compact-array varint) makes
the allocation fail, and a failed allocation in native code aborts the whole broker ("memory
allocation of N bytes failed"); a 2^31 count does the same on a host with less memory. So before
kio sees a body, `check_lengths` walks it with the message's schema, the way kio will, reading only
counts and lengths: an array that claims more elements than the bytes left could hold, a length
running past the end, or an over-long varint is a malformed request, rejected without allocating.

The walk is compiled once per message class into a list of steps (runs of fixed-size fields are
one step), so a Produce or Fetch request costs a few microseconds.

Tagged fields the schema does not know: Kafka's generated readers keep them aside and go on
(`_unknownTaggedFields`), so a newer client may send a tag a version did not have; kio refuses
them. `without_unknown_tags` walks the body the same way and, only when it meets such a tag,
returns a copy of the body without it, which kio then reads as Kafka would.
"""

from __future__ import annotations

import dataclasses
import struct
import threading
from collections.abc import Callable
from functools import cache
from types import UnionType
from typing import Any, Union, get_args, get_origin

from protocol.kio_compat import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)

__all__ = ["LengthError", "check_lengths", "without_unknown_tags"]

Buffer = bytes | bytearray | memoryview
Step = Callable[[Buffer, int, int], int]
"""(buffer, position, end) -> position after the field; raises LengthError."""

_FIXED_SIZE = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class LengthError(ValueError):
    """A count or length in the request does not fit in the bytes that follow it."""


_unknown = threading.local()
"""`sections`: the tagged-field sections holding unknown tags met by the walk in progress, as
(start, stop, [(start, stop) of each known field kept]); None when nobody collects them."""


def without_unknown_tags(cls: type, buf: Buffer, pos: int) -> tuple[Buffer, int]:
    """`check_lengths`, and the body without the tagged fields `cls` does not know: (buf, pos)
    as given when there are none, else (a copy from `pos` without them, 0)."""
    sections: list[tuple[int, int, list[tuple[int, int]]]] = []
    _unknown.sections = sections
    try:
        check_lengths(cls, buf, pos)
    finally:
        _unknown.sections = None
    if not sections:
        return buf, pos
    out = bytearray()
    cursor = pos
    for start, stop, kept in sections:
        out += buf[cursor:start]
        out += _uvarint_bytes(len(kept))
        for field_start, field_stop in kept:
            out += buf[field_start:field_stop]
        cursor = stop
    out += buf[cursor:]
    return bytes(out), 0


def _uvarint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def check_lengths(cls: type, buf: Buffer, pos: int) -> int:
    """Walk the body of message class `cls` at `pos`; returns the end position or raises LengthError."""
    walk = _entity_walker(cls)
    if isinstance(walk, int):
        return _need(pos, walk, len(buf))
    return walk(buf, pos, len(buf))


def _need(pos: int, n: int, end: int) -> int:
    if n < 0 or pos + n > end:
        raise LengthError(f"{n} bytes at {pos} run past the end of the request ({end})")
    return pos + n


def _uvarint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    value = 0
    for shift in (0, 7, 14, 21, 28):
        if pos >= end:
            raise LengthError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value > 0xFFFFFFFF:
                break
            return value, pos
    raise LengthError(f"varint at {pos} is longer than 32 bits")


def _count(buf: Buffer, pos: int, end: int, flexible: bool) -> tuple[int, int]:
    """An array count or byte length; -1 for null."""
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    _need(pos, 4, end)
    return _I32.unpack_from(buf, pos)[0], pos + 4


def _string_step(flexible: bool) -> Step:
    if flexible:

        def compact_string(buf: Buffer, pos: int, end: int) -> int:
            n, pos = _uvarint(buf, pos, end)
            return _need(pos, n - 1, end) if n else pos

        return compact_string

    def legacy_string(buf: Buffer, pos: int, end: int) -> int:
        _need(pos, 2, end)
        (n,) = _I16.unpack_from(buf, pos)
        return _need(pos + 2, n, end) if n >= 0 else pos + 2

    return legacy_string


def _bytes_step(flexible: bool) -> Step:
    def bytes_field(buf: Buffer, pos: int, end: int) -> int:
        n, pos = _count(buf, pos, end, flexible)
        return _need(pos, n, end) if n >= 0 else pos

    return bytes_field


def _primitive_step(kafka_type: str, flexible: bool) -> Step | int:
    """A step for one primitive field, or its fixed size."""
    if kafka_type in _FIXED_SIZE:
        return _FIXED_SIZE[kafka_type]
    if kafka_type == "string":
        return _string_step(flexible)
    if kafka_type in ("bytes", "records"):
        return _bytes_step(flexible)
    raise TypeError(f"no length rule for kafka type {kafka_type!r}")


def _array_step(element: Step | int, flexible: bool) -> Step:
    if isinstance(element, int):
        size = element

        def fixed_array(buf: Buffer, pos: int, end: int) -> int:
            n, pos = _count(buf, pos, end, flexible)
            if n < 0:
                return pos
            if n > end - pos:  # also bounds arrays of fieldless structs (size 0)
                raise LengthError(
                    f"array of {n} elements at {pos} with {end - pos} bytes left"
                )
            return _need(pos, n * size, end)

        return fixed_array

    walk = element

    def array(buf: Buffer, pos: int, end: int) -> int:
        n, pos = _count(buf, pos, end, flexible)
        if n > end - pos:  # every element takes at least one byte
            raise LengthError(
                f"array of {n} elements at {pos} with {end - pos} bytes left"
            )
        for _ in range(n):
            pos = walk(buf, pos, end)
        return pos

    return array


def _nullable_struct_step(walk: Step) -> Step:
    def nullable_struct(buf: Buffer, pos: int, end: int) -> int:
        _need(pos, 1, end)
        if buf[pos] >= 0x80:  # int8 -1: null
            return pos + 1
        return walk(buf, pos + 1, end)

    return nullable_struct


def _tagged_fields(known: frozenset[int]) -> Step:
    """The tagged-field section of an entity whose schema has the tags `known`."""

    def tagged(buf: Buffer, pos: int, end: int) -> int:
        if pos < end and buf[pos] == 0:  # the usual case: none
            return pos + 1
        start = pos
        n, pos = _uvarint(buf, pos, end)
        if n > end - pos:
            raise LengthError(f"{n} tagged fields at {pos} with {end - pos} bytes left")
        fields: list[tuple[bool, int, int]] = []
        for _ in range(n):
            field_start = pos
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            pos = _need(pos, size, end)
            fields.append((tag in known, field_start, pos))
        sections = getattr(_unknown, "sections", None)
        if sections is not None and not all(is_known for is_known, _, _ in fields):
            sections.append((start, pos, [(a, b) for is_known, a, b in fields if is_known]))
        return pos

    return tagged


def _fixed_step(size: int) -> Step:
    def fixed(buf: Buffer, pos: int, end: int) -> int:
        return _need(pos, size, end)

    return fixed


@cache
def _entity_walker(cls: type[Any]) -> Step | int:
    """A step walking one `cls`, or its size if every field has a fixed size."""
    flexible = bool(cls.__flexible__)
    steps: list[Step] = []
    fixed = 0

    def add(step: Step | int) -> None:
        nonlocal fixed
        if isinstance(step, int):
            fixed += step
            return
        if fixed:
            steps.append(_fixed_step(fixed))
            fixed = 0
        steps.append(step)

    known: set[int] = set()
    for f in dataclasses.fields(cls):
        tag = get_field_tag(f)
        if tag is not None:
            known.add(tag)
            continue  # tagged fields live in the tagged-field section at the end
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            add(_array_step(_entity_walker(kind.type_), flexible))
        elif isinstance(kind, EntityField):
            nullable = get_origin(f.type) in (UnionType, Union) and type(
                None
            ) in get_args(f.type)
            walk = _entity_walker(kind.type_)
            if nullable:
                add(
                    _nullable_struct_step(
                        _fixed_step(walk) if isinstance(walk, int) else walk
                    )
                )
            else:
                add(walk)
        elif isinstance(kind, PrimitiveTupleField):
            add(
                _array_step(
                    _primitive_step(get_schema_field_type(f), flexible), flexible
                )
            )
        else:
            add(_primitive_step(get_schema_field_type(f), flexible))
    if flexible:
        tagged = _tagged_fields(frozenset(known))
        if not steps:  # fixed fields, then the tagged-field section: one step
            size = fixed

            def fixed_then_tags(buf: Buffer, pos: int, end: int) -> int:
                pos += size
                if pos < end and buf[pos] == 0:
                    return pos + 1
                if pos > end:
                    raise LengthError(
                        f"{size} bytes before {pos} run past the end of the request ({end})"
                    )
                return tagged(buf, pos, end)

            return fixed_then_tags
        add(tagged)
    if not steps:
        return fixed
    if fixed:
        steps.append(_fixed_step(fixed))
    if len(steps) == 1:
        return steps[0]
    all_steps = tuple(steps)

    def walk_entity(buf: Buffer, pos: int, end: int) -> int:
        for step in all_steps:
            pos = step(buf, pos, end)
        return pos

    return walk_entity
