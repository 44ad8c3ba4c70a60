"""protocol/consumer_protocol.py: the classic groups' embedded consumer protocol, read and written
as the byte layouts of Kafka's ConsumerProtocolSubscription/Assignment.json (versions 0-3) give
them, built here by hand."""

from __future__ import annotations

import dataclasses
import struct

import pytest

from broker.coordinator import consumer_records as rec
from broker.coordinator.consumer_group import ClassicMemberMetadata
from protocol.consumer_protocol import (
    Assignment,
    Subscription,
    read_assignment,
    read_subscription,
    write_assignment,
)


def _s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _i32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


def _v3_subscription(version: int) -> bytes:
    owned = _i32(1) + _s("a") + _i32(2, 0, 1)
    return struct.pack(">h", version) + _i32(2) + _s("a") + _s("b") + _i32(-1) + owned + _i32(7) + _s("r1")


def test_subscription_versions() -> None:
    v0 = struct.pack(">h", 0) + _i32(1) + _s("a") + _i32(2) + b"ud"
    assert read_subscription(v0) == Subscription(0, ("a",), user_data=b"ud")
    want = Subscription(3, ("a", "b"), None, (("a", (0, 1)),), 7, "r1")
    assert read_subscription(_v3_subscription(3)) == want
    # a later version is read as the highest known one, whatever it appends (Kafka's rule)
    assert read_subscription(_v3_subscription(5) + b"more") == dataclasses.replace(want, version=5)


@pytest.mark.parametrize("data", [b"", b"\x00", struct.pack(">h", -1) + _i32(0), struct.pack(">h", 0) + _i32(9)])
def test_malformed_subscription_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):  # LengthError is one
        read_subscription(data)


@pytest.mark.parametrize("version", [0, 1, 3])
def test_assignment_written_in_the_members_version(version: int) -> None:
    data = write_assignment(version, (("a", (0, 2)), ("b", ())))
    assert data == struct.pack(">h", version) + _i32(2) + _s("a") + _i32(2, 0, 2) + _s("b") + _i32(0) + _i32(-1)
    assert read_assignment(data) == Assignment(version, (("a", (0, 2)), ("b", ())))


def test_classic_member_metadata_record_round_trip() -> None:
    classic = ClassicMemberMetadata(45_000, (("range", _v3_subscription(3)), ("cooperative-sticky", b"")))
    for value in (classic, None):
        v = rec.MemberMetadataValue("i", "r1", "c", "/h", ("a",), None, 30_000, None, value)
        assert rec.read_value(rec.MEMBER_METADATA, rec.member_metadata_value(v)) == v
