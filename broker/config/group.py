"""Group configs (KIP-848, KIP-932): per-group overrides on a GROUP config resource, declared here
with Kafka 4.3.1's names, types, defaults and validation (its GroupConfig), and the broker configs
that are their defaults and bounds (its GroupCoordinatorConfig and ShareGroupConfig).

A group config falls back to its broker synonym (`consumer.heartbeat.interval.ms` <-
`group.consumer.heartbeat.interval.ms`). IncrementalAlterConfigs / AlterConfigs on a group check
the group's whole set with the broker defaults merged in (`validate_group_configs`, Kafka's
GroupConfig.validate): the names, each value's type and range, the broker's min/max bounds, and
session timeout > heartbeat interval. Where a group config is used, its value is clamped to the
broker's current bounds (`clamp`, Kafka's GroupConfig.evaluate), since the bounds may have
changed since it was set. broker/coordinator/group_configs.py is the lookup the coordinator reads.

The consumer.* configs are read by the consumer-protocol coordinator, the share.* configs by the
share group coordinator and the share partition leaders (broker/coordinator/group_configs.py says
where), except share.renew.acknowledge.enable; streams.* are stored, validated and described as
Kafka does, but Samsa serves no streams groups, so nothing reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from broker.config.security import SecurityConfig
from broker.config.settings import BOOLEAN, INT, STRING, ConfigDef, Range, at_least, setting, syn
from broker.config.values import AutoOffsetReset, ConfigError, ConfigType, OneOf, Validator
from protocol.errors import ErrorCode, KafkaError

NOT_SERVED = ("Accepted for compatibility; Samsa serves no {kind} groups yet, so this only "
              "{role} (DescribeConfigs, IncrementalAlterConfigs on a GROUP resource) and changes "
              "nothing else (Kafka: {kafka}).")


def _share(role: str, what: str) -> str:
    """A share group config's broker default's or bound's description (it has an effect)."""
    text = role.removeprefix("is ")
    return f"{text[0].upper()}{text[1:]} ({what})."


def _streams(role: str, kafka: str) -> str:
    return NOT_SERVED.format(kind="streams", role=role, kafka=kafka)


_DEFAULT_OF = "is the default of the group config {}"
_BOUND_OF = "bounds the group config {}"


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCoordinatorSettings(SecurityConfig):
    """The group coordinator's broker configs that bound or default the group configs (a part
    of `BrokerConfig`, like SecurityConfig; group.consumer.session.timeout.ms and the other
    consumer-group configs that existed before are declared in broker.py)."""

    group_consumer_min_session_timeout_ms: int = setting(INT, 45_000,
        "The smallest consumer.session.timeout.ms a group config may set; a stored value below "
        "it is raised to it where it is used.", at_least(1))
    group_consumer_max_session_timeout_ms: int = setting(INT, 60_000,
        "The largest consumer.session.timeout.ms a group config may set; a stored value above it "
        "is lowered to it where it is used.", at_least(1))
    group_consumer_min_heartbeat_interval_ms: int = setting(INT, 5_000,
        "The smallest consumer.heartbeat.interval.ms a group config may set (clamped where used).",
        at_least(1))
    group_consumer_max_heartbeat_interval_ms: int = setting(INT, 15_000,
        "The largest consumer.heartbeat.interval.ms a group config may set (clamped where used).",
        at_least(1))
    group_consumer_min_assignment_interval_ms: int = setting(INT, 0,
        "The smallest consumer.assignment.interval.ms a group config may set (clamped where used).",
        at_least(0))
    group_consumer_max_assignment_interval_ms: int = setting(INT, 15_000,
        "The largest consumer.assignment.interval.ms a group config may set (clamped where used).",
        at_least(0))
    # ---- share groups (KIP-932): defaults and bounds of the share.* group configs ----------------
    group_share_session_timeout_ms: int = setting(INT, 45_000, _share(
        _DEFAULT_OF.format("share.session.timeout.ms"), "a share member's session timeout"), at_least(1))
    group_share_min_session_timeout_ms: int = setting(INT, 45_000, _share(
        _BOUND_OF.format("share.session.timeout.ms"), "the smallest share session timeout"), at_least(1))
    group_share_max_session_timeout_ms: int = setting(INT, 60_000, _share(
        _BOUND_OF.format("share.session.timeout.ms"), "the largest share session timeout"), at_least(1))
    group_share_heartbeat_interval_ms: int = setting(INT, 5_000, _share(
        _DEFAULT_OF.format("share.heartbeat.interval.ms"), "a share member's heartbeat interval"), at_least(1))
    group_share_min_heartbeat_interval_ms: int = setting(INT, 5_000, _share(
        _BOUND_OF.format("share.heartbeat.interval.ms"), "the smallest share heartbeat interval"), at_least(1))
    group_share_max_heartbeat_interval_ms: int = setting(INT, 15_000, _share(
        _BOUND_OF.format("share.heartbeat.interval.ms"), "the largest share heartbeat interval"), at_least(1))
    group_share_assignment_interval_ms: int = setting(INT, 1_000, _share(
        _DEFAULT_OF.format("share.assignment.interval.ms"), "how often a share group's assignment "
        "is computed"), at_least(0))
    group_share_min_assignment_interval_ms: int = setting(INT, 0, _share(
        _BOUND_OF.format("share.assignment.interval.ms"), "the smallest share assignment interval"), at_least(0))
    group_share_max_assignment_interval_ms: int = setting(INT, 15_000, _share(
        _BOUND_OF.format("share.assignment.interval.ms"), "the largest share assignment interval"), at_least(0))
    group_share_record_lock_duration_ms: int = setting(INT, 30_000, _share(
        _DEFAULT_OF.format("share.record.lock.duration.ms"), "how long a share consumer holds "
        "the records it acquired"), Range(1_000, 3_600_000))
    group_share_min_record_lock_duration_ms: int = setting(INT, 15_000, _share(
        _BOUND_OF.format("share.record.lock.duration.ms"), "the smallest record lock duration"),
        Range(1_000, 30_000))
    group_share_max_record_lock_duration_ms: int = setting(INT, 60_000, _share(
        _BOUND_OF.format("share.record.lock.duration.ms"), "the largest record lock duration"),
        Range(30_000, 3_600_000))
    group_share_delivery_count_limit: int = setting(INT, 5, _share(
        _DEFAULT_OF.format("share.delivery.count.limit"), "how often a record is delivered before "
        "it is archived"), Range(2, 10))
    group_share_min_delivery_count_limit: int = setting(INT, 2, _share(
        _BOUND_OF.format("share.delivery.count.limit"), "the smallest delivery count limit"), Range(2, 5))
    group_share_max_delivery_count_limit: int = setting(INT, 10, _share(
        _BOUND_OF.format("share.delivery.count.limit"), "the largest delivery count limit"), Range(5, 25))
    group_share_partition_max_record_locks: int = setting(INT, 2_000, _share(
        _DEFAULT_OF.format("share.partition.max.record.locks"), "the most records of a share "
        "partition acquired at once"), Range(100, 10_000))
    group_share_min_partition_max_record_locks: int = setting(INT, 100, _share(
        _BOUND_OF.format("share.partition.max.record.locks"), "the smallest such limit"), Range(100, 2_000))
    group_share_max_partition_max_record_locks: int = setting(INT, 4_000, _share(
        _BOUND_OF.format("share.partition.max.record.locks"), "the largest such limit"), Range(2_000, 10_000))
    group_share_max_size: int = setting(INT, 200,
        "Most members a share group may have; a member joining a full group gets "
        "GROUP_MAX_SIZE_REACHED.", Range(1, 1_000))
    # ---- streams groups (KIP-1071): defaults and bounds of the streams.* group configs ------------
    group_streams_session_timeout_ms: int = setting(INT, 45_000, _streams(
        _DEFAULT_OF.format("streams.session.timeout.ms"), "a streams member's session timeout"), at_least(1))
    group_streams_min_session_timeout_ms: int = setting(INT, 45_000, _streams(
        _BOUND_OF.format("streams.session.timeout.ms"), "the smallest streams session timeout"), at_least(1))
    group_streams_max_session_timeout_ms: int = setting(INT, 60_000, _streams(
        _BOUND_OF.format("streams.session.timeout.ms"), "the largest streams session timeout"), at_least(1))
    group_streams_heartbeat_interval_ms: int = setting(INT, 5_000, _streams(
        _DEFAULT_OF.format("streams.heartbeat.interval.ms"), "a streams member's heartbeat interval"),
        at_least(1))
    group_streams_min_heartbeat_interval_ms: int = setting(INT, 5_000, _streams(
        _BOUND_OF.format("streams.heartbeat.interval.ms"), "the smallest streams heartbeat interval"),
        at_least(1))
    group_streams_max_heartbeat_interval_ms: int = setting(INT, 15_000, _streams(
        _BOUND_OF.format("streams.heartbeat.interval.ms"), "the largest streams heartbeat interval"),
        at_least(1))
    group_streams_num_standby_replicas: int = setting(INT, 0, _streams(
        _DEFAULT_OF.format("streams.num.standby.replicas"), "standby replicas per task"), at_least(0))
    group_streams_max_standby_replicas: int = setting(INT, 2, _streams(
        _BOUND_OF.format("streams.num.standby.replicas"), "the most standby replicas per task"), at_least(0))
    group_streams_initial_rebalance_delay_ms: int = setting(INT, 3_000, _streams(
        _DEFAULT_OF.format("streams.initial.rebalance.delay.ms"), "how long a new streams group "
        "waits before its first assignment"), at_least(0))
    group_streams_assignment_interval_ms: int = setting(INT, 1_000, _streams(
        _DEFAULT_OF.format("streams.assignment.interval.ms"), "how often a streams group's "
        "assignment is computed"), at_least(0))
    group_streams_min_assignment_interval_ms: int = setting(INT, 0, _streams(
        _BOUND_OF.format("streams.assignment.interval.ms"), "the smallest streams assignment interval"),
        at_least(0))
    group_streams_max_assignment_interval_ms: int = setting(INT, 15_000, _streams(
        _BOUND_OF.format("streams.assignment.interval.ms"), "the largest streams assignment interval"),
        at_least(0))


class GroupConfigSpec(NamedTuple):
    """What Kafka's GroupConfig says of one group config beyond its ConfigDef: the broker
    configs bounding it (min, max; None where there is none), and whether its default is the
    broker synonym's current value (GroupCoordinatorConfig.extractGroupConfigMap) or the
    declared default."""

    bounds: tuple[str | None, str | None]
    broker_default: bool


def _group(name: str, ctype: ConfigType, default: object, doc: str, validator: Validator | None,
           synonym: str | None) -> ConfigDef:
    return ConfigDef(name, ctype, default, doc, validator, read_only=False,
                     synonyms=syn(synonym) if synonym else ())


_CONSUMER = "A member of a consumer-protocol (KIP-848) group"
GROUP_CONFIG_DEFS: tuple[ConfigDef, ...] = (
    _group("consumer.session.timeout.ms", INT, 45_000,
           f"{_CONSUMER} is fenced when it sends no heartbeat for this long (this group's "
           "group.consumer.session.timeout.ms).", at_least(1), "group.consumer.session.timeout.ms"),
    _group("consumer.heartbeat.interval.ms", INT, 5_000,
           f"{_CONSUMER} is told to heartbeat this often (this group's "
           "group.consumer.heartbeat.interval.ms).", at_least(1), "group.consumer.heartbeat.interval.ms"),
    _group("consumer.assignment.interval.ms", INT, 1_000,
           "The group's target assignment is computed again at most this often (this group's "
           "group.consumer.assignment.interval.ms).", at_least(0), "group.consumer.assignment.interval.ms"),
    _group("share.session.timeout.ms", INT, 45_000, "A share group member is fenced when it sends no "
           "heartbeat for this long (this group's group.share.session.timeout.ms).",
           at_least(1), "group.share.session.timeout.ms"),
    _group("share.heartbeat.interval.ms", INT, 5_000, "A share group member is told to heartbeat this often "
           "(this group's group.share.heartbeat.interval.ms).", at_least(1), "group.share.heartbeat.interval.ms"),
    _group("share.record.lock.duration.ms", INT, 30_000, "How long records a share consumer acquired stay "
           "locked to it before they are delivered again or archived (this group's "
           "group.share.record.lock.duration.ms).", at_least(1_000), "group.share.record.lock.duration.ms"),
    _group("share.delivery.count.limit", INT, 5, "How many times a record is delivered before it is archived "
           "(this group's group.share.delivery.count.limit).", at_least(2), "group.share.delivery.count.limit"),
    _group("share.partition.max.record.locks", INT, 2_000, "The most in-flight records of one share "
           "partition: no more are acquired while it has as many (this group's "
           "group.share.partition.max.record.locks).", at_least(100), "group.share.partition.max.record.locks"),
    _group("share.auto.offset.reset", STRING, "latest", "Where a share partition starts when first used: "
           "earliest (the log start offset), latest (the high watermark) or by_duration:<ISO-8601 duration> "
           "(the first record at most that old, else the high watermark).", AutoOffsetReset(), None),
    _group("share.isolation.level", STRING, "read_uncommitted", "read_committed: share partitions are read up "
           "to the last stable offset, and records of aborted transactions are archived, never delivered; "
           "read_uncommitted: up to the high watermark.", OneOf(("read_committed", "read_uncommitted")), None),
    _group("share.renew.acknowledge.enable", BOOLEAN, True, "Accepted for compatibility; Samsa always accepts "
           "RENEW acknowledgements, so this only is stored (DescribeConfigs, IncrementalAlterConfigs on a GROUP "
           "resource) and changes nothing else (Kafka: whether the renew acknowledge type is enabled).",
           None, None),
    _group("share.assignment.interval.ms", INT, 1_000, "The share group's target assignment is computed again "
           "at most this often (this group's group.share.assignment.interval.ms).", at_least(0),
           "group.share.assignment.interval.ms"),
    _group("streams.session.timeout.ms", INT, 45_000, _streams("is stored", "a streams member's session "
           "timeout"), at_least(1), "group.streams.session.timeout.ms"),
    _group("streams.heartbeat.interval.ms", INT, 5_000, _streams("is stored", "a streams member's heartbeat "
           "interval"), at_least(1), "group.streams.heartbeat.interval.ms"),
    _group("streams.num.standby.replicas", INT, 0, _streams("is stored", "standby replicas per task"),
           at_least(0), "group.streams.num.standby.replicas"),
    _group("streams.initial.rebalance.delay.ms", INT, 3_000, _streams("is stored", "the delay before a new "
           "streams group's first assignment"), at_least(0), "group.streams.initial.rebalance.delay.ms"),
    _group("streams.assignment.interval.ms", INT, 1_000, _streams("is stored", "how often a streams group's "
           "assignment is computed"), at_least(0), "group.streams.assignment.interval.ms"),
)
GROUP_CONFIGS: Mapping[str, ConfigDef] = MappingProxyType({d.name: d for d in GROUP_CONFIG_DEFS})
"""Every group config by name, in Kafka's GroupConfig order."""


def _bounded(prefix: str, kind: str) -> GroupConfigSpec:
    return GroupConfigSpec((f"group.{prefix}.min.{kind}", f"group.{prefix}.max.{kind}"), True)


GROUP_CONFIG_SPECS: Mapping[str, GroupConfigSpec] = MappingProxyType({
    "consumer.heartbeat.interval.ms": _bounded("consumer", "heartbeat.interval.ms"),
    "consumer.session.timeout.ms": _bounded("consumer", "session.timeout.ms"),
    "consumer.assignment.interval.ms": _bounded("consumer", "assignment.interval.ms")._replace(broker_default=False),
    "share.heartbeat.interval.ms": _bounded("share", "heartbeat.interval.ms"),
    "share.session.timeout.ms": _bounded("share", "session.timeout.ms"),
    "share.record.lock.duration.ms": _bounded("share", "record.lock.duration.ms"),
    "share.delivery.count.limit": _bounded("share", "delivery.count.limit"),
    "share.partition.max.record.locks": _bounded("share", "partition.max.record.locks"),
    "share.auto.offset.reset": GroupConfigSpec((None, None), False),
    "share.isolation.level": GroupConfigSpec((None, None), False),
    "share.renew.acknowledge.enable": GroupConfigSpec((None, None), False),
    "share.assignment.interval.ms": _bounded("share", "assignment.interval.ms")._replace(broker_default=False),
    "streams.heartbeat.interval.ms": _bounded("streams", "heartbeat.interval.ms"),
    "streams.session.timeout.ms": _bounded("streams", "session.timeout.ms"),
    "streams.num.standby.replicas": GroupConfigSpec((None, "group.streams.max.standby.replicas"), True),
    "streams.initial.rebalance.delay.ms": GroupConfigSpec((None, None), True),
    "streams.assignment.interval.ms": _bounded("streams", "assignment.interval.ms")._replace(broker_default=False),
})
"""Bounds and default kind of each group config (Kafka's GroupConfig.validateValues/evaluate)."""

_SESSION_OVER_HEARTBEAT = tuple((f"{g}.session.timeout.ms", f"{g}.heartbeat.interval.ms")
                                for g in ("consumer", "share", "streams"))


def group_defaults(values: Mapping[str, object]) -> dict[str, object]:
    """Each group config's value for a group without overrides, from the broker's typed config
    values (`BrokerConfig.values`): the broker synonym's value where Kafka takes it
    (extractGroupConfigMap), else the declared default."""
    return {name: values[d.synonyms[0].name] if GROUP_CONFIG_SPECS[name].broker_default else d.default
            for name, d in GROUP_CONFIGS.items()}


def parse_group_configs(configs: Mapping[str, str]) -> dict[str, object]:
    """Typed values of a group's overrides; KafkaError(INVALID_CONFIG) for an unknown name or a
    value of the wrong type or range, with Kafka's message."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown group config name: {name}")
    typed: dict[str, object] = {}
    for name, raw in configs.items():
        try:
            typed[name] = GROUP_CONFIGS[name].parse(raw)
        except ConfigError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from None
    return typed


def validate_group_configs(configs: Mapping[str, str], values: Mapping[str, object]) -> None:
    """Kafka's GroupConfig.validate: `configs` (a group's whole set of overrides) merged over the
    broker defaults, each value within the broker's bounds and every session timeout above its
    heartbeat interval; the assignment intervals are checked only when set. Raises
    KafkaError(INVALID_CONFIG) with Kafka's message."""
    merged = {**group_defaults(values), **parse_group_configs(configs)}
    for name, spec in GROUP_CONFIG_SPECS.items():
        if name.endswith("assignment.interval.ms") and name not in configs:
            continue
        low, high = spec.bounds
        value = merged[name]
        if low is not None and _int(value) < _int(values[low]):
            raise KafkaError(ErrorCode.invalid_config, f"{name} must be greater than or equal to {low}")
        if high is not None and _int(value) > _int(values[high]):
            raise KafkaError(ErrorCode.invalid_config, f"{name} must be less than or equal to {high}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if _int(merged[session]) <= _int(merged[heartbeat]):
            raise KafkaError(ErrorCode.invalid_config, f"{session} must be greater than {heartbeat}")


def clamp(name: str, value: int, values: Mapping[str, object]) -> int:
    """A group config's value within the broker's current bounds (Kafka's GroupConfig.evaluate)."""
    low, high = GROUP_CONFIG_SPECS[name].bounds
    if low is not None:
        value = max(value, _int(values[low]))
    if high is not None:
        value = min(value, _int(values[high]))
    return value


_RELATIONS = {">=": "must be greater than or equal to", "<=": "must be less than or equal to",
              "<": "must be less than"}


def _within_bounds(group: str, kind: str) -> tuple[tuple[str, str, str], ...]:
    """A config between its min and max, and the min not above the max (Kafka's order)."""
    value, low, high = f"group.{group}.{kind}", f"group.{group}.min.{kind}", f"group.{group}.max.{kind}"
    return (high, ">=", low), (value, ">=", low), (value, "<=", high)


def _coordinator_rules() -> tuple[tuple[str, str, str], ...]:
    rules: list[tuple[str, str, str]] = []
    for group in ("consumer", "share", "streams"):
        rules += _within_bounds(group, "heartbeat.interval.ms")
        rules += _within_bounds(group, "session.timeout.ms")
        rules.append((f"group.{group}.heartbeat.interval.ms", "<", f"group.{group}.session.timeout.ms"))
        rules += _within_bounds(group, "assignment.interval.ms")
    rules.append(("group.streams.num.standby.replicas", "<=", "group.streams.max.standby.replicas"))
    return tuple(rules)


STARTUP_RULES: tuple[tuple[str, str, str], ...] = (
    *_coordinator_rules(),
    ("group.share.max.delivery.count.limit", ">=", "group.share.delivery.count.limit"),
    ("group.share.delivery.count.limit", ">=", "group.share.min.delivery.count.limit"),
    ("group.share.max.partition.max.record.locks", ">=", "group.share.partition.max.record.locks"),
    ("group.share.partition.max.record.locks", ">=", "group.share.min.partition.max.record.locks"),
    ("group.share.record.lock.duration.ms", ">=", "group.share.min.record.lock.duration.ms"),
    ("group.share.max.record.lock.duration.ms", ">=", "group.share.record.lock.duration.ms"),
)
"""(config, relation, config) that must hold for a broker to start: the `require(...)` checks of
Kafka 4.3.1's GroupCoordinatorConfig then ShareGroupConfig constructors, in their order, over
the configs Samsa declares (not group.share.assignors nor group.share.max.share.sessions)."""


def check_group_coordinator_configs(values: Mapping[str, object]) -> None:
    """Refuse a broker config whose group coordinator configs contradict each other, as Kafka
    refuses to start: ConfigError naming the first config of the first rule broken, with
    Kafka's message (`group.consumer.session.timeout.ms must be greater than or equal to
    group.consumer.min.session.timeout.ms`)."""
    for name, relation, other in STARTUP_RULES:
        left, right = _int(values[name]), _int(values[other])
        holds = left >= right if relation == ">=" else left <= right if relation == "<=" else left < right
        if not holds:
            raise ConfigError(f"{name} {_RELATIONS[relation]} {other}", name)


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value
