"""ElectLeaders on one broker, exact wire answers (the same requests compat/test_admin_apis.py and
franz-go's version sweep compare with Kafka): the one replica leads already, unknown topics and
partitions with the controller's messages, every partition, an unknown election type."""

from __future__ import annotations

from typing import Any

from kio.schema.elect_leaders.v1.request import ElectLeadersRequest as ElectLeadersRequestV1
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32

from broker.testing.process import SamsaProcess
from tests.support import fidelity
from tests.support.raw_client import RawClient

NOT_NEEDED = (84, "Leader election not needed for topic partition.")


def answer(response: Any) -> list[tuple[str, list[tuple[int, int, str | None]]]]:
    return [
        (r.topic, [(int(p.partition_id), int(p.error_code), p.error_message) for p in r.partition_result])
        for r in response.replica_election_results
    ]


def test_elect_leaders_on_one_broker(samsa_broker: SamsaProcess) -> None:
    with RawClient(samsa_broker.port) as c:
        fidelity.create_topic(c, "el", partitions=2)
        fidelity.wait_for_leader(c, "el", 1)
        for election_type in (0, 1):
            r = c.request(ElectLeadersRequest(election_type=i8(election_type), topic_partitions=(
                TopicPartitions(topic=TopicName("el"), partitions=(i32(1), i32(0), i32(2))),
                TopicPartitions(topic=TopicName("nope"), partitions=(i32(0),)),
            )))  # fmt: skip
            assert r.error_code == 0
            assert answer(r) == [
                ("el", [(1, *NOT_NEEDED), (0, *NOT_NEEDED), (2, 3, "No such partition as el-2")]),
                ("nope", [(0, 3, "No such topic as nope")]),
            ]
        r = c.request(ElectLeadersRequestV1(election_type=i8(1), topic_partitions=None))
        assert r.error_code == 0 and ("el", []) in answer(r)
        r = c.request(ElectLeadersRequest(election_type=i8(2), topic_partitions=(
            TopicPartitions(topic=TopicName("el"), partitions=(i32(0),)),
        )))  # fmt: skip
        assert r.error_code == 42 and answer(r) == [("el", [(0, 42, "Unknown election type 2")])]
