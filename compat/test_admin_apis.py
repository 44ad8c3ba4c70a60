"""Operator admin APIs (issue 13, part B) against Samsa and Apache Kafka, as raw requests.

ElectLeaders on one node, the cases franz-go's version sweep cannot send (compat/test_go_versions.py
sweeps kadm's ElectLeaders over every version): an unknown election type, and every partition
(null topic_partitions) in v0 and v2. tests/integration/test_elect_leaders.py holds Samsa to the same
requests with exact assertions.

Partition reassignments on one node: AlterPartitionReassignments v0 and v1 with every bad input
(unknown topic and partition, empty, duplicated and unregistered replica lists, a cancel of nothing,
a replication factor change refused by v1's allow_replication_factor_change) and a no-op move, then
ListPartitionReassignments of everything and of named partitions (nothing in progress on one node).
tests/cluster/test_reassignment.py moves data between brokers.

Client quotas: AlterClientQuotas for every entity kind (client id, user, both, their defaults),
validate-only, every malformed entry Kafka 4.3.1 refuses, then DescribeClientQuotas with every
filter shape and the malformed ones, and the removal; each answer's messages are compared.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, OpData
from kio.schema.alter_client_quotas.v1.request import EntityData as AlterEntityData
from kio.schema.alter_client_quotas.v1.request import EntryData as AlterEntryData
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
from kio.schema.describe_client_quotas.v1.request import ComponentData, DescribeClientQuotasRequest
from kio.schema.elect_leaders.v0.request import ElectLeadersRequest as ElectLeadersRequestV0
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.schema.list_partition_reassignments.v0.request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import f64, i8, i32

from tests.support import fidelity
from tests.support.raw_client import RawClient

TOPIC = "admin-elect-leaders"


def _answer(response: Any, topic: str | None = None) -> list[Any]:
    """(topic, [(partition, error code, message)]) for `topic` (all topics when None)."""
    return [
        [r.topic, [[int(p.partition_id), int(p.error_code), p.error_message] for p in r.partition_result]]
        for r in response.replica_election_results
        if topic is None or r.topic == topic
    ]


def observe_elect_leaders(target: Any) -> list[dict[str, Any]]:
    obs: list[dict[str, Any]] = []
    with RawClient(int(target.bootstrap_servers.rsplit(":", 1)[1])) as client:
        fidelity.create_topic(client, TOPIC, partitions=2)
        fidelity.wait_for_leader(client, TOPIC, 1)
        named = (TopicPartitions(topic=TopicName(TOPIC), partitions=(i32(0), i32(3))),)
        r = client.request(ElectLeadersRequest(election_type=i8(5), topic_partitions=named))
        obs.append({"step": "unknown election type", "error": int(r.error_code), "answer": _answer(r)})
        for election_type in (0, 1):
            r = client.request(ElectLeadersRequest(election_type=i8(election_type), topic_partitions=None))
            obs.append({"step": f"every partition, type {election_type}", "error": int(r.error_code),
                        "answer": _answer(r, TOPIC)})  # fmt: skip
        r = client.request(ElectLeadersRequestV0(topic_partitions=None))
        obs.append({"step": "every partition, v0", "answer": _answer(r, TOPIC)})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="ElectLeaders: unknown election type, every partition")
def test_elect_leaders(differential: Any) -> None:
    obs = differential("raw-elect-leaders", observe_elect_leaders)
    unknown = [[0, 42, "Unknown election type 5"], [3, 42, "Unknown election type 5"]]
    assert obs == [
        {"step": "unknown election type", "error": 42, "answer": [[TOPIC, unknown]]},
        {"step": "every partition, type 0", "error": 0, "answer": [[TOPIC, []]]},
        {"step": "every partition, type 1", "error": 0, "answer": [[TOPIC, []]]},
        {"step": "every partition, v0", "answer": [[TOPIC, []]]},
    ]


REASSIGN = "admin-reassign"


def _reassign(client: RawClient, moves: list[tuple[str, list[tuple[int, list[int] | None]]]], *,
              version: int = 1, allow_rf_change: bool = True) -> list[Any]:  # fmt: skip
    def replicas(r: list[int] | None) -> tuple[BrokerId, ...] | None:
        return None if r is None else tuple(BrokerId(b) for b in r)

    if version == 0:
        r: Any = client.request(AlterPartitionReassignmentsRequestV0(topics=tuple(
            ReassignableTopicV0(name=TopicName(t), partitions=tuple(
                ReassignablePartitionV0(partition_index=i32(p), replicas=replicas(b)) for p, b in ps))
            for t, ps in moves)))  # fmt: skip
    else:
        r = client.request(AlterPartitionReassignmentsRequest(allow_replication_factor_change=allow_rf_change, topics=tuple(
            ReassignableTopic(name=TopicName(t), partitions=tuple(
                ReassignablePartition(partition_index=i32(p), replicas=replicas(b)) for p, b in ps))
            for t, ps in moves)))  # fmt: skip
    return [int(r.error_code), r.error_message,
            [[t.name, [[int(p.partition_index), int(p.error_code), p.error_message] for p in t.partitions]]
             for t in r.responses]]  # fmt: skip


def _list(client: RawClient, topics: list[tuple[str, list[int]]] | None) -> list[Any]:
    r = client.request(ListPartitionReassignmentsRequest(topics=None if topics is None else tuple(
        ListPartitionReassignmentsTopics(name=TopicName(t), partition_indexes=tuple(i32(p) for p in ps))
        for t, ps in topics)))  # fmt: skip
    return [int(r.error_code), r.error_message,
            [[t.name, [[int(p.partition_index), list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)]
                       for p in t.partitions]] for t in r.topics if t.name.startswith("admin-")]]  # fmt: skip


def observe_reassignments(target: Any) -> list[dict[str, Any]]:
    obs: list[dict[str, Any]] = []
    with RawClient(int(target.bootstrap_servers.rsplit(":", 1)[1])) as c:
        fidelity.create_topic(c, REASSIGN, partitions=2)
        obs.append({"step": "bad and no-op", "answer": _reassign(c, [
            (REASSIGN, [(0, [1]), (1, None), (5, [1]), (0, []), (0, [1, 1]), (0, [1, 99]), (1, [99, 1, 99])]),
            ("admin-reassign-nope", [(0, [1]), (1, None)]),
        ])})  # fmt: skip
        obs.append({"step": "replication factor", "answer": _reassign(c, [(REASSIGN, [(0, [1]), (1, [1, 99]), (1, [])])],
                                                                     allow_rf_change=False)})  # fmt: skip
        obs.append({"step": "v0", "answer": _reassign(c, [(REASSIGN, [(0, [1]), (1, None), (2, [1])])], version=0)})
        obs.append({"step": "list all", "answer": _list(c, None)})
        obs.append({"step": "list named", "answer": _list(c, [(REASSIGN, [0, 1, 7]), ("admin-reassign-nope", [0])])})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="partition reassignments on one node: errors, no-op, list")
def test_partition_reassignments(differential: Any) -> None:
    obs = {o["step"]: o["answer"] for o in differential("raw-reassignments", observe_reassignments)}
    assert obs["bad and no-op"][:2] == [0, None]
    assert [p[1] for p in obs["bad and no-op"][2][0][1]] == [0, 85, 3, 39, 39, 39, 39]
    assert obs["bad and no-op"][2][0][1][1] == [1, 85, None]  # Kafka's default message is not sent
    assert obs["list all"] == [0, None, []] and obs["list named"] == [0, None, []]


def _alter(client: RawClient, entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]]],
           validate_only: bool = False) -> list[Any]:  # fmt: skip
    r = client.request(AlterClientQuotasRequest(
        entries=tuple(
            AlterEntryData(
                entity=tuple(AlterEntityData(entity_type=t, entity_name=n) for t, n in entity),
                ops=tuple(OpData(key=k, value=f64(0.0 if v is None else v), remove=v is None) for k, v in ops),
            )
            for entity, ops in entries
        ),
        validate_only=validate_only,
    ))  # fmt: skip
    return sorted(
        ([int(e.error_code), e.error_message, sorted([d.entity_type, _name(d.entity_name)] for d in e.entity)]
         for e in r.entries), key=json.dumps)  # fmt: skip


def _name(name: str | None) -> str:
    return "<default>" if name is None else name


def _describe(client: RawClient, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    r = client.request(DescribeClientQuotasRequest(
        components=tuple(ComponentData(entity_type=t, match_type=i8(m), match=s) for t, m, s in components),
        strict=strict,
    ))  # fmt: skip
    entries = None if r.entries is None else sorted(
        [sorted([d.entity_type, _name(d.entity_name)] for d in e.entity), sorted([v.key, float(v.value)] for v in e.values)]
        for e in r.entries
        if any(d.entity_name is None or d.entity_name.startswith("cq-") for d in e.entity)
    )  # fmt: skip
    return [int(r.error_code), r.error_message, entries]


def observe_client_quotas(target: Any) -> list[dict[str, Any]]:
    """AlterClientQuotas then DescribeClientQuotas, every entity kind and filter; undone at the end."""
    U, C = "user", "client-id"
    entities: list[list[tuple[str, str | None]]] = [
        [(C, "cq-client")], [(C, None)], [(U, "cq-user")], [(U, None)], [(U, "cq-user"), (C, "cq-client")],
        [(U, None), (C, None)], [(U, "cq-user"), (C, None)],
    ]  # fmt: skip
    obs: list[dict[str, Any]] = []
    with RawClient(int(target.bootstrap_servers.rsplit(":", 1)[1])) as c:
        obs.append({"step": "set", "answer": _alter(c, [
            (e, [("producer_byte_rate", 1024.0 * (i + 1)), ("request_percentage", 50.5)]) for i, e in enumerate(entities)])})
        obs.append({"step": "validate only", "answer": _alter(c, [([(C, "cq-validate")], [("consumer_byte_rate", 1.0)])], True)})
        obs.append({"step": "bad", "answer": _alter(c, [
            ([], [("producer_byte_rate", 1.0)]),
            ([(C, "cq-a"), (C, "cq-b")], [("producer_byte_rate", 1.0)]),
            ([("group", "cq-g")], [("producer_byte_rate", 1.0)]),
            ([(C, "")], [("producer_byte_rate", 1.0)]),
            ([(C, "cq-bad-values")], [("nonsense", 1.0), ("consumer_byte_rate", 1.5)]),
            ([(C, "cq-unknown-key")], [("nonsense", 1.0)]),
            ([(C, "cq-negative")], [("producer_byte_rate", -5.0)]),
            ([(C, "cq-zero")], [("request_percentage", 0.0)]),
            ([(C, "cq-two-errors")], [("consumer_byte_rate", 1.5), ("nonsense", 1.0)]),
            ([(U, "cq-u"), (C, "cq-c")], [("request_percentage", -1.0)]),
        ])})  # fmt: skip
        filters: list[tuple[str, list[tuple[str, int, str | None]], bool]] = [
            ("client exact", [(C, 0, "cq-client")], False),
            ("client exact strict", [(C, 0, "cq-client")], True),
            ("client default", [(C, 1, None)], False),
            ("client any", [(C, 2, None)], False),
            ("user any strict", [(U, 2, None)], True),
            ("user and client", [(U, 0, "cq-user"), (C, 2, None)], False),
            ("no components", [], False),
            ("no components strict", [], True),
            ("exact without match", [(C, 0, None)], False),
            ("default with match", [(C, 1, "x")], False),
            ("any with match", [(C, 2, "x")], False),
            ("match type 7", [(C, 7, None)], False),
            ("duplicate", [(C, 2, None), (C, 2, None)], False),
            ("unknown type", [("group", 2, None)], False),
            ("empty type", [("", 2, None)], False),
        ]
        deadline = time.monotonic() + 10  # (as below: Kafka's brokers learn of changes a moment later)
        while len(_describe(c, [])[2] or []) < len(entities) + 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        for name, components, strict in filters:
            obs.append({"step": f"describe {name}", "answer": _describe(c, components, strict)})
        obs.append({"step": "remove", "answer": _alter(c, [
            (e, [("producer_byte_rate", None), ("request_percentage", None)]) for e in entities]
            + [([(C, "cq-b")], [("producer_byte_rate", None)])])})
        # Kafka's brokers learn of a change from the controller a moment after it answered
        deadline = time.monotonic() + 10
        while (after := _describe(c, [(C, 2, None)]))[2] and time.monotonic() < deadline:
            time.sleep(0.1)
        obs.append({"step": "describe after", "answer": after})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="client quotas: AlterClientQuotas, DescribeClientQuotas filters")
def test_client_quotas(differential: Any) -> None:
    obs = {o["step"]: o["answer"] for o in differential("raw-client-quotas", observe_client_quotas)}
    assert [e[0] for e in obs["set"]] == [0] * 7 and [e[0] for e in obs["remove"]] == [0] * 8
    assert [e[:2] for e in obs["bad"]] == [
        [0, None],  # a type named twice: the last name, set
        [42, "Empty client-id not supported"],
        [42, "Invalid configuration key nonsense"],
        [42, "Invalid empty client quota entity"],
        [42, "Quota producer_byte_rate must be greater than 0"],
        [42, "Quota request_percentage must be greater than 0"],
        [42, "Quota request_percentage must be greater than 0"],
        [42, "Unhandled client quota entity type: group"],
        [42, "consumer_byte_rate cannot be a fractional value."],
        [42, "consumer_byte_rate cannot be a fractional value."],
    ]
    assert obs["describe client exact strict"] == [0, "", [
        [[["client-id", "cq-client"]], [["producer_byte_rate", 1024.0], ["request_percentage", 50.5]]]]]
    assert len(obs["describe no components"][2]) == 8 and obs["describe no components strict"] == [0, "", []]
    assert obs["describe unknown type"] == [35, "Unsupported entity type group", None]
    assert obs["describe after"] == [0, "", []]
