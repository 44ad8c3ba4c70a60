"""Group configs (broker/config/group.py): Kafka 4.3.1's validation and messages
(GroupConfig.validate), DescribeConfigs entries (ConfigHelper.createGroupConfigEntry) and the
coordinator's lookup (broker/coordinator/group_configs.py, GroupConfig.evaluate's clamping)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from broker.config import BrokerConfig, ConfigSource, describe_group_configs
from broker.config.group import GROUP_CONFIG_SPECS, GROUP_CONFIGS, clamp, validate_group_configs
from broker.config.values import duration_ms
from broker.coordinator.group_configs import GroupConfigs
from controller.model import ClusterImage
from protocol.errors import ErrorCode, KafkaError
from protocol.types import BrokerId, ControllerEpoch

DEFAULTS, _ = BrokerConfig.from_properties({})


def _error(configs: dict[str, str], broker: BrokerConfig = DEFAULTS) -> tuple[ErrorCode, str]:
    with pytest.raises(KafkaError) as info:
        validate_group_configs(configs, broker.values)
    return info.value.code, info.value.message


def test_names_and_specs_are_kafkas() -> None:
    assert list(GROUP_CONFIGS) == [
        "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms",
        "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
        "share.delivery.count.limit", "share.partition.max.record.locks", "share.auto.offset.reset",
        "share.isolation.level", "share.renew.acknowledge.enable", "share.assignment.interval.ms",
        "streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
        "streams.initial.rebalance.delay.ms", "streams.assignment.interval.ms",
    ]
    assert set(GROUP_CONFIG_SPECS) == set(GROUP_CONFIGS)
    for name, d in GROUP_CONFIGS.items():
        for broker_config in [s.name for s in d.synonyms] + [b for b in GROUP_CONFIG_SPECS[name].bounds if b]:
            assert broker_config in DEFAULTS.values, (name, broker_config)
        if d.synonyms:  # the group config's default is its broker synonym's
            assert DEFAULTS.values[d.synonyms[0].name] == d.default, name


@pytest.mark.parametrize(("configs", "message"), [
    ({"consumer.heartbeat.interval.ms": "6000", "nope": "1"}, "Unknown group config name: nope"),
    ({"consumer.heartbeat.interval.ms": "x"},
     "Invalid value x for configuration consumer.heartbeat.interval.ms: Not a number of type INT"),
    ({"consumer.heartbeat.interval.ms": "0"},
     "Invalid value 0 for configuration consumer.heartbeat.interval.ms: Value must be at least 1"),
    ({"consumer.heartbeat.interval.ms": "4999"},
     "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ({"consumer.heartbeat.interval.ms": "15001"},
     "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ({"consumer.session.timeout.ms": "60001"},
     "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"consumer.assignment.interval.ms": "15001"},
     "consumer.assignment.interval.ms must be less than or equal to group.consumer.max.assignment.interval.ms"),
    ({"share.record.lock.duration.ms": "14999"},
     "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"share.delivery.count.limit": "11"},
     "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"),
    ({"streams.num.standby.replicas": "3"},
     "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
    ({"share.isolation.level": "READ_COMMITTED"},
     "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be one of: "
     "read_committed, read_uncommitted"),
    ({"share.auto.offset.reset": "by_duration:-PT1H"},
     "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: Invalid value "
     "`by_duration:-PT1H` for configuration share.auto.offset.reset. The value must be either 'earliest', "
     "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."),
    ({"share.renew.acknowledge.enable": "yes"},
     "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value to be either true or false"),
])  # fmt: skip
def test_invalid_configs_get_kafkas_messages(configs: dict[str, str], message: str) -> None:
    assert _error(configs) == (ErrorCode.invalid_config, message)


def test_valid_configs_and_the_session_over_heartbeat_rule() -> None:
    for configs in ({}, {"consumer.heartbeat.interval.ms": "15000", "consumer.session.timeout.ms": "45000"},
                    {"share.auto.offset.reset": "by_duration:P1DT2H3M4.5S"}, {"share.auto.offset.reset": "EARLIEST"},
                    {"share.isolation.level": "read_committed", "share.renew.acknowledge.enable": "false"},
                    {"consumer.assignment.interval.ms": "0"}):
        validate_group_configs(configs, DEFAULTS.values)
    wide, _ = BrokerConfig.from_properties({"group.consumer.max.heartbeat.interval.ms": "60000"})
    assert _error({"consumer.heartbeat.interval.ms": "45000"}, wide) == (
        ErrorCode.invalid_config, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
    # the assignment intervals are checked only when the group sets them (Kafka's KAFKA-20337 note)
    narrow, _ = BrokerConfig.from_properties({"group.consumer.max.assignment.interval.ms": "500",
                                              "group.consumer.assignment.interval.ms": "500"})
    validate_group_configs({}, narrow.values)


def test_describe_entries() -> None:
    broker, _ = BrokerConfig.from_properties({"group.consumer.session.timeout.ms": "50000"})
    entries = {e.name: e for e in describe_group_configs(broker, {"consumer.heartbeat.interval.ms": "6000"})}
    assert list(entries) == sorted(GROUP_CONFIGS)
    hb = entries["consumer.heartbeat.interval.ms"]
    assert (hb.value, hb.source, hb.read_only) == ("6000", ConfigSource.GROUP_CONFIG, False)
    assert [(s.name, s.value, s.source) for s in hb.synonyms] == [
        ("consumer.heartbeat.interval.ms", "6000", ConfigSource.GROUP_CONFIG),
        ("group.consumer.heartbeat.interval.ms", "5000", ConfigSource.DEFAULT_CONFIG)]
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.source) == ("50000", ConfigSource.STATIC_BROKER_CONFIG)
    assert [(s.name, s.source) for s in session.synonyms] == [
        ("group.consumer.session.timeout.ms", ConfigSource.STATIC_BROKER_CONFIG),
        ("group.consumer.session.timeout.ms", ConfigSource.DEFAULT_CONFIG)]
    level = entries["share.isolation.level"]
    assert (level.value, level.source, [(s.name, s.value) for s in level.synonyms]) == (
        "read_uncommitted", ConfigSource.DEFAULT_CONFIG, [("share.isolation.level", "read_uncommitted")])
    assert entries["share.renew.acknowledge.enable"].value == "true"


def test_lookup_clamps_to_the_current_bounds_and_follows_the_image() -> None:
    def image(groups: dict[str, dict[str, str]]) -> ClusterImage:
        return ClusterImage("c", BrokerId(0), ControllerEpoch(1), MappingProxyType({}), MappingProxyType({}),
                            group_configs=MappingProxyType({g: MappingProxyType(c) for g, c in groups.items()}))

    current = image({"g": {"consumer.heartbeat.interval.ms": "12000", "consumer.session.timeout.ms": "bad"}})
    broker, _ = BrokerConfig.from_properties({"group.consumer.max.heartbeat.interval.ms": "10000",
                                              "group.consumer.assignment.interval.ms": "250"})
    lookup = GroupConfigs(broker, lambda: current)
    assert lookup.int_value("g", "consumer.heartbeat.interval.ms") == 10_000  # stored above today's maximum
    assert lookup.int_value("g", "consumer.session.timeout.ms") == 45_000  # unparseable: the broker's value
    assert lookup.int_value("g", "consumer.assignment.interval.ms") == 250  # unset: the broker config, as Kafka
    assert lookup.int_value("other", "consumer.heartbeat.interval.ms") == 5_000
    assert lookup.value("g", "share.auto.offset.reset") == "latest"
    current = image({"g": {"consumer.heartbeat.interval.ms": "7000"}})
    assert lookup.int_value("g", "consumer.heartbeat.interval.ms") == 7_000
    assert clamp("streams.num.standby.replicas", 5, DEFAULTS.values) == 2


def test_share_settings_from_group_configs_and_broker_defaults() -> None:
    stored = {"g": MappingProxyType({"share.record.lock.duration.ms": "50000", "share.delivery.count.limit": "3",
                                     "share.isolation.level": "read_committed",
                                     "share.auto.offset.reset": "by_duration:PT1M30S",
                                     "share.heartbeat.interval.ms": "9000"})}  # fmt: skip
    current = ClusterImage("c", BrokerId(0), ControllerEpoch(1), MappingProxyType({}), MappingProxyType({}),
                           group_configs=MappingProxyType(stored))
    broker, _ = BrokerConfig.from_properties({"group.share.max.record.lock.duration.ms": "40000",
                                              "group.share.partition.max.record.locks": "500",
                                              "group.share.session.timeout.ms": "50000"})  # fmt: skip
    lookup = GroupConfigs(broker, lambda: current)
    own, other = lookup.share_partition_settings("g"), lookup.share_partition_settings("other")
    assert (own.record_lock_duration_ms, own.delivery_count_limit, own.max_in_flight_records) == (40_000, 3, 500)
    assert (own.read_committed, own.auto_offset_reset) == (True, "by_duration:PT1M30S")
    assert (other.record_lock_duration_ms, other.delivery_count_limit, other.read_committed) == (30_000, 5, False)
    assert other.auto_offset_reset == "latest"
    group = lookup.share_group_settings("g")
    assert (group.heartbeat_interval_ms, group.session_timeout_ms, group.assignment_interval_ms) == (9_000, 50_000, 1_000)
    assert duration_ms("PT1M30S") == 90_000 and duration_ms("P1DT0.5S") == 86_400_500
