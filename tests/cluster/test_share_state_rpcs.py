"""A share partition led by one broker whose share-group state another broker coordinates: the
leader's persister (broker/share/persister.py) initializes, reads and writes the state with the
state RPCs over TCP (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState served by
broker/handlers/api_83..85), as Kafka's DefaultStatePersister does, and the coordinator records the
leader's epoch, the acknowledged records, and fences an older leader epoch. Two in-process brokers
on a real ZooKeeper, so that the test can drive the leader's share fetch manager (no ShareFetch
handler yet); a raw ReadShareGroupStateSummary reads the coordinator's record over TCP."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kio.schema.read_share_group_state_summary.v1 import request as summary_req
from kio.static.primitive import i32

from broker.replication.leader_client import LeaderClient
from broker.share.in_flight import AcknowledgementBatch, AcknowledgeType, RecordState
from broker.share.share_coordinator import SHARE_GROUP_STATE_TOPIC
from broker.share.share_fetch import ShareFetchParams
from broker.share.share_state import SharePartitionKey
from broker.testing.cluster import ZooKeeperServer
from broker.testing.inprocess import SamsaInProcess
from broker.testing.ports import free_port
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

T = TypeVar("T")
GROUP = "queue"


def _until(what: Callable[[], T | None], timeout_s: float = 20) -> T:
    deadline = time.monotonic() + timeout_s
    while (value := what()) is None:
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return value


def _brokers(tmp_path: Path, zk_port: int) -> dict[int, SamsaInProcess]:
    return {
        i: SamsaInProcess(tmp_path / f"broker-{i}", {
            "broker.id": str(i),
            "zookeeper.connect": f"127.0.0.1:{zk_port}",
            "samsa.heartbeat.port": str(free_port()),
            "offsets.topic.replication.factor": "1",
            "default.replication.factor": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
        }, port=free_port())  # fmt: skip
        for i in (1, 2)
    }


def _state_leader(samsa: SamsaInProcess) -> int | None:
    registration = samsa.broker.controller.image.partition(SHARE_GROUP_STATE_TOPIC, 0)
    return None if registration is None or registration.leader < 0 else int(registration.leader)


def _summary(samsa: SamsaInProcess, topic_id: uuid.UUID) -> Any:
    """A raw ReadShareGroupStateSummary to this broker, over TCP."""
    client = LeaderClient("127.0.0.1", samsa.port, client_id="test", timeout_s=10)
    try:
        return samsa.run(client.request(summary_req.ReadShareGroupStateSummaryRequest(
            group_id=GROUP, topics=(summary_req.ReadStateSummaryData(topic_id=topic_id, partitions=(
                summary_req.PartitionData(partition=i32(0), leader_epoch=i32(-1)),)),),
        ))).results[0].partitions[0]  # fmt: skip
    finally:
        client.close()


def test_a_share_partition_leader_persists_through_another_brokers_share_coordinator(tmp_path: Path) -> None:
    zk = ZooKeeperServer(tmp_path / "zk").start()
    brokers = _brokers(tmp_path, zk.port)
    producer: KafkaProducer | None = None
    try:
        for b in brokers.values():
            b.start()
        _until(lambda: len(brokers[1].broker.controller.image.brokers) == 2 or None)
        # __share_group_state (one partition) is created as a group coordinator's first
        # initialization creates it; the topic partition goes to the other broker
        assert brokers[1].broker.share_coordinator is not None
        created = brokers[1].run(brokers[1].broker.share_coordinator.ensure_topic(SharePartitionKey(GROUP, uuid.uuid4(), 0)))
        assert created == ErrorCode.none
        coordinator_id = _until(lambda: _state_leader(brokers[1]))
        leader_id = 3 - coordinator_id
        coordinator, leader = brokers[coordinator_id], brokers[leader_id]
        admin = KafkaAdminClient(bootstrap_servers=leader.bootstrap_servers)
        admin.create_topics([NewTopic("jobs", -1, replica_assignments={0: [leader_id]})])
        admin.close()
        topic_id: uuid.UUID = _until(
            lambda: t.topic_id if (t := leader.broker.controller.image.topics.get("jobs")) is not None else None
        )
        key = SharePartitionKey(GROUP, topic_id, 0)
        share_coordinator = coordinator.broker.share_coordinator
        assert share_coordinator is not None and share_coordinator.is_local(key)
        assert leader.broker.share_coordinator is not None and not leader.broker.share_coordinator.is_local(key)
        # the coordinator answers NOT_COORDINATOR where it does not lead the state partition
        assert _summary(leader, topic_id).error_code == ErrorCode.not_coordinator

        # the leader's persister initializes the state over InitializeShareGroupState
        persister = leader.broker.share_persister
        assert persister is not None
        done = leader.run(persister.initialize_partitions(GROUP, 1, {topic_id: frozenset({0})}))
        assert done == {topic_id: frozenset({0})}
        assert share_coordinator.read_summary(key).state_epoch == 1

        # the leader's share fetch manager loads the share partition over ReadShareGroupState,
        # which records the partition's leader epoch with the coordinator
        manager = leader.broker.share_partitions
        assert manager is not None
        tip = (topic_id, 0)
        first = leader.run(manager.fetch(GROUP, "m", 0, [tip], [], {}, ShareFetchParams(max_wait_ms=50), "c"))
        assert first.error == ErrorCode.none and first.partitions[tip].error == ErrorCode.none
        epoch = leader.broker.replica_manager.leader_partition(TopicPartition("jobs", 0)).leader_epoch
        summary = _summary(coordinator, topic_id)
        assert (summary.error_code, int(summary.leader_epoch)) == (ErrorCode.none, epoch)

        producer = KafkaProducer(bootstrap_servers=leader.bootstrap_servers, acks="all")
        for i in range(5):
            producer.send("jobs", f"r{i}".encode())
        producer.flush()
        got = leader.run(manager.fetch(GROUP, "m", 1, [], [], {}, ShareFetchParams(max_wait_ms=5_000), "c"))
        acquired = got.partitions[tip].acquired
        assert acquired and acquired[0].first_offset == 0
        last = acquired[-1].last_offset
        # accepted with WriteShareGroupState before it takes effect; what the coordinator holds
        # is what a new leader would load
        ack = {tip: [AcknowledgementBatch(0, last, (int(AcknowledgeType.ACCEPT),))]}
        assert leader.run(manager.acknowledge(GROUP, "m", ack)) == {tip: ErrorCode.none}
        state = coordinator.run(share_coordinator.read(key, epoch))
        assert state.error == ErrorCode.none
        assert [(b.first_offset, b.last_offset, b.delivery_state) for b in state.state_batches] == [
            (0, last, RecordState.ACKNOWLEDGED)]  # fmt: skip
        # a newer leader epoch reaches the coordinator (as a new leader's read would bring it):
        # the old leader's next write is fenced over the wire, its acknowledgement refused
        # (NOT_LEADER_OR_FOLLOWER, Kafka's mapping) and its share partition dropped
        producer.send("jobs", b"more")
        producer.flush()
        held = leader.run(manager.fetch(GROUP, "m", 2, [], [], {}, ShareFetchParams(max_wait_ms=5_000), "c"))
        offset = held.partitions[tip].acquired[0].first_offset
        assert coordinator.run(share_coordinator.read(key, epoch + 1)).error == ErrorCode.none
        ack = {tip: [AcknowledgementBatch(offset, offset, (int(AcknowledgeType.ACCEPT),))]}
        assert leader.run(manager.acknowledge(GROUP, "m", ack)) == {tip: ErrorCode.not_leader_or_follower}
        again = leader.run(manager.fetch(GROUP, "m", 3, [], [], {}, ShareFetchParams(max_wait_ms=50), "c"))
        assert again.partitions[tip].error == ErrorCode.not_leader_or_follower
        assert coordinator.run(share_coordinator.read(key, epoch + 1)).state_batches == state.state_batches
    finally:
        if producer is not None:
            producer.close()
        for b in brokers.values():
            b.close()
        zk.stop()
