"""broker/partition_metadata_client.py between two brokers on a real ZooKeeper: the latest offset of
a partition led here (from its Partition) and of one led by the other broker (ListOffsets over the
inter-broker listener) are their high watermarks, as DescribeShareGroupOffsets needs them for a
share group's lag; a partition no broker leads is LEADER_NOT_AVAILABLE, and one whose leader has
gone answers an error, not a hang."""

from __future__ import annotations

import time
from pathlib import Path

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from broker.testing.cluster import ZooKeeperServer
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from tests.cluster.test_share_state_rpcs import _brokers, _until


def test_latest_offsets_from_each_partitions_leader(tmp_path: Path) -> None:
    zk = ZooKeeperServer(tmp_path / "zk").start()
    brokers = _brokers(tmp_path, zk.port)
    producer: KafkaProducer | None = None
    try:
        for b in brokers.values():
            b.start()
        one, two = brokers[1], brokers[2]
        _until(lambda: len(one.broker.controller.image.brokers) == 2 or None)
        admin = KafkaAdminClient(bootstrap_servers=one.bootstrap_servers)
        admin.create_topics([NewTopic("jobs", -1, replica_assignments={0: [1], 1: [2]})])
        admin.close()
        _until(lambda: all((p := one.broker.controller.image.partition("jobs", q)) is not None and p.leader >= 0
                           for q in (0, 1)) or None)  # fmt: skip
        producer = KafkaProducer(bootstrap_servers=one.bootstrap_servers, acks="all")
        for i in range(7):
            producer.send("jobs", f"r{i}".encode(), partition=i % 2)
        producer.flush()
        here, there, missing = TopicPartition("jobs", 0), TopicPartition("jobs", 1), TopicPartition("gone", 0)
        client = one.broker.services.partition_metadata
        assert client is not None
        offsets = one.run(client.list_latest_offsets([here, there, missing]))
        assert offsets[here] == 4 and offsets[there] == 3
        assert isinstance(offsets[missing], KafkaError) and offsets[missing].code == ErrorCode.leader_not_available
        # what the other broker's partition reports is its high watermark, not its log end alone
        assert offsets[there] == int(two.broker.replica_manager.leader_partition(there).high_watermark)

        two.close()
        started = time.monotonic()
        gone = one.run(client.list_latest_offsets([here, there]))
        assert gone[here] == 4
        assert isinstance(gone[there], KafkaError)
        assert gone[there].code in (ErrorCode.network_exception, ErrorCode.leader_not_available)
        assert time.monotonic() - started < 10
    finally:
        if producer is not None:
            producer.close()
        for b in brokers.values():
            b.close()
        zk.stop()
