"""A real Prometheus server (Debian's `prometheus` package) scrapes a 3-broker cluster every second,
and the test asks it through its HTTP API what an operator's dashboards and alerts would:

- messages in move with a known load (the leader counts every record produced, once), and both
  followers' replica lag is 0 once they have it;
- the active controller count sums to 1 over the brokers;
- under-replicated partitions go to 1 when a follower stops, and back to 0 when it is back;
- a consumer group's lag, computed on its coordinator, is what it has not committed, and falls
  to 0 when the consumer catches up, also on partitions of a topic with one replica, most of which
  the coordinator does not host (their leaders' high watermarks, asked with ListOffsets).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition

from broker.testing.cluster import SamsaCluster
from broker.testing.ports import free_port
from broker.testing.process import terminate
from tests.cluster.conftest import create_topic

pytestmark = pytest.mark.timeout(240)

TOPIC = "watched"
SPREAD = "spread"
"""one replica per partition, a partition on each broker"""
GROUP = "watchers"
RECORDS = 500


class Prometheus:
    """A Prometheus server scraping `targets` every second, on a free loopback port."""

    def __init__(self, base: Path, targets: list[str]) -> None:
        binary = shutil.which("prometheus")
        assert binary, "prometheus is not installed (tests/run.sh installs Debian's prometheus)"
        base.mkdir(parents=True, exist_ok=True)
        config = base / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: samsa\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        self.port = free_port()
        self.log = base / "prometheus.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={base / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.wait(lambda: self._get("/-/ready") is not None, 30, "prometheus ready")

    def _get(self, path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.read()
        except OSError:
            return None

    def query(self, expr: str) -> float | None:
        """The value of an instant query whose answer is one sample (None: no sample)."""
        body = self._get("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        if body is None:
            return None
        answer = json.loads(body)
        assert answer["status"] == "success", answer
        result = answer["data"]["result"]
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait_value(self, expr: str, want: Callable[[float | None], bool], timeout: float, what: str) -> float | None:
        deadline = time.monotonic() + timeout
        value = self.query(expr)
        while not want(value):
            assert time.monotonic() < deadline, f"{what}: {expr} = {value} after {timeout}s"
            time.sleep(0.5)
            value = self.query(expr)
        return value

    def wait(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            assert time.monotonic() < deadline, what
            time.sleep(0.2)

    def close(self) -> None:
        terminate(self.proc, 10)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SamsaCluster]:
    overrides = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0",
                 "min.insync.replicas": "2"}  # fmt: skip
    with SamsaCluster(tmp_path / "cluster", 3, overrides=overrides, metrics=True) as c:
        yield c


@pytest.fixture
def prometheus(tmp_path: Path, cluster: SamsaCluster) -> Iterator[Prometheus]:
    p = Prometheus(tmp_path / "prometheus", [f"127.0.0.1:{s.metrics_port}" for s in cluster.brokers.values()])
    yield p
    p.close()


def test_prometheus_sees_load_replication_controller_and_lag(cluster: SamsaCluster, prometheus: Prometheus) -> None:
    prometheus.wait_value('count(up{job="samsa"} == 1)', lambda v: v == 3, 20, "all three brokers scraped")
    prometheus.wait_value("sum(kafka_controller_kafkacontroller_activecontrollercount)", lambda v: v == 1, 20,
                          "one active controller")  # fmt: skip

    # messages in: the leader counts each acknowledged record once
    all_topics = 'sum(kafka_server_brokertopicmetrics_messagesin_total{topic=""})'
    before = prometheus.wait_value(all_topics, lambda v: v is not None, 10, "messages in, all topics")
    create_topic(cluster, TOPIC, partitions=1, replication_factor=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, f"record-{i}".encode())
    assert producer.flush(30) == 0
    messages_in = f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}})'
    prometheus.wait_value(messages_in, lambda v: v == RECORDS, 20, "messages in, the topic")
    prometheus.wait_value(all_topics, lambda v: v == (before or 0) + RECORDS, 10, "messages in, all topics")
    prometheus.wait_value(f'count(kafka_server_fetcherlagmetrics_consumerlag{{topic="{TOPIC}"}} == 0)',
                          lambda v: v == 2, 10, "both followers caught up")  # fmt: skip

    # under-replicated partitions: a follower stopped, then back
    view = cluster.metadata(topics=[TOPIC]).topics[TOPIC][0]
    follower = next(b for b in view.replicas if b != view.leader and b != cluster.controller())
    under_replicated = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
    assert prometheus.query(under_replicated) == 0
    cluster.stop(follower)
    prometheus.wait_value(under_replicated, lambda v: v == 1, 30, "under-replicated after the follower stopped")
    prometheus.wait_value(f'kafka_cluster_partition_underreplicated{{topic="{TOPIC}"}} == 1', lambda v: v == 1, 5,
                          "the partition's own gauge")  # fmt: skip
    cluster.restart(follower)
    prometheus.wait_value(under_replicated, lambda v: v == 0, 30, "fully replicated after the restart")
    prometheus.wait_value("sum(kafka_controller_kafkacontroller_activecontrollercount)", lambda v: v == 1, 20,
                          "still one active controller")  # fmt: skip

    # group lag on the coordinator: half committed, then everything
    create_topic(cluster, SPREAD, assignments=[[b] for b in sorted(cluster.brokers)],
                 configs={"min.insync.replicas": "1"})  # the cluster's 2 would refuse acks=all  # fmt: skip
    for p in range(3):
        for i in range(RECORDS // 5):
            producer.produce(SPREAD, f"spread-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    lag = f'sum(kafka_consumergroup_lag{{consumergroup="{GROUP}"}})'
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    try:
        half = [CKTopicPartition(TOPIC, 0, RECORDS // 2)] + [CKTopicPartition(SPREAD, p, RECORDS // 10) for p in range(3)]
        consumer.commit(offsets=half, asynchronous=False)
        expected = RECORDS // 2 + 3 * (RECORDS // 10)
        prometheus.wait_value(lag, lambda v: v == expected, 30, "lag of the half committed")
        assert prometheus.query(f'count(kafka_consumergroup_lag{{consumergroup="{GROUP}"}})') == 4
        consumer.subscribe([TOPIC, SPREAD])
        got, deadline = 0, time.monotonic() + 60
        while got < expected and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got += 1
        assert got == expected
        consumer.commit(asynchronous=False)
        prometheus.wait_value(lag, lambda v: v == 0, 30, "lag after the consumer caught up")
    finally:
        consumer.close()
