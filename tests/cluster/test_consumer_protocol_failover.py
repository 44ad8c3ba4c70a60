"""A KIP-848 consumer group (confluent-kafka, group.protocol=consumer) through a kill -9 of its
coordinator in the middle of a rebalance: a third member has just joined when the coordinator's
broker is killed. The offsets the members were told are committed survive (the new coordinator
has them), the group settles again with every partition assigned once, and every record, those
produced after the kill too, is read and committed in the end.

The new coordinator rebuilds the group from its records in __consumer_offsets: the members carry
on with their epochs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker.coordinator.records import partition_for
from broker.testing.cluster import SamsaCluster
from tests.cluster.conftest import broker_logs, create_topic

TOPIC = "kip848-failover"
GROUP = "kip848-failover-group"
PARTITIONS = 6
OVERRIDES = {"group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000",
             "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500"}


def produce(cluster: SamsaCluster, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(start, start + count):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(60) == 0


class Member:
    def __init__(self, cluster: SamsaCluster, name: str) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP, "client.id": name,
            "group.protocol": "consumer", "enable.auto.commit": False, "auto.offset.reset": "earliest",
        })  # fmt: skip
        self.consumer.subscribe([TOPIC])
        self.seen: set[bytes] = set()
        self.acked: dict[int, int] = {}
        """Partition -> highest offset a commit of this member was acknowledged for."""

    def poll(self) -> None:
        messages = [m for m in self.consumer.consume(50, 0.1) if m.error() is None]
        self.seen.update(m.value() for m in messages)
        if messages:
            try:
                for tp in self.consumer.commit(asynchronous=False) or ():
                    if tp.error is None and tp.offset >= 0:
                        self.acked[tp.partition] = max(self.acked.get(tp.partition, -1), tp.offset)
            except Exception:  # noqa: BLE001 - a commit during the failover may fail: not acknowledged
                pass

    def assigned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}


def poll_until(members: list[Member], predicate: Callable[[], bool], timeout: float, what: str, cluster: SamsaCluster) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        for m in members:
            m.poll()
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{broker_logs(cluster, 4000)}"


def committed(cluster: SamsaCluster) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    from confluent_kafka import ConsumerGroupTopicPartitions

    request = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    result: Any = admin.list_consumer_group_offsets([request])[GROUP].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def test_coordinator_killed_mid_rebalance(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(3, overrides=OVERRIDES)
    create_topic(cluster, TOPIC, PARTITIONS, 3)
    produce(cluster, 0, 600)
    members = [Member(cluster, "a"), Member(cluster, "b")]
    try:
        poll_until(members, lambda: all(m.assigned() for m in members) and sum(len(m.assigned()) for m in members) == PARTITIONS,
                   60, "two members to split the partitions", cluster)  # fmt: skip
        poll_until(members, lambda: sum(len(m.acked) for m in members) == PARTITIONS, 60, "commits on every partition", cluster)
        members.append(Member(cluster, "c"))
        for _ in range(3):  # the third member joins: the group is reconciling
            for m in members:
                m.poll()
        offsets = cluster.metadata(topics=["__consumer_offsets"]).topics["__consumer_offsets"]
        coordinator = offsets[partition_for(GROUP, len(offsets))].leader
        acked_before = {p: max(m.acked.get(p, -1) for m in members) for p in range(PARTITIONS)}
        cluster.kill(coordinator)
        killed_at = time.monotonic()
        produce(cluster, 600, 300)

        def settled() -> bool:
            parts = [m.assigned() for m in members]
            return all(parts) and sum(len(p) for p in parts) == PARTITIONS and set().union(*parts) == set(range(PARTITIONS))

        poll_until(members, settled, 60, "three members to split the partitions after the kill", cluster)
        recovered = time.monotonic() - killed_at
        after = committed(cluster)
        lost = {p: (acked_before[p], after.get(p)) for p in range(PARTITIONS) if after.get(p, -1) < acked_before[p]}
        assert not lost, f"acknowledged commits lost (partition: acked, now): {lost}"
        everything = {b"%d" % i for i in range(900)}
        poll_until(members, lambda: everything <= set().union(*(m.seen for m in members)), 60, "every record read", cluster)
        poll_until(members, lambda: sum(committed(cluster).values()) == 900, 60, "every record committed", cluster)
        print(f"\nKIP848 group settled {recovered:.1f}s after its coordinator (broker {coordinator}) was killed")
    finally:
        for m in members:
            m.consumer.close()
