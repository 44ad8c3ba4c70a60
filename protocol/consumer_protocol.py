"""The embedded consumer protocol of classic groups (protocol type "consumer"): what a JoinGroup's
protocol metadata (ConsumerProtocolSubscription) and a SyncGroup's assignment
(ConsumerProtocolAssignment) carry, versions 0-3, as Kafka's clients ConsumerProtocol reads and
writes them: an int16 version, then the body of that version. A version above 3 is read as 3
(Kafka's rule: later versions only add fields at the end). Bodies are kio's schemas.

The group coordinator needs them to move a group between the classic and the consumer protocol
(KIP-848 online migration): a classic member's subscription, rack and owned partitions become a
consumer-group member's, and a classic member of a consumer group is sent its assignment in the
version of the subscription it joined with.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_protocol_assignment.v0 import data as a0
from kio.schema.consumer_protocol_assignment.v1 import data as a1
from kio.schema.consumer_protocol_assignment.v2 import data as a2
from kio.schema.consumer_protocol_assignment.v3 import data as a3
from kio.schema.consumer_protocol_subscription import v0 as s0
from kio.schema.consumer_protocol_subscription import v1 as s1
from kio.schema.consumer_protocol_subscription import v2 as s2
from kio.schema.consumer_protocol_subscription import v3 as s3
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from protocol.prescan import check_lengths

HIGHEST_VERSION = 3
_SUBSCRIPTION: tuple[type, ...] = (
    s0.ConsumerProtocolSubscription, s1.ConsumerProtocolSubscription, s2.ConsumerProtocolSubscription,
    s3.ConsumerProtocolSubscription,
)  # fmt: skip
_ASSIGNMENT: tuple[Any, ...] = (a0, a1, a2, a3)

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]
"""(topic name, partitions) pairs, in the order they were written."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    version: int
    partitions: TopicPartitions
    user_data: bytes | None = None


def _version(data: bytes) -> int:
    if len(data) < 2:
        raise ValueError("consumer protocol data too short for its version")
    (version,) = struct.unpack_from(">h", data, 0)
    if version < 0:
        raise ValueError(f"consumer protocol version {version} is negative")
    return int(version)


def _read(cls: type, data: bytes) -> Any:
    check_lengths(cls, data, 2)
    entity: Any
    entity, _ = entity_reader(cls)(data, 2)
    return entity


def read_subscription(data: bytes) -> Subscription:
    """A JoinGroup protocol's metadata; ValueError (or a prescan LengthError) when malformed."""
    version = _version(data)
    s = _read(_SUBSCRIPTION[min(version, HIGHEST_VERSION)], data)
    return Subscription(
        version=version,
        topics=tuple(str(t) for t in s.topics),
        user_data=s.user_data,
        owned_partitions=tuple((str(tp.topic), tuple(int(p) for p in tp.partitions))
                               for tp in getattr(s, "owned_partitions", ())),
        generation_id=int(getattr(s, "generation_id", -1)),
        rack_id=getattr(s, "rack_id", None),
    )  # fmt: skip


def read_assignment(data: bytes) -> Assignment:
    version = _version(data)
    a = _read(_ASSIGNMENT[min(version, HIGHEST_VERSION)].ConsumerProtocolAssignment, data)
    partitions = tuple((str(tp.topic), tuple(int(p) for p in tp.partitions)) for tp in a.assigned_partitions)
    return Assignment(version, partitions, a.user_data)


def write_assignment(version: int, partitions: TopicPartitions, user_data: bytes | None = None) -> bytes:
    """A SyncGroup assignment in `version` (a member is answered in the version it subscribed
    with, as Kafka's ConsumerProtocol.serializeAssignment(assignment, version) does)."""
    module = _ASSIGNMENT[min(max(version, 0), HIGHEST_VERSION)]
    entity = module.ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            module.TopicPartition(topic=TopicName(t), partitions=tuple(i32(p) for p in ps)) for t, ps in partitions
        ),
        user_data=user_data,
    )
    out = io.BytesIO()
    out.write(struct.pack(">h", version))
    entity_writer(type(entity))(out, entity)
    return out.getvalue()
