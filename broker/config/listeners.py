"""Listeners: `NAME://host:port` entries and the listener-to-security-protocol map."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from broker.config.values import ConfigError, invalid

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)

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
            raise invalid(key, raw, "Map entry should be of form <key><separator><value>")
        if proto not in SECURITY_PROTOCOLS:
            raise invalid(key, raw, f"unknown security protocol {proto}")
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
            raise invalid(key, raw, f"port {port} of listener {name} is out of range")
        if name not in protocol_map:
            raise ConfigError(f"No security protocol defined for listener {name} ({key})", key)
        listeners.append(Listener(name, host, port, protocol_map[name]))
    names = [lst.name for lst in listeners]
    if len(set(names)) != len(names):
        raise invalid(key, raw, "Each listener must have a different name")
    ports = [lst.port for lst in listeners if lst.port != 0]
    if len(set(ports)) != len(ports):
        raise invalid(key, raw, "Each listener must have a different port")
    return tuple(listeners)
