"""Moving a replica between two log dirs (AlterReplicaLogDirs, DescribeLogDirs) on Samsa and
Apache Kafka 4.3.1, each with `log.dirs` of two directories (this module's own targets, so that
the session's DescribeLogDirs sweep keeps seeing one dir). kafka-python's admin client moves a
partition of 50 records to the dir it is not in and polls describe_log_dirs until the move is done;
the observations name the dirs `a` and `b`, never their paths: the replica's one log before,
in the other dir after with the same size, the errors of a dir not in log.dirs and of an unknown partition, and the records
read back.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from broker.testing import SamsaProcess
from compat.conftest import SAMSA_SETTINGS, TARGETS, Targets
from compat.kafka import KafkaJarProcess

TOPIC = "jbod-move"
DIRS = ("data-a", "data-b")


def _dirs(directory: Path) -> str:
    return ",".join(str(directory / d) for d in DIRS)


def _start_samsa(directory: Path) -> SamsaProcess:
    return SamsaProcess(directory, {**SAMSA_SETTINGS, "log.dirs": _dirs(directory)}).start()


def _start_kafka(directory: Path) -> KafkaJarProcess:
    kafka = KafkaJarProcess({"log.dirs": _dirs(directory)}, data_dir=directory)
    kafka.name = "kafka-jbod"
    return kafka.start()


@pytest.fixture(params=TARGETS)
def kafka_target(request: pytest.FixtureRequest, targets: Targets) -> Any:
    """This module's targets: a Samsa and a Kafka with two log dirs each."""
    targets.register("samsa-jbod", _start_samsa)
    targets.register("kafka-jbod", _start_kafka)
    return targets.get(f"{request.param}-jbod")


def _label(path: str) -> str:
    """`a` or `b` for a log dir's absolute path (the targets' paths differ)."""
    return {name: name[-1] for name in DIRS}.get(Path(path).name, "?")


def _move(target: Any) -> list[dict]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from kafka import KafkaAdminClient, TopicPartitionReplica
    from kafka.admin import NewTopic

    bs = target.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bs)
    obs: list[dict] = []
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        producer = Producer({"bootstrap.servers": bs, "acks": "all"})
        values = [b"%04d" % n for n in range(50)]
        for v in values:
            producer.produce(TOPIC, v, partition=0)
        assert producer.flush(30) == 0

        def where() -> list[tuple[str, bool, int]]:
            """(dir, is future, size) of each log of the partition, from DescribeLogDirs."""
            (broker,) = admin.describe_log_dirs(topic_partitions=[TOPIC])
            out = []
            for d in broker["log_dirs"]:
                for t in d["topics"]:
                    for p in t["partitions"]:
                        out.append((_label(d["log_dir"]), bool(p["is_future_key"]), p["partition_size"]))
            return sorted(out)

        before = where()
        (source, _, size) = before[0]
        target_dir = next(d for d in DIRS if d[-1] != source)
        (broker_info,) = admin.describe_log_dirs(topic_partitions=[TOPIC])
        paths = {_label(d["log_dir"]): d["log_dir"] for d in broker_info["log_dirs"]}
        replica = TopicPartitionReplica(TOPIC, 0, 1)
        # which dir a new log goes to is each broker's choice (both: the least loaded): not compared
        obs.append({"step": "before", "futures": [f for _, f, _ in before], "dirs": sorted(paths),
                    "errors": sorted({str(d["error_code"]) for d in broker_info["log_dirs"]})})  # fmt: skip
        missing = TopicPartitionReplica("jbod-missing", 0, 1)
        answers = admin.alter_replica_log_dirs({
            replica: paths[target_dir[-1]], missing: paths[source]})  # fmt: skip
        obs.append({"step": "alter", "answers": sorted((r.topic, e.__name__) for r, e in answers.items())})
        answer = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, 1): paths[source] + "-nowhere"})
        obs.append({"step": "alter-unknown-dir", "answers": sorted(e.__name__ for e in answer.values())})
        deadline = time.monotonic() + 30
        while (now := where()) != [(target_dir[-1], False, size)]:
            assert time.monotonic() < deadline, now
            time.sleep(0.1)
        obs.append({"step": "moved", "to_the_other_dir": now[0][0] != source, "same_size": now[0][2] == size})
        consumer = Consumer({"bootstrap.servers": bs, "group.id": "jbod-check", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            got: list[bytes] = []
            while len(got) < len(values) and time.monotonic() < deadline:
                got.extend(m.value() for m in consumer.consume(100, 1) if m.error() is None)
        finally:
            consumer.close()
        obs.append({"step": "read", "all_records_in_order": got == values})
    finally:
        admin.close()
    return obs


@pytest.mark.compat(client="kafka-python", scenario="a replica moved between two log dirs (JBOD)")
def test_kafka_python_moves_a_replica_between_log_dirs(differential: Any) -> None:
    obs = differential("kafka-python-jbod-move", _move)
    steps = {o["step"]: o for o in obs}
    assert steps["before"]["dirs"] == ["a", "b"] and steps["before"]["futures"] == [False]
    assert steps["alter"]["answers"] == [("jbod-missing", "UnknownTopicOrPartitionError"), (TOPIC, "NoError")]
    assert steps["alter-unknown-dir"]["answers"] == ["LogDirNotFoundError"]
    assert steps["moved"]["to_the_other_dir"] and steps["moved"]["same_size"]
    assert steps["read"]["all_records_in_order"]
