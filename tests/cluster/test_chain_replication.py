"""Pipelined (chain) replication on a real cluster (ZooKeeper + 3 brokers, broker.testing.cluster):
a topic with replication.pipeline.enable=true and replicas [1, 2, 3] replicates 1 -> 2 -> 3.

- the leader's ReplicationBytesOut for the chain topic is about half of the star topic's (fails when
  the tail fetches from the leader), the middle follower sends the tail its bytes, an acks=all
  record is acknowledged well within replica.fetch.wait.max.ms (the chain's reports do not wait
  for a long poll to expire), and every
  acknowledged record is readable from each replica (each is made leader in turn by killing the
  one before);
- kill -9 the middle follower while an acks=all producer writes (min.insync.replicas=2): writes
  go on, the tail fetches from the leader, nothing acknowledged is lost.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing.cluster import SamsaCluster

LAG_MS = 3000
FETCH_WAIT_MS = 500
VALUE = b"x" * 1000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SamsaCluster]:
    overrides = {
        "min.insync.replicas": "2",
        "replica.lag.time.max.ms": str(LAG_MS),
        "replica.fetch.wait.max.ms": str(FETCH_WAIT_MS),
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    with SamsaCluster(tmp_path, brokers=3, overrides=overrides, metrics=True) as c:
        yield c


def create_topic(c: SamsaCluster, name: str, chain: bool) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    config = {"replication.pipeline.enable": "true"} if chain else {}
    admin.create_topics([NewTopic(name, 1, replica_assignment=[[1, 2, 3]], config=config)])[name].result(30)
    c.wait_for(
        lambda: (p := c.metadata(topics=[name]).topics.get(name, {}).get(0)) is not None
        and p.leader == 1 and len(p.isr) == 3,
        30, f"{name} online with a full ISR",
    )  # fmt: skip


def replication_bytes_out(c: SamsaCluster, broker: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{c.brokers[broker].metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r"^kafka_server_brokertopicmetrics_replicationbytesout(?:_total)? (\S+)$", text, re.M)
    assert m, "no replicationbytesout metric"
    return int(float(m.group(1)))


def producer(c: SamsaCluster) -> Producer:
    return Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5, "message.timeout.ms": 30000, "topic.metadata.refresh.interval.ms": 500})


def produce(p: Producer, topic: str, values: list[bytes], acked: list[tuple[int, bytes]]) -> None:
    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.offset(), msg.value()))

    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(60) == 0


def read_all(c: SamsaCluster, topic: str, acked: dict[int, bytes]) -> dict[int, bytes]:
    """Every record of partition 0, read once the high watermark covers the acknowledged ones: a
    new leader's high watermark is the one it last heard from the old leader, and it advances
    past the last acknowledged records only once the other ISR members have fetched them from it
    (as in Kafka). An acknowledged record that is lost never becomes visible and fails the test."""
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": f"check-{time.monotonic()}",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 500})
    end = max(acked, default=-1) + 1
    try:
        deadline = time.monotonic() + 30
        while True:  # right after a leader change the client may still ask the old leader, and
            try:  # librdkafka's watermark query does not retry NOT_LEADER_OR_FOLLOWER
                low, high = consumer.get_watermark_offsets(CKTopicPartition(topic, 0), timeout=10)
                if high >= end or time.monotonic() > deadline:
                    break
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
        consumer.assign([CKTopicPartition(topic, 0, low)])
        out: dict[int, bytes] = {}
        deadline = time.monotonic() + 30
        while len(out) < high - low and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out[msg.offset()] = msg.value()
        return out
    finally:
        consumer.close()


def wait_chain_formed(c: SamsaCluster, p: Producer, topic: str) -> None:
    """Until the middle follower (2) serves the tail: its replication bytes out grow."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        before = replication_bytes_out(c, 2)
        produce(p, topic, [b"warm-up"], [])
        time.sleep(0.3)
        if replication_bytes_out(c, 2) > before:
            return
    raise AssertionError("the tail never fetched from the middle follower")


def test_chain_halves_leader_replication_bytes_and_every_replica_has_every_record(cluster: SamsaCluster) -> None:
    c = cluster
    create_topic(c, "star", chain=False)
    create_topic(c, "chain", chain=True)
    p = producer(c)
    values = [VALUE] * 2000  # 2 MB
    produce(p, "star", [b"warm-up"], [])
    wait_chain_formed(c, p, "chain")

    before = replication_bytes_out(c, 1)
    produce(p, "star", values, [])
    time.sleep(1.0)  # the followers' last fetches
    star = replication_bytes_out(c, 1) - before
    assert star >= 2 * len(values) * len(VALUE), star

    acked: list[tuple[int, bytes]] = []
    before, middle_before = replication_bytes_out(c, 1), replication_bytes_out(c, 2)
    produce(p, "chain", values, acked)
    time.sleep(1.0)
    chained = replication_bytes_out(c, 1) - before
    middle = replication_bytes_out(c, 2) - middle_before
    print(f"CHAIN leader replication bytes out: star={star} chain={chained} ({chained / star:.2f}x) middle={middle}")
    assert chained < 0.6 * star, (chained, star)
    assert middle >= len(values) * len(VALUE), middle

    # one acks=all record at a time: the tail's progress reaches the leader without waiting for the
    # middle's long poll on it to expire (replica.fetch.wait.max.ms) at every hop
    latencies = []
    for i in range(20):
        t0 = time.monotonic()
        produce(p, "chain", [b"one-%d" % i], acked)
        latencies.append(time.monotonic() - t0)
    median = sorted(latencies)[len(latencies) // 2]
    print(f"CHAIN acks=all one record at a time: median {median * 1000:.0f} ms")
    assert median < FETCH_WAIT_MS / 2000, latencies

    want = dict(acked)
    for killed in (None, 1, 2):  # read from 1, then 3's turn comes after 1 and 2 are gone
        if killed is not None:
            c.kill(killed)
            c.wait_for(lambda k=killed: (m := c.metadata(next(iter(c.live())), topics=["chain"]).topics.get("chain"))
                       is not None and m[0].leader not in (k, -1), 30, "a new leader")  # fmt: skip
        got = read_all(c, "chain", want)
        missing = [o for o in want if got.get(o) != want[o]]
        assert not missing, (killed, missing[:10], len(missing))


def test_kill_middle_follower_mid_write(cluster: SamsaCluster) -> None:
    c = cluster
    create_topic(c, "chain", chain=True)
    p = producer(c)
    wait_chain_formed(c, p, "chain")
    acked: list[tuple[int, bytes]] = []
    stop = threading.Event()
    sent = [0]

    def write() -> None:  # batches of 100 acks=all records until stopped
        while not stop.is_set():
            produce(p, "chain", [b"%d" % (sent[0] + i) for i in range(100)], acked)
            sent[0] += 100

    writer = threading.Thread(target=write)
    writer.start()
    c.wait_for(lambda: len(acked) >= 1000, 30, "the first acknowledgements")
    c.kill(2)  # mid-write: acks=all goes on with 1 and 3 (min.insync.replicas=2)
    at_kill = len(acked)
    log3 = c.process(3)
    c.wait_for(lambda: re.search(r"follower assigned topic=chain partition=0 leader=1 leader_epoch=\d+ fetcher=1/",
                                 log3.read_log()), 15, "the tail fetching from the leader")  # fmt: skip
    c.wait_for(lambda: len(acked) >= at_kill + 1000, 30, "writes going on without the middle follower")
    stop.set()
    writer.join(60)
    assert not writer.is_alive() and len(acked) == sent[0]
    c.restart(2)
    want = dict(acked)
    got = read_all(c, "chain", want)
    assert all(got.get(o) == v for o, v in want.items())
    c.kill(1)  # 3 has everything acknowledged: it was in the ISR with 1 while 2 was down
    c.wait_for(lambda: (m := c.metadata(3, topics=["chain"]).topics.get("chain")) is not None
               and m[0].leader not in (1, -1), 30, "a new leader")  # fmt: skip
    got = read_all(c, "chain", want)
    assert all(got.get(o) == v for o, v in want.items())
