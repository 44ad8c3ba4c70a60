"""Listening sockets: accepting connections within Kafka's connection limits.

Samsa accepts on its own rather than through asyncio.start_server, for two reasons. asyncio's
accept loop (3.11) answers EMFILE by logging a traceback through the loop's exception handler and
then goes on calling accept() up to 100 times in the same tick, each failure another traceback and
another retry timer: out of file descriptors, a broker wrote ~4,000 tracebacks a second. And
Kafka's max.connections stops accepting at the limit, which asyncio's server cannot do.

Limits, as Kafka's SocketServer / ConnectionQuotas apply them:
- `max.connections` (broker-wide) and `listener.name.<name>.max.connections`: at the limit the
  listener stops accepting; new connections wait in the kernel's listen backlog until a connection
  closes. With more than one listener, the inter-broker listener is exempt from the broker-wide
  limit (only its own applies); the broker then closes the least recently active connection of
  another listener to get back under the limit (`Broker._close_excess_connection`).
- `max.connections.per.ip` and `max.connections.per.ip.overrides`: a connection from an address
  at its limit is accepted and closed at once.
- accept() failing for lack of file descriptors, buffers or memory (EMFILE, ENFILE, ENOBUFS,
  ENOMEM) or anything else stops accepting for ACCEPT_BACKOFF_S and retries; waiting clients stay
  in the backlog. Repeated events log one line per interval with the count of those not logged.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any

from broker.config import INT_MAX, BrokerConfig, Listener
from broker.logs import Throttle

log = logging.getLogger("samsa.network")

ACCEPT_BACKOFF_S = 0.1
"""Pause after a failed accept() before trying again."""
ACCEPT_BATCH = 64
"""Connections accepted per readiness event before other work gets the loop."""
LOG_INTERVAL_S = 10.0
"""Repeated accept failures, rejections and blocked periods log one line per interval."""
LISTEN_BACKLOG = 100


def normalise_ip(host: str) -> str:
    """The address connections are counted under: IPv4-mapped IPv6 addresses as IPv4."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def resolve_ip_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """max.connections.per.ip.overrides by address: each host name stands for all its addresses."""
    resolved: dict[str, int] = {}
    for host, limit in overrides.items():
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as e:
            raise OSError(f"max.connections.per.ip.overrides: cannot resolve {host}: {e}") from e
        for info in infos:
            resolved[normalise_ip(str(info[4][0]))] = limit
    return resolved


class ConnectionQuotas:
    """Connection counts (total, per listener, per address) against the configured limits."""

    def __init__(self, config: BrokerConfig, ip_overrides: Mapping[str, int]) -> None:
        self.max_connections = config.max_connections
        self.listener_limits = dict(config.max_connections_per_listener)
        self.max_per_ip = config.max_connections_per_ip
        self.ip_overrides = dict(ip_overrides)
        self.protected_listener = (
            config.inter_broker_listener_name if len(config.listeners) > 1 else None)
        """Kafka's rule: the inter-broker listener is exempt from the broker-wide limit when
        there are other listeners."""
        self.total = 0
        self.per_listener: collections.Counter[str] = collections.Counter()
        self.per_ip: collections.Counter[str] = collections.Counter()

    def slot_available(self, listener: str) -> bool:
        if self.per_listener[listener] >= self.listener_limits.get(listener, INT_MAX):
            return False
        return listener == self.protected_listener or self.total < self.max_connections

    def ip_limit(self, ip: str) -> int:
        return self.ip_overrides.get(ip, self.max_per_ip)

    def excess(self) -> bool:
        """More connections than max.connections (accepted on the inter-broker listener)."""
        return self.total > self.max_connections

    def inc(self, listener: str, ip: str) -> None:
        self.total += 1
        self.per_listener[listener] += 1
        self.per_ip[ip] += 1

    def dec(self, listener: str, ip: str) -> None:
        self.total -= 1
        self.per_listener[listener] -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]


def bind(listener: Listener) -> socket.socket:
    """A listening, non-blocking socket for `listener` (an empty host: every interface)."""
    if not listener.host:
        if socket.has_dualstack_ipv6():
            sock = socket.create_server(("", listener.port), family=socket.AF_INET6,
                                        dualstack_ipv6=True, backlog=LISTEN_BACKLOG)
        else:
            sock = socket.create_server(("", listener.port), backlog=LISTEN_BACKLOG)
    else:
        family, _, _, _, address = socket.getaddrinfo(
            listener.host, listener.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.create_server(address[:2], family=family, backlog=LISTEN_BACKLOG)
    sock.setblocking(False)
    return sock


class AcceptState(enum.Enum):
    ACCEPTING = "accepting"
    BLOCKED = "blocked"
    BACKING_OFF = "backing_off"
    CLOSED = "closed"


class Acceptor:
    """Accepts the connections of one listener.

    States:
      ACCEPTING    the listening socket is watched; each readiness accepts up to ACCEPT_BATCH.
      BLOCKED      max.connections or the listener's limit is reached: not watched.
      BACKING_OFF  accept() failed: not watched for ACCEPT_BACKOFF_S.
      CLOSED       stopped; the socket is closed.
    Transitions: ACCEPTING -> BLOCKED (no slot) -> ACCEPTING (`maybe_resume`, called when a
    connection closes, finds a slot); ACCEPTING -> BACKING_OFF (accept error) -> ACCEPTING
    (timer); any -> CLOSED (`close`).
    """

    def __init__(
        self,
        listener: str,
        sock: socket.socket,
        quotas: ConnectionQuotas,
        on_accept: Callable[[str, socket.socket, str], None],
    ) -> None:
        self.listener = listener
        self.sock = sock
        self.quotas = quotas
        self.on_accept = on_accept
        self.state = AcceptState.CLOSED
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._error_log = Throttle(LOG_INTERVAL_S)
        self._reject_log = Throttle(LOG_INTERVAL_S)
        self._blocked_log = Throttle(LOG_INTERVAL_S)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._watch()

    def close(self) -> None:
        if self.state is AcceptState.ACCEPTING and self._loop is not None:
            self._loop.remove_reader(self.sock)
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self.state = AcceptState.CLOSED
        self.sock.close()

    def maybe_resume(self) -> None:
        if self.state is AcceptState.BLOCKED and self.quotas.slot_available(self.listener):
            self._watch()

    def _watch(self) -> None:
        assert self._loop is not None
        self.state = AcceptState.ACCEPTING
        self._loop.add_reader(self.sock, self._on_readable)

    def _unwatch(self, state: AcceptState) -> None:
        assert self._loop is not None
        self._loop.remove_reader(self.sock)
        self.state = state

    def _on_readable(self) -> None:
        quotas = self.quotas
        for _ in range(ACCEPT_BATCH):
            if not quotas.slot_available(self.listener):
                self._block()
                return
            try:
                conn, address = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as e:
                self._back_off(e)
                return
            conn.setblocking(False)
            # as Kafka's acceptor; asyncio sets it only on sockets made with IPPROTO_TCP, and
            # without it a response's last small chunk after a sendfile waits ~40 ms for an ACK
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ip = normalise_ip(str(address[0]))
            limit = quotas.ip_limit(ip)
            if quotas.per_ip[ip] >= limit:
                self._reject(conn, ip, address, limit)
                continue
            quotas.inc(self.listener, ip)
            self.on_accept(self.listener, conn, ip)

    def _block(self) -> None:
        self._unwatch(AcceptState.BLOCKED)
        if self._blocked_log.due():
            quotas = self.quotas
            log.warning(
                "connection limit reached, accepting paused listener=%s connections=%d "
                "listener_connections=%d max_connections=%d listener_max_connections=%s "
                "suppressed=%d",
                self.listener,
                quotas.total,
                quotas.per_listener[self.listener],
                quotas.max_connections,
                quotas.listener_limits.get(self.listener, "none"),
                self._blocked_log.take_suppressed(),
            )

    def _back_off(self, error: OSError) -> None:
        assert self._loop is not None
        self._unwatch(AcceptState.BACKING_OFF)
        self._retry = self._loop.call_later(ACCEPT_BACKOFF_S, self._end_back_off)
        if self._error_log.due():
            log.error(
                "accept failed listener=%s error=%s connections=%d retry_ms=%d suppressed=%d",
                self.listener,
                error,
                self.quotas.total,
                ACCEPT_BACKOFF_S * 1000,
                self._error_log.take_suppressed(),
            )

    def _end_back_off(self) -> None:
        self._retry = None
        if self.state is AcceptState.BACKING_OFF:
            self._watch()

    def _reject(self, conn: socket.socket, ip: str, address: Any, limit: int) -> None:
        """Kafka's answer to a connection beyond max.connections.per.ip: accept, then close."""
        conn.close()
        if self._reject_log.due():
            log.info(
                "connection rejected reason=max_connections_per_ip client=%s:%s listener=%s "
                "ip_connections=%d max_connections_per_ip=%d suppressed=%d",
                ip,
                address[1],
                self.listener,
                self.quotas.per_ip[ip],
                limit,
                self._reject_log.take_suppressed(),
            )
