"""protocol/prescan.py: the length walk that runs before kio decodes a request.

It must agree with kio on every valid request (a false rejection would break a client) and stop
every count that kio would turn into a huge allocation (which aborts the broker)."""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
import sys
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v5.request import CreatableTopic, CreateTopicsRequest
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from protocol import messages
from protocol.kio_compat import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
)
from protocol.prescan import LengthError, check_lengths, without_unknown_tags
from protocol.records import NewRecord, build_batch
from tests.support.raw_client import encode_body


def _exists(key: int, version: int) -> bool:
    try:
        messages.request_class(key, version)
        return True
    except KeyError:
        return False


ALL_REQUESTS = [(k, v) for k in range(100) for v in range(20) if _exists(k, v)]


def _primitive(kafka_type: str, draw: Any) -> Any:
    if kafka_type in ("int8",):
        return draw(st.integers(-128, 127))
    if kafka_type in ("int16",):
        return draw(st.integers(-(2**15), 2**15 - 1))
    if kafka_type in ("int32",):
        return draw(st.integers(-(2**31), 2**31 - 1))
    if kafka_type in ("int64",):
        return draw(st.integers(-(2**63), 2**63 - 1))
    if kafka_type == "uint16":
        return draw(st.integers(0, 2**16 - 1))
    if kafka_type == "float64":
        return draw(st.floats(allow_nan=False))
    if kafka_type == "bool":
        return draw(st.booleans())
    if kafka_type == "string":
        return draw(st.text(max_size=20))
    if kafka_type == "bytes":
        return draw(st.binary(max_size=20))
    if kafka_type == "records":
        return draw(
            st.one_of(
                st.none(), st.just(build_batch([NewRecord(key=b"k", value=b"v")]))
            )
        )
    if kafka_type == "uuid":
        return draw(st.one_of(st.just(uuid.UUID(int=0)), st.uuids()))
    if kafka_type == "timedelta_i32":
        return datetime.timedelta(milliseconds=draw(st.integers(0, 2**31 - 1)))
    if kafka_type == "timedelta_i64":
        return datetime.timedelta(milliseconds=draw(st.integers(0, 2**40)))
    raise AssertionError(kafka_type)


def _entity(cls: type, draw: Any, depth: int = 0) -> Any:
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        nullable = "None" in str(f.type)
        if (
            nullable
            and draw(st.integers(0, 3)) == 0
            and not isinstance(kind, PrimitiveTupleField)
        ):
            kwargs[f.name] = None
        elif isinstance(kind, EntityTupleField):
            n = 0 if depth > 2 else draw(st.integers(0, 2))
            kwargs[f.name] = tuple(
                _entity(kind.type_, draw, depth + 1) for _ in range(n)
            )
        elif isinstance(kind, EntityField):
            kwargs[f.name] = _entity(kind.type_, draw, depth + 1)
        elif isinstance(kind, PrimitiveTupleField):
            kwargs[f.name] = tuple(
                _primitive(get_schema_field_type(f), draw)
                for _ in range(draw(st.integers(0, 3)))
            )
        else:
            kwargs[f.name] = _primitive(get_schema_field_type(f), draw)
    return cls(**kwargs)


@settings(max_examples=10, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize(("key", "version"), ALL_REQUESTS)
def test_agrees_with_kio_on_valid_requests(
    key: int, version: int, data: st.DataObject
) -> None:
    cls = messages.request_class(key, version)
    entity = _entity(cls, data.draw)
    body = messages.encode_bytes(entity)
    prefix = b"\x07" * data.draw(st.integers(0, 3))
    assert check_lengths(cls, prefix + body, len(prefix)) == len(prefix) + len(body)
    _decoded, used = messages.decode_request(key, version, prefix + body, len(prefix))
    assert used == len(body)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_a_truncated_request_never_passes(data: st.DataObject) -> None:
    key, version = data.draw(st.sampled_from(ALL_REQUESTS))
    cls = messages.request_class(key, version)
    body = messages.encode_bytes(_entity(cls, data.draw))
    if not body:
        return
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(LengthError):
        check_lengths(cls, body[:cut], 0)


CRASHERS = [
    (3, 9, "ffffffff0f00"),  # Metadata v9: compact topics array of 2^32-2 elements
    (15, 5, "ffffffff0f"),  # DescribeGroups v5: compact array of 2^32-2 strings
    (3, 4, "7fffffff00"),  # Metadata v4: int32 count 2^31-1
    (1, 12, "ffffffffffffffffff01"),  # a 10-byte varint
    (3, 9, "00010000ffffffff0f"),  # 2^32-1 tagged fields
]


@pytest.mark.parametrize(("key", "version", "body"), CRASHERS)
def test_rejects_counts_that_do_not_fit(key: int, version: int, body: str) -> None:
    with pytest.raises(LengthError):
        check_lengths(messages.request_class(key, version), bytes.fromhex(body), 0)


def test_decode_request_survives_a_huge_array_count() -> None:
    """In a child process, because the failure this prevents aborts the interpreter."""
    code = (
        "from protocol import messages\n"
        "try:\n"
        "    messages.decode_request(3, 9, bytes.fromhex('ffffffff0f00'), 0)\n"
        "except ValueError as e:\n"
        "    print('rejected', type(e).__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "rejected LengthError"


def test_unknown_tagged_fields_are_skipped_as_kafka_skips_them() -> None:
    """Kafka's generated readers keep unknown tags aside and read on; kio refuses them, so the
    prescan drops them first (a request's own section and a nested entity's), and a body without
    any is passed on untouched."""
    body = encode_body(ApiVersionsRequest(client_software_name="c", client_software_version="1"))
    assert body.endswith(b"\x00")
    tagged = body[:-1] + bytes([2, 7, 2]) + b"hi" + bytes([40, 0])  # tags 7 (2 bytes) and 40 (empty)
    assert without_unknown_tags(ApiVersionsRequest, body, 0) == (body, 0)
    decoded, _ = messages.decode_request(18, 3, tagged, 0)
    assert (decoded.client_software_name, decoded.client_software_version) == ("c", "1")

    request = CreateTopicsRequest(
        topics=(CreatableTopic(name=TopicName("t"), num_partitions=i32(3), replication_factor=i16(1),
                               assignments=(), configs=()),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)), validate_only=False)  # fmt: skip
    plain = encode_body(request)
    # the topic's (nested) tagged section: after its configs array, before the request's timeout
    topic_end = plain.index(b"\x01\x01\x00") + 3  # empty assignments, empty configs, no tags
    nested = plain[: topic_end - 1] + bytes([1, 99, 1, 0xAB]) + plain[topic_end:]
    decoded, _ = messages.decode_request(19, 5, nested, 0)
    assert decoded == messages.decode_request(19, 5, plain, 0)[0]
