"""Pipelined produces (broker/network.py): while an acks=all Produce waits for its replicas, the
next Produce on the same connection is appended; responses still go out in request order, and a
request of another kind waits its turn as in Kafka.

The follower is paused (SIGSTOP), so the first produce cannot complete: its batch is appended and
it waits in the produce purgatory. The second batch of the same idempotent producer is appended
meanwhile (DescribeProducers on another connection sees its sequence), which a broker handling one
request at a time per connection would only do after the first produce's timeout. Then the
follower resumes and all three answers come back in order.
"""

from __future__ import annotations

import datetime
import select
import time
from collections.abc import Callable

from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.metadata.v9.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.types import ProducerId, TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from broker.testing.cluster import SamsaCluster
from protocol import frames, messages
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from tests.cluster.conftest import create_topic
from tests.support.raw_client import RawClient


def _produce(pid: int, epoch: int, sequence: int, topic: str) -> produce_v9.ProduceRequest:
    batch = build_batch([NewRecord(None, b"r%d" % sequence, (), None)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=sequence)  # fmt: skip
    return produce_v9.ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(produce_v9.TopicProduceData(name=TopicName(topic), partition_data=(
            produce_v9.PartitionProduceData(index=i32(0), records=batch),)),),
    )  # fmt: skip


def test_a_produce_waiting_for_replicas_lets_the_next_one_append(cluster_factory: Callable[..., SamsaCluster]) -> None:
    # the paused follower stays in the ISR (neither lagging long enough nor suspected)
    cluster = cluster_factory(2, overrides={"replica.lag.time.max.ms": "60000", "samsa.heartbeat.timeout.ms": "60000"})
    topic = "pipelined"
    leader, follower = cluster.live()
    create_topic(cluster, topic, assignments=[[leader, follower]])
    cluster.wait_for(lambda: cluster.metadata(topics=[topic]).topics[topic][0].leader == leader, 20, "leader")
    port = cluster.process(leader).port
    with RawClient(port, timeout=30) as conn, RawClient(port, timeout=30) as observer:
        init = conn.request(InitProducerIdRequest(
            transactional_id=None, transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
            producer_id=ProducerId(-1), producer_epoch=i16(-1)))  # fmt: skip
        assert init.error_code == ErrorCode.none, init
        pid, epoch = int(init.producer_id), int(init.producer_epoch)

        def last_sequence() -> int:
            answer = observer.request(DescribeProducersRequest(
                topics=(TopicRequest(name=TopicName(topic), partition_indexes=(i32(0),)),)))  # fmt: skip
            states = answer.topics[0].partitions[0].active_producers
            return max((int(s.last_sequence) for s in states if int(s.producer_id) == pid), default=-1)

        cluster.pause(follower)
        try:
            sent = [
                conn.send_request(_produce(pid, epoch, 0, topic)),
                conn.send_request(_produce(pid, epoch, 1, topic)),
                conn.send_request(MetadataRequest(
                    topics=(MetadataRequestTopic(name=TopicName(topic)),), allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False, include_topic_authorized_operations=False)),  # fmt: skip
            ]
            # the second batch is appended while the first waits for the paused follower
            cluster.wait_for(lambda: last_sequence() == 1, 10, "the second produce appended")
            assert not select.select([conn.sock], [], [], 0.2)[0], "nothing is answered while the first produce waits"
        finally:
            cluster.resume(follower)
        started = time.monotonic()
        answers = []
        for key, version in ((0, 9), (0, 9), (3, 9)):
            payload = conn.recv_frame()
            cid, pos = frames.parse_response_header(payload, key, messages.is_flexible(key, version))
            answers.append((cid, messages.decode_response(key, version, payload, pos)[0]))
    assert [cid for cid, _ in answers] == sent  # in request order
    first, second = (a.responses[0].partition_responses[0] for _, a in answers[:2])
    assert (first.error_code, first.base_offset, second.error_code, second.base_offset) == (0, 0, 0, 1)
    assert answers[2][1].topics[0].error_code == ErrorCode.none
    assert time.monotonic() - started < 20, "answered once the follower caught up, not at the produce timeout"
