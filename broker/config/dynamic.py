"""Dynamic broker configs (Kafka's DynamicBrokerConfig): broker configs changed at runtime through
AlterConfigs / IncrementalAlterConfigs on a BROKER resource, kept by the controller (the
metadata file on a single node, /config/brokers/<id> and /config/brokers/<default> in ZooKeeper)
and applied by every broker without a restart.

A broker config's value comes from, most specific first: this broker's dynamic configs
(DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic defaults (DYNAMIC_DEFAULT_BROKER_CONFIG),
server.properties (STATIC_BROKER_CONFIG), its default (DEFAULT_CONFIG).

Which configs may change: those declared `read_only=False` (`DYNAMIC_CONFIGS`), each of which is
applied where it is read: the broker configs topic configs fall back to (log.retention.ms,
log.cleanup.policy, message.max.bytes, min.insync.replicas, ...) become every topic's new
defaults at once; the thread counts are accepted and, as their documentation says, change
nothing. The configs Kafka can change at runtime but Samsa reads only at start-up stay read-only
(docs/compat.md lists them).

`DynamicBrokerConfig.update` is called with every metadata image; it rebuilds the broker's
`BrokerConfig` when this broker's dynamic configs or the defaults changed and tells its listeners.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from types import MappingProxyType

from broker.config.broker import BROKER_CONFIGS, BrokerConfig
from broker.config.values import ConfigError

log = logging.getLogger("samsa.config")

DYNAMIC_CONFIGS: frozenset[str] = frozenset(n for n, d in BROKER_CONFIGS.items() if not d.read_only)
"""The broker configs AlterConfigs may change at runtime."""
PER_BROKER_CONFIGS: frozenset[str] = frozenset(
    n for n in DYNAMIC_CONFIGS if n.startswith(("ssl.", "sasl.", "listener"))
)
"""Dynamic configs that only one broker's entity may set, never the cluster default (Kafka's
DynamicBrokerConfig.PerBrokerConfigs: security and listener settings)."""

ConfigListener = Callable[[BrokerConfig, BrokerConfig], None]


class DynamicBrokerConfig:
    """The broker's current config: its static config with the dynamic configs applied."""

    def __init__(self, static: BrokerConfig) -> None:
        self.static = static
        self.current = static
        self._listeners: list[ConfigListener] = []

    def add_listener(self, listener: ConfigListener) -> None:
        """Called with (old, new) on the loop, no awaits, whenever the config changes."""
        self._listeners.append(listener)

    def update(self, broker_configs: Mapping[str, Mapping[str, str]]) -> None:
        """Apply the image's dynamic broker configs (entity "" and this broker's id)."""
        default = dict(broker_configs.get("", {}))
        own = dict(broker_configs.get(str(self.static.broker_id), {}))
        if default == self.current.dynamic_default and own == self.current.dynamic_broker:
            return
        try:
            new = with_dynamic(self.static, default, own)
        except ConfigError as e:  # stored by another broker or an older version; Kafka skips it too
            log.error("dynamic broker configs not applied error=%s default=%s broker=%s", e, default, own)
            return
        old, self.current = self.current, new
        changed = sorted(n for n in BROKER_CONFIGS if old.values.get(n) != new.values.get(n))
        log.info("dynamic broker configs applied changed=%s", ",".join(changed) or "-")
        for listener in self._listeners:
            listener(old, new)


def with_dynamic(static: BrokerConfig, default: Mapping[str, str], own: Mapping[str, str]) -> BrokerConfig:
    """`static` with the cluster defaults and this broker's dynamic configs applied (unknown and
    non-dynamic names are kept in the store but change nothing). Raises ConfigError."""
    applied = {n: v for n, v in {**default, **own}.items() if n in DYNAMIC_CONFIGS}
    new, _ = BrokerConfig.from_properties({**static.overrides, **applied})
    return dataclasses.replace(
        new,
        overrides=static.overrides,
        max_connections_per_listener=static.max_connections_per_listener,
        dynamic_default=MappingProxyType(dict(default)),
        dynamic_broker=MappingProxyType(dict(own)),
    )
