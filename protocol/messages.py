"""Message codecs and the versioning layer, on top of kio's generated schemas.

kio generates one frozen dataclass per message and version from Kafka's JSON specs. Samsa's handlers
are each written against ONE version of their messages (the newest they handle): the dispatcher
converts an older request up to that version (`convert`: fields matched by name, fields the old
version lacks take their spec default) and the handler's response down to the version the client
asked for. Where versions differ in meaning, not only in fields, the handler looks at the request
context's api_version.

Encoding writes into a `FrameBuffer`, which accepts zero-copy regions (any object with `__len__`
that is not bytes) in place of `records` bytes: kio's writers only call `len()` and `write()` on a
records value, so a fetch response is framed around file regions without reading them.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from functools import cache
from types import UnionType
from typing import Any, Protocol, Union, get_args, get_origin

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from protocol import compiled, produce_request
from protocol.kio_compat import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_schema_field_type,
    write_entity,
)
from protocol.prescan import without_unknown_tags

__all__ = [
    "FrameBuffer",
    "Region",
    "convert",
    "decode_request",
    "encode",
    "is_flexible",
    "request_class",
    "response_class",
]


class Region(Protocol):
    """A zero-copy stretch of bytes (a file region) written into a frame in place of records."""

    def __len__(self) -> int: ...


class FrameBuffer:
    """Collects an encoded message as bytes chunks and zero-copy regions, in order. The compiled
    writers (`protocol.compiled`) append to `_current` directly and hand regions to `write`."""

    __slots__ = ("_current", "_flushed", "chunks")

    def __init__(self) -> None:
        self.chunks: list[bytes | Region] = []
        self._current = bytearray()
        self._flushed = 0
        """Bytes in `chunks`."""

    @property
    def size(self) -> int:
        return self._flushed + len(self._current)

    def write(self, data: Any) -> int:
        n = len(data)
        if isinstance(data, (bytes, bytearray, memoryview)):
            self._current += data
        else:
            if self._current:
                self.chunks.append(bytes(self._current))
                self._flushed += len(self._current)
                self._current = bytearray()
            self.chunks.append(data)
            self._flushed += n
        return n

    def finish(self) -> list[bytes | Region]:
        if self._current:
            self.chunks.append(bytes(self._current))
            self._flushed += len(self._current)
            self._current = bytearray()
        return self.chunks


def _own_schemas(api_key: int, api_version: int) -> tuple[type, type] | None:
    """Samsa's (request, response) classes for a version kio lacks (Produce v0-2), or that Samsa
    extends (Fetch v12's request: the chain replication carrier, a Samsa-reserved tagged field
    kio would reject), imported on first use like kio's own."""
    if api_key == 0 and api_version <= 2:
        from protocol.schemas import produce_v0_2

        return produce_v0_2.SCHEMAS.get(api_version)
    if api_key == 1 and api_version == 12:
        from kio.schema.fetch.v12.response import FetchResponse

        from protocol.schemas.fetch_v12_chain import FetchRequest

        return FetchRequest, FetchResponse
    return None


@cache
def request_class(api_key: int, api_version: int) -> type[Any]:
    """The kio request dataclass for a key and version; raises KeyError if there is none."""
    extra = _own_schemas(api_key, api_version)
    if extra is not None:
        return extra[0]
    try:
        return load_request_schema(api_key, api_version)
    except Exception as e:  # kio raises its own index errors
        raise KeyError((api_key, api_version)) from e


@cache
def response_class(api_key: int, api_version: int) -> type[Any]:
    extra = _own_schemas(api_key, api_version)
    if extra is not None:
        return extra[1]
    try:
        return load_response_schema(api_key, api_version)
    except Exception as e:
        raise KeyError((api_key, api_version)) from e


def is_flexible(api_key: int, api_version: int) -> bool:
    return bool(request_class(api_key, api_version).__flexible__)


@cache
def _reader(cls: type[Any]) -> Callable[[Any, int], tuple[Any, int]]:
    return entity_reader(cls)


class NullFieldError(ValueError):
    """A field the schema does not allow to be null was sent as null."""


def decode_request(api_key: int, api_version: int, buf: bytes | memoryview, offset: int) -> Any:
    """Decode a request body; returns (entity, bytes consumed). Raises on malformed input,
    including null in a non-nullable array (kio reads length -1 as None for every array; Kafka's
    parser rejects it, and handlers rely on it not happening), and any count or length that does
    not fit in the bytes that follow (`protocol.prescan`). Tagged fields the version does not
    know are skipped, as Kafka skips them (the bytes consumed then count in a copy without them).
    Produce v3-12 is read by `protocol.produce_request`: the same entities, records left in the
    frame as memoryviews."""
    cls: type = request_class(api_key, api_version)
    if api_key == 0 and api_version in produce_request.VERSIONS:  # the records stay in the frame
        return produce_request.decode(cls, is_flexible(api_key, api_version), buf, offset)
    # kio would reserve memory for any declared array count, and refuses tags it does not know
    body, offset = without_unknown_tags(cls, buf, offset)
    entity, used = _reader(cls)(body, offset)
    check_non_nullable(entity)
    return entity, used


@cache
def _null_plan(cls: type) -> tuple[tuple[str, bool, int], ...]:
    """(field name, nullable, kind) for the fields of `cls` that need a look: arrays (kio checks
    strings and bytes itself, and numbers are never None) and nested entities that contain arrays."""
    steps: list[tuple[str, bool, int]] = []
    for f in fields(cls):
        nullable = get_origin(f.type) in (UnionType, Union) and type(None) in get_args(f.type)
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            steps.append((f.name, nullable, _ENTITY_TUPLE if _null_plan(kind.type_) else _PRIMITIVE))
        elif isinstance(kind, EntityField):
            if _null_plan(kind.type_):
                steps.append((f.name, True, _ENTITY))  # a null struct is kio's to reject
        elif kind.is_array and not nullable:
            steps.append((f.name, False, _PRIMITIVE))
    return tuple(steps)


def check_non_nullable(entity: Any) -> None:
    """Raise NullFieldError if a non-nullable array in `entity` (or an entity in it) is None."""
    cls: type = type(entity)
    for name, nullable, kind in _null_plan(cls):
        value = getattr(entity, name)
        if value is None:
            if nullable:
                continue
            raise NullFieldError(f"non-nullable field {type(entity).__name__}.{name} was null")
        if kind == _ENTITY:
            check_non_nullable(value)
        elif kind == _ENTITY_TUPLE:
            for item in value:
                check_non_nullable(item)


def decode_response(
    api_key: int, api_version: int, buf: bytes | memoryview, offset: int, response_cls: type | None = None
) -> tuple[Any, int]:
    """Decode a response body (client side: followers, tests); returns (entity, bytes consumed)."""
    return _reader(response_cls or response_class(api_key, api_version))(buf, offset)


def encode(entity: Any, out: FrameBuffer) -> None:
    cls = type(entity)
    writer = _writers.get(cls)
    if writer is None:
        try:
            writer = _writers[cls] = compiled.entity_writer(cls)
        except NotImplementedError:  # what kio cannot write either: kio raises its own error
            writer = _writers[cls] = write_entity
    writer(out, entity)


_writers: dict[type, Callable[[FrameBuffer, Any], None]] = {}


def encode_bytes(entity: Any) -> bytes:
    out = FrameBuffer()
    encode(entity, out)
    chunks = out.finish()
    return b"".join(c for c in chunks if isinstance(c, bytes))


# --- conversion between versions ----------------------------------------------------------------

_ZERO_BY_KAFKA_TYPE: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint8": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": None,
    "uuid": uuid.UUID(int=0),
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": None,
}

_PRIMITIVE, _ENTITY, _ENTITY_TUPLE, _DEFAULT = range(4)


def _default_of(f: Field[Any]) -> Callable[[], Any]:
    if f.default is not MISSING:
        value = f.default
        return lambda: value
    if f.default_factory is not MISSING:
        return f.default_factory
    cls = classify_field(f)
    if isinstance(cls, EntityTupleField) or getattr(cls, "is_array", False):
        return tuple
    if isinstance(cls, EntityField):
        nested = cls.type_
        return lambda: _zero_entity(nested)
    zero = _ZERO_BY_KAFKA_TYPE.get(get_schema_field_type(f))
    return lambda: zero


def _zero_entity(cls: type) -> Any:
    return cls(**{f.name: _default_of(f)() for f in fields(cls)})


@cache
def _plan(source: type, target: type) -> tuple[tuple[str, int, Any], ...]:
    source_names = {f.name for f in fields(source)}
    steps: list[tuple[str, int, Any]] = []
    for f in fields(target):
        if f.name not in source_names:
            steps.append((f.name, _DEFAULT, _default_of(f)))
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            steps.append((f.name, _ENTITY_TUPLE, kind.type_))
        elif isinstance(kind, EntityField):
            steps.append((f.name, _ENTITY, kind.type_))
        else:
            steps.append((f.name, _PRIMITIVE, None))
    return tuple(steps)


def convert(value: Any, target: type, **overrides: Any) -> Any:
    """Convert a kio entity to another version's class of the same message (matched by name).

    `overrides` set top-level fields of the result, for fields the source version lacks.
    """
    source: type = type(value)
    if source is target and not overrides:
        return value
    if overrides:
        kwargs = _converter(source, target, True)(value)
        kwargs.update(overrides)
        return target(**kwargs)
    return _converter(source, target, False)(value)


@cache
def _converter(source: type, target: type, as_kwargs: bool) -> Callable[[Any], Any]:
    """`convert` from `source` to `target` compiled into one generated function (no loop over the
    plan per entity): it builds the target (or, `as_kwargs`, its keyword arguments)."""
    names: dict[str, Any] = {"_target": target}
    args: list[str] = []
    for i, (name, kind, arg) in enumerate(_plan(source, target)):
        if kind == _PRIMITIVE:
            args.append(f"{name}=v.{name}")
            continue
        names[f"_a{i}"] = arg
        if kind == _DEFAULT:
            args.append(f"{name}=_a{i}()")
        elif kind == _ENTITY:
            args.append(f"{name}=None if v.{name} is None else _convert(v.{name}, _a{i})")
        else:
            args.append(f"{name}=None if v.{name} is None else tuple([_convert(x, _a{i}) for x in v.{name}])")
    names["_convert"] = convert
    call = "dict" if as_kwargs else "_target"
    namespace = dict(names)
    exec(f"def conv(v):\n    return {call}({', '.join(args)})", namespace)  # noqa: S102 - from the plan above
    conv: Callable[[Any], Any] = namespace["conv"]
    return conv


def replace(entity: Any, **changes: Any) -> Any:
    """dataclasses.replace for kio entities (re-exported for handlers)."""
    return dataclasses.replace(entity, **changes)
