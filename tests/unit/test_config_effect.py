"""Every config in broker/config.py's table has an effect, or says it has none.

A config that is accepted and described by DescribeConfigs but does nothing is a stub advertised
as a feature. So for every broker config one of these must hold:

- its BrokerConfig attribute (`log.cleaner.threads` -> `config.log_cleaner_threads`) is read
  from a config object, or its name is passed to a config's method
  (`config.effective("log.cleaner.io.buffer.size")`), in broker/ or controller/ code outside
  broker/config.py and the test harness;
- it is folded by config.py into another BrokerConfig attribute that is read (`node.id` ->
  `broker_id`; see FOLDED);
- it is the broker default of a topic config that has an effect (`log.retention.hours` ->
  `retention.ms`);
- it is the broker default or a bound of a group config that has an effect
  (`group.consumer.min.heartbeat.interval.ms` -> `consumer.heartbeat.interval.ms`);
- its description starts with "Accepted for compatibility; " and says what Samsa does instead.

And for every topic config: its `LogConfig` field is read from a config object in broker/ or
controller/ code (the properties of LogConfig itself count), or its description starts the same
way. And for every group config (broker/config/group.py): its name is passed to a config's method
(`group_configs.int_value(group_id, "consumer.heartbeat.interval.ms")`, or `self.int_value(...)`
inside GroupConfigs, whose share-group settings gather the share.* ones), or its description
starts the same way; not both.

Code is read with `ast`: comments, docstrings and unrelated attributes of the same name do not
count as a use.
"""

from __future__ import annotations

import ast
import dataclasses
from functools import cache
from pathlib import Path

import pytest

from broker.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, ConfigDef, LogConfig
from broker.config.group import GROUP_CONFIG_SPECS, GROUP_CONFIGS

ROOT = Path(__file__).resolve().parents[2]
CONFIG_PACKAGE = ROOT / "broker" / "config"
LOG_CONFIG_MODULE = CONFIG_PACKAGE / "topic.py"
"""LogConfig's home: its properties (`compact`, `log_append_time`) read the fields."""
GROUP_CONFIGS_MODULE = ROOT / "broker" / "coordinator" / "group_configs.py"
"""GroupConfigs' home: its methods ask `self.int_value("share.delivery.count.limit")`."""
HARNESS = ROOT / "broker" / "testing"
NO_EFFECT = "Accepted for compatibility; "

FOLDED = {
    "node.id": "broker_id",
    "log.dir": "log_dirs",
    "offsets.retention.minutes": "offsets_retention_ms",
    "listener.security.protocol.map": "listeners",
    "security.inter.broker.protocol": "inter_broker_listener_name",
}
"""Broker configs config.py folds into a BrokerConfig attribute or property of another name."""


@dataclasses.dataclass(frozen=True)
class _Uses:
    config_attributes: frozenset[str]
    strings: frozenset[str]


def _is_config(node: ast.expr) -> bool:
    """`config`, `self.config`, `ctx.services.config`, `self._config`, `plan.config`, `cfg`, ..."""
    name = node.id if isinstance(node, ast.Name) else \
        node.attr if isinstance(node, ast.Attribute) else ""
    return "config" in name.lower() or name == "cfg"


@cache
def _uses() -> _Uses:
    """Attributes read from an object named like a config (`config.x`, `self.config.x`;
    `self.x` inside broker/config/topic.py, whose LogConfig properties derive from the fields), and
    strings passed to a config's method (`config.effective("x")`), in broker/ and controller/
    outside the broker/config/ package and the test harness (broker/testing/). Matching attribute names on
    any object would let an unrelated `image.cluster_id` pass for a read of cluster.id, and any
    string a topic override `{"compression.type": "producer"}` for a read of compression.type."""
    attributes: set[str] = set()
    strings: set[str] = set()
    for top in ("broker", "controller"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if (CONFIG_PACKAGE in path.parents and path != LOG_CONFIG_MODULE) or HARNESS in path.parents:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            in_log_config = path == LOG_CONFIG_MODULE
            in_group_configs = path == GROUP_CONFIGS_MODULE
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and (
                        _is_config(node.value) or (in_log_config and isinstance(node.value, ast.Name)
                                                   and node.value.id == "self")):
                    attributes.add(node.attr)
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and (_is_config(node.func.value) or (in_group_configs and isinstance(node.func.value, ast.Name)
                                                           and node.func.value.id == "self"))):
                    strings.update(a.value for a in node.args
                                   if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return _Uses(frozenset(attributes), frozenset(strings))


def _says_no_effect(d: ConfigDef) -> bool:
    return d.doc.startswith(NO_EFFECT) and len(d.doc) > len(NO_EFFECT) + 10


def _topic_config_has_effect(d: ConfigDef) -> bool:
    return d.attr in {f.name for f in dataclasses.fields(LogConfig)} \
        and d.attr in _uses().config_attributes


def _broker_config_effect(name: str) -> str | None:
    """How broker config `name` takes effect, or None."""
    d = BROKER_CONFIGS[name]
    uses = _uses()
    if d.attr in uses.config_attributes:
        return f"attribute {d.attr}"
    if name in uses.strings:
        return f"name {name!r}"
    if name in FOLDED and FOLDED[name] in uses.config_attributes:
        return f"folded into {FOLDED[name]}"
    for topic in TOPIC_CONFIGS.values():
        if any(s.name == name for s in topic.synonyms) and _topic_config_has_effect(topic):
            return f"topic config {topic.name}"
    for group, d in GROUP_CONFIGS.items():
        related = {s.name for s in d.synonyms} | set(GROUP_CONFIG_SPECS[group].bounds)
        if name in related and group in uses.strings:
            return f"group config {group}"
    return None


@pytest.mark.parametrize("name", sorted(BROKER_CONFIGS))
def test_broker_config_has_an_effect_or_says_it_has_none(name: str) -> None:
    d = BROKER_CONFIGS[name]
    if _says_no_effect(d):
        return
    assert _broker_config_effect(name) is not None, (
        f"broker config {name} is accepted and described but nothing outside broker/config/ "
        f"reads BrokerConfig.{d.attr}: wire it, or start its description with {NO_EFFECT!r} "
        "and say what Samsa does instead")


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_topic_config_has_an_effect_or_says_it_has_none(name: str) -> None:
    d = TOPIC_CONFIGS[name]
    if _says_no_effect(d):
        return
    assert _topic_config_has_effect(d), (
        f"topic config {name} is accepted and described but nothing reads LogConfig.{d.attr}: "
        f"wire it, or start its description with {NO_EFFECT!r} and say what Samsa does instead")


@pytest.mark.parametrize("name", sorted(GROUP_CONFIGS))
def test_group_config_has_an_effect_or_says_it_has_none(name: str) -> None:
    d = GROUP_CONFIGS[name]
    assert _says_no_effect(d) != (name in _uses().strings), (
        f"group config {name}: either nothing outside broker/config/ asks for it by name (wire it, or start "
        f"its description with {NO_EFFECT!r}), or it is asked for and says it has no effect")


def test_folded_configs_are_broker_configs_and_attributes() -> None:
    fields = {f.name for f in dataclasses.fields(BrokerConfig)}
    for name, attr in FOLDED.items():
        assert name in BROKER_CONFIGS
        assert attr in fields or isinstance(getattr(BrokerConfig, attr, None), property)


def test_no_effect_configs_are_not_also_read() -> None:
    """A config documented as having no effect must not be read either: the description would
    then be the lie."""
    uses = _uses()
    for name, d in BROKER_CONFIGS.items():
        if _says_no_effect(d) and name not in TOPIC_CONFIGS:
            assert d.attr not in uses.config_attributes, f"{name} says it has no effect but is read"
