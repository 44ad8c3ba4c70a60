"""AlterReplicaLogDirs on a broker with two log.dirs, through Kafka's own tools: a replica moved
with kafka-reassign-partitions.sh (`log_dirs` in its plan) while an acks=all producer keeps
writing to it; kafka-log-dirs.sh shows where it lies; every acknowledged record is read back in
order, from the new dir, before and after a restart. kafka-python's admin client sends the
errors' cases (its alter_replica_log_dirs), CLUSTER_AUTHORIZATION_FAILED under an authorizer
included. And a broker whose only log dir fails stops (the failed-dir rules themselves:
tests/unit/test_alter_log_dirs.py, tests/cluster/test_log_dir_failure.py)."""

from __future__ import annotations

import errno
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.errors import (
    ClusterAuthorizationFailedError,
    KafkaStorageError,
    LogDirNotFoundError,
    NoError,
    UnknownTopicOrPartitionError,
)

from broker.testing.process import SamsaProcess
from broker.testing.slowdisk import SlowDisk
from compat.jvm import run_tool
from tests.support import fidelity
from tests.support.raw_client import RawClient

TOPIC = "moving"
BROKER_ID = 0  # the default broker.id


def where(broker: SamsaProcess) -> dict[str, tuple[str, bool, int]]:
    """kafka-log-dirs.sh --describe: partition -> (log dir, is future, offset lag)."""
    out = run_tool("kafka-log-dirs", "--bootstrap-server", broker.bootstrap_servers, "--describe",
                   "--topic-list", TOPIC).stdout  # fmt: skip
    answer = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    (b,) = answer["brokers"]
    return {
        p["partition"] + (".future" if p["isFuture"] else ""): (d["logDir"], p["isFuture"], p["offsetLag"])
        for d in b["logDirs"]
        for p in d["partitions"]
    }


def read_all(broker: SamsaProcess, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([TOPIC])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for m in consumer.consume(500, 1):
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        consumer.close()
    return got


def test_move_a_replica_while_producing(samsa_broker_factory: Any, tmp_path: Path) -> None:
    dirs = [tmp_path / "dir-a", tmp_path / "dir-b"]
    broker: SamsaProcess = samsa_broker_factory({"log.dirs": ",".join(str(d) for d in dirs)})
    with RawClient(broker.port) as c:
        fidelity.create_topic(c, TOPIC, partitions=1)
        fidelity.wait_for_leader(c, TOPIC, 0)
    source = next(str(d.absolute()) for d in dirs if (d / f"{TOPIC}-0").is_dir())
    target = next(str(d.absolute()) for d in dirs if str(d.absolute()) != source)

    acked: list[bytes] = []
    failed: list[str] = []
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 2})

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value())
        else:
            failed.append(str(err))

    def produce() -> None:
        n = 0
        while not stop.is_set():
            producer.produce(TOPIC, b"%08d" % n + b"x" * 200, partition=0, on_delivery=on_delivery)
            producer.poll(0)
            n += 1
            if n % 100 == 0:
                time.sleep(0.005)
        producer.flush(30)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        while len(acked) < 10_000:  # 2 MiB to copy
            time.sleep(0.05)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [BROKER_ID], "log_dirs": [target]}]}))
        bs = ("--bootstrap-server", broker.bootstrap_servers, "--reassignment-json-file", str(plan))
        run_tool("kafka-reassign-partitions", *bs, "--execute")
        deadline = time.monotonic() + 30
        while True:  # --verify: the tool asks DescribeLogDirs whether the move is done
            out = run_tool("kafka-reassign-partitions", *bs, "--verify").stdout
            if f"Reassignment of replica {TOPIC}-0-{BROKER_ID} completed successfully." in out:
                break
            assert time.monotonic() < deadline, out
            time.sleep(0.2)
        time.sleep(0.3)  # appends go on into the moved log
    finally:
        stop.set()
        writer.join(60)
    assert not failed, failed[:5]
    assert where(broker) == {f"{TOPIC}-0": (target, False, 0)}
    assert not (Path(source) / f"{TOPIC}-0").exists()
    assert read_all(broker, len(acked)) == acked, "every acknowledged record, in order"
    broker.restart()
    assert (Path(target) / f"{TOPIC}-0").is_dir() and not (Path(source) / f"{TOPIC}-0").exists()
    assert read_all(broker, len(acked)) == acked


def test_errors_with_kafka_python(samsa_broker_factory: Any, tmp_path: Path) -> None:
    dirs = [tmp_path / "dir-a", tmp_path / "dir-b"]
    broker: SamsaProcess = samsa_broker_factory({"log.dirs": ",".join(str(d) for d in dirs)})
    with RawClient(broker.port) as c:
        fidelity.create_topic(c, TOPIC, partitions=1)
        fidelity.wait_for_leader(c, TOPIC, 0)
    (current, _, _) = where(broker)[f"{TOPIC}-0"]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        replica = TopicPartitionReplica(TOPIC, 0, BROKER_ID)
        assert admin.alter_replica_log_dirs({replica: current}) == {replica: NoError}
        assert admin.alter_replica_log_dirs({replica: str(tmp_path / "other")}) == {replica: LogDirNotFoundError}
        missing = TopicPartitionReplica("missing", 0, BROKER_ID)
        assert admin.alter_replica_log_dirs({missing: current}) == {missing: UnknownTopicOrPartitionError}
        other = next(d for d in dirs if str(d.absolute()) != current)
        shutil.rmtree(other)
        other.write_text("")  # the dir is gone, a file in its place: offline
        assert admin.alter_replica_log_dirs({replica: str(other.absolute())}) == {replica: KafkaStorageError}
    finally:
        admin.close()


def test_without_alter_on_the_cluster(samsa_broker_factory: Any, tmp_path: Path) -> None:
    """With an authorizer and no ACL, ANONYMOUS may not ALTER the cluster: every partition asked
    for answers CLUSTER_AUTHORIZATION_FAILED (Kafka's KafkaApis.handleAlterReplicaLogDirsRequest)."""
    broker: SamsaProcess = samsa_broker_factory({
        "log.dirs": str(tmp_path / "dir-a"), "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        replicas = [TopicPartitionReplica(TOPIC, p, BROKER_ID) for p in (0, 1)]
        path = str((tmp_path / "dir-a").absolute())
        assert admin.alter_replica_log_dirs(dict.fromkeys(replicas, path)) == dict.fromkeys(
            replicas, ClusterAuthorizationFailedError)
    finally:
        admin.close()


def test_a_broker_whose_every_log_dir_failed_stops(tmp_path: Path) -> None:
    """Kafka halts a broker with no log dir left; `samsa serve` stops and exits with status 1.
    The fault: every write to the broker's one log dir fails with EIO (the LD_PRELOAD layer)."""
    data = tmp_path / "data"
    disk = SlowDisk(tmp_path / "disk.control", data)
    with SamsaProcess(data, {"log.dirs": str(data)}, env=disk.environment()) as broker:
        with RawClient(broker.port) as c:
            fidelity.create_topic(c, TOPIC, partitions=1)
            fidelity.wait_for_leader(c, TOPIC, 0)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 5000})
        producer.produce(TOPIC, b"before", partition=0)
        assert producer.flush(10) == 0
        disk.set(fail_errno=errno.EIO)
        time.sleep(0.3)  # the fault layer reads its control file every 100 ms
        producer.produce(TOPIC, b"after", partition=0)
        producer.flush(10)
        assert broker.proc is not None
        assert broker.proc.wait(30) == 1
        log = broker.read_log()
        assert "log dir failed" in log and "stopping the broker: every log dir has failed" in log


def test_a_throttled_move_takes_as_long_as_the_rate_says(samsa_broker_factory: Any, tmp_path: Path) -> None:
    """replica.alter.log.dirs.io.max.bytes.per.second, set and deleted as a dynamic broker config
    (IncrementalAlterConfigs, confluent-kafka's admin client): ~300 KB moved at 100 KB/s take about
    size/rate less the one window the rate allows at once (2 windows of 1 s, copy steps of
    replica.fetch.max.bytes = 10 KB); unthrottled, the move back takes well under a second."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    dirs = [tmp_path / "dir-a", tmp_path / "dir-b"]
    broker: SamsaProcess = samsa_broker_factory({
        "log.dirs": ",".join(str(d) for d in dirs), "replica.fetch.max.bytes": "10000",
        "replica.fetch.backoff.ms": "50", "alter.log.dirs.replication.quota.window.num": "2"})  # fmt: skip
    with RawClient(broker.port) as c:
        fidelity.create_topic(c, TOPIC, partitions=1)
        fidelity.wait_for_leader(c, TOPIC, 0)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for n in range(300):
        producer.produce(TOPIC, b"%08d" % n + bytes(992), partition=0)
    assert producer.flush(30) == 0
    source = next(d for d in dirs if (d / f"{TOPIC}-0").is_dir())
    target = next(d for d in dirs if d != source)
    size = sum(f.stat().st_size for f in (source / f"{TOPIC}-0").glob("*.log"))
    assert size > 300_000, size
    rate = 100_000
    config = "replica.alter.log.dirs.io.max.bytes.per.second"
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def set_rate(op: AlterConfigOpType, value: str | None) -> None:
        resource = ConfigResource("BROKER", str(BROKER_ID),
                                  incremental_configs=[ConfigEntry(config, value, incremental_operation=op)])
        for f in confluent.incremental_alter_configs([resource]).values():
            f.result(10)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    replica = TopicPartitionReplica(TOPIC, 0, BROKER_ID)

    def move(to: Path) -> float:
        started = time.monotonic()
        assert admin.alter_replica_log_dirs({replica: str(to.absolute())}) == {replica: NoError}
        while not (to / f"{TOPIC}-0").is_dir():
            assert time.monotonic() - started < 30, "the move did not end in 30 s"
            time.sleep(0.02)
        return time.monotonic() - started

    try:
        set_rate(AlterConfigOpType.SET, str(rate))
        throttled = move(target)
        expected = size / rate - 1  # the first window's worth passes at once
        assert expected - 0.7 <= throttled <= expected + 1.5, (throttled, expected, size)
        set_rate(AlterConfigOpType.DELETE, None)
        unthrottled = move(source)
        assert unthrottled < 1.0, unthrottled
    finally:
        admin.close()
    assert read_all(broker, 300) == [b"%08d" % n + bytes(992) for n in range(300)]
