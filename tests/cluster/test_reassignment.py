"""Partition reassignment on a 3-broker cluster with Kafka's own kafka-reassign-partitions tool
(its Admin client: AlterPartitionReassignments v1, ListPartitionReassignments v0): a partition with
records moves from brokers {1,2} to {2,3} while an idempotent acks=all producer writes (nothing
acknowledged is lost, a consumer reads every record after, broker 1 deletes its log; a broker
that is not the controller forwards the request to it); a
reassignment held back by a network cut is listed as in progress, survives the controller's death
and completes under the next one; another is cancelled and its added replica drops its log; a
move with --throttle runs at the throttled rate, and --verify removes the throttle."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.alter_partition_reassignments.v1.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.testing.cluster import SamsaCluster
from compat.jvm import run_tool
from tests.cluster.conftest import broker_logs, create_topic
from tests.support.raw_client import RawClient


def reassign(
    cluster: SamsaCluster, tmp_path: Path, action: str, moves: dict[tuple[str, int], list[int]], *extra: str
) -> str:
    plan = tmp_path / "reassignment.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()
    ]}))  # fmt: skip
    result = run_tool(
        "kafka-reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
        "--reassignment-json-file", str(plan), action, *extra, check=False, timeout=60,
    )  # fmt: skip
    return result.stdout + result.stderr


def state(cluster: SamsaCluster, topic: str, via: int | None = None) -> tuple[int, list[int], list[int]]:
    view = cluster.metadata(via, [topic]).topics[topic][0]
    return view.leader, view.replicas, sorted(view.isr)


def ongoing(cluster: SamsaCluster, via: int) -> list[tuple[str, int, list[int], list[int], list[int]]]:
    with RawClient(cluster.brokers[via].client_port) as c:
        r = c.request(ListPartitionReassignmentsRequest(topics=None))
    return [
        (t.name, p.partition_index, list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in r.topics
        for p in t.partitions
    ]


def has_log(cluster: SamsaCluster, broker: int, topic: str) -> bool:
    return (cluster.brokers[broker].process.data_dir / f"{topic}-0").exists()


class BackgroundProducer:
    """An idempotent acks=all producer writing numbered records until stopped; `acked` holds every
    value the cluster acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 5, "message.timeout.ms": 60000})  # fmt: skip
        self._thread = threading.Thread(target=self._run, args=(topic,), daemon=True)
        self._thread.start()

    def _delivered(self, err: object, msg: object) -> None:
        if err is None:
            self.acked.append(msg.value())  # type: ignore[attr-defined]
        else:
            self.failed.append(str(err))

    def _run(self, topic: str) -> None:
        i = 0
        while not self._stop.is_set():
            self._producer.produce(topic, value=b"v%06d" % i, partition=0, on_delivery=self._delivered)
            self._producer.poll(0)
            i += 1
            time.sleep(0.002)
        self._producer.flush(60)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


def read_all(bootstrap: str, topic: str, expected: int, timeout: float = 30) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_move_under_acks_all_writes(cluster_factory: Callable[..., SamsaCluster], tmp_path: Path) -> None:
    cluster = cluster_factory(3)
    create_topic(cluster, "move", assignments=[[1, 2]], configs={"min.insync.replicas": "2"})
    cluster.wait_for(lambda: state(cluster, "move") == (1, [1, 2], [1, 2]), 10, "move-0 on {1,2}")
    producer = BackgroundProducer(cluster.bootstrap_servers, "move")
    try:
        cluster.wait_for(lambda: len(producer.acked) >= 300, 20, "records before the move")

        plan = tmp_path / "topics.json"
        plan.write_text(json.dumps({"version": 1, "topics": [{"topic": "move"}]}))
        generated = run_tool("kafka-reassign-partitions", "--bootstrap-server", cluster.bootstrap_servers,
                             "--topics-to-move-json-file", str(plan), "--broker-list", "2,3", "--generate").stdout
        lines = generated.splitlines()
        current = json.loads(lines[lines.index("Current partition replica assignment") + 1])["partitions"]
        proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])["partitions"]
        assert [(p["topic"], p["partition"], p["replicas"]) for p in current] == [("move", 0, [1, 2])], generated
        assert [(p["topic"], p["partition"], sorted(p["replicas"])) for p in proposed] == [("move", 0, [2, 3])]

        out = reassign(cluster, tmp_path, "--execute", {("move", 0): [2, 3]})
        assert "Successfully started partition reassignment for move-0" in out, out
        cluster.wait_for(
            lambda: "Reassignment of partition move-0 is completed." in reassign(cluster, tmp_path, "--verify", {("move", 0): [2, 3]}),
            60, "the reassignment to complete",
        )  # fmt: skip
        for i in cluster.live():
            cluster.wait_for(lambda i=i: state(cluster, "move", via=i) == (2, [2, 3], [2, 3]), 10,
                             f"broker {i} sees move-0 on {{2,3}} led by 2")  # fmt: skip
        cluster.wait_for(lambda: not has_log(cluster, 1, "move") and has_log(cluster, 3, "move"), 10,
                         "broker 1's log deleted, broker 3's created")  # fmt: skip
        assert ongoing(cluster, cluster.controller()) == []
        moved_at = len(producer.acked)
        cluster.wait_for(lambda: len(producer.acked) >= moved_at + 300, 30, "records after the move")
    finally:
        producer.stop()
    assert producer.failed == [], producer.failed[:5]
    other = next(i for i in cluster.live() if i != cluster.controller())
    with RawClient(cluster.brokers[other].client_port) as c:  # forwarded to the controller, as Kafka 4.x
        r = c.request(AlterPartitionReassignmentsRequest(topics=(ReassignableTopic(name=TopicName("move"), partitions=(
            ReassignablePartition(partition_index=i32(0), replicas=None),)),)))  # fmt: skip
    assert (r.error_code.name, [(p.partition_index, p.error_code.name) for t in r.responses for p in t.partitions]) == (
        "none", [(0, "no_reassignment_in_progress")])  # the controller's answer to a cancel of nothing
    acked = set(producer.acked)
    got = read_all(cluster.bootstrap_servers, "move", len(acked))
    assert acked <= set(got), (len(acked - set(got)), sorted(acked - set(got))[:5])
    assert len(got) == len(set(got))  # idempotence: no duplicates across the leader change


def test_controller_dies_mid_reassignment_and_cancel(cluster_factory: Callable[..., SamsaCluster], tmp_path: Path) -> None:
    cluster = cluster_factory(3, overrides={"auto.leader.rebalance.enable": "false"})
    create_topic(cluster, "held", assignments=[[1, 2]])
    create_topic(cluster, "undo", assignments=[[1, 2]])
    cluster.wait_for(lambda: state(cluster, "held") == (1, [1, 2], [1, 2]) == state(cluster, "undo"), 10, "full ISRs")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(500):
        producer.produce("held", value=b"h%04d" % i, partition=0)
        producer.produce("undo", value=b"u%04d" % i, partition=0)
    assert producer.flush(30) == 0

    # broker 3 cannot reach the leader, broker 1: it cannot catch up, both reassignments hang
    cluster.cut(1, 3)
    out = reassign(cluster, tmp_path, "--execute", {("held", 0): [2, 3], ("undo", 0): [2, 3]})
    assert "Successfully started partition reassignments for held-0,undo-0" in out, out
    out = reassign(cluster, tmp_path, "--verify", {("held", 0): [2, 3], ("undo", 0): [2, 3]})
    assert "Reassignment of partition held-0 is still in progress." in out, out
    for i in cluster.live():
        assert ongoing(cluster, i) == [("held", 0, [2, 3, 1], [3], [1]), ("undo", 0, [2, 3, 1], [3], [1])]
    cluster.wait_for(lambda: has_log(cluster, 3, "undo"), 10, "broker 3 creates the adding replica's log")

    out = reassign(cluster, tmp_path, "--cancel", {("undo", 0): [2, 3]})
    assert "Successfully cancelled partition reassignment for: undo-0" in out, out
    cluster.wait_for(lambda: state(cluster, "undo") == (1, [2, 1], [1, 2]), 10, "undo-0 back on its replicas")
    cluster.wait_for(lambda: not has_log(cluster, 3, "undo"), 10, "the cancelled replica's log deleted")
    assert [o[0] for o in ongoing(cluster, cluster.controller())] == ["held"]

    old = cluster.controller()
    cluster.kill(old)
    cluster.wait_for(lambda: cluster.controller(next(i for i in cluster.live())) not in (-1, old), 30,
                     "a new controller")  # fmt: skip
    new = cluster.controller(next(i for i in cluster.live()))
    cluster.heal(1, 3)
    cluster.process(old).start()
    cluster.wait_for(lambda: state(cluster, "held", via=new)[1:] == ([2, 3], [2, 3]), 60,
                     "the new controller completes the reassignment")  # fmt: skip
    assert "reason=reassignment completed controller_epoch" in cluster.brokers[new].process.read_log(), broker_logs(cluster)
    cluster.wait_for(lambda: not has_log(cluster, 1, "held"), 20, "broker 1's log deleted")
    got = read_all(cluster.bootstrap_servers, "held", 500)
    assert sorted(got) == [b"h%04d" % i for i in range(500)]


def test_throttled_move(cluster_factory: Callable[..., SamsaCluster], tmp_path: Path) -> None:
    # 64 KiB fetches and a rate measured over 2 windows of 1 s: the throttle bites after ~0.2 MB
    cluster = cluster_factory(3, overrides={"replica.fetch.max.bytes": "65536", "replication.quota.window.num": "2"})
    create_topic(cluster, "slow", assignments=[[1]])
    create_topic(cluster, "fast", assignments=[[1]])
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "batch.size": 16384})
    for i in range(600):  # 0.6 MB each
        producer.produce("slow", value=b"%05d" % i + b"x" * 995, partition=0)
        producer.produce("fast", value=b"%05d" % i + b"x" * 995, partition=0)
    assert producer.flush(30) == 0

    started = time.monotonic()
    out = reassign(cluster, tmp_path, "--execute", {("slow", 0): [1, 2]}, "--throttle", "200000")
    assert "The inter-broker throttle limit was set to 200000 B/s" in out, out
    cluster.wait_for(lambda: state(cluster, "slow")[1:] == ([1, 2], [1, 2]), 30, "the throttled move")
    throttled_s = time.monotonic() - started
    out = reassign(cluster, tmp_path, "--verify", {("slow", 0): [1, 2]})
    assert "Reassignment of partition slow-0 is completed." in out and "Clearing topic-level throttles on topic slow" in out
    cluster.wait_for(lambda: all(cluster.brokers[i].process.read_log().count("dynamic broker configs applied") >= 2
                                 for i in (1, 2)), 10, "the throttle rates removed on brokers 1 and 2")  # fmt: skip

    started = time.monotonic()
    reassign(cluster, tmp_path, "--execute", {("fast", 0): [1, 3]})
    cluster.wait_for(lambda: state(cluster, "fast")[1:] == ([1, 3], [1, 3]), 30, "the move without a throttle")
    fast_s = time.monotonic() - started
    # 0.6 MB at 200 kB/s after a burst of ~0.2-0.4 MB (two 1 s windows), the follower backing off
    # 1 s whenever it leaves the partition out: measured 5.9 s against 1.1 s (both with the CLI's
    # JVM start)
    assert throttled_s >= 3.0 and fast_s < throttled_s - 1.5, (throttled_s, fast_s)
    got = read_all(cluster.bootstrap_servers, "slow", 600)
    assert len(got) == 600
