"""Replication on a real cluster (ZooKeeper + 3 brokers, broker.testing.cluster): RF=3,
min.insync.replicas=2, acks=all. Kill -9 the leader: a follower takes over, every acknowledged
record is there exactly once and in order; the time from the kill to the first acks=all produce
acknowledged by the new leader is printed (docs/benchmarks.md, "Failover"). A follower paused
past replica.lag.time.max.ms leaves the ISR and rejoins after it resumes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing.cluster import SamsaCluster

TOPIC = "replicated"
LAG_MS = 3000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SamsaCluster]:
    overrides = {
        "min.insync.replicas": "2",
        "replica.lag.time.max.ms": str(LAG_MS),
        "offsets.topic.num.partitions": "3",
        "group.initial.rebalance.delay.ms": "0",
    }
    with SamsaCluster(tmp_path, brokers=3, overrides=overrides) as c:
        yield c


def create_topic(c: SamsaCluster, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    futures = admin.create_topics([NewTopic(TOPIC, partitions, 3)])
    futures[TOPIC].result(30)
    c.wait_for(
        lambda: len(c.metadata(topics=[TOPIC]).topics.get(TOPIC, {})) == partitions
        and all(p.leader >= 0 and len(p.isr) == 3 for p in c.metadata(topics=[TOPIC]).topics[TOPIC].values()),
        30,
        "topic online with a full ISR",
    )


def producer(c: SamsaCluster, **extra: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": c.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
            "message.timeout.ms": 30000,
            "topic.metadata.refresh.interval.ms": 500,
            **extra,
        }
    )


def produce_all(p: Producer, values: list[bytes], acked: list[tuple[int, int, bytes]], partition: int = 0) -> None:
    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    for v in values:
        p.produce(TOPIC, value=v, partition=partition, on_delivery=on_delivery)
    assert p.flush(60) == 0


def read_all(c: SamsaCluster, partition: int = 0) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "checker", "enable.auto.commit": False})
    low, high = consumer.get_watermark_offsets(CKTopicPartition(TOPIC, partition), timeout=20)
    consumer.assign([CKTopicPartition(TOPIC, partition, low)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while high > low and (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            out.append((m.offset(), m.value()))
    consumer.close()
    return out


def test_kill_leader_failover_keeps_every_acknowledged_record(cluster: SamsaCluster) -> None:
    create_topic(cluster)
    p = producer(cluster)
    acked: list[tuple[int, int, bytes]] = []
    produce_all(p, [f"before-{i}".encode() for i in range(500)], acked)
    leader = cluster.metadata(topics=[TOPIC]).topics[TOPIC][0].leader

    killed = time.monotonic()
    cluster.kill(leader)
    first: list[tuple[int, int, bytes]] = []
    p.produce(TOPIC, value=b"first-after-kill", partition=0, on_delivery=lambda e, m: e is None and first.append(m))
    while not first:
        p.poll(0.005)
        assert time.monotonic() - killed < 30, "no acks=all produce acknowledged within 30 s of the kill"
    failover_ms = (time.monotonic() - killed) * 1000
    print(f"\nFAILOVER kill -9 of leader {leader} -> first acks=all ack: {failover_ms:.0f} ms")
    acked.append((0, first[0].offset(), first[0].value()))
    produce_all(p, [f"after-{i}".encode() for i in range(500)], acked)
    new_leader = cluster.metadata(topics=[TOPIC]).topics[TOPIC][0].leader
    assert new_leader != leader

    got = read_all(cluster)
    want = sorted((o, v) for _, o, v in acked)
    assert got == want

    # the killed broker comes back, truncates to the leader's log and rejoins the ISR
    cluster.restart(leader)
    cluster.wait_for(
        lambda: leader in cluster.metadata(topics=[TOPIC]).topics[TOPIC][0].isr, 30, "restarted broker back in the ISR"
    )


def test_paused_follower_leaves_and_rejoins_isr(cluster: SamsaCluster) -> None:
    create_topic(cluster)
    p = producer(cluster)
    acked: list[tuple[int, int, bytes]] = []
    produce_all(p, [f"a-{i}".encode() for i in range(100)], acked)
    view = cluster.metadata(topics=[TOPIC]).topics[TOPIC][0]
    follower = next(b for b in view.replicas if b != view.leader)
    cluster.pause(follower)
    try:
        # writes continue (ISR of 2 >= min.insync.replicas) once the follower is out of the ISR
        produce_all(p, [f"b-{i}".encode() for i in range(100)], acked)
        cluster.wait_for(
            lambda: follower not in cluster.metadata(view.leader, topics=[TOPIC]).topics[TOPIC][0].isr,
            LAG_MS / 1000 * 4,
            "paused follower removed from the ISR",
        )
    finally:
        cluster.resume(follower)
    produce_all(p, [f"c-{i}".encode() for i in range(100)], acked)
    cluster.wait_for(
        lambda: follower in cluster.metadata(view.leader, topics=[TOPIC]).topics[TOPIC][0].isr,
        30,
        "resumed follower back in the ISR",
    )
    assert read_all(cluster) == sorted((o, v) for _, o, v in acked)
