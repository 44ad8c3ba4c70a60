"""Admin APIs through kafka-python's KafkaAdminClient, kcat and raw requests, against a real broker.

CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs and DescribeCluster: what the client sees (results, Kafka's error codes
and messages) and what happens on disk (deleted topic directories, retention after an alter).
confluent-kafka's AdminClient is exercised in test_admin_confluent.py.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    OffsetSpec,
)
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from broker.testing.process import SamsaProcess
from protocol.errors import ErrorCode
from tests.support.raw_client import RawClient

KCAT = "/usr/bin/kcat"
ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture
def admin(samsa_broker: SamsaProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=samsa_broker.bootstrap_servers, client_id="admin-test")
    yield client
    client.close()


def _admin(broker: SamsaProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="admin-test")


def _wait(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _produce(broker: SamsaProcess, topic: str, n: int, partition: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    try:
        for i in range(n):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=partition)
        producer.flush(30)
    finally:
        producer.close()


def _offsets(admin: KafkaAdminClient, topic: str, partition: int = 0) -> tuple[int, int]:
    tp = TopicPartition(topic, partition)
    earliest = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset
    latest = admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset
    return earliest, latest


def _consume_from(broker: SamsaProcess, topic: str, offset: int, expect: int, **config: Any) -> list[Any]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False, **config)
    tp = TopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset)
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < expect and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(records)
        return got
    finally:
        consumer.close()


def _topic_dirs(broker: SamsaProcess, topic: str) -> list[Path]:
    return sorted(p for p in broker.data_dir.iterdir() if p.is_dir() and p.name.startswith(f"{topic}-"))


def _kcat_metadata(broker: SamsaProcess) -> dict[str, Any]:
    out = subprocess.run(
        [KCAT, "-b", broker.bootstrap_servers, "-L", "-J", "-m", "15"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return json.loads(out.stdout)


# ------------------------------------------------------------------------------ CreateTopics


def test_create_topics_partitions_configs_and_kcat_listing(samsa_broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    result = admin.create_topics(
        {
            "orders": {"num_partitions": 3, "replication_factor": 1, "configs": {"retention.ms": "123456"}},
            "defaults": {},  # -1/-1: the broker's num.partitions and default.replication.factor
        }
    )
    topics = {t["name"]: t for t in result["topics"]}
    assert topics["orders"]["error_code"] == 0
    assert topics["orders"]["num_partitions"] == 3
    assert topics["orders"]["replication_factor"] == 1
    assert uuid.UUID(str(topics["orders"]["topic_id"])) != ZERO_UUID
    orders_configs = topics["orders"]["configs"]
    assert orders_configs["retention.ms"]["value"] == "123456"
    assert orders_configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert orders_configs["cleanup.policy"]["value"] == "delete"
    assert orders_configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    assert topics["defaults"]["num_partitions"] == 1
    assert topics["defaults"]["replication_factor"] == 1

    metadata = _kcat_metadata(samsa_broker)
    listed = {t["topic"]: t for t in metadata["topics"]}
    assert len(listed["orders"]["partitions"]) == 3
    assert len(listed["defaults"]["partitions"]) == 1
    assert all(p["leader"] == 0 for p in listed["orders"]["partitions"])
    assert [b["id"] for b in metadata["brokers"]] == [0]
    assert len(_topic_dirs(samsa_broker, "orders")) == 3


def test_create_topics_errors_are_kafkas(admin: KafkaAdminClient) -> None:
    admin.create_topics({"exists": {"num_partitions": 1}})
    result = admin.create_topics(
        {
            "exists": {"num_partitions": 1},
            "bad name!": {"num_partitions": 1},
            "zero-partitions": {"num_partitions": 0, "replication_factor": 1},
            "too-many-replicas": {"num_partitions": 1, "replication_factor": 3},
            "zero-replicas": {"num_partitions": 1, "replication_factor": 0},
            "bad-config": {"configs": {"retention.ms": "-2"}},
            "unknown-config": {"configs": {"no.such.config": "1"}},
            "bad-assignment": {"assignments": {0: [0], 1: [7]}},
            "gap-assignment": {"assignments": {0: [0], 2: [0]}},
        },
        raise_errors=False,
    )
    by_name = {t["name"]: (t["error_code"], t["error_message"]) for t in result["topics"]}
    assert by_name["exists"] == (TopicAlreadyExistsError.errno, "Topic 'exists' already exists.")
    assert by_name["bad name!"][0] == InvalidTopicError.errno
    assert "contains a character other than ASCII alphanumerics" in by_name["bad name!"][1]
    assert by_name["zero-partitions"] == (
        InvalidPartitionsError.errno,
        "Number of partitions was set to an invalid non-positive value.",
    )
    assert by_name["too-many-replicas"] == (
        InvalidReplicationFactorError.errno,
        ("Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be "
        "reached because only 1 broker(s) are registered."),
    )
    assert by_name["zero-replicas"] == (
        InvalidReplicationFactorError.errno,
        "Replication factor must be larger than 0, or -1 to use the default value.",
    )
    assert by_name["bad-config"] == (40, "Invalid value -2 for configuration retention.ms: Value must be at least -1")
    assert by_name["unknown-config"] == (40, "Unknown topic config name: no.such.config")
    assert by_name["bad-assignment"] == (
        39,
        "The manual partition assignment includes broker 7, but no such broker is registered.",
    )
    assert by_name["gap-assignment"] == (39, "partitions should be a consecutive 0-based integer sequence")
    names = set(admin.list_topics())
    assert "exists" in names
    assert not names & {"zero-partitions", "too-many-replicas", "bad-config", "bad-assignment", "gap-assignment"}


def test_create_topics_validate_only_and_manual_assignment(samsa_broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    result = admin.create_topics({"dry": {"num_partitions": 4, "replication_factor": 1}}, validate_only=True)
    assert result["topics"][0]["error_code"] == 0
    assert result["topics"][0]["num_partitions"] == 4
    assert "dry" not in admin.list_topics()
    assert _topic_dirs(samsa_broker, "dry") == []

    admin.create_topics({"manual": {"assignments": {0: [0], 1: [0]}}})
    assert len(_kcat_metadata(samsa_broker)["topics"][0]["partitions"]) == 2


def test_create_topics_duplicate_names_and_collisions_over_the_wire(samsa_broker: SamsaProcess) -> None:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    def topic(name: str) -> CreatableTopic:
        return CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=(), configs=())

    with RawClient(samsa_broker.port) as c:
        first = c.request(CreateTopicsRequest(topics=(topic("a.b"), topic("twice"), topic("twice")),
                                              timeout=datetime.timedelta(seconds=5)))
        results = {t.name: t for t in first.topics}
        assert results["a.b"].error_code == 0
        assert results["twice"].error_code == 42  # INVALID_REQUEST
        assert results["twice"].error_message == "Duplicate topic name."
        assert len(first.topics) == 2
        second = c.request(CreateTopicsRequest(topics=(topic("a_b"), topic("__cluster_metadata")),
                                               timeout=datetime.timedelta(seconds=5)))
        results = {t.name: t for t in second.topics}
        assert results["a_b"].error_code == 17  # INVALID_TOPIC_EXCEPTION
        assert results["a_b"].error_message == "Topic 'a_b' collides with existing topic: a.b"
        assert results["__cluster_metadata"].error_code == 42
        # an older version gets the same answers without the v5+ fields
        from kio.schema.create_topics.v2 import request as v2

        old = c.request(v2.CreateTopicsRequest(
            topics=(v2.CreatableTopic(name="a.b", num_partitions=1, replication_factor=1, assignments=(), configs=()),),
            timeout=datetime.timedelta(seconds=5),
        ))
        assert old.topics[0].error_code == 36  # TOPIC_ALREADY_EXISTS


def test_internal_topic_can_be_created_by_a_client_like_kafka(admin: KafkaAdminClient) -> None:
    result = admin.create_topics({"__transaction_state": {"num_partitions": 2}})
    assert result["topics"][0]["error_code"] == 0
    assert "__transaction_state" in admin.list_topics()


# ------------------------------------------------------------------------------ DeleteTopics


def test_delete_topic_removes_logs_and_recreated_topic_starts_empty(samsa_broker_factory: Callable[..., SamsaProcess]) -> None:
    broker = samsa_broker_factory(log_segment_delete_delay_ms="300")
    admin = _admin(broker)
    try:
        admin.create_topics({"doomed": {"num_partitions": 2}})
        _produce(broker, "doomed", 20)
        assert _offsets(admin, "doomed") == (0, 20)
        old_id = admin.describe_topics(["doomed"])[0]["topic_id"]

        result = admin.delete_topics(["doomed"])
        assert result["topics"][0]["error_code"] == 0
        assert "doomed" not in admin.list_topics()
        # the partition directories are renamed at once and removed after file.delete.delay.ms
        _wait(lambda: not any(p.name.startswith("doomed-") for p in broker.data_dir.iterdir()), what="deletion")

        admin.create_topics({"doomed": {"num_partitions": 2}})
        new_id = admin.describe_topics(["doomed"])[0]["topic_id"]
        assert new_id != old_id
        assert _offsets(admin, "doomed") == (0, 0)
        _produce(broker, "doomed", 3)
        got = _consume_from(broker, "doomed", 0, 3)
        assert [(r.offset, r.value) for r in got] == [(0, b"v0"), (1, b"v1"), (2, b"v2")]
    finally:
        admin.close()
    log = broker.read_log()
    assert "admin action=delete_topic client_id=admin-test" in log
    assert "admin action=create_topic client_id=admin-test" in log


def test_delete_topics_errors_and_by_id(samsa_broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    result = admin.delete_topics(["missing"], raise_errors=False)
    assert result["topics"][0]["error_code"] == UnknownTopicOrPartitionError.errno

    admin.create_topics({"by-id": {"num_partitions": 1}})
    topic_id = uuid.UUID(str(admin.describe_topics(["by-id"])[0]["topic_id"]))
    from kio.schema.delete_topics.v6.request import (
        DeleteTopicsRequest,
        DeleteTopicState,
    )

    with RawClient(samsa_broker.port) as c:
        response = c.request(DeleteTopicsRequest(
            topics=(
                DeleteTopicState(name=None, topic_id=topic_id),
                DeleteTopicState(name=None, topic_id=uuid.uuid4()),
                DeleteTopicState(name="x", topic_id=uuid.uuid4()),
                DeleteTopicState(name=None, topic_id=ZERO_UUID),
            ),
            timeout=datetime.timedelta(seconds=5),
        ))
    results = [(r.name, r.error_code, r.error_message) for r in response.responses]
    assert ("by-id", 0, None) in results
    assert (None, 100, "This server does not host this topic ID.") in results  # UNKNOWN_TOPIC_ID
    assert ("x", 42, "You may not specify both topic name and topic id.") in results
    assert (None, 42, "Neither topic name nor id were specified.") in results
    assert "by-id" not in admin.list_topics()


def test_delete_topic_disabled(samsa_broker_factory: Callable[..., SamsaProcess]) -> None:
    broker = samsa_broker_factory(delete_topic_enable="false")
    admin = _admin(broker)
    try:
        admin.create_topics({"kept": {"num_partitions": 1}})
        result = admin.delete_topics(["kept"], raise_errors=False)
        assert result["topics"][0]["error_code"] == 73  # TOPIC_DELETION_DISABLED
        assert "kept" in admin.list_topics()
    finally:
        admin.close()
    from kio.schema.delete_topics.v2.request import DeleteTopicsRequest

    with RawClient(broker.port) as c:  # before v3 Kafka answers INVALID_REQUEST
        old = c.request(DeleteTopicsRequest(topic_names=("kept",), timeout=datetime.timedelta(seconds=5)))
    assert old.responses[0].error_code == 42


# -------------------------------------------------------------------------- CreatePartitions


def test_create_partitions(samsa_broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics({"grow": {"num_partitions": 1}})
    admin.create_partitions({"grow": NewPartitions(3)})
    assert len(admin.describe_topics(["grow"])[0]["partitions"]) == 3
    assert len(_topic_dirs(samsa_broker, "grow")) == 3
    _produce(samsa_broker, "grow", 2, partition=2)
    assert _offsets(admin, "grow", 2) == (0, 2)

    results = admin.create_partitions(
        {"grow": NewPartitions(3), "missing": NewPartitions(2)}, raise_errors=False
    ).results
    by_name = {r.name: (r.error_code, r.error_message) for r in results}
    assert by_name["grow"] == (InvalidPartitionsError.errno, "Topic already has 3 partition(s).")
    assert by_name["missing"][0] == UnknownTopicOrPartitionError.errno

    lower = admin.create_partitions({"grow": NewPartitions(2)}, raise_errors=False).results[0]
    assert (lower.error_code, lower.error_message) == (
        InvalidPartitionsError.errno,
        "The topic grow currently has 3 partition(s); 2 would not be an increase.",
    )
    wrong = admin.create_partitions(
        {"grow": NewPartitions(5, new_assignments=[[0]])}, raise_errors=False
    ).results[0]
    assert (wrong.error_code, wrong.error_message) == (
        39,
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
    )
    admin.create_partitions({"grow": NewPartitions(6)}, validate_only=True)
    assert len(admin.describe_topics(["grow"])[0]["partitions"]) == 3
    admin.create_partitions({"grow": NewPartitions(4, new_assignments=[[0]])})
    assert len(admin.describe_topics(["grow"])[0]["partitions"]) == 4


# ---------------------------------------------------------------------------- DeleteRecords


def test_delete_records_moves_log_start_offset(samsa_broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics({"trim": {"num_partitions": 1}})
    _produce(samsa_broker, "trim", 10)
    tp = TopicPartition("trim", 0)

    result = admin.delete_records({tp: 4})
    assert result[tp]["low_watermark"] == 4
    assert _offsets(admin, "trim") == (4, 10)

    # a fetch below the log start offset is out of range; the consumer resets to earliest
    got = _consume_from(samsa_broker, "trim", 0, 6, auto_offset_reset="earliest")
    assert [r.offset for r in got] == [4, 5, 6, 7, 8, 9]
    strict = KafkaConsumer(bootstrap_servers=samsa_broker.bootstrap_servers, auto_offset_reset="none",
                           enable_auto_commit=False)
    try:
        strict.assign([tp])
        strict.seek(tp, 1)
        with pytest.raises(Exception) as info:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                strict.poll(timeout_ms=200)
        assert "OffsetOutOfRange" in type(info.value).__name__ or isinstance(info.value, OffsetOutOfRangeError)
    finally:
        strict.close()

    # beyond the high watermark: OFFSET_OUT_OF_RANGE; -1: up to the high watermark
    with pytest.raises(OffsetOutOfRangeError):
        admin.delete_records({tp: 11})
    assert admin.delete_records({tp: -1})[tp]["low_watermark"] == 10
    assert _offsets(admin, "trim") == (10, 10)

    # the log start offset survives a restart
    samsa_broker.restart()
    admin2 = _admin(samsa_broker)
    try:
        assert _offsets(admin2, "trim") == (10, 10)
    finally:
        admin2.close()


def test_delete_records_errors_over_the_wire(samsa_broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    from kio.schema.delete_records.v2.request import (
        DeleteRecordsPartition,
        DeleteRecordsRequest,
        DeleteRecordsTopic,
    )

    admin.create_topics({"compacted": {"configs": {"cleanup.policy": "compact"}}, "plain": {}})

    def topic(name: str, *offsets: tuple[int, int]) -> DeleteRecordsTopic:
        return DeleteRecordsTopic(
            name=name, partitions=tuple(DeleteRecordsPartition(partition_index=p, offset=o) for p, o in offsets)
        )

    with RawClient(samsa_broker.port) as c:
        response = c.request(DeleteRecordsRequest(
            topics=(topic("compacted", (0, 0)), topic("plain", (0, -2), (5, 0)), topic("__consumer_offsets", (0, 0))),
            timeout=datetime.timedelta(seconds=5),
        ))
    codes = {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in response.topics for p in t.partitions}
    assert codes[("compacted", 0)] == (44, -1)  # POLICY_VIOLATION
    assert codes[("plain", 0)] == (1, -1)  # OFFSET_OUT_OF_RANGE
    assert codes[("plain", 5)] == (3, -1)  # UNKNOWN_TOPIC_OR_PARTITION
    assert codes[("__consumer_offsets", 0)] == (17, -1)  # INVALID_TOPIC_EXCEPTION


# -------------------------------------------------------------------------- Describe/Alter configs


def test_describe_configs_topic_and_broker(samsa_broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics({"described": {"configs": {"retention.ms": "5000", "cleanup.policy": "compact,delete"}}})
    result = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "described")], include_synonyms=True, config_filter="all"
    )
    configs = result["topic"]["described"]
    assert configs["retention.ms"]["value"] == "5000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    # Kafka's synonym list starts at the topic config's first broker synonym (log.retention.ms),
    # which is neither set nor defaulted here: only the topic's own override is listed
    assert [s["name"] for s in configs["retention.ms"]["synonyms"]] == ["retention.ms"]
    assert [(s["name"], s["source"]) for s in configs["segment.bytes"]["synonyms"]] == [
        ("log.segment.bytes", "DEFAULT_CONFIG")
    ]
    assert configs["cleanup.policy"]["value"] == "compact,delete"
    assert configs["segment.bytes"]["value"] == "1073741824"
    assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert configs["segment.bytes"]["read_only"] is False
    assert configs["max.message.bytes"]["config_type"] == "INT"
    assert len(configs) >= 20

    broker = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")
    broker_configs = broker["broker"]["0"]
    assert broker_configs["num.partitions"]["value"] == "1"
    assert broker_configs["log.dirs"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert broker_configs["log.dirs"]["value"] == str(samsa_broker.data_dir)
    # dynamic broker configs (broker/config/dynamic.py) are the ones not read-only
    assert broker_configs["num.partitions"]["read_only"] is True
    assert broker_configs["message.max.bytes"]["read_only"] is False


def test_describe_configs_errors_over_the_wire(samsa_broker: SamsaProcess) -> None:
    from kio.schema.describe_configs.v4.request import (
        DescribeConfigsRequest,
        DescribeConfigsResource,
    )

    def resource(kind: int, name: str, keys: tuple[str, ...] | None = None) -> DescribeConfigsResource:
        return DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=keys)

    with RawClient(samsa_broker.port) as c:
        response = c.request(DescribeConfigsRequest(
            resources=(
                resource(2, "nope"),
                resource(4, "7"),
                resource(4, "zero"),
                resource(4, ""),
                resource(4, "0", ("num.partitions", "log.retention.ms")),
                resource(8, "0"),
                resource(32, ""),
            ),
            include_synonyms=True,
            include_documentation=True,
        ))
    r = response.results
    assert (r[0].error_code, r[0].configs) == (3, ())  # UNKNOWN_TOPIC_OR_PARTITION
    assert (r[1].error_code, r[1].error_message) == (
        42,
        "Unexpected broker id, expected 0 or empty string, but received 7",
    )
    assert (r[2].error_code, r[2].error_message) == (42, "Broker id must be an integer, but it is: zero")
    # the cluster-wide dynamic defaults: min.insync.replicas, written when the cluster was created
    assert (r[3].error_code, [(c.name, c.value) for c in r[3].configs]) == (0, [("min.insync.replicas", "1")])
    assert r[4].error_code == 0
    assert [c.name for c in r[4].configs] == ["log.retention.ms", "num.partitions"]
    retention = r[4].configs[0]
    assert retention.value is None  # only log.retention.hours applies, as Kafka reports it
    assert retention.documentation
    assert r[5].error_code == 0
    assert {c.name: c.value for c in r[5].configs}["root"] in {"INFO", "WARN", "DEBUG", "ERROR"}
    assert (r[6].error_code, r[6].error_message) == (42, "Group name must not be empty")  # tests/integration/test_group_configs.py


def test_alter_configs_legacy_replaces_overrides_and_takes_effect(
    samsa_broker_factory: Callable[..., SamsaProcess],
) -> None:
    broker = samsa_broker_factory(log_retention_check_interval_ms="200")
    admin = _admin(broker)
    try:
        admin.create_topics({"aged": {"configs": {"max.message.bytes": "50000", "segment.bytes": "1048576"}}})
        _produce(broker, "aged", 5)
        # the legacy API replaces the whole override set: max.message.bytes and segment.bytes
        # return to their defaults (kafka-python would resend them, so this goes over the wire)
        from kio.schema.alter_configs.v2.request import (
            AlterableConfig,
            AlterConfigsRequest,
            AlterConfigsResource,
        )

        with RawClient(broker.port) as c:
            response = c.request(AlterConfigsRequest(
                resources=(AlterConfigsResource(
                    resource_type=2, resource_name="aged",
                    configs=(AlterableConfig(name="retention.ms", value="300"),),
                ),),
                validate_only=False,
            ))
        assert response.responses[0].error_code == 0
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "aged")])["topic"]["aged"]
        assert {k: v["value"] for k, v in configs.items()} == {"retention.ms": "300"}
        # retention now deletes the records older than 300 ms
        _wait(lambda: _offsets(admin, "aged") == (5, 5), what="retention after alter")
    finally:
        admin.close()


def test_alter_configs_errors_over_the_wire(samsa_broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    from kio.schema.alter_configs.v2.request import (
        AlterableConfig,
        AlterConfigsRequest,
        AlterConfigsResource,
    )

    admin.create_topics({"target": {}})

    def resource(kind: int, name: str, **configs: str | None) -> AlterConfigsResource:
        return AlterConfigsResource(
            resource_type=kind,
            resource_name=name,
            configs=tuple(AlterableConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()),
        )

    with RawClient(samsa_broker.port) as c:
        response = c.request(AlterConfigsRequest(
            resources=(
                resource(2, "target", retention_ms="abc"),
                resource(2, "missing", retention_ms="1000"),
                resource(4, "0", num_partitions="3"),
                resource(4, ""),
                resource(8, "0", root="DEBUG"),
                resource(2, "dup"),
                resource(2, "dup"),
            ),
            validate_only=False,
        ))
    r = [(x.error_code, x.error_message) for x in response.responses]
    assert r[0] == (40, "Invalid value abc for configuration retention.ms: Not a number of type LONG")
    assert r[1] == (3, "The topic 'missing' does not exist.")
    assert r[2] == (42, "Cannot update these configs dynamically: [num.partitions]")
    # replacing the cluster defaults with none would remove min.insync.replicas (Kafka 4.x's ELR rule)
    assert r[3] == (40, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
    assert r[4] == (42, "Unknown resource type 8")
    assert r[5] == r[6] == (42, "Each resource must appear at most once.")


def test_incremental_alter_configs_with_kafka_python(samsa_broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics({"inc": {"configs": {"retention.ms": "1000"}}})
    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                "inc",
                configs={
                    "retention.bytes": (AlterConfigOp.SET, "2000"),
                    "retention.ms": (AlterConfigOp.DELETE, None),
                    "cleanup.policy": (AlterConfigOp.APPEND, "compact"),
                },
            )
        ],
        incremental=True,
    )
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "inc")])["topic"]["inc"]
    assert {k: v["value"] for k, v in configs.items()} == {"retention.bytes": "2000", "cleanup.policy": "delete,compact"}
    log = samsa_broker.read_log()
    assert "admin action=incremental_alter_configs client_id=admin-test" in log


# ---------------------------------------------------------------------------- DescribeCluster


def test_describe_cluster(samsa_broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 0
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
        (0, "127.0.0.1", samsa_broker.port)
    ]
    assert len(cluster["cluster_id"]) == 22
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest

    with RawClient(samsa_broker.port) as c:
        wrong = c.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2))
        assert wrong.error_code == ErrorCode.mismatched_endpoint_type
        unknown = c.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=9))
        assert unknown.error_code == ErrorCode.unsupported_endpoint_type
        plain = c.request(DescribeClusterRequest(include_cluster_authorized_operations=False))
        assert plain.cluster_authorized_operations == -2147483648
        assert plain.cluster_id == cluster["cluster_id"]


def test_broker_logger_levels(samsa_broker: SamsaProcess) -> None:
    from kio.schema.describe_configs.v4.request import (
        DescribeConfigsRequest,
        DescribeConfigsResource,
    )
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    def alter(c: RawClient, *ops: tuple[int, str, str | None], name: str = "0") -> list[tuple[int, str | None]]:
        response = c.request(IncrementalAlterConfigsRequest(
            resources=(AlterConfigsResource(
                resource_type=8,
                resource_name=name,
                configs=tuple(AlterableConfig(name=n, config_operation=op, value=v) for op, n, v in ops),
            ),),
            validate_only=False,
        ))
        return [(r.error_code, r.error_message) for r in response.responses]

    def levels(c: RawClient) -> dict[str, str | None]:
        response = c.request(DescribeConfigsRequest(
            resources=(DescribeConfigsResource(resource_type=8, resource_name="0", configuration_keys=None),),
        ))
        assert response.results[0].error_code == 0
        return {e.name: e.value for e in response.results[0].configs}

    with RawClient(samsa_broker.port) as c:
        assert levels(c)["samsa.admin"] == "INFO"
        assert alter(c, (0, "samsa.admin", "DEBUG")) == [(0, None)]
        assert levels(c)["samsa.admin"] == "DEBUG"
        assert alter(c, (1, "samsa.admin", None)) == [(0, None)]
        assert levels(c)["samsa.admin"] == "INFO"
        assert alter(c, (0, "samsa.admin", "LOUD"))[0][0] == 40  # INVALID_CONFIG
        assert alter(c, (0, "no.such.logger", "DEBUG")) == [(40, "Logger no.such.logger does not exist!")]
        assert alter(c, (1, "root", None)) == [(42, "Removing the log level of the root logger is not allowed")]
        assert alter(c, (2, "root", "DEBUG")) == [(42, "APPEND operation is not allowed for the BROKER_LOGGER resource")]
        assert alter(c, (0, "root", "DEBUG"), name="3")[0][0] == 42
