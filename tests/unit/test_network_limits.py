"""The pieces behind the broker's resource limits: log escaping, the request memory pool,
connection quotas and their configs (the behaviour against a real broker is in
tests/integration/test_fuzz_resources.py)."""

from __future__ import annotations

import logging
import sys

import pytest

from broker.acceptor import ConnectionQuotas, normalise_ip
from broker.config import BrokerConfig, ConfigError
from broker.logs import FORMAT, SafeFormatter, Throttle, escape
from broker.memory_pool import MemoryPool


def config(**props: str) -> BrokerConfig:
    return BrokerConfig.from_properties(props)[0]


# -- escaping ------------------------------------------------------------------------------------


def test_escape_writes_control_characters_and_line_separators_as_escapes() -> None:
    assert escape("a\nb\rc\td\x00e\x1bf\x7fg\x85h\x9bi\u2028j\u2029k") == (
        "a\\nb\\rc\\td\\x00e\\x1bf\\x7fg\\x85h\\x9bi\\u2028j\\u2029k")
    plain = "client_id=consumer-1 topic=orders é ü 日本"
    assert escape(plain) is plain


def _record(msg: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = None
    if exc is not None:
        try:
            raise exc
        except BaseException:
            exc_info = sys.exc_info()
    return logging.LogRecord("samsa.test", logging.WARNING, __file__, 1, msg, args, exc_info)


def test_a_record_with_a_newline_in_an_argument_stays_one_line() -> None:
    formatter = SafeFormatter(FORMAT)
    forged = "2026-01-01 00:00:00,000 ERROR samsa.broker forged"
    line = formatter.format(_record("request client_id=%s", f"x\n{forged}\x1b[2J"))
    assert "\n" not in line and "\x1b" not in line
    assert line.endswith(f"request client_id=x\\n{forged}\\x1b[2J")


def test_traceback_lines_are_indented_so_none_can_pass_for_a_record() -> None:
    formatter = SafeFormatter(FORMAT)
    forged = "2026-01-01 00:00:00,000 ERROR samsa.broker forged"
    text = formatter.format(_record("request failed", exc=ValueError(f"bad\n{forged}\x1b")))
    first, *rest = text.split("\n")
    assert first.endswith("request failed")
    assert rest and all(line.startswith("  ") for line in rest), rest
    assert any("Traceback" in line for line in rest)
    assert "\x1b" not in text and any(forged in line for line in rest)


def test_throttle_lets_one_event_per_interval_through_and_counts_the_rest() -> None:
    throttle = Throttle(60.0)
    assert throttle.due()
    assert not throttle.due() and not throttle.due()
    assert throttle.take_suppressed() == 2
    assert throttle.take_suppressed() == 0


# -- the memory pool -----------------------------------------------------------------------------


def test_unbounded_pool_always_allocates() -> None:
    pool = MemoryPool(-1)
    assert not pool.bounded
    assert pool.try_allocate(1 << 40)
    pool.release(1 << 40)


def test_bounded_pool_is_kafkas_non_strict_pool() -> None:
    pool = MemoryPool(100)
    assert pool.try_allocate(60)
    assert pool.try_allocate(60)  # any memory left: granted, the pool goes below zero
    assert pool.available == -20
    assert not pool.try_allocate(1)
    woken: list[str] = []

    def waiter(name: str) -> None:
        def wake() -> None:
            woken.append(name)
            assert pool.try_allocate(30)
        pool.wait(wake)

    waiter("first")
    waiter("second")
    waiter("third")
    pool.release(60)  # 40 left: the first takes 30 (10 left), the second takes 30 (-20 left)
    assert woken == ["first", "second"] and pool.waiting == 1
    pool.release(60)
    assert woken == ["first", "second", "third"] and pool.waiting == 0


# -- connection quotas ---------------------------------------------------------------------------


def test_broker_and_listener_limits() -> None:
    quotas = ConnectionQuotas(config(**{
        "max.connections": "3", "listener.name.plaintext.max.connections": "2"}), {})
    assert quotas.slot_available("PLAINTEXT")
    quotas.inc("PLAINTEXT", "10.0.0.1")
    quotas.inc("PLAINTEXT", "10.0.0.1")
    assert not quotas.slot_available("PLAINTEXT")  # the listener's own limit
    quotas.dec("PLAINTEXT", "10.0.0.1")
    assert quotas.slot_available("PLAINTEXT")
    assert quotas.per_ip["10.0.0.1"] == 1


def test_the_inter_broker_listener_is_exempt_from_the_broker_wide_limit() -> None:
    quotas = ConnectionQuotas(config(**{
        "listeners": "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION",
        "max.connections": "1",
    }), {})
    quotas.inc("PLAINTEXT", "10.0.0.1")
    assert not quotas.slot_available("PLAINTEXT")
    assert quotas.slot_available("REPLICATION")
    quotas.inc("REPLICATION", "10.0.0.2")
    assert quotas.excess()  # the broker then closes a connection of another listener


def test_a_single_listener_is_not_exempt() -> None:
    quotas = ConnectionQuotas(config(**{"max.connections": "1"}), {})
    assert quotas.protected_listener is None
    quotas.inc("PLAINTEXT", "10.0.0.1")
    assert not quotas.slot_available("PLAINTEXT")


def test_per_ip_limit_and_overrides() -> None:
    quotas = ConnectionQuotas(config(**{"max.connections.per.ip": "2"}), {"10.0.0.9": 5})
    assert quotas.ip_limit("10.0.0.1") == 2
    assert quotas.ip_limit("10.0.0.9") == 5


def test_ipv4_mapped_addresses_count_as_ipv4() -> None:
    assert normalise_ip("::ffff:127.0.0.2") == "127.0.0.2"
    assert normalise_ip("::1") == "::1"
    assert normalise_ip("fe80::1%eth0") == "fe80::1"


# -- configs -------------------------------------------------------------------------------------


def test_connection_limit_configs() -> None:
    c, unknown = BrokerConfig.from_properties({
        "listener.name.internal.max.connections": "7",
        "max.connections.per.ip.overrides": "hostA:100, 127.0.0.1:200,[::1]:3",
        "queued.max.request.bytes": "209715200",
    })
    assert unknown == []
    assert dict(c.max_connections_per_listener) == {"INTERNAL": 7}
    assert dict(c.max_connections_per_ip_overrides) == {"hostA": 100, "127.0.0.1": 200, "::1": 3}
    assert c.queued_max_request_bytes == 209_715_200
    assert c.max_connections == c.max_connections_per_ip == 2**31 - 1


@pytest.mark.parametrize("props, message", [
    ({"max.connections.per.ip": "0"}, "can be set to zero only if"),
    ({"queued.max.request.bytes": "1000"}, "must be larger or equal to socket.request.max.bytes"),
    ({"max.connections.per.ip.overrides": "hostA"}, "invalid addresses"),
    ({"max.connections.per.ip.overrides": "hostA:x"}, "invalid addresses"),
    ({"listener.name.a.max.connections": "-1"}, "listener.name.a.max.connections"),
    ({"samsa.request.receive.timeout.ms": "0"}, "Value must be at least 1"),
])
def test_invalid_connection_limit_configs(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)
