"""Config values: types, where a value comes from, parsing and rendering as Kafka does, and
the validators a setting may carry.

A config's type decides how its string is parsed (`parse_value`) and how its value is shown in
DescribeConfigs (`render_value`), both following Kafka's ConfigDef: case-insensitive booleans,
range-checked SHORT/INT/LONG, comma-separated LIST, Java's rendering of doubles.
"""

from __future__ import annotations

import decimal
import enum
import math
import re
from dataclasses import dataclass

LONG_MAX = (1 << 63) - 1
"""Java's Long.MAX_VALUE, Kafka's "never" for millisecond and count settings."""
LONG_MIN = -(1 << 63)
INT_MAX = (1 << 31) - 1
INT_MIN = -(1 << 31)
SHORT_MAX = (1 << 15) - 1
SHORT_MIN = -(1 << 15)


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
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class Scope(enum.Flag):
    """Whether a config is a broker config (server.properties), a topic config, or both."""

    BROKER = enum.auto()
    TOPIC = enum.auto()
    BOTH = BROKER | TOPIC


_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT_BOUNDS = {
    ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
}


def invalid(key: str, value: object, reason: str) -> ConfigError:
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
        raise invalid(key, s, "Expected value to be either true or false")
    if ctype in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[ctype]
        if not _INT_RE.fullmatch(s) or not lo <= int(s) <= hi:
            raise invalid(key, s, f"Not a number of type {ctype.name}")
        return int(s)
    if ctype is ConfigType.DOUBLE:
        try:
            if "_" in s:
                raise ValueError(s)
            return float(s)
        except ValueError:
            raise invalid(key, s, "Not a number of type DOUBLE") from None
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
            raise invalid(key, shown, f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise invalid(key, shown, f"Value must be no more than {self.max}")

@dataclass(frozen=True, slots=True)
class OneOf:
    """The value (each element, for LIST configs) must be one of `choices` (case-sensitive unless
    `ignore_case`: Kafka's CaseInsensitiveValidString)."""

    choices: tuple[str, ...]
    ignore_case: bool = False

    def check(self, key: str, ctype: ConfigType, value: object) -> None:
        """Raise ConfigError when `value` (or one of its elements) is not allowed."""
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if self.ignore_case and isinstance(item, str) and item.lower() in self.choices:
                continue
            if item not in self.choices:
                if self.ignore_case:  # Kafka shows them upper-cased
                    raise invalid(key, item, f"String must be one of (case insensitive): "
                                  f"{', '.join(c.upper() for c in self.choices)}")  # fmt: skip
                raise invalid(key, item, f"String must be one of: {', '.join(self.choices)}")
        if isinstance(value, tuple) and len(set(value)) != len(value):
            raise ConfigError(f"Configuration '{key}' values must not be duplicated.", key)


@dataclass(frozen=True, slots=True)
class GzipLevel:
    """Kafka's GzipCompression.LevelValidator: -1 (zlib's default) or 1-9."""

    def check(self, key: str, ctype: ConfigType, value: object) -> None:
        """Raise ConfigError for any other level."""
        assert isinstance(value, int)
        if value != -1 and not 1 <= value <= 9:
            raise invalid(key, value, "Value must be between 1 and 9 or equal to -1")


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


@dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    """Kafka's ThrottledReplicaListValidator: `*` or `partitionId:brokerId` pairs."""

    def check(self, key: str, ctype: ConfigType, value: object) -> None:
        """Raise ConfigError, showing the value as a Java list, for anything else."""
        assert isinstance(value, tuple)
        if "".join(value) != "*" and not all(_REPLICA.fullmatch(item) for item in value):
            raise invalid(key, f"[{', '.join(value)}]", f"{key} must be the literal '*' or a list of replicas "
                          "in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


_DURATION = re.compile(r"P(?:(?P<d>[0-9]+)D)?(?:T(?=[0-9])(?:(?P<h>[0-9]+)H)?(?:(?P<m>[0-9]+)M)?"
                       r"(?:(?P<s>[0-9]+(?:[.,][0-9]{0,9})?)S)?)?", re.IGNORECASE)


def duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration as share.auto.offset.reset's by_duration takes it
    (Java's Duration.parse subset the validator below accepts: PnDTnHnMn.nS)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    days, hours, minutes = (int(match[g] or 0) for g in "dhm")
    seconds = float((match["s"] or "0").replace(",", "."))
    return ((days * 24 + hours) * 60 + minutes) * 60_000 + int(seconds * 1000)


@dataclass(frozen=True, slots=True)
class AutoOffsetReset:
    """share.auto.offset.reset: earliest, latest or by_duration:<ISO-8601 duration, not negative>
    (Kafka's ShareGroupAutoOffsetResetStrategy.Validator, with its message)."""

    def check(self, key: str, ctype: ConfigType, value: object) -> None:
        text = str(value)
        kind, _, duration = text.partition(":")
        ok = text.lower() in ("earliest", "latest") or (
            kind.lower() == "by_duration" and _DURATION.fullmatch(duration.strip()) is not None
            and duration.strip().upper() not in ("P", "PT"))
        if not ok:
            raise invalid(key, text, f"Invalid value `{text}` for configuration {key}. The value must be either "
                                     "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


Validator = Range | OneOf | GzipLevel | ThrottledReplicas | AutoOffsetReset
