"""kio's entity writers compiled: one generated Python function per message class.

kio encodes an entity by walking a table of per-field writer closures, each of which packs one
value and calls the output's write(); a small Produce response costs about 20 µs that way, a third
of the codec's share of a produce request. `entity_writer(cls)` reads the same schema facts kio
reads (`protocol.kio_compat`: field kinds, Kafka types, tags, the flexible flag) and generates the
source of one function per entity class that appends every field to the frame's bytearray
directly (a struct pack per number, no call per field, tagged fields in tag order). The bytes are
kio's, byte for byte: tests/unit/test_compiled_writer.py encodes Hypothesis-drawn entities of every
request and response class with both and compares them, errors included (a string too long for
its length prefix, a null where the schema has none, a number out of range all raise).

Records fields may hold a zero-copy region instead of bytes (see `protocol.messages`): the
generated code hands such a value to `FrameBuffer.write`, which keeps it as a chunk of its own.
A class whose fields kio itself cannot write (an optional number, a tagged records field) raises
NotImplementedError here as it does in kio; `protocol.messages.encode` then falls back to kio.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

from protocol.coordinator_wire import I16, uvarint
from protocol.kio_compat import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    get_tagged_field_default,
    is_optional,
    out_of_bound_value,
)

__all__ = ["entity_writer"]

_BUFFERS = (bytes, bytearray, memoryview)
_PACKERS = {
    "int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint8": ">B", "uint16": ">H",
    "uint32": ">I", "uint64": ">Q", "float64": ">d", "bool": ">?",
}  # fmt: skip
_NULLABLE = frozenset({"string", "bytes", "records", "uuid", "datetime_i64"})
"""The Kafka types kio writes a null of; any other optional field has no kio writer."""
_UUID_ZERO = bytes(16)
_I16_MAX = 2**15 - 1
_I32_MAX = 2**31 - 1


def _legacy_string(buf: bytearray, value: str | None, nullable: bool) -> None:
    if value is None:
        if nullable:
            buf += b"\xff\xff"
            return
        raise TypeError("Unexpectedly received None value")
    raw = value.encode()
    if len(raw) > _I16_MAX:
        raise out_of_bound_value(f"String is too long for legacy string format ({len(raw)} > {_I16_MAX})")
    buf += I16.pack(len(raw))
    buf += raw


def _compact_string(buf: bytearray, value: str | bytes | None, nullable: bool) -> None:
    if value is None:
        if nullable:
            buf.append(0)
            return
        raise TypeError("Unexpectedly received None value")
    raw = value.encode() if isinstance(value, str) else value
    uvarint(buf, len(raw) + 1)
    buf += raw


class _Source:
    """The generated source of one class's writer and the constants it refers to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {}
        self._ids = itertools.count()

    def const(self, value: Any, hint: str = "c") -> str:
        name = f"_{hint}{next(self._ids)}"
        self.names[name] = value
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)


def _primitive(src: _Source, kafka_type: str, flexible: bool, optional: bool, value: str, depth: int) -> None:
    """Append one primitive `value` (an expression) to `buf` (a bytes or region-capable write)."""
    if optional and kafka_type not in _NULLABLE:  # as kio: no writer for a null number
        raise NotImplementedError(f"optional {kafka_type} field")
    if kafka_type in _PACKERS:
        src.emit(depth, f"buf += {src.const(struct.Struct(_PACKERS[kafka_type]).pack, 'p')}({value})")
    elif kafka_type == "string":
        if flexible:
            src.emit(depth, f"{src.const(_compact_string, 's')}(buf, {value}, {optional})")
        else:
            src.emit(depth, f"{src.const(_legacy_string, 's')}(buf, {value}, {optional})")
    elif kafka_type in ("bytes", "records"):
        src.emit(depth, f"v = {value}")
        src.emit(depth, "if v is None:")
        if optional:
            src.emit(depth + 1, "buf += " + ("b'\\x00'" if flexible else "b'\\xff\\xff\\xff\\xff'"))
        else:
            src.emit(depth + 1, "raise TypeError('Unexpectedly received None value')")
        src.emit(depth, "else:")
        src.emit(depth + 1, "n = len(v)")
        if flexible:
            src.emit(depth + 1, f"{src.const(uvarint, 'u')}(buf, n + 1)")
        else:
            src.emit(depth + 1, f"if n > {_I32_MAX}:")
            src.emit(depth + 2, f"raise {src.const(out_of_bound_value, 'e')}"
                                f"(f'Bytes is too long for legacy string format ({{n}} > {_I32_MAX})')")
            src.emit(depth + 1, f"buf += {src.const(struct.Struct('>i').pack, 'p')}(n)")
        src.emit(depth + 1, f"if isinstance(v, {src.const(_BUFFERS, 'b')}):")
        src.emit(depth + 2, "buf += v")
        src.emit(depth + 1, "else:  # a zero-copy region: a chunk of its own")
        src.emit(depth + 2, "out.write(v)")
        src.emit(depth + 2, "buf = out._current")
    elif kafka_type == "uuid":
        src.emit(depth, f"v = {value}")
        src.emit(depth, f"buf += {src.const(_UUID_ZERO, 'z')} if v is None else v.bytes")
    elif kafka_type == "error_code":
        src.emit(depth, f"buf += {src.const(struct.Struct('>h').pack, 'p')}({value}.value)")
    elif kafka_type in ("timedelta_i32", "timedelta_i64"):
        fmt = ">i" if kafka_type == "timedelta_i32" else ">q"
        src.emit(depth, f"buf += {src.const(struct.Struct(fmt).pack, 'p')}(round({value}.total_seconds() * 1000))")
    elif kafka_type == "datetime_i64":
        pack = src.const(struct.Struct(">q").pack, "p")
        src.emit(depth, f"v = {value}")
        if optional:
            src.emit(depth, f"buf += {pack}(-1) if v is None else {pack}(round(v.timestamp() * 1000))")
        else:
            src.emit(depth, f"buf += {pack}(round(v.timestamp() * 1000))")
    else:
        raise NotImplementedError(f"kafka type {kafka_type!r}")


def _array_length(src: _Source, flexible: bool, items: str, depth: int) -> None:
    """The length prefix of an array (null: -1) and, for a non-null one, `if` opened at depth."""
    src.emit(depth, f"if {items} is None:")
    src.emit(depth + 1, "buf += " + ("b'\\x00'" if flexible else "b'\\xff\\xff\\xff\\xff'"))
    src.emit(depth, "else:")
    if flexible:
        src.emit(depth + 1, f"{src.const(uvarint, 'u')}(buf, len({items}) + 1)")
    else:
        src.emit(depth + 1, f"if len({items}) > {_I32_MAX}:")
        src.emit(depth + 2, f"raise {src.const(out_of_bound_value, 'e')}('Sequence is too long for legacy array format')")
        src.emit(depth + 1, f"buf += {src.const(struct.Struct('>i').pack, 'p')}(len({items}))")


def _field(src: _Source, f: Any, flexible: bool, is_tag: bool, value: str, depth: int) -> None:
    """Append field `f` (its value the expression `value`) to buf."""
    optional = False if is_tag else is_optional(f)
    kind = classify_field(f)
    if isinstance(kind, (EntityField, EntityTupleField)):
        child = src.const(entity_writer(kind.type_), "w")
        if isinstance(kind, EntityTupleField):
            src.emit(depth, f"items = {value}")
            _array_length(src, flexible, "items", depth)
            src.emit(depth + 1, "out._current = buf")
            src.emit(depth + 1, "for x in items:")
            src.emit(depth + 2, f"{child}(out, x)")
            src.emit(depth + 1, "buf = out._current")
        elif optional:  # KIP-893 nullable struct: a marker byte
            src.emit(depth, f"v = {value}")
            src.emit(depth, "if v is None:")
            src.emit(depth + 1, "buf += b'\\xff'")
            src.emit(depth, "else:")
            src.emit(depth + 1, "buf += b'\\x01'")
            src.emit(depth + 1, "out._current = buf")
            src.emit(depth + 1, f"{child}(out, v)")
            src.emit(depth + 1, "buf = out._current")
        else:
            src.emit(depth, "out._current = buf")
            src.emit(depth, f"{child}(out, {value})")
            src.emit(depth, "buf = out._current")
        return
    kafka_type = get_schema_field_type(f)
    if isinstance(kind, PrimitiveTupleField):
        src.emit(depth, f"items = {value}")
        _array_length(src, flexible, "items", depth)
        src.emit(depth + 1, "for x in items:")
        _primitive(src, kafka_type, flexible, False, "x", depth + 2)
        return
    _primitive(src, kafka_type, flexible, optional, value, depth)


class _Collector:
    """A bytes-only output for an encoded tagged field (tagged fields carry no records)."""

    __slots__ = ("_current",)

    def __init__(self) -> None:
        self._current = bytearray()

    def write(self, data: Any) -> None:
        raise NotImplementedError("a zero-copy region in a tagged field")


_cache: dict[type, Callable[[Any, Any], None]] = {}


def entity_writer(cls: type) -> Callable[[Any, Any], None]:
    """The compiled writer of kio entity class `cls`: `write(out, entity)`, where `out` is a
    `protocol.messages.FrameBuffer` (or any object with a bytearray `_current` and `write`)."""
    found = _cache.get(cls)
    if found is not None:
        return found
    if cls.__name__ == "RequestHeader":  # client_id is a legacy string even when flexible
        raise NotImplementedError("RequestHeader")
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]  # every kio entity class has it
    src = _Source()
    src.emit(0, "def write(out, e):")
    src.emit(1, "buf = out._current")
    tagged: list[tuple[Any, Any]] = []
    for f in fields(cls):
        tag = get_field_tag(f)
        if tag is not None:
            tagged.append((tag, f))
            continue
        _field(src, f, flexible, False, f"e.{f.name}", 1)
    if tagged and not flexible:
        raise ValueError("Found tagged fields on a non-flexible model")
    if flexible:
        if not tagged:
            src.emit(1, "buf += b'\\x00'")
        else:
            src.emit(1, "tags = []")
            for tag, f in sorted(tagged, key=lambda t: t[0]):
                explicit = f.default
                implicit = get_tagged_field_default(f) if explicit is MISSING else None
                default = src.const(explicit if explicit is not MISSING else implicit, "d")
                src.emit(1, f"v = e.{f.name}")
                src.emit(1, f"if v != {default}:")
                src.emit(2, f"t = {src.const(_Collector, 'k')}()")
                src.emit(2, "saved, out = out, t")
                src.emit(2, "outer, buf = buf, t._current")
                _field(src, f, True, True, "v", 2)
                src.emit(2, "out, buf = saved, outer")
                uv = src.const(uvarint, "u")
                src.emit(2, "tag = bytearray()")
                src.emit(2, f"{uv}(tag, {tag})")
                src.emit(2, f"{uv}(tag, len(t._current))")
                src.emit(2, "tag += t._current")
                src.emit(2, "tags.append(tag)")
            src.emit(1, f"{src.const(uvarint, 'u')}(buf, len(tags))")
            src.emit(1, "for t in tags:")
            src.emit(2, "buf += t")
    src.emit(1, "out._current = buf")
    namespace = dict(src.names)
    exec("\n".join(src.lines), namespace)  # noqa: S102 - source generated above from the schema
    write: Callable[[Any, Any], None] = namespace["write"]
    write.__qualname__ = f"write_{cls.__module__}.{cls.__qualname__}"
    _cache[cls] = write
    return write
