"""Broker and topic configuration: server.properties, the config table, DescribeConfigs.

Every config Samsa knows is declared once, as a field of the settings class it belongs to:
`BrokerConfig` (broker.py) for server.properties, `LogConfig` (topic.py) for topic configs. The
declaration gives the Kafka name (the field name with dots), the type, the default, the
documentation, the validator, whether it can change at runtime, and for topic configs the broker
configs it falls back to (`retention.ms` <- `log.retention.ms`, `log.retention.minutes`,
`log.retention.hours`). The tables (`BROKER_CONFIGS`, `TOPIC_CONFIGS`, `CONFIG_DEFS`) are derived
from those fields and drive parsing, defaults, validation and DescribeConfigs; the code reads the
typed fields.

- `load_properties(path)` reads a Java `.properties` file (properties.py, javaproperties).
- `BrokerConfig.from_properties(props)` turns the strings into typed settings and reports keys it
  does not know (not fatal: the CLI logs them in one warning line).
- `BrokerConfig.log_config()` gives the broker's defaults for topics as a `LogConfig`;
  `topic_log_config(defaults, overrides)` applies a topic's own settings on top.
- `validate_topic_configs(configs)` checks CreateTopics/AlterConfigs input and raises
  `KafkaError(ErrorCode.invalid_config, ...)` with Kafka's messages.
- `describe_topic_configs` / `describe_broker_configs` / `describe_group_configs` (describe.py)
  produce what DescribeConfigs v1-v4 return.
- Group configs (KIP-848 per-group overrides, GROUP resources) are declared in group.py, with the
  broker configs that default and bound them; `validate_group_configs` checks them as Kafka does.

Every config has an effect or says it has none: its value reaches the code that obeys it, or its
documentation starts with "Accepted for compatibility; " and says what Samsa does instead
(tests/unit/test_config_effect.py checks this). The security configs (security.py) are fields
of `SecurityConfig`, which `BrokerConfig` extends; what Samsa cannot serve (a JKS store, GSSAPI)
is refused with a ConfigError.

Defaults follow Apache Kafka 4.x, except where Samsa deliberately differs for a drop-in dev
broker: `broker.id`/`node.id` default to 0, `listeners` to PLAINTEXT://127.0.0.1:9092 and
`log.dir` to ./samsa-data.
"""

from broker.config.broker import (
    BROKER_CONFIGS,
    CONFIG_DEFS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    BrokerConfig,
)
from broker.config.describe import (
    ConfigSynonym,
    DescribedConfig,
    describe_broker_configs,
    describe_group_configs,
    describe_topic_configs,
)
from broker.config.listeners import Listener, parse_listeners, parse_security_protocol_map
from broker.config.properties import load_properties, parse_properties
from broker.config.settings import ConfigDef, Synonym
from broker.config.topic import TOPIC_CONFIGS, LogConfig, topic_log_config, validate_topic_configs
from broker.config.values import (
    INT_MAX,
    LONG_MAX,
    ConfigError,
    ConfigSource,
    ConfigType,
    OneOf,
    Range,
    Scope,
    parse_value,
    render_value,
)

__all__ = [
    "BROKER_CONFIGS",
    "CONFIG_DEFS",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "INT_MAX",
    "LONG_MAX",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "DescribedConfig",
    "Listener",
    "LogConfig",
    "OneOf",
    "Range",
    "Scope",
    "Synonym",
    "describe_broker_configs",
    "describe_group_configs",
    "describe_topic_configs",
    "load_properties",
    "parse_listeners",
    "parse_properties",
    "parse_security_protocol_map",
    "parse_value",
    "render_value",
    "topic_log_config",
    "validate_topic_configs",
]
