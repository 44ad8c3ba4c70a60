"""Operator admin APIs (issue 13, part B) against Samsa and Apache Kafka, as raw requests.

ElectLeaders on one node, the cases franz-go's version sweep cannot send (compat/test_go_versions.py
sweeps kadm's ElectLeaders over every version): an unknown election type, and every partition
(null topic_partitions) in v0 and v2. tests/integration/test_elect_leaders.py holds Samsa to the same
requests with exact assertions.
"""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.elect_leaders.v0.request import ElectLeadersRequest as ElectLeadersRequestV0
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32

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
