"""A failed log dir takes only its partitions offline (Kafka's LogDirFailureChannel,
ReplicaManager.handleLogDirFailure and the controller's onBrokerLogDirFailure). Three brokers;
broker 1 has two log.dirs, the first of which fails: every write and fsync to it answers EIO (the
LD_PRELOAD fault layer under the broker, broker/testing/slowdisk.c). Meanwhile an idempotent
acks=all producer writes to four partitions. The partitions whose broker-1 replica was in the
failed dir lose it (another ISR member leads, broker 1 leaves the ISR); those in its other dir keep
it, leader included; DescribeLogDirs on broker 1 reports the dir with KAFKA_STORAGE_ERROR; the
producer goes on on every partition and every acknowledged record is read back.

And a log dir that cannot be read at start-up (Kafka's LogManager starts without it): broker 1,
restarted with its second dir replaced by a file, registers and serves its first dir's
partitions; its replicas of the second dir's are offline, reported so, and led elsewhere.

    .venv/bin/python -m pytest -s tests/cluster/test_log_dir_failure.py
"""

from __future__ import annotations

import errno
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.testing.cluster import SamsaCluster
from compat.bench.traffic import AckLog, read_topic, run_producer
from compat.jvm import run_tool
from tests.cluster.conftest import broker_logs, create_topic

TOPIC = "dirfail"
PARTITIONS = 4
VICTIM = 1


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SamsaCluster]:
    # broker 1's first log dir is its data directory, the one the fault layer covers
    dirs = f"{tmp_path / f'broker-{VICTIM}'},{tmp_path / f'other-{VICTIM}'}"
    with SamsaCluster(tmp_path, brokers=3, slow_disk=True, overrides={"min.insync.replicas": "2"},
                      broker_overrides={VICTIM: {"log.dirs": dirs}}) as c:  # fmt: skip
        yield c


def test_failed_log_dir_takes_only_its_partitions_offline(cluster: SamsaCluster, tmp_path: Path) -> None:
    create_topic(cluster, TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"},
                 assignments=[[1, 2, 3], [1, 3, 2], [2, 1, 3], [3, 1, 2]])  # fmt: skip
    cluster.wait_for(
        lambda: all(len(p.isr) == 3 for p in cluster.metadata(topics=[TOPIC]).topics[TOPIC].values()), 30, "full ISR"
    )
    failed_dir, other_dir = tmp_path / f"broker-{VICTIM}", tmp_path / f"other-{VICTIM}"
    in_failed = {p for p in range(PARTITIONS) if (failed_dir / f"{TOPIC}-{p}").is_dir()}
    in_other = {p for p in range(PARTITIONS) if (other_dir / f"{TOPIC}-{p}").is_dir()}
    assert in_failed and in_other and in_failed | in_other == set(range(PARTITIONS)), (in_failed, in_other)
    before = cluster.metadata(topics=[TOPIC]).topics[TOPIC]

    acks = AckLog()
    stop = threading.Event()
    producer = threading.Thread(target=run_producer, args=(cluster.bootstrap_servers, TOPIC, PARTITIONS, acks, stop),
                                daemon=True)  # fmt: skip
    producer.start()
    try:
        cluster.wait_for(lambda: all(acks.count(q) > 20 for q in range(PARTITIONS)), 30, "traffic on every partition")
        cluster.slow_disk(VICTIM, fail_errno=errno.EIO)

        def moved() -> bool:
            now = cluster.metadata(topics=[TOPIC]).topics[TOPIC]
            return all(now[p].leader != VICTIM and VICTIM not in now[p].isr for p in in_failed)

        cluster.wait_for(moved, 30, "the failed dir's partitions moved off broker 1")
        counts = {q: acks.count(q) for q in range(PARTITIONS)}
        cluster.wait_for(lambda: all(acks.count(q) > counts[q] + 20 for q in range(PARTITIONS)), 30,
                         "acknowledgements on every partition after the failure")  # fmt: skip
        after = cluster.metadata(topics=[TOPIC]).topics[TOPIC]
        for p in in_other:  # the other dir's replicas are untouched
            assert VICTIM in after[p].isr and after[p].leader == before[p].leader, (p, before[p], after[p])
            assert after[p].offline == []
        for p in in_failed:  # Metadata lists the failed dir's replicas as offline
            assert after[p].offline == [VICTIM], (p, after[p])
        out = run_tool("kafka-log-dirs", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                       "--broker-list", str(VICTIM), "--topic-list", TOPIC).stdout  # fmt: skip
        answer = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
        by_dir = {Path(d["logDir"]): d for b in answer["brokers"] for d in b["logDirs"]}
        assert by_dir[failed_dir]["error"] == "org.apache.kafka.common.errors.KafkaStorageException", by_dir
        assert by_dir[other_dir]["error"] is None
        assert {p["partition"] for p in by_dir[other_dir]["partitions"]} == {f"{TOPIC}-{p}" for p in in_other}
        victim_log = cluster.process(VICTIM).read_log()
        assert "log dir failed" in victim_log and "offline replicas reported" in victim_log
    finally:
        stop.set()
        producer.join(60)
        cluster.slow_disk(VICTIM)
    assert not producer.is_alive(), "the producer's last records were neither delivered nor failed in 60 s"
    assert not acks.errors, (acks.errors[:5], broker_logs(cluster, 3000))
    problems = acks.check_against(read_topic(cluster.bootstrap_servers, TOPIC, PARTITIONS))
    assert not problems, problems[:5]


def test_log_dir_unreadable_at_start_up(tmp_path: Path) -> None:
    first, second = tmp_path / f"broker-{VICTIM}", tmp_path / f"second-{VICTIM}"
    with SamsaCluster(tmp_path, brokers=3, broker_overrides={VICTIM: {"log.dirs": f"{first},{second}"}}) as cluster:
        create_topic(cluster, TOPIC, PARTITIONS, 3,
                     assignments=[[1, 2, 3], [1, 3, 2], [1, 2, 3], [1, 3, 2]])  # fmt: skip
        cluster.wait_for(
            lambda: all(len(p.isr) == 3 for p in cluster.metadata(topics=[TOPIC]).topics[TOPIC].values()), 30,
            "full ISR")  # fmt: skip
        in_second = {p for p in range(PARTITIONS) if (second / f"{TOPIC}-{p}").is_dir()}
        in_first = set(range(PARTITIONS)) - in_second
        assert in_first and in_second, (in_first, in_second)
        cluster.stop(VICTIM)
        second.rename(tmp_path / "second-unreadable")
        second.write_bytes(b"")  # as root, a mode of 000 would not stop reads: not a directory at all
        cluster.restart(VICTIM)

        def settled() -> bool:
            now = cluster.metadata(topics=[TOPIC]).topics[TOPIC]
            return all(now[p].offline == [VICTIM] and now[p].leader != VICTIM and VICTIM not in now[p].isr
                       for p in in_second) and all(VICTIM in now[p].isr for p in in_first)  # fmt: skip

        cluster.wait_for(settled, 30, "the unreadable dir's partitions offline on broker 1, the others in sync")
        acks = AckLog()
        stop = threading.Event()
        producer = threading.Thread(target=run_producer,
                                    args=(cluster.bootstrap_servers, TOPIC, PARTITIONS, acks, stop), daemon=True)
        producer.start()
        try:
            cluster.wait_for(lambda: all(acks.count(q) > 20 for q in range(PARTITIONS)), 30, "traffic on every partition")
            assert cluster.process(VICTIM).running
        finally:
            stop.set()
            producer.join(60)
        assert not acks.errors, (acks.errors[:5], broker_logs(cluster, 3000))
        problems = acks.check_against(read_topic(cluster.bootstrap_servers, TOPIC, PARTITIONS))
        assert not problems, problems[:5]
        out = run_tool("kafka-log-dirs", "--bootstrap-server", cluster.bootstrap_servers, "--describe",
                       "--broker-list", str(VICTIM), "--topic-list", TOPIC).stdout  # fmt: skip
        answer = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
        by_dir = {Path(d["logDir"]): d for b in answer["brokers"] for d in b["logDirs"]}
        assert by_dir[second]["error"] == "org.apache.kafka.common.errors.KafkaStorageException", by_dir
        assert {p["partition"] for p in by_dir[first]["partitions"]} == {f"{TOPIC}-{p}" for p in in_first}
        victim_log = cluster.process(VICTIM).read_log()
        assert "log dir offline at start-up" in victim_log and "offline replicas reported" in victim_log
