"""Admin APIs through confluent-kafka's AdminClient (librdkafka) against a real broker.

librdkafka negotiates its own versions (CreateTopics v4, DescribeConfigs v1, DeleteRecords v2,
...), so this covers the down-converted answers as well as the behaviour: errors surface as
KafkaException with Kafka's codes, describe_configs shows defaults and sources, incremental
SET/DELETE/APPEND/SUBTRACT, delete_records followed by list_offsets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from broker.testing.process import SamsaProcess

TIMEOUT = 30


@pytest.fixture
def admin(samsa_broker: SamsaProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": samsa_broker.bootstrap_servers, "client.id": "confluent-admin"})


def _result(futures: dict[Any, Any], key: Any) -> Any:
    return futures[key].result(TIMEOUT)


def _error_code(futures: dict[Any, Any], key: Any) -> int:
    with pytest.raises(KafkaException) as info:
        futures[key].result(TIMEOUT)
    return info.value.args[0].code()


def _produce(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
    assert producer.flush(TIMEOUT) == 0


def _topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return _result(admin.describe_configs([resource], request_timeout=TIMEOUT), resource)


def _offsets(admin: AdminClient, topic: str) -> tuple[int, int]:
    tp = TopicPartition(topic, 0)
    earliest = _result(admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=TIMEOUT), tp).offset
    latest = _result(admin.list_offsets({tp: OffsetSpec.latest()}, request_timeout=TIMEOUT), tp).offset
    return earliest, latest


def test_create_topics_and_errors(admin: AdminClient) -> None:
    futures = admin.create_topics(
        [
            NewTopic("c-orders", num_partitions=2, replication_factor=1, config={"retention.ms": "60000"}),
            NewTopic("c-bad-rf", num_partitions=1, replication_factor=2),
            NewTopic("c-bad-config", num_partitions=1, replication_factor=1, config={"cleanup.policy": "nope"}),
            NewTopic("c-bad name", num_partitions=1, replication_factor=1),
        ],
        operation_timeout=TIMEOUT,
        request_timeout=TIMEOUT,
    )
    assert _result(futures, "c-orders") is None
    assert _error_code(futures, "c-bad-rf") == KafkaError.INVALID_REPLICATION_FACTOR
    assert _error_code(futures, "c-bad-config") == KafkaError.INVALID_CONFIG
    assert _error_code(futures, "c-bad name") == KafkaError.TOPIC_EXCEPTION

    again = admin.create_topics([NewTopic("c-orders", 2, 1)], request_timeout=TIMEOUT)
    assert _error_code(again, "c-orders") == KafkaError.TOPIC_ALREADY_EXISTS

    dry = admin.create_topics([NewTopic("c-dry", 3, 1)], validate_only=True, request_timeout=TIMEOUT)
    assert _result(dry, "c-dry") is None
    topics = admin.list_topics(timeout=TIMEOUT).topics
    assert len(topics["c-orders"].partitions) == 2
    assert "c-dry" not in topics


def test_delete_topics_and_create_partitions(admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("c-grow", 1, 1), NewTopic("c-gone", 1, 1)], request_timeout=TIMEOUT),
            "c-grow")
    assert _result(admin.create_partitions([NewPartitions("c-grow", 4)], request_timeout=TIMEOUT), "c-grow") is None
    assert len(admin.list_topics(timeout=TIMEOUT).topics["c-grow"].partitions) == 4
    same = admin.create_partitions([NewPartitions("c-grow", 4)], request_timeout=TIMEOUT)
    assert _error_code(same, "c-grow") == KafkaError.INVALID_PARTITIONS
    dry = admin.create_partitions([NewPartitions("c-grow", 8)], validate_only=True, request_timeout=TIMEOUT)
    assert _result(dry, "c-grow") is None
    assert len(admin.list_topics(timeout=TIMEOUT).topics["c-grow"].partitions) == 4

    deleted = admin.delete_topics(["c-gone", "c-never"], operation_timeout=TIMEOUT, request_timeout=TIMEOUT)
    assert _result(deleted, "c-gone") is None
    assert _error_code(deleted, "c-never") == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert "c-gone" not in admin.list_topics(timeout=TIMEOUT).topics


def test_describe_configs_shows_defaults_and_sources(samsa_broker_factory: Any) -> None:
    broker = samsa_broker_factory(log_retention_hours="72", log_segment_bytes="2097152", num_partitions="2")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    _result(admin.create_topics([NewTopic("c-desc", -1, -1, config={"segment.ms": "3600000"})],
                                request_timeout=TIMEOUT), "c-desc")
    assert len(admin.list_topics(timeout=TIMEOUT).topics["c-desc"].partitions) == 2  # num.partitions

    configs = _topic_configs(admin, "c-desc")
    assert configs["segment.ms"].value == "3600000"
    assert configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not configs["segment.ms"].is_default
    # inherited from server.properties (log.segment.bytes): a static broker config
    assert configs["segment.bytes"].value == "2097152"
    assert configs["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert "log.segment.bytes" in configs["segment.bytes"].synonyms
    # log.retention.hours=72 gives the value; like Kafka the source is DEFAULT_CONFIG, because
    # Kafka lists synonyms only from the first one (log.retention.ms), which is not set
    assert configs["retention.ms"].value == str(72 * 3_600_000)
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # untouched: Kafka's default
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].is_default
    assert configs["cleanup.policy"].value == "delete"
    assert not any(c.is_read_only for c in configs.values())

    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    broker_configs = _result(admin.describe_configs([resource], request_timeout=TIMEOUT), resource)
    assert broker_configs["log.retention.hours"].value == "72"
    assert broker_configs["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker_configs["num.partitions"].value == "2"
    assert broker_configs["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    missing = ConfigResource(ConfigResource.Type.TOPIC, "c-missing")
    assert _error_code(admin.describe_configs([missing], request_timeout=TIMEOUT), missing) == (
        KafkaError.UNKNOWN_TOPIC_OR_PART
    )


def test_incremental_alter_configs(admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("c-inc", 1, 1, config={"retention.ms": "1000"})],
                                request_timeout=TIMEOUT), "c-inc")

    def alter(*entries: ConfigEntry, validate_only: bool = False) -> Any:
        resource = ConfigResource(ConfigResource.Type.TOPIC, "c-inc", incremental_configs=list(entries))
        futures = admin.incremental_alter_configs([resource], validate_only=validate_only, request_timeout=TIMEOUT)
        return futures, resource

    futures, resource = alter(
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("max.message.bytes", "20000", incremental_operation=AlterConfigOpType.SET),
    )
    assert _result(futures, resource) is None
    configs = _topic_configs(admin, "c-inc")
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].value == "20000"

    futures, resource = alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    assert _result(futures, resource) is None
    assert _topic_configs(admin, "c-inc")["cleanup.policy"].value == "compact"

    # validate_only changes nothing; APPEND to a non-list config is INVALID_CONFIG
    futures, resource = alter(ConfigEntry("max.message.bytes", "30000", incremental_operation=AlterConfigOpType.SET),
                              validate_only=True)
    assert _result(futures, resource) is None
    assert _topic_configs(admin, "c-inc")["max.message.bytes"].value == "20000"
    futures, resource = alter(ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND))
    assert _error_code(futures, resource) == KafkaError.INVALID_CONFIG
    futures, resource = alter(ConfigEntry("retention.ms", "-5", incremental_operation=AlterConfigOpType.SET))
    assert _error_code(futures, resource) == KafkaError.INVALID_CONFIG

    # a static broker config is refused as Kafka refuses it
    broker = ConfigResource(
        ConfigResource.Type.BROKER,
        "0",
        incremental_configs=[ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)],
    )
    futures = admin.incremental_alter_configs([broker], request_timeout=TIMEOUT)
    with pytest.raises(KafkaException) as info:
        futures[broker].result(TIMEOUT)
    error = info.value.args[0]
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically" in error.str()

    # a dynamic one is set for this broker, reported as DYNAMIC_BROKER_CONFIG, and deleted again
    def alter_broker(op: AlterConfigOpType, value: str | None) -> None:
        entry = ConfigEntry("message.max.bytes", value, incremental_operation=op)
        resource = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[entry])
        assert _result(admin.incremental_alter_configs([resource], request_timeout=TIMEOUT), resource) is None

    def message_max_bytes() -> tuple[str, str, bool]:
        resource = ConfigResource(ConfigResource.Type.BROKER, "0")
        entry = admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(TIMEOUT)["message.max.bytes"]
        return entry.value, entry.source, entry.is_read_only

    alter_broker(AlterConfigOpType.SET, "2000000")
    assert message_max_bytes() == ("2000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    alter_broker(AlterConfigOpType.DELETE, None)
    assert message_max_bytes() == ("1048588", ConfigSource.DEFAULT_CONFIG.value, False)


def test_delete_records_and_list_offsets(samsa_broker: SamsaProcess, admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("c-trim", 1, 1)], request_timeout=TIMEOUT), "c-trim")
    _produce(samsa_broker.bootstrap_servers, "c-trim", 8)
    assert _offsets(admin, "c-trim") == (0, 8)

    tp = TopicPartition("c-trim", 0, 3)
    deleted = admin.delete_records([tp], request_timeout=TIMEOUT, operation_timeout=TIMEOUT)
    assert _result(deleted, tp).low_watermark == 3
    assert _offsets(admin, "c-trim") == (3, 8)

    too_far = TopicPartition("c-trim", 0, 99)
    deleted = admin.delete_records([too_far], request_timeout=TIMEOUT)
    assert _error_code(deleted, too_far) == KafkaError.OFFSET_OUT_OF_RANGE
    assert _offsets(admin, "c-trim") == (3, 8)


def test_describe_cluster(samsa_broker: SamsaProcess, admin: AdminClient) -> None:
    # librdkafka answers describe_cluster from a Metadata request
    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(0, "127.0.0.1", samsa_broker.port)]
    assert cluster.controller is not None and cluster.controller.id == 0
    assert cluster.cluster_id
    assert cluster.authorized_operations is None

    # Asked for, the cluster's authorized operations come in Metadata v8-10 (no authorizer: all).
    asked = admin.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT).result(TIMEOUT)
    names = {op.name for op in asked.authorized_operations}
    assert {"DESCRIBE", "ALTER", "CLUSTER_ACTION", "IDEMPOTENT_WRITE", "DESCRIBE_CONFIGS"} <= names


def test_admin_actions_are_logged(samsa_broker: SamsaProcess, admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("c-logged", 1, 1)], request_timeout=TIMEOUT), "c-logged")
    deadline = time.monotonic() + 10
    while "topic=c-logged" not in samsa_broker.read_log() and time.monotonic() < deadline:
        time.sleep(0.05)
    line = next(x for x in samsa_broker.read_log().splitlines() if "action=create_topic" in x and "c-logged" in x)
    assert "client_id=confluent-admin" in line
    assert "correlation_id=" in line
    assert "result=none" in line
