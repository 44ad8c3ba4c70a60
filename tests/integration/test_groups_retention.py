"""Offset retention: OffsetCommit v2-4 retention_time (a commit with an explicit retention expires
after it; one with -1, what clients send, keeps offsets.retention.minutes), and the offsets a
Stable group holds for topics it no longer subscribes to."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest
from kio.schema.offset_commit.v2 import request as commit_v2
from kio.static.primitive import i32, i64

from broker.coordinator.group import GroupState
from broker.testing import SamsaProcess
from broker.testing.inprocess import SamsaInProcess
from protocol.errors import ErrorCode
from tests.support.clients import kafka_python_await_topics
from tests.support.raw_client import RawClient

GROUP = "retained"


def _commit(client: RawClient, partition: int, offset: int, retention_ms: int) -> None:
    request = commit_v2.OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=i32(-1),
        member_id="",
        retention_time=datetime.timedelta(milliseconds=retention_ms),
        topics=(
            commit_v2.OffsetCommitRequestTopic(
                name="t",
                partitions=(
                    commit_v2.OffsetCommitRequestPartition(
                        partition_index=i32(partition), committed_offset=i64(offset), committed_metadata=""
                    ),
                ),
            ),
        ),
    )
    response = client.request(request)
    assert [p.error_code.value for t in response.topics for p in t.partitions] == [0]


def test_retention_time_of_v2_commits(tmp_path: Path) -> None:
    broker = SamsaProcess(
        tmp_path / "data",
        {"num.partitions": "2", "offsets.retention.check.interval.ms": "200"},
    ).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        admin.create_topics([NewTopic("t", 2, 1)])
        with RawClient(broker.port) as client:
            deadline = time.monotonic() + 15
            while client.request(FindCoordinatorRequest(key=GROUP)).error_code.value != 0:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            _commit(client, 0, 5, retention_ms=500)
            _commit(client, 1, 7, retention_ms=-1)

        def offsets() -> dict[int, int]:
            return {tp.partition: om.offset for tp, om in admin.list_group_offsets(GROUP).get(GROUP, {}).items()}

        assert offsets() == {0: 5, 1: 7}
        deadline = time.monotonic() + 10
        while offsets() != {1: 7}:
            assert time.monotonic() < deadline, offsets()
            time.sleep(0.2)
        admin.close()
    finally:
        broker.close()


def test_stable_group_expires_offsets_of_topics_it_no_longer_subscribes_to(
    samsa_inprocess_broker_factory: Callable[..., SamsaInProcess],
) -> None:
    """KIP-211: a Stable consumer group keeps the offsets of its subscribed topics however old;
    offsets it holds for a topic no member subscribes to expire offsets.retention.minutes after
    their commit. The broker runs in this process so that the expiry check can be run at a
    chosen time instead of waiting the one-minute minimum retention."""
    samsa = samsa_inprocess_broker_factory(num_partitions="1")
    broker, run, bootstrap = samsa.broker, samsa.run, samsa.bootstrap_servers
    consumer = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic("now", 1, 1), NewTopic("before", 1, 1)])
        admin.close()
        consumer = KafkaConsumer(
            "now", bootstrap_servers=bootstrap, group_id="moved-on", enable_auto_commit=False
        )
        kafka_python_await_topics(consumer, "now")
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer never joined"
            consumer.poll(timeout_ms=200)
        # the consumer's own OffsetFetch for its new assignment may still be in flight when poll
        # returns; kafka-python keeps that request's future and would answer a later committed()
        # for the same partition with its (empty) result: position() waits for it to be consumed
        assert consumer.position(TopicPartition("now", 0)) == 0
        consumer.commit({TopicPartition("now", 0): OffsetAndMetadata(3, "", -1)})
        consumer.commit({TopicPartition("before", 0): OffsetAndMetadata(9, "", -1)})
        error, group = broker.group_coordinator.get_group("moved-on")
        assert error == ErrorCode.none and group is not None and group.state is GroupState.STABLE
        committed = {tp.topic: om.offset for tp, om in group.offsets.items()}
        assert committed == {"now": 3, "before": 9}

        retention = broker.config.offsets_retention_ms
        just_before = max(om.commit_timestamp for om in group.offsets.values()) + retention - 1
        assert run(broker.group_coordinator.expire_offsets(just_before)) == 0
        assert run(broker.group_coordinator.expire_offsets(just_before + 2)) == 1
        assert {tp.topic: om.offset for tp, om in group.offsets.items()} == {"now": 3}
        assert group.state is GroupState.STABLE
        # the tombstone reached __consumer_offsets: a client reads the same
        assert consumer.committed(TopicPartition("before", 0)) is None
        assert consumer.committed(TopicPartition("now", 0)) == 3
    finally:
        if consumer is not None:
            consumer.close()
