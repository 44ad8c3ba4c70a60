"""Every use of kio beyond its public API, in one place.

kio (the message codecs generated from Kafka's JSON specs) is pinned in pyproject.toml. Samsa
relies on a few of its internals; they are all imported or assumed here, and
tests/unit/test_kio_compat.py checks each one, so a kio upgrade that changes them fails one test
that names the assumption, and is mended in this one file:

- `kio.serial._introspect`: classifying an entity's fields (entity, entity tuple, primitive
  tuple), their schema types and tags. `protocol.prescan` walks request bodies with it to bound
  every array and string length before kio decodes them, and `protocol.messages` converts
  entities between versions with it.
- `kio.index._name_from_key`: the snake_case name of an API key (`api_versions`), for logs and
  the registry.
- `kio.serial._introspect.is_optional`, `kio.serial._implicit_defaults.get_tagged_field_default`
  and `kio.serial.errors.OutOfBoundValue`: what `protocol.compiled` needs to write exactly what
  kio's writers write.
- The writers' use of a `records` field: kio's writer for a records (bytes) field only calls
  `len()` on the value and hands the value to the output's `write()`. Zero-copy fetch depends on
  it: the fetch response carries a file region (`FileRecords`) in place of the bytes, and
  `protocol.messages.FrameBuffer.write` keeps the region as a chunk of its own.
"""

from __future__ import annotations

from typing import IO, Any, cast

from kio.index import _name_from_key
from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial.errors import OutOfBoundValue
from kio.static.primitive import Records

__all__ = [
    "EntityField",
    "EntityTupleField",
    "PrimitiveTupleField",
    "api_name",
    "as_records",
    "classify_field",
    "get_field_tag",
    "get_schema_field_type",
    "get_tagged_field_default",
    "is_optional",
    "out_of_bound_value",
    "write_entity",
]


def out_of_bound_value(message: str) -> Exception:
    """The error kio's writers raise for a length its prefix cannot hold."""
    return OutOfBoundValue(message)


def api_name(api_key: int) -> str:
    """kio's snake_case name of an API key, e.g. 18 -> "api_versions"."""
    return str(_name_from_key(api_key))


def as_records(value: object) -> Records:
    """A records field's value: bytes, or a zero-copy file region that kio's writer only measures
    with len() and passes to the output's write() (see the module docstring)."""
    return cast(Records, value)


def write_entity(out: object, entity: Any) -> None:
    """Encode `entity` into `out`, which needs only `write()` (kio's writers are typed for a
    stream; protocol.messages.FrameBuffer is not one, and keeps zero-copy regions as they are)."""
    entity_writer(type(entity))(cast(IO[bytes], out), entity)
