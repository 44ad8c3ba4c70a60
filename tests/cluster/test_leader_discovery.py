"""Leader discovery (KIP-951) on a 2-broker cluster: a Produce v10+ or Fetch v16+ sent to a broker
that does not lead the partition is answered NOT_LEADER_OR_FOLLOWER with the partition's current
leader and epoch, and the leader's endpoint among the response's node endpoints (Kafka's
KafkaApis.getCurrentLeader); older versions carry neither."""

from __future__ import annotations

import datetime
from collections.abc import Callable

from kio.schema.fetch.v17.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v11.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from broker.testing.cluster import SamsaCluster
from tests.cluster.conftest import create_topic
from tests.support import fidelity
from tests.support.raw_client import RawClient

NOT_LEADER_OR_FOLLOWER = 6


def produce_request(topic: str) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=i16(1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(
            PartitionProduceData(index=i32(0), records=fidelity.batch_of(1)),)),),
    )  # fmt: skip


def fetch_request(topic_id: object) -> FetchRequest:
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(0)), min_bytes=i32(1), max_bytes=i32(1 << 20),
        isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic_id=topic_id, partitions=(FetchPartition(  # type: ignore[arg-type]
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), last_fetched_epoch=i32(-1),
            log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
        forgotten_topics_data=(), rack_id="",
    )  # fmt: skip


def test_not_leader_answers_name_the_leader(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(2)
    create_topic(cluster, "led-by-1", assignments=[[1]])
    leader = cluster.process(1)
    view = cluster.metadata(2, ["led-by-1"]).topics["led-by-1"][0]
    assert view.leader == 1
    with RawClient(leader.port) as c:
        topic_id = fidelity.topic_id(c, "led-by-1")
    with RawClient(cluster.process(2).port) as c:
        produced = c.request(produce_request("led-by-1"))
        (p,) = produced.responses[0].partition_responses
        assert p.error_code == NOT_LEADER_OR_FOLLOWER
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, view.leader_epoch)
        assert [(n.node_id, n.host, n.port) for n in produced.node_endpoints] == [(1, leader.host, leader.port)]

        fetched = c.request(fetch_request(topic_id))
        (f,) = fetched.responses[0].partitions
        assert (fetched.responses[0].topic_id, f.error_code) == (topic_id, NOT_LEADER_OR_FOLLOWER)
        assert (f.current_leader.leader_id, f.current_leader.leader_epoch) == (1, view.leader_epoch)
        assert [(n.node_id, n.host, n.port) for n in fetched.node_endpoints] == [(1, leader.host, leader.port)]

        # Fetch v15 (before KIP-951 in Fetch) and Produce v9: the error alone
        old_fetch = c.request(fetch_request(topic_id), api_version=15)
        assert old_fetch.responses[0].partitions[0].current_leader.leader_id == -1
        old_produce = c.request(produce_request("led-by-1"), api_version=9)
        assert old_produce.responses[0].partition_responses[0].error_code == NOT_LEADER_OR_FOLLOWER
