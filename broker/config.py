"""Broker and topic configuration: server.properties parsing, the config table, DescribeConfigs.

One table (`CONFIG_DEFS`) describes every config Samsa knows: its Kafka name, type, default,
validator, documentation, whether it is read-only at runtime, and for topic configs the broker
configs it falls back to (`retention.ms` <- `log.retention.ms`, `log.retention.minutes`,
`log.retention.hours`). That table drives parsing, defaults, validation and DescribeConfigs;
nothing about a config is written down twice.

- `load_properties(path)` reads a Java `.properties` file (Kafka's server.properties).
- `BrokerConfig.from_properties(props)` turns the strings into typed settings and reports keys it
  does not know (not fatal: the CLI logs them in one warning line).
- `BrokerConfig.log_config()` gives the broker's defaults for topics as a `LogConfig`;
  `topic_log_config(defaults, overrides)` applies a topic's own settings on top.
- `validate_topic_configs(configs)` checks CreateTopics/AlterConfigs input and raises
  `KafkaError(ErrorCode.invalid_config, ...)` with Kafka's messages.
- `describe_topic_configs` / `describe_broker_configs` produce what DescribeConfigs v1-v4 return:
  value, source, synonyms (in Kafka's order), type, documentation.

Every config in the table has an effect or says it has none: its value reaches the code that
obeys it, or its documentation starts with "Accepted for compatibility; " and says what Samsa does
instead (tests/unit/test_config_effect.py checks this). Listeners must use PLAINTEXT: an SSL or
SASL listener is refused with a ConfigError.

Defaults follow Apache Kafka 4.x, except where Samsa deliberately differs for a drop-in dev
broker: `broker.id`/`node.id` default to 0, `listeners` to PLAINTEXT://127.0.0.1:9092 and
`log.dir` to ./samsa-data.
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.log.config import LogConfig

__all__ = [
    "BROKER_CONFIGS",
    "CONFIG_DEFS",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "DescribedConfig",
    "Listener",
    "OneOf",
    "Range",
    "Scope",
    "Synonym",
    "describe_broker_configs",
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

LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)
INT_MAX = (1 << 31) - 1
INT_MIN = -(1 << 31)
SHORT_MAX = (1 << 15) - 1
SHORT_MIN = -(1 << 15)


# --------------------------------------------------------------------------------------------
# Errors and enums
# --------------------------------------------------------------------------------------------


class ConfigError(ValueError):
    """A config value (or a properties file) that cannot be used; `key` names the config."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class ConfigType(enum.IntEnum):
    """Config value types, numbered as in DescribeConfigs responses (v3+ `config_type`)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Where a config value comes from, numbered as Kafka's DescribeConfigs `config_source`."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class Scope(enum.Flag):
    """Whether a config is a broker config (server.properties), a topic config, or both."""

    BROKER = enum.auto()
    TOPIC = enum.auto()
    BOTH = BROKER | TOPIC


# --------------------------------------------------------------------------------------------
# Java .properties
# --------------------------------------------------------------------------------------------

_PROPS_WS = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a Java `.properties` file such as Kafka's server.properties.

    The file is decoded as UTF-8 (Java's own loader uses ISO-8859-1; a file that is not valid
    UTF-8 is read that way instead). Later duplicates of a key win, as in Java.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    try:
        return parse_properties(text)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}", e.key) from None


def parse_properties(text: str) -> dict[str, str]:
    """Parse `.properties` text: `#`/`!` comments, `key=value`, `key: value`, `key value`,
    backslash line continuations and the escapes `\\t \\n \\r \\f \\\\ \\uXXXX` (any other
    escaped character stands for itself, e.g. `\\:` `\\=` `\\ `)."""
    result: dict[str, str] = {}
    for lineno, logical in _logical_lines(text):
        key, value = _split_entry(logical, lineno)
        result[key] = value
    return result


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Join continued natural lines; skip blank and comment lines. Yields (line number, line)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(_PROPS_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts: list[str] = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0:
                parts.append(line)
                break
            parts.append(line[:-1])  # odd number of backslashes: the last one continues the line
            if i >= len(lines):
                break
            line = lines[i].lstrip(_PROPS_WS)
            i += 1
        yield start + 1, "".join(parts)


def _split_entry(line: str, lineno: int) -> tuple[str, str]:
    """Split one logical line into its unescaped key and value."""
    n = len(line)
    pos = 0
    while pos < n:
        c = line[pos]
        if c == "\\":
            pos += 2
            continue
        if c in "=:" or c in _PROPS_WS:
            break
        pos += 1
    key_raw = line[:pos]
    while pos < n and line[pos] in _PROPS_WS:
        pos += 1
    if pos < n and line[pos] in "=:":
        pos += 1
        while pos < n and line[pos] in _PROPS_WS:
            pos += 1
    return _unescape(key_raw, lineno), _unescape(line[pos:], lineno)


def _unescape(s: str, lineno: int) -> str:
    """Resolve backslash escapes; \\uXXXX pairs forming a UTF-16 surrogate pair are joined."""
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:  # a lone trailing backslash (end of input) is dropped, as in Java
            break
        e = s[i + 1]
        if e == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"line {lineno}: malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_SIMPLE_ESCAPES.get(e, e))
            i += 2
    joined = "".join(out)
    return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


# --------------------------------------------------------------------------------------------
# Values: parsing, rendering, validators
# --------------------------------------------------------------------------------------------

_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT_BOUNDS = {
    ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
}


def _invalid(key: str, value: object, reason: str) -> ConfigError:
    """Kafka's ConfigException wording: `Invalid value V for configuration K: reason`."""
    return ConfigError(f"Invalid value {value} for configuration {key}: {reason}", key)


def parse_value(ctype: ConfigType, key: str, raw: str) -> object:
    """Convert a config string to its typed value the way Kafka's ConfigDef does.

    BOOLEAN -> bool (case-insensitive true/false), SHORT/INT/LONG -> int (range-checked),
    DOUBLE -> float, LIST -> tuple[str, ...] (comma separated, blanks around commas ignored,
    empty string is the empty list), STRING/CLASS/PASSWORD -> the trimmed string.
    """
    s = raw.strip()
    if ctype is ConfigType.BOOLEAN:
        if s.lower() == "true":
            return True
        if s.lower() == "false":
            return False
        raise _invalid(key, s, "Expected value to be either true or false")
    if ctype in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[ctype]
        if not _INT_RE.fullmatch(s) or not lo <= int(s) <= hi:
            raise _invalid(key, s, f"Not a number of type {ctype.name}")
        return int(s)
    if ctype is ConfigType.DOUBLE:
        try:
            if "_" in s:
                raise ValueError(s)
            return float(s)
        except ValueError:
            raise _invalid(key, s, "Not a number of type DOUBLE") from None
    if ctype is ConfigType.LIST:
        return tuple(p.strip() for p in s.split(",")) if s else ()
    return s


def _java_double(x: float) -> str:
    """Render a float as Java's Double.toString does (0.5, 1.0, 1.0E-5, 1.0E7)."""
    if math.isnan(x):
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        r = repr(x)
        return r if "e" not in r else format(decimal.Decimal(r), "f")
    sign, digits, exp = decimal.Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exp, int)
    mantissa = "".join(map(str, digits))
    exponent = exp + len(digits) - 1
    frac = mantissa[1:] or "0"
    return f"{'-' if sign else ''}{mantissa[0]}.{frac}E{exponent}"


def render_value(ctype: ConfigType, value: object) -> str | None:
    """Render a typed value as Kafka does in DescribeConfigs (`true`, `a,b`, `0.5`, decimals)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if ctype is ConfigType.DOUBLE and isinstance(value, (int, float)):
        return _java_double(float(value))
    if isinstance(value, (tuple, list, frozenset)):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True, slots=True)
class Range:
    """Numeric bounds (inclusive); Kafka's `atLeast` / `between`."""

    min: int | float | None = None
    max: int | float | None = None

    def check(self, key: str, ctype: ConfigType, value: object) -> None:
        """Raise ConfigError when `value` is outside the bounds."""
        assert isinstance(value, (int, float))
        shown = render_value(ctype, value)
        if self.min is not None and value < self.min:
            raise _invalid(key, shown, f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise _invalid(key, shown, f"Value must be no more than {self.max}")

@dataclass(frozen=True, slots=True)
class OneOf:
    """The value (each element, for LIST configs) must be one of `choices` (case-sensitive)."""

    choices: tuple[str, ...]

    def check(self, key: str, ctype: ConfigType, value: object) -> None:
        """Raise ConfigError when `value` (or one of its elements) is not allowed."""
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if item not in self.choices:
                raise _invalid(key, item, f"String must be one of: {', '.join(self.choices)}")
        if isinstance(value, tuple) and len(set(value)) != len(value):
            raise ConfigError(f"Configuration '{key}' values must not be duplicated.", key)


Validator = Range | OneOf


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------


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
_COMPRESSION = OneOf(("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
_TIMESTAMP_TYPE = OneOf(("CreateTime", "LogAppendTime"))
_CLEANUP = OneOf(("compact", "delete"))
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in _SECURITY_PROTOCOLS)
_NO_PREALLOCATE = ("Accepted for compatibility; Samsa grows segment files as it appends and "
                   "never preallocates them (Kafka: preallocate segment files).")
_NO_DOWNCONVERSION = ("Accepted for compatibility; Samsa stores magic v2 batches only (older "
                      "produce formats are up-converted) and serves Fetch v4 and later, which "
                      "carry them as stored, so it never down-converts (Kafka: whether old fetch "
                      "versions get down-converted messages).")
_NO_TRANSACTIONS = ("Accepted for compatibility; Samsa has no transactions (a transactional "
                    "InitProducerId is answered COORDINATOR_NOT_AVAILABLE) ")
_NO_TLS = ("Accepted for compatibility; Samsa has no TLS and serves only PLAINTEXT listeners "
           "(SSL and SASL listeners are refused at start-up), so nothing reads it ")


def _at_least(n: int) -> Range:
    return Range(min=n)


def _syn(*names: str | tuple[str, int]) -> tuple[Synonym, ...]:
    return tuple(Synonym(n) if isinstance(n, str) else Synonym(*n) for n in names)


_DEFS: tuple[ConfigDef, ...] = (
    # ---- identity, listeners, data directories ------------------------------------------------
    ConfigDef("broker.id", INT, 0, "The broker's id (Samsa's default is 0; Kafka's is -1). "
              "If node.id is also set the two must agree."),
    ConfigDef("node.id", INT, 0, "The node id; a synonym of broker.id kept for KRaft-style "
              "configuration files."),
    ConfigDef("cluster.id", STRING, None, "The cluster id to use; when unset Samsa generates one. "
              "It is kept in meta.properties (single node) or /cluster/id (ZooKeeper); a broker "
              "whose stored cluster id differs from a set cluster.id refuses to start."),
    ConfigDef("broker.rack", STRING, None, "The broker's rack, used for rack-aware replica "
              "placement and reported in Metadata."),
    ConfigDef("listeners", STRING, "PLAINTEXT://127.0.0.1:9092", "Comma-separated listeners "
              "NAME://host:port the broker binds; an empty host binds the default interface, "
              "port 0 picks a free port. Samsa serves only the PLAINTEXT security protocol: a "
              "listener mapped to SSL or SASL_* is refused at start-up.", read_only=False),
    ConfigDef("advertised.listeners", STRING, None, "Listeners published to clients in "
              "Metadata, if different from `listeners`.", read_only=False),
    ConfigDef("listener.security.protocol.map", STRING, _DEFAULT_PROTOCOL_MAP, "Map of listener "
              "name to security protocol, as NAME:PROTOCOL pairs separated by commas. Listeners "
              "in use must map to PLAINTEXT, the only protocol Samsa serves.",
              read_only=False),
    ConfigDef("inter.broker.listener.name", STRING, None, "Listener name followers use to fetch "
              "from leaders; defaults to PLAINTEXT, or the first advertised listener."),
    ConfigDef("log.dirs", LIST, None, "Comma-separated directories holding partition logs; "
              "when unset, log.dir is used."),
    ConfigDef("log.dir", STRING, "./samsa-data", "The data directory used when log.dirs is not "
              "set (Samsa's default is ./samsa-data)."),
    # ---- topics ---------------------------------------------------------------------------------
    ConfigDef("num.partitions", INT, 1, "Default number of partitions for new topics.",
              _at_least(1)),
    ConfigDef("default.replication.factor", INT, 1, "Default replication factor for "
              "automatically created topics and CreateTopics requests that leave it unset.",
              _at_least(1)),
    ConfigDef("auto.create.topics.enable", BOOLEAN, True, "Create a topic when Metadata asks "
              "for one that does not exist (and the client allows it)."),
    ConfigDef("samsa.auto.create.topics.max.per.request", INT, 100, "Most unknown topics one "
              "Metadata request may auto-create; the others named in it are answered "
              "UNKNOWN_TOPIC_OR_PARTITION, Kafka's answer for a topic not created yet, so the "
              "client asks again and the next request creates the next ones (a line is logged "
              "when the cap applies). Kafka has no such limit.", _at_least(1)),
    ConfigDef("delete.topic.enable", BOOLEAN, True, "Whether DeleteTopics is allowed."),
    # ---- network ------------------------------------------------------------------------------
    ConfigDef("socket.request.max.bytes", INT, 104_857_600, "Largest request frame accepted; "
              "bigger frames close the connection.", _at_least(1)),
    ConfigDef("socket.send.buffer.bytes", INT, 102_400, "Accepted for compatibility; the OS "
              "sizes socket buffers: Samsa never sets SO_SNDBUF, which leaves Linux's auto-tuning "
              "free to grow the buffer past a fixed size on the fetch path (Kafka: SO_SNDBUF of "
              "client sockets)."),
    ConfigDef("socket.receive.buffer.bytes", INT, 102_400, "Accepted for compatibility; the OS "
              "sizes socket buffers: Samsa never sets SO_RCVBUF, which leaves Linux's auto-tuning "
              "free to grow the buffer past a fixed size on the produce path (Kafka: SO_RCVBUF "
              "of client sockets)."),
    ConfigDef("queued.max.requests", INT, 500, "Accepted for compatibility; Samsa reads one "
              "request per connection at a time and reads the next only after answering it, so "
              "no request queue builds up: pipelined requests wait in the socket buffer (Kafka: "
              "requests queued before the network threads stop reading).", _at_least(1)),
    ConfigDef("connections.max.idle.ms", LONG, 600_000, "A client connection with no request "
              "in flight and no new request started for this many milliseconds is closed "
              "(checked every tenth of it, at most every 30 s); a negative value keeps idle "
              "connections open."),
    ConfigDef("max.connections", INT, INT_MAX, "Most client connections the broker holds at "
              "once, over all listeners (listener.name.<name>.max.connections sets a listener's "
              "own limit). At the limit the broker stops accepting, as Kafka does: new "
              "connections wait in the listen backlog until one closes. With several listeners, "
              "the inter-broker listener is exempt from the broker-wide limit; accepting on it "
              "beyond the limit closes the least recently active connection of another listener.",
              _at_least(0)),
    ConfigDef("max.connections.per.ip", INT, INT_MAX, "Most connections from one IP address; "
              "a new connection beyond it is accepted and closed at once (one log line per "
              "interval, with a count). May be 0 only when max.connections.per.ip.overrides is set.",
              _at_least(0)),
    ConfigDef("max.connections.per.ip.overrides", STRING, "", "Per-address exceptions to "
              "max.connections.per.ip: `host:count,...` (for example `hostName:100,127.0.0.1:200`); "
              "host names are resolved at start-up, every address of a name counts."),
    ConfigDef("queued.max.request.bytes", LONG, -1, "Bytes of requests being read or handled "
              "that the broker holds at once; 0 or less is unbounded, Kafka's default and "
              "Samsa's. A frame reserves its declared size when its size prefix is read and "
              "returns it when its response is written; when nothing is left, connections stop "
              "reading (TCP pushes back on the clients) until memory is returned. Samsa keeps "
              "it unbounded because a reservation is of the declared size: a few connections "
              "declaring 100 MB frames and sending nothing would stop every connection from "
              "reading; Samsa backs a large frame's buffer with memory only as its bytes "
              "arrive and closes a frame that is not complete within "
              "samsa.request.receive.timeout.ms, so a sender holds only what it actually sent, "
              "for a bounded time. When set, it must be at least socket.request.max.bytes."),
    ConfigDef("samsa.request.receive.timeout.ms", LONG, 60_000, "A request frame must arrive "
              "whole within this many milliseconds of its first byte (or of the moment "
              "queued.max.request.bytes let it be read); otherwise the connection is closed with "
              "one log line and its buffered bytes are released (slow senders, frames missing "
              "their last bytes). Kafka has no such limit. The default is twice the 30 s "
              "request.timeout.ms of Kafka's clients, after which a client no longer waits for "
              "the answer.", _at_least(1)),
    ConfigDef("fetch.max.bytes", INT, 57_671_680, "Most bytes returned by one Fetch response: "
              "caps the request's max_bytes (the first batch still goes out whole).",
              _at_least(1024)),
    ConfigDef("max.incremental.fetch.session.cache.slots", INT, 1000, "Accepted for "
              "compatibility; Samsa keeps no fetch sessions: every Fetch is answered sessionless "
              "(session id 0), so clients send full fetch requests (Kafka: incremental fetch "
              "sessions kept per broker).", _at_least(0)),
    ConfigDef("num.network.threads", INT, 3, "Accepted for compatibility; Samsa serves all "
              "connections on one asyncio loop.", _at_least(1), read_only=False),
    ConfigDef("num.io.threads", INT, 8, "Accepted for compatibility; Samsa handles requests on "
              "one asyncio loop.", _at_least(1), read_only=False),
    ConfigDef("background.threads", INT, 10, "Accepted for compatibility; Samsa runs "
              "background work (retention, flushes, checkpoints, offset expiry) as tasks on its "
              "asyncio loop, and compaction on log.cleaner.threads threads (Kafka: the "
              "background scheduler's threads).", _at_least(1), read_only=False),
    ConfigDef("num.recovery.threads.per.data.dir", INT, 2, "Accepted for compatibility; Samsa "
              "loads and recovers logs one at a time, in one thread off the event loop (Kafka: "
              "threads per data directory recovering logs at start-up).", _at_least(1),
              read_only=False),
    # ---- log: segments, retention, flush -----------------------------------------------------
    ConfigDef("message.max.bytes", INT, 1_048_588, "Largest record batch the broker accepts "
              "(default for the topic config max.message.bytes).", _at_least(0)),
    ConfigDef("log.segment.bytes", INT, 1_073_741_824, "Maximum size of one segment file.",
              _at_least(14)),
    ConfigDef("log.roll.ms", LONG, None, "Roll a new segment after this many milliseconds; "
              "when unset, log.roll.hours is used."),
    ConfigDef("log.roll.hours", INT, 168, "Roll a new segment after this many hours (used when "
              "log.roll.ms is unset).", _at_least(1)),
    ConfigDef("log.roll.jitter.ms", LONG, None, "Maximum random jitter subtracted from the roll "
              "time; when unset, log.roll.jitter.hours is used."),
    ConfigDef("log.roll.jitter.hours", INT, 0, "Maximum roll jitter in hours (used when "
              "log.roll.jitter.ms is unset).", _at_least(0)),
    ConfigDef("log.index.size.max.bytes", INT, 10_485_760, "Maximum size of an offset or time "
              "index file.", _at_least(4)),
    ConfigDef("log.index.interval.bytes", INT, 4096, "Bytes of log between offset index "
              "entries.", _at_least(0)),
    ConfigDef("log.retention.ms", LONG, None, "Keep log segments this many milliseconds; -1 "
              "keeps them forever. Takes precedence over log.retention.minutes and .hours."),
    ConfigDef("log.retention.minutes", INT, None, "Retention in minutes, used when "
              "log.retention.ms is unset."),
    ConfigDef("log.retention.hours", INT, 168, "Retention in hours, used when neither "
              "log.retention.ms nor log.retention.minutes is set."),
    ConfigDef("log.retention.bytes", LONG, -1, "Delete old segments once a partition is larger "
              "than this; -1 means no size limit."),
    ConfigDef("log.retention.check.interval.ms", LONG, 300_000, "How often retention is "
              "checked.", _at_least(1)),
    ConfigDef("log.segment.delete.delay.ms", LONG, 60_000, "Delay before a deleted segment's "
              "files are removed from disk.", _at_least(0)),
    ConfigDef("log.flush.interval.messages", LONG, LONG_MAX, "fsync a partition after this many "
              "messages.", _at_least(1)),
    ConfigDef("log.flush.interval.ms", LONG, None, "fsync a partition when its oldest unflushed "
              "message is this old; when unset, log.flush.scheduler.interval.ms is used."),
    ConfigDef("log.flush.scheduler.interval.ms", LONG, LONG_MAX, "How often the flusher checks "
              "whether any log needs an fsync."),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", INT, 60_000, "How often the recovery "
              "point checkpoint is written; 0 writes it only at shutdown.", _at_least(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", INT, 60_000, "How often the log "
              "start offset checkpoint is written; 0 writes it only at shutdown.", _at_least(0)),
    ConfigDef("log.preallocate", BOOLEAN, False, _NO_PREALLOCATE),
    ConfigDef("log.cleanup.policy", LIST, ("delete",), "Default cleanup policy: delete, "
              "compact, or both.", _CLEANUP),
    ConfigDef("log.message.timestamp.type", STRING, "CreateTime", "Default timestamp type of "
              "stored messages.", _TIMESTAMP_TYPE),
    ConfigDef("log.message.timestamp.before.max.ms", LONG, LONG_MAX, "How far in the past a "
              "record timestamp may be, relative to the broker's clock.", _at_least(0)),
    ConfigDef("log.message.timestamp.after.max.ms", LONG, 3_600_000, "How far in the future a "
              "record timestamp may be, relative to the broker's clock.", _at_least(0)),
    ConfigDef("log.message.downconversion.enable", BOOLEAN, True, _NO_DOWNCONVERSION),
    # ---- log cleaner ---------------------------------------------------------------------------
    ConfigDef("log.cleaner.enable", BOOLEAN, True, "Run the log cleaner (compaction)."),
    ConfigDef("log.cleaner.threads", INT, 1, "Cleaner threads.", _at_least(0), read_only=False),
    ConfigDef("log.cleaner.backoff.ms", LONG, 15_000, "Sleep between cleaner passes when "
              "nothing needs cleaning.", _at_least(0), read_only=False),
    ConfigDef("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, "Minimum dirty ratio before a "
              "log is compacted.", Range(0, 1)),
    ConfigDef("log.cleaner.delete.retention.ms", LONG, 86_400_000, "How long tombstones are kept "
              "on compacted topics.", _at_least(0)),
    ConfigDef("log.cleaner.min.compaction.lag.ms", LONG, 0, "Minimum age of a message before "
              "it may be compacted.", _at_least(0)),
    ConfigDef("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, "Maximum time a message "
              "stays ineligible for compaction.", _at_least(1)),
    ConfigDef("log.cleaner.dedupe.buffer.size", LONG, 134_217_728, "Memory for the cleaner's "
              "key -> offset map, shared by all cleaner threads; counted as Kafka counts it (24 "
              "bytes per key), so it bounds the same number of keys per pass.", _at_least(0)),
    ConfigDef("log.cleaner.io.buffer.size", INT, 524_288, "Read and write buffer of a cleaner "
              "thread.", _at_least(0)),
    ConfigDef("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, "How full the cleaner's offset "
              "map may get before a pass stops mapping more of the dirty section."),
    # ---- broker configs that are also topic configs under the same name ----------------------
    ConfigDef("compression.type", STRING, "producer", "The codec batches are stored in: "
              "`producer` keeps each batch as the producer compressed it (byte for byte); "
              "`uncompressed`, `gzip`, `snappy`, `lz4` or `zstd` makes the leader rewrite a "
              "produced batch in another codec with that one (same records, producer id, epoch "
              "and sequence); a batch already in it is stored as produced.", _COMPRESSION,
              scope=BOTH),
    ConfigDef("min.insync.replicas", INT, 1, "Minimum ISR size for acks=all produce requests.",
              _at_least(1), scope=BOTH),
    ConfigDef("unclean.leader.election.enable", BOOLEAN, False, "Allow replicas outside the ISR "
              "to become leader (may lose acknowledged data).", scope=BOTH),
    # ---- group coordinator and offsets -----------------------------------------------------------
    ConfigDef("offsets.topic.num.partitions", INT, 50, "Partitions of __consumer_offsets.",
              _at_least(1)),
    ConfigDef("offsets.topic.replication.factor", SHORT, 3, "Replication factor of "
              "__consumer_offsets (capped to the live brokers when it is created).",
              _at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", INT, 104_857_600, "Segment size of "
              "__consumer_offsets.", _at_least(1)),
    ConfigDef("offsets.retention.minutes", INT, 10_080, "Committed offsets of empty groups are "
              "kept this long.", _at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", LONG, 600_000, "How often stale offsets "
              "are expired.", _at_least(1)),
    ConfigDef("offsets.commit.timeout.ms", INT, 5000, "How long an offset commit waits for "
              "__consumer_offsets replication.", _at_least(1)),
    ConfigDef("offset.metadata.max.bytes", INT, 4096, "Largest metadata string allowed with an "
              "offset commit."),
    ConfigDef("group.min.session.timeout.ms", INT, 6000, "Smallest session timeout a member may "
              "ask for."),
    ConfigDef("group.max.session.timeout.ms", INT, 1_800_000, "Largest session timeout a member "
              "may ask for."),
    ConfigDef("group.initial.rebalance.delay.ms", INT, 3000, "How long the first rebalance of a "
              "new group waits for more members (the Samsa CLI may choose a lower value)."),
    ConfigDef("group.max.size", INT, INT_MAX, "Most members a consumer group may have.",
              _at_least(1)),
    # ---- transactions and producer ids ------------------------------------------------------
    ConfigDef("producer.id.expiration.ms", INT, 86_400_000, "Idle producer ids are forgotten "
              "after this long.", _at_least(1), read_only=False),
    ConfigDef("transaction.max.timeout.ms", INT, 900_000, "Largest transaction timeout a "
              "producer may ask for.", _at_least(1)),
    ConfigDef("transactional.id.expiration.ms", INT, 604_800_000, _NO_TRANSACTIONS + "so no "
              "transactional id is kept to expire (Kafka: idle transactional ids expire after "
              "this long).", _at_least(1)),
    ConfigDef("transaction.state.log.num.partitions", INT, 50, _NO_TRANSACTIONS + "and no "
              "__transaction_state topic (Kafka: its partition count).", _at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", SHORT, 3, _NO_TRANSACTIONS + "and no "
              "__transaction_state topic (Kafka: its replication factor).", _at_least(1)),
    ConfigDef("transaction.state.log.min.isr", INT, 2, _NO_TRANSACTIONS + "and no "
              "__transaction_state topic (Kafka: its min.insync.replicas).", _at_least(1)),
    # ---- replication ----------------------------------------------------------------------------
    ConfigDef("replica.lag.time.max.ms", LONG, 30_000, "A follower that has not caught up for "
              "this long leaves the ISR."),
    ConfigDef("replica.fetch.max.bytes", INT, 1_048_576, "Bytes a follower asks for per "
              "partition.", _at_least(0)),
    ConfigDef("replica.fetch.min.bytes", INT, 1, "min_bytes of follower fetches."),
    ConfigDef("replica.fetch.wait.max.ms", INT, 500, "max_wait_ms of follower fetches."),
    ConfigDef("replica.fetch.backoff.ms", INT, 1000, "Sleep after a failed follower fetch.",
              _at_least(0)),
    ConfigDef("replica.fetch.response.max.bytes", INT, 10_485_760, "Bytes a follower asks for "
              "per fetch response.", _at_least(0)),
    ConfigDef("replica.socket.timeout.ms", INT, 30_000, "Socket timeout of follower fetches."),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, "How often high "
              "watermarks are checkpointed; 0 or less checkpoints them only at shutdown."),
    ConfigDef("num.replica.fetchers", INT, 1, "Fetcher tasks per source broker.",
              read_only=False),
    # ---- controller, ZooKeeper, shutdown -------------------------------------------------------
    ConfigDef("zookeeper.connect", STRING, None, "ZooKeeper connect string "
              "host:port[,...][/chroot]; when unset Samsa uses its embedded controller."),
    ConfigDef("zookeeper.session.timeout.ms", INT, 18_000, "ZooKeeper session timeout."),
    ConfigDef("zookeeper.connection.timeout.ms", INT, None, "How long to wait for a ZooKeeper "
              "connection; defaults to zookeeper.session.timeout.ms."),
    ConfigDef("controller.socket.timeout.ms", INT, 30_000, "Accepted for compatibility; "
              "Samsa's controller sends no requests to brokers: they follow partition state "
              "through ZooKeeper watches, or the embedded controller on a single node (Kafka: "
              "socket timeout of controller-to-broker requests)."),
    ConfigDef("controlled.shutdown.enable", BOOLEAN, True, "Move leadership away before "
              "shutting down."),
    ConfigDef("controlled.shutdown.max.retries", INT, 3, "Attempts of a controlled shutdown."),
    ConfigDef("controlled.shutdown.retry.backoff.ms", LONG, 5000, "Sleep between controlled "
              "shutdown attempts."),
    ConfigDef("samsa.heartbeat.port", INT, 0, "UDP port of this broker's failure-detector "
              "heartbeats (0 picks a free port); advertised in its ZooKeeper registration.",
              Range(0, 65535)),
    ConfigDef("samsa.heartbeat.interval.ms", INT, 100, "How often a broker sends each peer a "
              "UDP heartbeat (cluster mode).", _at_least(10)),
    ConfigDef("samsa.heartbeat.timeout.ms", INT, 500, "Silence after which a broker reports a "
              "peer as suspected; a majority of a partition's ISR suspecting its leader moves "
              "leadership, and a leader takes a suspected follower that holds its high watermark "
              "back out of the ISR, without waiting for the ZooKeeper session to expire or for "
              "replica.lag.time.max.ms.", _at_least(50)),
    ConfigDef("samsa.preferred.leader.settle.ms", LONG, 10_000, "How long a broker must have been "
              "registered before the preferred leader election gives it leadership back: "
              "clients back off from reconnecting to a broker that was down (librdkafka's "
              "reconnect.backoff.max.ms is 10 s), and a move earlier stalls their writes for the "
              "rest of that backoff.", _at_least(0)),
    ConfigDef("samsa.peer.address.overrides", STRING, "", "Testing: `id=host:tcp_port:udp_port,...` "
              "reach peer `id`'s inter-broker listener and heartbeats through these addresses "
              "(the cluster harness's fault-injecting proxies)."),
    ConfigDef("auto.leader.rebalance.enable", BOOLEAN, True, "Move leadership back to "
              "preferred replicas periodically."),
    ConfigDef("leader.imbalance.check.interval.seconds", LONG, 300, "How often preferred leader "
              "balance is checked.", _at_least(1)),
    ConfigDef("leader.imbalance.per.broker.percentage", INT, 10, "The share of a broker's "
              "preferred partitions led elsewhere above which the controller moves them back.",
              Range(0, 100)),
    # ---- TLS: not served (passwords are never shown) -------------------------------------------
    ConfigDef("ssl.keystore.location", STRING, None, _NO_TLS + "(Kafka: the key store file of "
              "SSL listeners).", read_only=False),
    ConfigDef("ssl.keystore.password", PASSWORD, None, _NO_TLS + "(Kafka: the key store "
              "password).", read_only=False),
    ConfigDef("ssl.key.password", PASSWORD, None, _NO_TLS + "(Kafka: the private key "
              "password).", read_only=False),
    ConfigDef("ssl.truststore.location", STRING, None, _NO_TLS + "(Kafka: the trust store "
              "file).", read_only=False),
    ConfigDef("ssl.truststore.password", PASSWORD, None, _NO_TLS + "(Kafka: the trust store "
              "password).", read_only=False),
    ConfigDef("ssl.client.auth", STRING, "none", _NO_TLS + "(Kafka: whether SSL listeners "
              "require client certificates).", OneOf(("required", "requested", "none")),
              read_only=False),
    # ---- topic configs, with the broker configs they default to ---------------------------------
    ConfigDef("cleanup.policy", LIST, ("delete",), "delete, compact, or both.", _CLEANUP,
              scope=T, synonyms=_syn("log.cleanup.policy")),
    ConfigDef("segment.bytes", INT, 1_073_741_824, "Segment file size.", _at_least(14),
              scope=T, synonyms=_syn("log.segment.bytes")),
    ConfigDef("segment.ms", LONG, 604_800_000, "Roll a segment after this long even if not "
              "full.", _at_least(1), scope=T,
              synonyms=_syn("log.roll.ms", ("log.roll.hours", HOUR_MS))),
    ConfigDef("segment.jitter.ms", LONG, 0, "Maximum random jitter subtracted from segment.ms.",
              _at_least(0), scope=T,
              synonyms=_syn("log.roll.jitter.ms", ("log.roll.jitter.hours", HOUR_MS))),
    ConfigDef("segment.index.bytes", INT, 10_485_760, "Size of the offset and time index files.",
              _at_least(4), scope=T, synonyms=_syn("log.index.size.max.bytes")),
    ConfigDef("index.interval.bytes", INT, 4096, "Bytes between offset index entries.",
              _at_least(0), scope=T, synonyms=_syn("log.index.interval.bytes")),
    ConfigDef("retention.ms", LONG, 604_800_000, "Keep segments this long; -1 means forever.",
              _at_least(-1), scope=T,
              synonyms=_syn("log.retention.ms", ("log.retention.minutes", MINUTE_MS),
                            ("log.retention.hours", HOUR_MS))),
    ConfigDef("retention.bytes", LONG, -1, "Largest partition size before old segments are "
              "deleted; -1 means no limit.", scope=T, synonyms=_syn("log.retention.bytes")),
    ConfigDef("max.message.bytes", INT, 1_048_588, "Largest record batch accepted.",
              _at_least(0), scope=T, synonyms=_syn("message.max.bytes")),
    ConfigDef("flush.messages", LONG, LONG_MAX, "fsync after this many messages.", _at_least(1),
              scope=T, synonyms=_syn("log.flush.interval.messages")),
    ConfigDef("flush.ms", LONG, LONG_MAX, "fsync when unflushed data is this old.", _at_least(0),
              scope=T, synonyms=_syn("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    ConfigDef("file.delete.delay.ms", LONG, 60_000, "Delay before deleted segment files are "
              "removed.", _at_least(0), scope=T, synonyms=_syn("log.segment.delete.delay.ms")),
    ConfigDef("delete.retention.ms", LONG, 86_400_000, "How long tombstones are kept on "
              "compacted topics.", _at_least(0), scope=T,
              synonyms=_syn("log.cleaner.delete.retention.ms")),
    ConfigDef("min.compaction.lag.ms", LONG, 0, "Minimum age before a message may be compacted.",
              _at_least(0), scope=T, synonyms=_syn("log.cleaner.min.compaction.lag.ms")),
    ConfigDef("max.compaction.lag.ms", LONG, LONG_MAX, "Maximum time a message stays "
              "ineligible for compaction.", _at_least(1), scope=T,
              synonyms=_syn("log.cleaner.max.compaction.lag.ms")),
    ConfigDef("min.cleanable.dirty.ratio", DOUBLE, 0.5, "Dirty ratio at which the log is "
              "compacted.", Range(0, 1), scope=T,
              synonyms=_syn("log.cleaner.min.cleanable.ratio")),
    ConfigDef("message.timestamp.type", STRING, "CreateTime", "CreateTime or LogAppendTime.",
              _TIMESTAMP_TYPE, scope=T, synonyms=_syn("log.message.timestamp.type")),
    ConfigDef("message.timestamp.before.max.ms", LONG, LONG_MAX, "How far in the past a record "
              "timestamp may be.", _at_least(0), scope=T,
              synonyms=_syn("log.message.timestamp.before.max.ms")),
    ConfigDef("message.timestamp.after.max.ms", LONG, 3_600_000, "How far in the future a "
              "record timestamp may be.", _at_least(0), scope=T,
              synonyms=_syn("log.message.timestamp.after.max.ms")),
    ConfigDef("message.downconversion.enable", BOOLEAN, True, _NO_DOWNCONVERSION, scope=T,
              synonyms=_syn("log.message.downconversion.enable")),
    ConfigDef("preallocate", BOOLEAN, False, _NO_PREALLOCATE, scope=T,
              synonyms=_syn("log.preallocate")),
)


def _finish_table(defs: Iterable[ConfigDef]) -> dict[str, ConfigDef]:
    """Index the table by name and fill in what follows from it: topic configs are never
    read-only; one whose broker config has the same name (compression.type) is its own
    synonym; a broker config that is the primary fallback of a topic config can be changed at
    runtime, as in Kafka."""
    defs = list(defs)
    table = {d.name: d for d in defs}
    if len(table) != len(defs):
        raise AssertionError("duplicate config name in the table")
    for d in defs:
        if Scope.TOPIC in d.scope:
            synonyms = d.synonyms or _syn(d.name)
            d = table[d.name] = dataclasses.replace(d, synonyms=synonyms, read_only=False)
            primary = table[d.synonyms[0].name]
            table[primary.name] = dataclasses.replace(primary, read_only=False)
    return table


CONFIG_DEFS: Mapping[str, ConfigDef] = MappingProxyType(_finish_table(_DEFS))
"""Every config Samsa knows, by name."""
BROKER_CONFIGS: Mapping[str, ConfigDef] = MappingProxyType(
    {n: d for n, d in CONFIG_DEFS.items() if Scope.BROKER in d.scope})
"""Configs accepted in server.properties and shown by DescribeConfigs for a broker."""
TOPIC_CONFIGS: Mapping[str, ConfigDef] = MappingProxyType(
    {n: d for n, d in CONFIG_DEFS.items() if Scope.TOPIC in d.scope})
"""Configs a topic may override (CreateTopics, AlterConfigs)."""

_BROKER_SYNONYM_GROUPS: Mapping[str, tuple[Synonym, ...]] = MappingProxyType({
    s.name: d.synonyms for d in TOPIC_CONFIGS.values() for s in d.synonyms
})
"""Broker config -> the group of broker configs that set the same thing (log.retention.*)."""


def _broker_synonyms(name: str) -> tuple[Synonym, ...]:
    return _BROKER_SYNONYM_GROUPS.get(name, (Synonym(name),))


def _resolve_group(values: Mapping[str, object], group: tuple[Synonym, ...]) -> object:
    """The effective value of a synonym group: the first member that has a value (set or
    defaulted), times its factor. A negative retention means unlimited (-1), as in Kafka."""
    for syn in group:
        v = values.get(syn.name)
        if v is not None:
            if syn.factor != 1:
                assert isinstance(v, int)
                v = v * syn.factor
            if group[0].name == "log.retention.ms" and isinstance(v, int) and v < 0:
                v = -1
            return v
    return None


def _effective(values: Mapping[str, object], name: str) -> object:
    """The value broker config `name` really has: for the first member of a synonym group
    (log.retention.ms) the group's resolution, otherwise its own value."""
    group = _broker_synonyms(name)
    return _resolve_group(values, group) if group[0].name == name else values[name]


# --------------------------------------------------------------------------------------------
# Listeners
# --------------------------------------------------------------------------------------------

_LISTENER_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class Listener:
    """One listener `NAME://host:port`. An empty host means the default interface (the server
    decides); port 0 means any free port."""

    name: str
    host: str
    port: int
    security_protocol: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def parse_security_protocol_map(key: str, raw: str) -> dict[str, str]:
    """Parse `NAME:PROTOCOL,...` (listener.security.protocol.map); names are upper-cased."""
    result: dict[str, str] = {}
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        name, sep, proto = entry.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or not proto:
            raise _invalid(key, raw, "Map entry should be of form <key><separator><value>")
        if proto not in _SECURITY_PROTOCOLS:
            raise _invalid(key, raw, f"unknown security protocol {proto}")
        result[name] = proto
    return result


def parse_listeners(key: str, raw: str, protocol_map: Mapping[str, str]) -> tuple[Listener, ...]:
    """Parse a listeners string (`PLAINTEXT://127.0.0.1:0,SSL://:9093`, `PLAINTEXT://[::1]:9092`).

    Raises ConfigError naming `key` for a malformed entry, a port outside 0-65535, a listener
    name without a security protocol, or two listeners with the same name or the same
    (non-zero) port.
    """
    listeners: list[Listener] = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        m = _LISTENER_RE.match(entry)
        if m is None:
            raise ConfigError(f"Unable to parse {entry} to a broker endpoint ({key})", key)
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if not 0 <= port <= 65535:
            raise _invalid(key, raw, f"port {port} of listener {name} is out of range")
        if name not in protocol_map:
            raise ConfigError(f"No security protocol defined for listener {name} ({key})", key)
        listeners.append(Listener(name, host, port, protocol_map[name]))
    names = [lst.name for lst in listeners]
    if len(set(names)) != len(names):
        raise _invalid(key, raw, "Each listener must have a different name")
    ports = [lst.port for lst in listeners if lst.port != 0]
    if len(set(ports)) != len(ports):
        raise _invalid(key, raw, "Each listener must have a different port")
    return tuple(listeners)


# --------------------------------------------------------------------------------------------
# BrokerConfig
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """The broker's typed settings. Build it with `from_properties`.

    Most attributes are the config of the same name (dots as underscores) with its default
    applied; a few are derived: `broker_id` (node.id or broker.id), `listeners`,
    `advertised_listeners` (defaults to `listeners`), `listener_security_protocol_map`,
    `inter_broker_listener_name`, `log_dirs` (log.dirs or log.dir), `log_retention_ms`
    (log.retention.ms > .minutes > .hours), `log_roll_ms`, `log_roll_jitter_ms`,
    `log_flush_interval_ms` (falls back to the scheduler interval) and
    `zookeeper_connection_timeout_ms` (falls back to the session timeout).
    `overrides` holds the known keys explicitly set (DescribeConfigs STATIC_BROKER_CONFIG);
    `values` every broker config's own typed value with its default applied (None when unset
    and without default), as DescribeConfigs shows it.
    """

    broker_id: int
    cluster_id: str | None
    broker_rack: str | None
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    listener_security_protocol_map: Mapping[str, str]
    inter_broker_listener_name: str
    log_dirs: tuple[Path, ...]
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    samsa_auto_create_topics_max_per_request: int
    delete_topic_enable: bool
    message_max_bytes: int
    socket_request_max_bytes: int
    socket_send_buffer_bytes: int
    socket_receive_buffer_bytes: int
    queued_max_requests: int
    connections_max_idle_ms: int
    max_connections: int
    max_connections_per_listener: Mapping[str, int]
    max_connections_per_ip: int
    max_connections_per_ip_overrides: Mapping[str, int]
    queued_max_request_bytes: int
    samsa_request_receive_timeout_ms: int
    fetch_max_bytes: int
    max_incremental_fetch_session_cache_slots: int
    background_threads: int
    num_recovery_threads_per_data_dir: int
    log_segment_bytes: int
    log_roll_ms: int
    log_roll_jitter_ms: int
    log_index_size_max_bytes: int
    log_index_interval_bytes: int
    log_retention_ms: int
    log_retention_bytes: int
    log_retention_check_interval_ms: int
    log_segment_delete_delay_ms: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_flush_start_offset_checkpoint_interval_ms: int
    log_preallocate: bool
    log_cleanup_policy: tuple[str, ...]
    log_message_timestamp_type: str
    log_message_timestamp_before_max_ms: int
    log_message_timestamp_after_max_ms: int
    log_message_downconversion_enable: bool
    log_cleaner_enable: bool
    log_cleaner_threads: int
    log_cleaner_backoff_ms: int
    log_cleaner_min_cleanable_ratio: float
    log_cleaner_delete_retention_ms: int
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_max_compaction_lag_ms: int
    compression_type: str
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offsets_commit_timeout_ms: int
    offset_metadata_max_bytes: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_initial_rebalance_delay_ms: int
    group_max_size: int
    producer_id_expiration_ms: int
    transaction_max_timeout_ms: int
    transactional_id_expiration_ms: int
    transaction_state_log_num_partitions: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    replica_lag_time_max_ms: int
    replica_fetch_max_bytes: int
    replica_fetch_min_bytes: int
    replica_fetch_wait_max_ms: int
    replica_fetch_backoff_ms: int
    replica_fetch_response_max_bytes: int
    replica_socket_timeout_ms: int
    replica_high_watermark_checkpoint_interval_ms: int
    num_replica_fetchers: int
    zookeeper_connect: str | None
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int
    controller_socket_timeout_ms: int
    controlled_shutdown_enable: bool
    controlled_shutdown_max_retries: int
    controlled_shutdown_retry_backoff_ms: int
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    leader_imbalance_per_broker_percentage: int
    samsa_heartbeat_port: int
    samsa_heartbeat_interval_ms: int
    samsa_heartbeat_timeout_ms: int
    samsa_preferred_leader_settle_ms: int
    samsa_peer_address_overrides: str
    overrides: Mapping[str, str] = field(default_factory=dict, repr=False)
    values: Mapping[str, object] = field(default_factory=dict, repr=False)

    @property
    def offsets_retention_ms(self) -> int:
        """offsets.retention.minutes in milliseconds."""
        return self.offsets_retention_minutes * MINUTE_MS

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> tuple[BrokerConfig, list[str]]:
        """Build the config from server.properties strings.

        Returns the config and the sorted keys that are not broker configs Samsa knows (not
        fatal; the caller logs them). Raises ConfigError naming the key for an invalid value.
        """
        unknown = sorted(k for k in props
                         if k not in BROKER_CONFIGS and not _LISTENER_MAX_CONNECTIONS.match(k))
        overrides = {k: v for k, v in props.items() if k in BROKER_CONFIGS}
        values: dict[str, object] = {}
        for name, d in BROKER_CONFIGS.items():
            values[name] = d.parse(overrides[name]) if name in overrides else d.default
        kwargs = _derived_settings(values, overrides)
        kwargs.update(_connection_limits(values, props))
        for f in dataclasses.fields(cls):
            if f.name in ("overrides", "values") or f.name in kwargs:
                continue
            key = f.name.replace("_", ".")
            if key not in BROKER_CONFIGS:
                raise AssertionError(f"BrokerConfig.{f.name} has no config definition")
            kwargs[f.name] = _effective(values, key)
        if kwargs["log_retention_ms"] == 0:
            key = next(s.name for s in _broker_synonyms("log.retention.ms")
                       if values[s.name] is not None)
            raise ConfigError(f"{key} must be unlimited (-1) or, equal or greater than 1", key)
        config = cls(**kwargs, overrides=MappingProxyType(dict(overrides)),
                     values=MappingProxyType(values))
        return config, unknown

    def effective(self, name: str) -> object:
        """The value a broker config actually has, following its synonyms
        (`effective("log.retention.ms")` is 604800000 when only the hours default applies)."""
        return _effective(self.values, name)

    def topic_defaults(self) -> dict[str, object]:
        """Each topic config's default on this broker (typed), from its broker synonyms."""
        out: dict[str, object] = {}
        for name, d in TOPIC_CONFIGS.items():
            v = self.effective(d.synonyms[0].name)
            out[name] = d.default if v is None else v
        return out

    def log_config(self) -> LogConfig:
        """The broker's defaults for topics, as the storage layer's LogConfig."""
        from broker.log.config import LogConfig

        return _build_log_config(LogConfig(), self.topic_defaults())


def _refuse_unsupported_protocols(key: str, listeners: Iterable[Listener]) -> None:
    """Samsa serves PLAINTEXT only. A listener mapped to SSL or SASL_* is refused rather than
    served as plaintext: clients would fail with confusing handshake errors, or a user would
    believe the traffic is encrypted or authenticated."""
    for lst in listeners:
        if lst.security_protocol != "PLAINTEXT":
            raise ConfigError(
                f"{key}: listener {lst} uses security protocol {lst.security_protocol}, but "
                "Samsa supports only PLAINTEXT listeners (no TLS, no SASL); map the listener "
                "to PLAINTEXT in listener.security.protocol.map or remove it", key)


_LISTENER_MAX_CONNECTIONS = re.compile(r"listener\.name\.([^.]+)\.max\.connections")
"""Kafka's listener-prefixed max.connections: `listener.name.<lower-case name>.max.connections`."""


def _connection_limits(values: Mapping[str, object],
                       props: Mapping[str, str]) -> dict[str, Any]:
    """max.connections per listener (from the listener-prefixed keys of `props`), the per-IP
    overrides, and Kafka's checks of them and of queued.max.request.bytes."""
    out: dict[str, Any] = {}
    per_listener: dict[str, int] = {}
    for key, raw in props.items():
        m = _LISTENER_MAX_CONNECTIONS.fullmatch(key)
        if m:
            limit = parse_value(INT, key, raw)
            _at_least(0).check(key, INT, limit)
            assert isinstance(limit, int)
            per_listener[m.group(1).upper()] = limit
    out["max_connections_per_listener"] = MappingProxyType(per_listener)
    ip_overrides: dict[str, int] = {}
    raw_overrides = str(values["max.connections.per.ip.overrides"] or "")
    for entry in filter(None, (e.strip() for e in raw_overrides.split(","))):
        host, sep, count = entry.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ConfigError("max.connections.per.ip.overrides contains invalid addresses : "
                              f"{entry} (expected host:count)", "max.connections.per.ip.overrides")
        ip_overrides[host.strip().strip("[]")] = int(count)
    out["max_connections_per_ip_overrides"] = MappingProxyType(ip_overrides)
    if values["max.connections.per.ip"] == 0 and not ip_overrides:
        raise ConfigError("max.connections.per.ip can be set to zero only if "
                          "max.connections.per.ip.overrides property is set.",
                          "max.connections.per.ip")
    queued = values["queued.max.request.bytes"]
    assert isinstance(queued, int)
    request_max = values["socket.request.max.bytes"]
    assert isinstance(request_max, int)
    if 0 < queued < request_max:
        raise ConfigError("queued.max.request.bytes must be larger or equal to "
                          "socket.request.max.bytes", "queued.max.request.bytes")
    return out


def _derived_settings(values: Mapping[str, object],
                      overrides: Mapping[str, str]) -> dict[str, Any]:
    """The BrokerConfig attributes that combine several configs or need parsing beyond type."""
    out: dict[str, Any] = {}
    if "node.id" in overrides and "broker.id" in overrides \
            and values["node.id"] != values["broker.id"]:
        raise ConfigError("broker.id and node.id are both set and differ "
                          f"({values['broker.id']} != {values['node.id']})", "node.id")
    out["broker_id"] = values["node.id"] if "node.id" in overrides else values["broker.id"]

    protocol_map = parse_security_protocol_map(
        "listener.security.protocol.map", str(values["listener.security.protocol.map"]))
    out["listener_security_protocol_map"] = MappingProxyType(protocol_map)
    listeners = parse_listeners("listeners", str(values["listeners"]), protocol_map)
    if not listeners:
        raise ConfigError("listeners must name at least one listener", "listeners")
    advertised = listeners
    if values["advertised.listeners"] is not None:
        advertised = parse_listeners(
            "advertised.listeners", str(values["advertised.listeners"]), protocol_map)
        if any(a.host == "0.0.0.0" for a in advertised):
            raise ConfigError("advertised.listeners cannot use the nonroutable meta-address "
                              "0.0.0.0. Use a routable IP address.", "advertised.listeners")
    for key, group in (("listeners", listeners), ("advertised.listeners", advertised)):
        _refuse_unsupported_protocols(key, group)
    out["listeners"], out["advertised_listeners"] = listeners, advertised

    names = [a.name for a in advertised]
    inter = values["inter.broker.listener.name"]
    if inter is not None:
        inter = str(inter).upper()
        if inter not in names:
            raise ConfigError("inter.broker.listener.name must be a listener name defined in "
                              f"advertised.listeners; valid: {', '.join(names)}",
                              "inter.broker.listener.name")
    else:
        inter = "PLAINTEXT" if "PLAINTEXT" in names else names[0]
    out["inter_broker_listener_name"] = inter

    dirs = values["log.dirs"] or (values["log.dir"],)
    assert isinstance(dirs, tuple)
    out["log_dirs"] = tuple(Path(str(d)) for d in dirs if d)
    if not out["log_dirs"]:
        raise ConfigError("log.dirs and log.dir name no directory", "log.dirs")

    zk_conn = values["zookeeper.connection.timeout.ms"]
    out["zookeeper_connection_timeout_ms"] = (
        values["zookeeper.session.timeout.ms"] if zk_conn is None else zk_conn)
    return out


# --------------------------------------------------------------------------------------------
# Topic configs
# --------------------------------------------------------------------------------------------


def _build_log_config(base: LogConfig, typed: Mapping[str, object]) -> LogConfig:
    """Replace the LogConfig fields named by `typed` (topic config name -> typed value).
    Topic configs LogConfig does not model are skipped; LIST values become comma-joined
    strings when the LogConfig field holds a string (cleanup_policy)."""
    changes: dict[str, object] = {}
    current = {f.name for f in dataclasses.fields(base)}
    for name, value in typed.items():
        attr = name.replace(".", "_")
        if attr not in current:
            continue
        if isinstance(value, tuple) and isinstance(getattr(base, attr), str):
            value = ",".join(value)
        changes[attr] = value
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _parse_topic_configs(configs: Mapping[str, str | None], *,
                         allow_null: bool) -> dict[str, object]:
    """Parse topic overrides (None values skipped); raise KafkaError(invalid_config)."""
    unknown = [k for k in configs if k not in TOPIC_CONFIGS]
    if unknown:
        raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {unknown[0]}")
    nulls = [k for k, v in configs.items() if v is None]
    if nulls and not allow_null:
        raise KafkaError(ErrorCode.invalid_config,
                         f"Null value not supported for topic configs: {','.join(nulls)}")
    typed: dict[str, object] = {}
    for key, raw in configs.items():
        if raw is None:
            continue
        try:
            typed[key] = TOPIC_CONFIGS[key].parse(raw)
        except ConfigError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from None
    return typed


def _check_compaction_lag(min_lag: object, max_lag: object) -> None:
    assert isinstance(min_lag, int) and isinstance(max_lag, int)
    if min_lag > max_lag:
        raise KafkaError(ErrorCode.invalid_config,
                         f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                         f"max.compaction.lag.ms ({max_lag})")


def validate_topic_configs(configs: Mapping[str, str | None], *, allow_null: bool = True) -> None:
    """Check topic config overrides from CreateTopics / AlterConfigs.

    Raises `KafkaError(ErrorCode.invalid_config, msg)` with Kafka's wording for an unknown name
    (`Unknown topic config name: x`), a value of the wrong type or out of range
    (`Invalid value -2 for configuration retention.ms: Value must be at least -1`), or
    min.compaction.lag.ms above max.compaction.lag.ms. A None value means "remove the
    override" and passes unless `allow_null` is False (CreateTopics rejects nulls).
    """
    typed = _parse_topic_configs(configs, allow_null=allow_null)
    _check_compaction_lag(
        typed.get("min.compaction.lag.ms", TOPIC_CONFIGS["min.compaction.lag.ms"].default),
        typed.get("max.compaction.lag.ms", TOPIC_CONFIGS["max.compaction.lag.ms"].default))


def topic_log_config(defaults: LogConfig, overrides: Mapping[str, str | None]) -> LogConfig:
    """`defaults` (usually `BrokerConfig.log_config()`) with a topic's overrides applied.

    Raises KafkaError(invalid_config) like `validate_topic_configs`; None values are ignored.
    """
    config = _build_log_config(defaults, _parse_topic_configs(overrides, allow_null=True))
    _check_compaction_lag(config.min_compaction_lag_ms, config.max_compaction_lag_ms)
    return config


# --------------------------------------------------------------------------------------------
# DescribeConfigs
# --------------------------------------------------------------------------------------------


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
    """Kafka's synonym list for broker config `name`: the members of its synonym group set in
    server.properties, then the members that have a default, with every entry before the
    first one for `name` itself dropped (so log.retention.ms lists nothing when only
    log.retention.hours is set or defaulted, exactly as Kafka reports it)."""
    group = [s.name for s in _broker_synonyms(name)]
    entries: list[ConfigSynonym] = []
    for member in group:
        if member in config.overrides:
            value = None if sensitive else config.overrides[member]
            entries.append(ConfigSynonym(member, value, ConfigSource.STATIC_BROKER_CONFIG))
    for member in group:
        default = CONFIG_DEFS[member].default_string
        if default is not None:
            entries.append(ConfigSynonym(member, None if sensitive else default,
                                         ConfigSource.DEFAULT_CONFIG))
    while entries and entries[0].name != name:
        entries.pop(0)
    return entries


def describe_broker_configs(config: BrokerConfig) -> list[DescribedConfig]:
    """DescribeConfigs entries for the broker resource, sorted by name.

    Each config shows its own value (log.retention.ms is None when only log.retention.hours
    applies, as in Kafka); the source is that of its first synonym."""
    out: list[DescribedConfig] = []
    for name in sorted(BROKER_CONFIGS):
        d = BROKER_CONFIGS[name]
        synonyms = _broker_synonym_entries(config, name, d.is_sensitive)
        value = None if d.is_sensitive else render_value(d.type, config.values[name])
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
    typed = {**defaults.topic_defaults(), **_parse_topic_configs(overrides, allow_null=True)}
    out: list[DescribedConfig] = []
    for name in sorted(TOPIC_CONFIGS):
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
