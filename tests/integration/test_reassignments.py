"""Partition reassignments on one broker, exact wire answers (the requests compat/test_admin_apis.py
compares with Kafka): a no-op move to the broker itself, every bad input with the controller's
messages, a refused replication factor change (v1), v0, and ListPartitionReassignments (nothing in
progress on one node). tests/cluster/test_reassignment.py moves data between brokers."""

from __future__ import annotations

from typing import Any

from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest as AlterPartitionReassignmentsRequestV0,
)
from kio.schema.alter_partition_reassignments.v0.request import (
    ReassignablePartition as ReassignablePartitionV0,
)
from kio.schema.alter_partition_reassignments.v0.request import ReassignableTopic as ReassignableTopicV0
from kio.schema.alter_partition_reassignments.v1.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.list_partition_reassignments.v0.request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from broker.testing.process import SamsaProcess
from tests.support import fidelity
from tests.support.raw_client import RawClient

UNREGISTERED = (39, "The manual partition assignment includes broker 99, but no such broker is registered.")


def answer(r: Any) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
    return [(t.name, [(int(p.partition_index), int(p.error_code), p.error_message) for p in t.partitions])
            for t in r.responses]  # fmt: skip


def replicas(r: list[int] | None) -> tuple[BrokerId, ...] | None:
    return None if r is None else tuple(BrokerId(b) for b in r)


def alter(c: RawClient, moves: list[tuple[int, list[int] | None]], topic: str = "ra", **kw: Any) -> Any:
    return c.request(AlterPartitionReassignmentsRequest(topics=(ReassignableTopic(name=TopicName(topic), partitions=tuple(
        ReassignablePartition(partition_index=i32(p), replicas=replicas(b)) for p, b in moves)),), **kw))  # fmt: skip


def test_reassignments_on_one_broker(samsa_broker: SamsaProcess) -> None:
    with RawClient(samsa_broker.port) as c:
        me = int(c.request(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False)).controller_id)  # fmt: skip
        fidelity.create_topic(c, "ra", partitions=2)
        r = alter(c, [(0, [me]), (1, None), (5, [me]), (0, []), (0, [me, me]), (0, [me, 99])])
        assert (r.error_code, r.error_message, r.allow_replication_factor_change) == (0, None, True)
        assert answer(r) == [("ra", [
            (0, 0, None),
            (1, 85, None),  # Kafka sends no message where it would be the code's default
            (5, 3, "Unable to find partition ra:5."),
            (0, 39, "The manual partition assignment includes an empty replica list."),
            (0, 39, f"The manual partition assignment includes the broker {me} more than once."),
            (0, *UNREGISTERED),
        ])]  # fmt: skip
        r = alter(c, [(0, [me])], topic="ra-nope")
        assert answer(r) == [("ra-nope", [(0, 3, "Unable to find a topic named ra-nope.")])]
        r = alter(c, [(0, [me]), (1, [me, 99])], allow_replication_factor_change=False)
        assert answer(r) == [("ra", [(0, 0, None), (1, *UNREGISTERED)])] and not r.allow_replication_factor_change
        r = c.request(AlterPartitionReassignmentsRequestV0(topics=(ReassignableTopicV0(name=TopicName("ra"), partitions=(
            ReassignablePartitionV0(partition_index=i32(0), replicas=replicas([me])),)),)))  # fmt: skip
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.responses] == [("ra", [(0, 0)])]
        r = c.request(ListPartitionReassignmentsRequest(topics=None))
        assert (r.error_code, r.error_message, r.topics) == (0, None, ())
        r = c.request(ListPartitionReassignmentsRequest(topics=(
            ListPartitionReassignmentsTopics(name=TopicName("ra"), partition_indexes=(i32(0), i32(7))),)))  # fmt: skip
        assert r.topics == ()
