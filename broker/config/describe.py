"""DescribeConfigs answers: each config's value, source, synonyms (in Kafka's order), type and
documentation, for a broker, a topic and a group."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from broker.config.broker import (
    BROKER_CONFIGS,
    CONFIG_DEFS,
    INTERNAL_BROKER_CONFIGS,
    BrokerConfig,
    broker_synonyms,
)
from broker.config.group import GROUP_CONFIGS, group_defaults, parse_group_configs
from broker.config.topic import INTERNAL_TOPIC_CONFIGS, TOPIC_CONFIGS, parse_topic_configs
from broker.config.values import ConfigSource, render_value


class ConfigSynonym(NamedTuple):
    """One DescribeConfigs synonym: (name, value, source)."""

    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    """One DescribeConfigs result entry (v1-v4). `value` is None for passwords and unset
    configs; `source` is a ConfigSource; `config_type` a ConfigType."""

    name: str
    value: str | None
    read_only: bool
    source: int
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    config_type: int
    documentation: str

    @property
    def is_default(self) -> bool:
        """DescribeConfigs v0's is_default flag."""
        return self.source == ConfigSource.DEFAULT_CONFIG


def _broker_synonym_entries(config: BrokerConfig, name: str,
                            sensitive: bool) -> list[ConfigSynonym]:
    """Kafka's synonym list for broker config `name` (ConfigHelper.configSynonyms): the members of
    its synonym group set dynamically for this broker, then in the cluster-wide dynamic defaults,
    then in server.properties, then the members that have a default, with every entry before
    the first one for `name` itself dropped (so log.retention.ms lists nothing when only
    log.retention.hours is set or defaulted, exactly as Kafka reports it)."""
    group = [s.name for s in broker_synonyms(name)]
    entries: list[ConfigSynonym] = []
    for configs, source in ((config.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                            (config.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                            (config.overrides, ConfigSource.STATIC_BROKER_CONFIG)):
        for member in group:
            if member in configs:
                entries.append(ConfigSynonym(member, None if sensitive else configs[member], source))
    for member in group:
        default = CONFIG_DEFS[member].default_string
        if default is not None:
            entries.append(ConfigSynonym(member, None if sensitive else default,
                                         ConfigSource.DEFAULT_CONFIG))
    while entries and entries[0].name != name:
        entries.pop(0)
    return entries


def describe_broker_configs(config: BrokerConfig, *, cluster_default: bool = False) -> list[DescribedConfig]:
    """DescribeConfigs entries for the broker resource, sorted by name.

    Each config shows its own value (log.retention.ms is None when only log.retention.hours
    applies, as in Kafka); the source is that of its first synonym. `cluster_default`: the
    resource "" (Kafka's ConfigHelper): only the configs set in the cluster-wide dynamic
    defaults, without this broker's own dynamic configs among the synonyms."""
    out: list[DescribedConfig] = []
    for name in sorted(BROKER_CONFIGS):
        d = BROKER_CONFIGS[name]
        if cluster_default and name not in config.dynamic_default:
            continue
        if name in INTERNAL_BROKER_CONFIGS and name not in config.overrides:
            continue  # Kafka describes an internal config only where it is set (ConfigHelperUtils)
        synonyms = _broker_synonym_entries(config, name, d.is_sensitive)
        if cluster_default:
            synonyms = [s for s in synonyms if s.source != ConfigSource.DYNAMIC_BROKER_CONFIG]
        if d.is_sensitive:
            value = None
        elif cluster_default:
            value = render_value(d.type, d.parse(config.dynamic_default[name]))
        else:
            value = render_value(d.type, config.values[name])
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append(DescribedConfig(name, value, d.read_only, int(source), d.is_sensitive,
                                   tuple(synonyms), int(d.type), d.doc))
    return out


def describe_topic_configs(defaults: BrokerConfig,
                           overrides: Mapping[str, str]) -> list[DescribedConfig]:
    """DescribeConfigs entries for a topic with the given overrides, sorted by name.

    Synonyms in Kafka's order: the topic's own setting (DYNAMIC_TOPIC_CONFIG), then the broker
    synonyms set in server.properties (STATIC_BROKER_CONFIG), then their defaults
    (DEFAULT_CONFIG); the source is that of the first synonym. Raises KafkaError
    (invalid_config) if an override is not a valid topic config."""
    typed = {**defaults.topic_defaults(), **parse_topic_configs(overrides, allow_null=True)}
    out: list[DescribedConfig] = []
    for name in sorted(TOPIC_CONFIGS):
        if name in INTERNAL_TOPIC_CONFIGS and overrides.get(name) is None:
            continue  # Kafka describes an internal config only where it is set
        d = TOPIC_CONFIGS[name]
        value = None if d.is_sensitive else render_value(d.type, typed[name])
        synonyms: list[ConfigSynonym] = []
        if overrides.get(name) is not None:
            synonyms.append(ConfigSynonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        synonyms += _broker_synonym_entries(defaults, d.synonyms[0].name, d.is_sensitive)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append(DescribedConfig(name, value, False, int(source), d.is_sensitive,
                                   tuple(synonyms), int(d.type), d.doc))
    return out


def describe_group_configs(config: BrokerConfig, overrides: Mapping[str, str]) -> list[DescribedConfig]:
    """DescribeConfigs entries for a group (Kafka's ConfigHelper.createGroupConfigEntry), sorted by
    name: every group config, its value the group's own setting, else the broker synonym's value
    (GroupCoordinatorConfig.extractGroupConfigMap) or Kafka's default; synonyms the group's own
    setting (GROUP_CONFIG), then the broker synonym's as for a broker config, or the group
    config's default (DEFAULT_CONFIG) where it has no broker synonym; read_only false."""
    shown = {**group_defaults(config.values), **parse_group_configs(overrides)}
    out: list[DescribedConfig] = []
    for name in sorted(GROUP_CONFIGS):
        d = GROUP_CONFIGS[name]
        value = render_value(d.type, shown[name])
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, value, ConfigSource.GROUP_CONFIG))
        if d.synonyms:
            synonyms += _broker_synonym_entries(config, d.synonyms[0].name, False)
        else:
            synonyms.append(ConfigSynonym(name, d.default_string, ConfigSource.DEFAULT_CONFIG))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append(DescribedConfig(name, value, False, int(source), False, tuple(synonyms), int(d.type), d.doc))
    return out
