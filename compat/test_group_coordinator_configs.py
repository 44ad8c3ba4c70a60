"""The group coordinator configs a broker refuses to start with, against Kafka 4.3.1's own
KafkaConfig (compat/jvm/harness/kafka/BrokerConfigCheck.java): each case breaks one `require(...)`
of Kafka's GroupCoordinatorConfig or ShareGroupConfig, and Samsa must refuse it with Kafka's
message (naming the same config: the first rule broken in Kafka's order); the settings the suites
and benchmarks start brokers with must be accepted by both. One JVM for every case (~2 s)."""

from __future__ import annotations

import pytest

from broker.config import BrokerConfig, ConfigError
from compat.bench.targets import BENCH_SETTINGS
from compat.jvm import run_main
from compat.kafka import COMMON_SETTINGS
from tests.integration.groups_support import BROKER_OVERRIDES


def _breaking(group: str) -> list[dict[str, str]]:
    """One case per rule of one group type, in Kafka's order, from the defaults (heartbeat 5 s in
    [5 s, 15 s], session 45 s in [45 s, 60 s], assignment interval 1 s in [0, 15 s])."""
    g = f"group.{group}"
    return [
        {f"{g}.min.heartbeat.interval.ms": "20000"},
        {f"{g}.min.heartbeat.interval.ms": "6000"},
        {f"{g}.heartbeat.interval.ms": "16000"},
        {f"{g}.min.session.timeout.ms": "70000"},
        {f"{g}.session.timeout.ms": "40000"},
        {f"{g}.session.timeout.ms": "70000"},
        {f"{g}.heartbeat.interval.ms": "15000", f"{g}.session.timeout.ms": "15000",
         f"{g}.min.session.timeout.ms": "15000"},
        {f"{g}.min.assignment.interval.ms": "20000"},
        {f"{g}.min.assignment.interval.ms": "2000"},
        {f"{g}.assignment.interval.ms": "20000"},
    ]


REFUSED: list[dict[str, str]] = [
    *_breaking("consumer"),
    *_breaking("share"),
    *_breaking("streams"),
    {"group.streams.num.standby.replicas": "3"},
    {"group.share.delivery.count.limit": "8", "group.share.max.delivery.count.limit": "6"},
    {"group.share.delivery.count.limit": "3", "group.share.min.delivery.count.limit": "4"},
    {"group.share.partition.max.record.locks": "5000"},
    {"group.share.partition.max.record.locks": "500", "group.share.min.partition.max.record.locks": "1000"},
    {"group.share.record.lock.duration.ms": "10000"},
    {"group.share.record.lock.duration.ms": "70000"},
    # two rules broken: the first in Kafka's order is named
    {"group.consumer.session.timeout.ms": "50", "group.share.heartbeat.interval.ms": "100"},
]


def _groups_only(settings: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in settings.items() if k.startswith(("group.consumer.", "group.share.", "group.streams."))}


ACCEPTED: list[dict[str, str]] = [
    {},
    _groups_only(COMMON_SETTINGS),
    _groups_only(BENCH_SETTINGS),
    _groups_only(BROKER_OVERRIDES),
    {"group.consumer.session.timeout.ms": "50", "group.consumer.min.session.timeout.ms": "50",
     "group.consumer.heartbeat.interval.ms": "10", "group.consumer.min.heartbeat.interval.ms": "10"},
    {"group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": "10000"},
]
CASES = REFUSED + ACCEPTED


def _samsa(case: dict[str, str]) -> str | None:
    try:
        BrokerConfig.from_properties(case)
    except ConfigError as e:
        return str(e)
    return None


@pytest.fixture(scope="module")
def kafka_errors() -> list[str | None]:
    lines = run_main("kafka", "BrokerConfigCheck",
                     *(";".join(f"{k}={v}" for k, v in case.items()) for case in CASES))
    return [line["error"] for line in lines if line["step"] == "case"]


def test_samsa_refuses_what_kafka_refuses_with_its_message(kafka_errors: list[str | None]) -> None:
    assert all(kafka_errors[: len(REFUSED)]), "each REFUSED case must break a rule of Kafka's"
    assert [_samsa(case) for case in CASES] == kafka_errors


def test_the_suites_broker_settings_are_accepted(kafka_errors: list[str | None]) -> None:
    assert kafka_errors[len(REFUSED):] == [None] * len(ACCEPTED)
