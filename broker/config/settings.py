"""Declaring configs: each config is declared once, as a field of the settings class it belongs
to (`BrokerConfig` for server.properties, `LogConfig` for topic configs), with `setting(...)` or
`topic_setting(...)` giving its type, default, documentation, validator and synonyms. The field's
name is the config's name with dots as underscores (`log.retention.ms` -> `log_retention_ms`),
its annotation the type the code reads. `definitions(cls)` derives the table of `ConfigDef`s from
a settings class; nothing about a config is written down anywhere else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from broker.config.values import (
    ConfigType,
    OneOf,
    Range,
    Scope,
    Validator,
    parse_value,
    render_value,
)


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config a topic config falls back to; its value times `factor` gives the
    topic value (log.retention.hours -> retention.ms has factor 3_600_000)."""

    name: str
    factor: int = 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One config: its Kafka name, type, default (typed; None means no default), documentation,
    validator, whether it cannot be changed at runtime (`read_only`), its scope, and for topic
    configs the broker configs it inherits from, most specific first."""

    name: str
    type: ConfigType
    default: object
    doc: str
    validator: Validator | None = None
    read_only: bool = True
    scope: Scope = Scope.BROKER
    synonyms: tuple[Synonym, ...] = ()

    @property
    def attr(self) -> str:
        """The Python attribute name: dots become underscores."""
        return self.name.replace(".", "_")

    @property
    def is_sensitive(self) -> bool:
        """Passwords are never shown in DescribeConfigs."""
        return self.type is ConfigType.PASSWORD

    @property
    def default_string(self) -> str | None:
        """The default as Kafka renders it (None when there is no default)."""
        return render_value(self.type, self.default)

    def parse(self, raw: str) -> object:
        """Parse and validate a string value; raises ConfigError naming this config."""
        value = parse_value(self.type, self.name, raw)
        self.check(value)
        return value

    def check(self, value: object) -> None:
        """Validate an already typed value (None passes: it means "not set")."""
        if value is not None and self.validator is not None:
            self.validator.check(self.name, self.type, value)


T, BOTH = Scope.TOPIC, Scope.BOTH
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, PASSWORD = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)
HOUR_MS = 3_600_000
MINUTE_MS = 60_000
COMPRESSION = OneOf(("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
TIMESTAMP_TYPE = OneOf(("CreateTime", "LogAppendTime"))
CLEANUP = OneOf(("compact", "delete"))
NO_PREALLOCATE = ("Accepted for compatibility; Samsa grows segment files as it appends and "
                   "never preallocates them (Kafka: preallocate segment files).")
NO_DOWNCONVERSION = ("Accepted for compatibility; Samsa stores magic v2 batches only (older "
                      "produce formats are up-converted) and serves Fetch v4 and later, which "
                      "carry them as stored, so it never down-converts (Kafka: whether old fetch "
                      "versions get down-converted messages).")
NO_MESSAGE_FORMAT = ("Accepted for compatibility; deprecated in Kafka 3.x (ignored with "
                     "inter.broker.protocol.version 3.0 and later) and removed in 4.0: Samsa stores "
                     "record batches v2 whatever it says, and logs a warning when it is set (Kafka: "
                     "the message format version of the log).")
NO_TIMESTAMP_DIFFERENCE = ("Accepted for compatibility; deprecated in Kafka 3.6 and removed in 4.0 "
                           "in favour of message.timestamp.before.max.ms and "
                           "message.timestamp.after.max.ms, which alone decide in Samsa (as in "
                           "Kafka 4.x); a warning is logged when it is set (Kafka 3.x: the bound "
                           "used where those two are unset).")
NO_TIERED_STORAGE = ("Accepted for compatibility; Samsa has no tiered storage, so every segment is "
                     "local and this changes nothing ")
NO_LEVELS = ("Accepted for compatibility; Samsa compresses with each codec's default level when "
             "compression.type makes it recompress a batch ")


def at_least(n: int) -> Range:
    return Range(min=n)


def syn(*names: str | tuple[str, int]) -> tuple[Synonym, ...]:
    """Synonyms: a name, or (name, factor) for a config in another unit (hours -> ms)."""
    return tuple(Synonym(n) if isinstance(n, str) else Synonym(*n) for n in names)


_SPEC = "samsa.config"
"""The dataclass field metadata key that holds a field's config declaration."""


@dataclass(frozen=True, slots=True)
class _Spec:
    type: ConfigType
    default: object
    doc: str
    validator: Validator | None
    read_only: bool
    scope: Scope
    synonyms: tuple[Synonym, ...]


def setting(
    type: ConfigType,
    default: object,
    doc: str,
    validator: Validator | None = None,
    *,
    read_only: bool = True,
    synonyms: tuple[Synonym, ...] = (),
) -> Any:
    """A broker config (a `BrokerConfig` field): server.properties sets it; DescribeConfigs shows
    it. The field has no Python default: `BrokerConfig.from_properties` fills every field.
    `read_only=False` makes it a dynamic broker config (config/dynamic.py): only for a config whose
    new value takes effect at once, or that says it has no effect."""
    spec = _Spec(type, default, doc, validator, read_only, Scope.BROKER, synonyms)
    return dataclasses.field(metadata={_SPEC: spec})


def topic_setting(
    type: ConfigType,
    default: object,
    doc: str,
    validator: Validator | None = None,
    *,
    scope: Scope = Scope.TOPIC,
    synonyms: tuple[Synonym, ...] = (),
) -> Any:
    """A topic config (a `LogConfig` field), with Kafka's default as the field's default (a LIST
    default as its comma-joined string); `synonyms` are the broker configs it falls back to, most
    specific first. `scope=BOTH`: also a broker config of the same name."""
    spec = _Spec(type, default, doc, validator, False, scope, synonyms)
    value = ",".join(default) if isinstance(default, tuple) else default
    return dataclasses.field(default=value, metadata={_SPEC: spec})


def definitions(cls: type) -> list[ConfigDef]:
    """The configs declared by the fields of settings class `cls`, in declaration order."""
    out = []
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(_SPEC)
        if spec is not None:
            out.append(ConfigDef(f.name.replace("_", "."), spec.type, spec.default, spec.doc,
                                 spec.validator, spec.read_only, spec.scope, spec.synonyms))
    return out
