"""protocol.produce_request against kio's reader (with protocol.prescan before it, as Samsa decoded
every Produce before): for random Produce requests of every version 3-12, with unknown tagged
fields where the version is flexible, then truncated and mutated, both decode to equal entities or
both refuse. The records come back as views of the frame, not copies."""

from __future__ import annotations

import dataclasses
import datetime
import random
from typing import Any

import pytest

from protocol import messages, produce_request
from protocol.coordinator_wire import uvarint
from protocol.prescan import without_unknown_tags
from tests.support.raw_client import encode_body


def _kio(cls: type, body: bytes) -> Any:
    try:
        stripped, offset = without_unknown_tags(cls, body, 0)
        entity, _ = messages._reader(cls)(stripped, offset)
        messages.check_non_nullable(entity)
        return entity
    except Exception as e:
        return type(e).__name__ + ":refused"


def _ours(cls: type, body: bytes) -> Any:
    try:
        entity, _ = produce_request.decode(cls, bool(cls.__flexible__), body, 0)
        return entity
    except Exception as e:
        return type(e).__name__ + ":refused"


def _random_request(cls: type, rnd: random.Random) -> Any:
    topic_cls, partition_cls = produce_request._classes(cls)
    topics = tuple(
        topic_cls(
            name=rnd.choice(["t", "", "topic-é", "x" * rnd.randint(0, 40)]),
            partition_data=tuple(
                partition_cls(index=rnd.choice([0, 1, -1, 2**31 - 1]),
                              records=None if rnd.random() < 0.2 else rnd.randbytes(rnd.choice([0, 1, 61, 300])))
                for _ in range(rnd.randint(0, 3))
            ),
        )
        for _ in range(rnd.randint(0, 3))
    )  # fmt: skip
    return cls(
        transactional_id=rnd.choice([None, "", "txn", "é" * 5]), acks=rnd.choice([-1, 0, 1, 5]),
        timeout=datetime.timedelta(milliseconds=rnd.choice([0, 1, 30_000, 2**31 - 1])), topic_data=topics,
    )  # fmt: skip


def _with_unknown_tags(body: bytes, rnd: random.Random) -> bytes:
    """The body with a tagged field (tag 7, some bytes) in its top-level tag section, which is the
    last byte of a flexible body with no tags (0)."""
    assert body[-1] == 0
    payload = rnd.randbytes(rnd.randint(0, 5))
    tags = bytearray(b"\x01")
    uvarint(tags, 7)
    uvarint(tags, len(payload))
    return body[:-1] + bytes(tags) + payload


@pytest.mark.parametrize("version", produce_request.VERSIONS)
def test_same_entities_as_kio(version: int) -> None:
    cls = messages.request_class(0, version)
    seed = random.randrange(2**32)
    rnd = random.Random(seed)
    for _ in range(150):
        body = encode_body(_random_request(cls, rnd))
        if cls.__flexible__ and rnd.random() < 0.5:
            body = _with_unknown_tags(body, rnd)
        expected = _kio(cls, body)
        assert not isinstance(expected, str), (expected, f"seed={seed}")
        assert _ours(cls, body) == expected, f"seed={seed}"
        for _ in range(4):  # truncated, or a byte changed
            if rnd.random() < 0.5:
                broken = body[: rnd.randrange(len(body))]
            else:
                i = rnd.randrange(len(body))
                broken = body[:i] + bytes([rnd.randrange(256)]) + body[i + 1 :]
            ours, theirs = _ours(cls, broken), _kio(cls, broken)
            assert isinstance(ours, str) == isinstance(theirs, str), (broken.hex(), ours, theirs, f"seed={seed}")
            if not isinstance(ours, str):
                assert ours == theirs, f"seed={seed}"


def test_records_are_views_of_the_frame() -> None:
    cls = messages.request_class(0, 12)
    topic_cls, partition_cls = produce_request._classes(cls)
    request = cls(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30), topic_data=(
        topic_cls(name="t", partition_data=(partition_cls(index=0, records=b"r" * 100),)),))  # fmt: skip
    frame = bytearray(encode_body(request))
    decoded, used = messages.decode_request(0, 12, memoryview(frame).toreadonly(), 0)
    assert used == len(frame)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.readonly
    assert records.obj is frame  # the frame's own bytes, not a copy
    assert dataclasses.replace(decoded) == request
