"""Leader failover with real clients, three brokers in one process (a background event loop)
sharing one in-memory controller (tests/support/controller.py). The controller's part of a failover
(detecting the death, electing) is instantaneous here, so the time measured is the data path's:
clients finding the new leader, followers truncating and fetching from it, the HW moving.

RF=3, min.insync.replicas=2, acks=all (confluent-kafka): the leader of every partition is
stopped; every acknowledged record is on the new leaders exactly once and in order; committed
offsets of a consumer group (kafka-python) survive the move of their __consumer_offsets partition;
the stopped broker, restarted, rejoins as follower and catches up.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

import broker.server as server_module
from broker.config import BrokerConfig
from broker.server import Broker
from broker.testing.loop_thread import LoopThread
from controller.model import NewTopic, PartitionRegistration, TopicRegistration
from protocol.errors import KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId, LeaderEpoch
from tests.support.controller import SharedController, View

TOPIC = "events"


async def _create_topics(
    view: View, topics: Any, *, validate_only: bool = False
) -> dict[str, KafkaError | None]:
    """Replicas rotate over the live brokers; the first replica leads (epoch 0)."""
    shared = view.shared
    live = sorted(b for b in shared.image.brokers if b not in shared.dead)
    results: dict[str, KafkaError | None] = {}
    topics_now = dict(shared.image.topics)
    for t in topics:
        if t.name in topics_now:
            results[t.name] = None
            continue
        rf = min(t.replication_factor if t.replication_factor > 0 else 3, len(live))
        parts = {}
        for i in range(t.num_partitions if t.num_partitions > 0 else 1):
            replicas = tuple(live[(i + k) % len(live)] for k in range(rf))
            parts[i] = PartitionRegistration(
                replicas, replicas, replicas[0], LeaderEpoch(0), 0
            )
        topics_now[t.name] = TopicRegistration(
            t.name,
            uuid.uuid4(),
            MappingProxyType(parts),
            MappingProxyType(dict(t.configs)),
        )
        results[t.name] = None
    shared.publish(replace(shared.image, topics=MappingProxyType(topics_now)))
    return results


async def elect_without(shared: SharedController, dead: BrokerId) -> int:
    """Kafka's controller on a broker failure: out of every ISR; new leaders from the ISR."""
    shared.dead.add(dead)
    topics = {}
    moved = 0
    for name, t in shared.image.topics.items():
        parts = {}
        for i, reg in t.partitions.items():
            if dead in reg.isr:
                isr = tuple(b for b in reg.isr if b != dead)
                leader = reg.leader
                epoch = reg.leader_epoch
                if reg.leader == dead:
                    leader = isr[0] if isr else BrokerId(-1)
                    epoch = LeaderEpoch(epoch + 1)
                    moved += 1
                reg = PartitionRegistration(
                    reg.replicas, isr, leader, epoch, reg.partition_epoch + 1
                )
            parts[i] = reg
        topics[name] = replace(t, partitions=MappingProxyType(parts))
    brokers = {b: r for b, r in shared.image.brokers.items() if b != dead}
    shared.publish(
        replace(
            shared.image,
            topics=MappingProxyType(topics),
            brokers=MappingProxyType(brokers),
        )
    )
    return moved


@pytest.fixture
def cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LoopThread, SharedController, dict[BrokerId, Broker], Any]]:
    shared = SharedController()
    shared.dead = set()  # type: ignore[attr-defined]
    monkeypatch.setattr(
        server_module,
        "EmbeddedController",
        lambda data_dir, registration, cluster_id=None, **_: shared.attach(registration),
    )
    monkeypatch.setattr(View, "create_topics", _create_topics)
    lt = LoopThread()
    brokers: dict[BrokerId, Broker] = {}

    def config(i: int) -> BrokerConfig:
        props = {
            "broker.id": str(i),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / f"b{i}"),
            "replica.lag.time.max.ms": "3000",
            "min.insync.replicas": "2",
            "offsets.topic.num.partitions": "3",
            "offsets.topic.replication.factor": "3",
            "group.initial.rebalance.delay.ms": "0",
        }
        return BrokerConfig.from_properties(props)[0]

    async def start(i: int) -> Broker:
        b = Broker(config(i))
        await b.start()
        return b

    for i in (1, 2, 3):
        brokers[BrokerId(i)] = lt.run(start(i))
    try:
        yield lt, shared, brokers, start
    finally:
        for b in brokers.values():
            try:
                lt.run(b.stop())
            except Exception:
                pass
        lt.stop()


def bootstrap(brokers: dict[BrokerId, Broker], shared: SharedController) -> str:
    return ",".join(
        f"127.0.0.1:{b.bound_port('PLAINTEXT')}"
        for i, b in brokers.items()
        if i not in shared.dead
    )  # type: ignore[attr-defined]


def produce(
    bootstrap_servers: str,
    partition: int,
    values: list[bytes],
    acked: list[tuple[int, int, bytes]],
) -> None:
    p = CKProducer(
        {
            "bootstrap.servers": bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
        }
    )

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    for v in values:
        p.produce(TOPIC, value=v, partition=partition, on_delivery=on_delivery)
    assert p.flush(30) == 0


def read_partition(bootstrap_servers: str, partition: int) -> list[tuple[int, bytes]]:
    c = CKConsumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "checker",
            "enable.auto.commit": False,
        }
    )
    low, high = c.get_watermark_offsets(CKTopicPartition(TOPIC, partition), timeout=10)
    c.assign([CKTopicPartition(TOPIC, partition, low)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 20
    while (
        (not out or out[-1][0] < high - 1)
        and high > low
        and time.monotonic() < deadline
    ):
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            out.append((m.offset(), m.value()))
    c.close()
    return out


def test_leader_failover_keeps_acknowledged_records_and_offsets(cluster: Any) -> None:
    lt, shared, brokers, start = cluster
    lt.run(_create_topics(shared.views[BrokerId(1)], [NewTopic(TOPIC, 3, 3)]))
    bs = bootstrap(brokers, shared)
    acked: list[tuple[int, int, bytes]] = []
    for p in range(3):
        produce(bs, p, [f"p{p}-a{i}".encode() for i in range(200)], acked)
    assert len(acked) == 600

    # a group commits offsets through its coordinator (kafka-python)
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KPTopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        bootstrap_servers=bs, group_id="g1", enable_auto_commit=False
    )
    tps = [KPTopicPartition(TOPIC, p) for p in range(3)]
    consumer.assign(tps)
    consumer.commit({tp: OffsetAndMetadata(100 + tp.partition, None, -1) for tp in tps})
    consumer.close()

    # stop the leader of partition 0 (it leads one partition of each topic, and maybe g1's
    # coordinator partition); the controller moves leadership and measures the time to the first
    # acks=all produce acknowledged by the new leader
    victim = shared.reg(TopicPartition(TOPIC, 0)).leader
    started = time.monotonic()
    lt.run(brokers[victim].stop())
    del shared.views[victim]
    stopped = time.monotonic()
    lt.run(elect_without(shared, victim))
    first: list[tuple[int, int, bytes]] = []
    produce(bootstrap(brokers, shared), 0, [b"after-failover"], first)
    done = time.monotonic()
    print(
        f"\nfailover (in-process controller): leader stop {(stopped - started) * 1000:.0f} ms, "
        f"election -> first acks=all ack by a new producer {(done - stopped) * 1000:.0f} ms"
    )
    assert first and first[0][2] == b"after-failover"
    acked += first
    bs = bootstrap(brokers, shared)
    for p in range(3):
        produce(bs, p, [f"p{p}-b{i}".encode() for i in range(200)], acked)

    # every acknowledged record exactly once, in order, at its acknowledged offset
    for p in range(3):
        got = read_partition(bs, p)
        want = sorted((o, v) for part, o, v in acked if part == p)
        assert got == want, f"partition {p}: {len(got)} read, {len(want)} acknowledged"

    consumer = KafkaConsumer(
        bootstrap_servers=bs, group_id="g1", enable_auto_commit=False
    )
    committed = {tp.partition: consumer.committed(tp) for tp in tps}
    consumer.close()
    assert committed == {0: 100, 1: 101, 2: 102}

    # the stopped broker comes back: follower of everything, catches up to the new leaders
    shared.dead.discard(victim)
    restarted = lt.run(start(victim))
    brokers[victim] = restarted

    def caught_up() -> bool:
        for p in range(3):
            tp = TopicPartition(TOPIC, p)
            leader = brokers[shared.reg(tp).leader].replica_manager.partitions[tp]
            mine = restarted.replica_manager.partitions.get(tp)
            if mine is None or mine.log_end_offset != leader.log_end_offset:
                return False
        return True

    deadline = time.monotonic() + 20
    while not caught_up():
        assert time.monotonic() < deadline, "restarted broker did not catch up"
        time.sleep(0.1)
