"""Samsa's config names against Kafka 3.9's and 4.3.1's own tables (issue 13, A4).

Read from each Kafka's classes by compat/jvm/harness/ConfigNames.java (LogConfig.configKeys,
KafkaConfig.configDef, the dynamic broker config set): Samsa accepts every topic config either
accepts, with Kafka 3.9's deprecation warning for those 4.0 removed; declares no broker config
neither knows (but its own samsa.* ones, cluster.id and the metrics endpoint's); and changes at
runtime only broker configs Kafka changes at runtime too.
"""

from __future__ import annotations

from typing import Any

import pytest

from broker.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig
from broker.config.dynamic import DYNAMIC_CONFIGS
from broker.config.topic import DEPRECATED_TOPIC_CONFIGS
from compat.jvm import run_main

KAFKA = {"3.9.2": "kafka-3.9", "4.3.1": "kafka"}
"""Kafka version -> its broker classpath under compat/target."""
SAMSA_ONLY = {"cluster.id", "metrics.prometheus.host", "metrics.prometheus.port",
              "super.users", "allow.everyone.if.no.acl.found"}
"""Broker configs Samsa adds besides samsa.*: Kafka keeps the cluster id in meta.properties and
serves Prometheus metrics through the JMX exporter's agent, not a config of its own; super.users
and allow.everyone.if.no.acl.found are Kafka's too, but its authorizer reads them from the
properties, so KafkaConfig's table does not list them."""


@pytest.fixture(scope="module")
def kafka() -> dict[str, dict[str, Any]]:
    tables = {}
    for version, cp in KAFKA.items():
        lines = {line["step"]: line for line in run_main("clients-4", "ConfigNames", run_on=cp)}
        assert lines["start"]["kafkaVersion"] == version
        tables[version] = lines
    return tables


def _union(kafka: dict[str, dict[str, Any]], step: str, field: str) -> set[str]:
    return set().union(*(set(t[step][field]) for t in kafka.values()))


SAMSA_ONLY_TOPIC = {"replication.pipeline.enable"}
"""Samsa's own topic configs (compat/differences.py: Kafka rejects them as unknown)."""


def test_every_topic_config_kafka_accepts_is_accepted(kafka: dict[str, dict[str, Any]]) -> None:
    assert set(TOPIC_CONFIGS) - SAMSA_ONLY_TOPIC == _union(kafka, "topic", "configs")


def test_kafka_39s_deprecated_configs_are_accepted_with_a_warning(kafka: dict[str, dict[str, Any]]) -> None:
    topic = {n for n, flag in kafka["3.9.2"]["topic"]["configs"].items() if flag == "deprecated"}
    assert topic == set(DEPRECATED_TOPIC_CONFIGS)
    # their broker defaults, and every broker config 3.9 calls deprecated, start a broker
    broker = {n for n, flag in kafka["3.9.2"]["broker"]["configs"].items() if flag == "deprecated"}
    for name in ("log.message.format.version", "log.message.timestamp.difference.max.ms"):
        assert name in BROKER_CONFIGS
    config, unknown = BrokerConfig.from_properties(dict.fromkeys(broker, "1"))
    assert set(unknown) == broker - set(BROKER_CONFIGS)  # logged in one warning line, not fatal


def test_no_broker_config_kafka_does_not_know(kafka: dict[str, dict[str, Any]]) -> None:
    # Kafka's dynamic-only broker configs (DynamicConfig.Broker: the replication throttles' rates)
    # are not in KafkaConfig's table but are broker configs it knows
    own = {n for n in BROKER_CONFIGS if not n.startswith("samsa.")} - SAMSA_ONLY
    assert own - _union(kafka, "broker", "configs") - _union(kafka, "dynamic", "names") == set()


def test_dynamic_broker_configs_are_dynamic_in_kafka(kafka: dict[str, dict[str, Any]]) -> None:
    assert DYNAMIC_CONFIGS - _union(kafka, "dynamic", "names") == set()
