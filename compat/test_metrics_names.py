"""Samsa's Prometheus metric names and labels against Apache Kafka's through the JMX exporter.

Apache Kafka 4.3.1 runs with the Prometheus JMX exporter's java agent (Maven Central,
compat/pom.xml profile jmx-exporter) and the Strimzi-style rules of compat/jmx/kafka-metrics.yaml;
Samsa runs with metrics.prometheus.port. Both get the same load (a librdkafka producer, then a
consumer group that commits), both are scraped, and every (name, labels) that both should have
(`EXPECTED`) must be there on each, with the same label names. On Kafka the check proves the rules
and the scenario; on Samsa it proves the names.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client.parser import text_string_to_metric_families

from broker.testing import SamsaProcess
from broker.testing.ports import free_port
from compat.conftest import SAMSA_SETTINGS
from compat.kafka import COMPAT, TARGET, KafkaJarProcess

pytestmark = pytest.mark.timeout(300)

TOPIC = "metrics-names"
GROUP = "metrics-names-group"
RECORDS = 200
AGENT = TARGET / "jmx-exporter" / "jmx_prometheus_javaagent-1.0.1.jar"
RULES = COMPAT / "jmx" / "kafka-metrics.yaml"

Sample = tuple[str, dict[str, str], float]

QUANTILE_LABELS = ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999")
REQUESTS = ("Produce", "Fetch", "FetchConsumer", "Metadata", "ApiVersions", "OffsetCommit", "JoinGroup")
HISTOGRAMS = ("requestqueuetimems", "localtimems", "remotetimems", "throttletimems", "responsequeuetimems",
              "responsesendtimems", "totaltimems", "requestbytes")  # fmt: skip


def _expected() -> list[tuple[str, dict[str, str], frozenset[str]]]:
    """(sample name, label values it must have, its label names)."""
    out: list[tuple[str, dict[str, str], frozenset[str]]] = []

    def add(name: str, match: dict[str, str] | None = None, *keys: str) -> None:
        match = match or {}
        out.append((name, match, frozenset(match) | frozenset(keys)))

    topic = {"topic": TOPIC}
    partition = {"topic": TOPIC, "partition": "0"}
    for meter in ("messagesin", "bytesin", "bytesout", "totalproducerequests", "totalfetchrequests"):
        add(f"kafka_server_brokertopicmetrics_{meter}_total")
        add(f"kafka_server_brokertopicmetrics_{meter}_total", topic)
    for meter in ("bytesrejected", "failedproducerequests", "failedfetchrequests", "replicationbytesin",
                  "replicationbytesout"):  # fmt: skip
        add(f"kafka_server_brokertopicmetrics_{meter}_total")
    for gauge in ("leadercount", "partitioncount", "offlinereplicacount", "underreplicatedpartitions",
                  "underminisrpartitioncount", "atminisrpartitioncount", "reassigningpartitions"):  # fmt: skip
        add(f"kafka_server_replicamanager_{gauge}")
    for meter in ("isrexpands", "isrshrinks", "failedisrupdates"):
        add(f"kafka_server_replicamanager_{meter}_total")
    for gauge in ("underreplicated", "insyncreplicascount", "underminisr", "atminisr", "replicascount",
                  "laststableoffsetlag"):  # fmt: skip
        add(f"kafka_cluster_partition_{gauge}", partition)
    for gauge in ("size", "numlogsegments", "logstartoffset", "logendoffset"):
        add(f"kafka_log_log_{gauge}", partition)
    for q in QUANTILE_LABELS:
        add("kafka_log_logflushstats_logflushrateandtimems", {"quantile": q})
    add("kafka_log_logflushstats_logflushrateandtimems_count_total")
    for gauge in ("activecontrollercount", "offlinepartitionscount", "preferredreplicaimbalancecount",
                  "globaltopiccount", "globalpartitioncount", "activebrokercount", "fencedbrokercount"):  # fmt: skip
        add(f"kafka_controller_kafkacontroller_{gauge}")
    for op in ("Produce", "Fetch"):
        add("kafka_server_delayedoperationpurgatory_purgatorysize", {"delayedOperation": op})
        add("kafka_server_delayedoperationpurgatory_numdelayedoperations", {"delayedOperation": op})
    for request in REQUESTS:
        add("kafka_network_requestmetrics_requests_total", {"request": request}, "version")
        if request != "FetchConsumer":  # errors are counted under the API's own name only
            add("kafka_network_requestmetrics_errors_total", {"request": request, "error": "NONE"})
        for histogram in HISTOGRAMS:
            for q in QUANTILE_LABELS:
                add(f"kafka_network_requestmetrics_{histogram}", {"request": request, "quantile": q})
            add(f"kafka_network_requestmetrics_{histogram}_count_total", {"request": request})
    add("kafka_server_socket_server_metrics_connection_count", {"listener": "PLAINTEXT"}, "networkProcessor")
    add("kafka_network_socketserver_networkprocessoravgidle_percent")
    add("kafka_server_kafkaserver_brokerstate")
    add("kafka_server_replicafetchermanager_maxlag", {"clientId": "Replica"})
    for gauge in ("numgroups", "numoffsets", "numgroupspreparingrebalance", "numgroupscompletingrebalance",
                  "numgroupsstable", "numgroupsdead", "numgroupsempty"):  # fmt: skip
        add(f"kafka_coordinator_group_groupmetadatamanager_{gauge}")
    return out


EXPECTED = _expected()


def scrape(port: int) -> list[Sample]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    return [(s.name, dict(s.labels), s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def run_load(bootstrap: str) -> None:
    """RECORDS records produced, then consumed by a group that commits (ApiVersions, Metadata,
    Produce, Fetch, FindCoordinator, JoinGroup, SyncGroup, OffsetCommit on the wire)."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):
        producer.produce(TOPIC, f"record-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.subscribe([TOPIC])
        got, deadline = 0, time.monotonic() + 60
        while got < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got += 1
        assert got == RECORDS
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def missing(samples: list[Sample]) -> list[str]:
    """Each expectation no sample meets: a sample of that name with those label values, and
    label names exactly those expected."""
    out = []
    for name, match, keys in EXPECTED:
        candidates = [labels for n, labels, _ in samples if n == name and all(labels.get(k) == v for k, v in match.items())]
        if not candidates:
            out.append(f"{name}{match}: absent")
        elif not any(frozenset(labels) == keys for labels in candidates):
            out.append(f"{name}{match}: labels {sorted(candidates[0])}, expected {sorted(keys)}")
    return out


@pytest.fixture(scope="module")
def kafka_samples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Sample]]:
    assert AGENT.exists(), "run bash compat/jvm/fetch.sh jmx-exporter (tests/run.sh does)"
    port = free_port()
    kafka = KafkaJarProcess(
        data_dir=tmp_path_factory.mktemp("kafka-jmx"),
        jvm_args=[f"-javaagent:{AGENT}=127.0.0.1:{port}:{RULES}"],
    ).start()
    try:
        run_load(kafka.bootstrap_servers)
        yield scrape(port)
    finally:
        kafka.close()


@pytest.fixture(scope="module")
def samsa_samples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Sample]]:
    port = free_port()
    settings = {**SAMSA_SETTINGS, "metrics.prometheus.port": str(port), "metrics.prometheus.host": "127.0.0.1"}
    with SamsaProcess(Path(tmp_path_factory.mktemp("samsa-metrics")), settings) as samsa:
        run_load(samsa.bootstrap_servers)
        yield scrape(port)


def test_kafka_with_the_jmx_exporter_has_every_expected_name(kafka_samples: list[Sample]) -> None:
    assert missing(kafka_samples) == []


def test_samsa_has_every_name_kafka_has(kafka_samples: list[Sample], samsa_samples: list[Sample]) -> None:
    assert missing(samsa_samples) == []


def test_samsa_group_lag_reaches_zero_after_the_commit(samsa_samples: list[Sample]) -> None:
    """Group lag is Samsa's own (Kafka leaves it to kafka_exporter or kafka-lag-exporter): the
    group committed everything it read, so its lag on the topic's partition is 0."""
    lag = {tuple(sorted(labels.items())): value for name, labels, value in samsa_samples
           if name == "kafka_consumergroup_lag"}
    assert lag.get((("consumergroup", GROUP), ("partition", "0"), ("topic", TOPIC))) == 0


def test_samsa_invents_no_kafka_name(kafka_samples: list[Sample], samsa_samples: list[Sample]) -> None:
    """Every kafka_* name Samsa serves is one Kafka serves too (group lag, kafka_consumergroup_*,
    is kafka_exporter's and kafka-lag-exporter's, which Kafka leaves to those tools)."""
    kafka = {name for name, _, _ in kafka_samples}
    samsa = {name for name, _, _ in samsa_samples if name.startswith("kafka_")
             and not name.startswith("kafka_consumergroup_")}
    assert sorted(samsa - kafka) == []
