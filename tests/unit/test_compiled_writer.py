"""protocol.compiled writes exactly what kio's writers write: for every request and response class
of every API key and version kio knows (and Samsa's own schemas), random entities are
encoded by both and the bytes compared (random entities, in range and out of it); where kio raises, the compiled writer raises too."""

from __future__ import annotations

import dataclasses
import datetime
import random
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import response as fetch
from kio.schema.index import api_key_map, schema_name_map

from protocol import compiled, messages
from protocol.coordinator_wire import uvarint
from protocol.kio_compat import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
    write_entity,
)
from protocol.schemas import fetch_v12_chain, produce_v0_2


def _classes() -> list[type]:
    found: list[type] = []
    for api_key, name in sorted(api_key_map.items()):
        for version in sorted(schema_name_map[name]):
            found.append(load_request_schema(api_key, version))
            found.append(load_response_schema(api_key, version))
    for request, response in produce_v0_2.SCHEMAS.values():
        found += [request, response]
    found.append(fetch_v12_chain.FetchRequest)
    return found


CLASSES = _classes()


def _kio_bytes(entity: Any) -> bytes | type[BaseException]:
    out = messages.FrameBuffer()
    try:
        write_entity(out, entity)
    except Exception as e:
        return type(e)
    return b"".join(c for c in out.finish() if isinstance(c, bytes))


def _compiled_bytes(entity: Any) -> bytes | type[BaseException]:
    out = messages.FrameBuffer()
    try:
        compiled.entity_writer(type(entity))(out, entity)
    except Exception as e:
        return type(e)
    return b"".join(c for c in out.finish() if isinstance(c, bytes))


def test_every_class_compiles() -> None:
    assert len(CLASSES) > 500
    for cls in CLASSES:
        compiled.entity_writer(cls)  # none needs kio's fallback today


_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINTS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def _value(f: dataclasses.Field[Any], rnd: random.Random, wild: bool) -> Any:
    """A random value for field `f`; `wild` draws out-of-range numbers and over-long strings too."""
    kind = classify_field(f)
    optional = is_optional(f)
    if optional and rnd.random() < 0.25:
        return None
    if isinstance(kind, EntityTupleField):
        return tuple(_entity(kind.type_, rnd, wild) for _ in range(rnd.randint(0, 2)))
    if isinstance(kind, EntityField):
        return _entity(kind.type_, rnd, wild)
    kafka_type = get_schema_field_type(f)
    if isinstance(kind, PrimitiveTupleField):
        return tuple(_primitive(kafka_type, rnd, wild) for _ in range(rnd.randint(0, 3)))
    return _primitive(kafka_type, rnd, wild)


def _primitive(kafka_type: str, rnd: random.Random, wild: bool) -> Any:
    if kafka_type in _INTS:
        bits = _INTS[kafka_type] + (1 if wild and rnd.random() < 0.2 else 0)
        return rnd.choice([0, -1, 1, 2 ** (bits - 1) - 1, -(2 ** (bits - 1)), rnd.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)])
    if kafka_type in _UINTS:
        return rnd.choice([0, 1, 2 ** _UINTS[kafka_type] - 1, rnd.randint(0, 2 ** _UINTS[kafka_type] - 1)])
    if kafka_type == "float64":
        return rnd.choice([0.0, -1.5, rnd.random() * 1e12])
    if kafka_type == "bool":
        return rnd.random() < 0.5
    if kafka_type == "string":
        if wild and rnd.random() < 0.05:
            return "x" * 40_000
        return rnd.choice(["", "a", "topic-1", "é€𝄞", "x" * rnd.randint(0, 300)])
    if kafka_type in ("bytes", "records"):
        return rnd.randbytes(rnd.choice([0, 1, 17, 200]))
    if kafka_type == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128))
    if kafka_type == "error_code":
        return rnd.choice(list(ErrorCode))
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rnd.choice([0, 1, 30_000, rnd.randint(0, 2**31 - 1)]))
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(rnd.randint(0, 2**41) / 1000, tz=datetime.UTC)
    raise AssertionError(kafka_type)


def _entity(cls: type, rnd: random.Random, wild: bool) -> Any:
    values = {}
    for f in dataclasses.fields(cls):
        if get_field_tag(f) is not None and rnd.random() < 0.4:
            continue  # a tagged field left at its default: not written
        values[f.name] = _value(f, rnd, wild)
    try:
        return cls(**values)
    except TypeError:  # a field without default left out
        return cls(**{f.name: values.get(f.name, _value(f, rnd, wild)) for f in dataclasses.fields(cls)})


@pytest.mark.parametrize("wild", [False, True], ids=["in_range", "wild"])
def test_same_bytes_as_kio(wild: bool) -> None:
    seed = random.randrange(2**32)
    rnd = random.Random(seed)
    for cls in CLASSES:
        for _ in range(6):
            entity = _entity(cls, rnd, wild)
            assert _compiled_bytes(entity) == _kio_bytes(entity), (cls, f"seed={seed}")


class _Region:
    """A zero-copy file region standing in a records field."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


def test_a_region_is_a_chunk_of_its_own() -> None:
    region = _Region(1234)
    partition = dataclasses.replace(messages._zero_entity(fetch.PartitionData), records=region)
    topic = dataclasses.replace(messages._zero_entity(fetch.FetchableTopicResponse), partitions=(partition, partition))
    response = dataclasses.replace(messages._zero_entity(fetch.FetchResponse), responses=(topic,))
    out = messages.FrameBuffer()
    compiled.entity_writer(fetch.FetchResponse)(out, response)
    assert out.size == sum(len(c) for c in out.chunks) + len(out._current)
    chunks = out.finish()
    assert [c for c in chunks if not isinstance(c, bytes)] == [region, region]
    # the bytes around the regions are kio's bytes around records of the same length
    as_bytes = dataclasses.replace(response, responses=(dataclasses.replace(
        topic, partitions=(dataclasses.replace(partition, records=b"r" * 1234),) * 2),))  # fmt: skip
    expected = _kio_bytes(as_bytes)
    assert isinstance(expected, bytes)
    joined = b"".join(c if isinstance(c, bytes) else b"r" * 1234 for c in chunks)
    assert joined == expected
    assert out.size == len(expected)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    uvarint(out, n)  # the compiled writers' lengths
    return bytes(out)


def test_large_varints_and_lengths() -> None:
    assert _uvarint(0) == b"\x00"
    assert _uvarint(127) == b"\x7f"
    assert _uvarint(128) == b"\x80\x01"
    assert _uvarint(300) == b"\xac\x02"
    assert _uvarint(2**31 - 1) == b"\xff\xff\xff\xff\x07"
