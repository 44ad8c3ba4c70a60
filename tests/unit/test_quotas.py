"""Client quotas (controller/quotas.py, broker/quotas.py): Kafka's entity rules, precedence and
rate windows, as pure functions."""

from __future__ import annotations

import pytest

from broker.quotas import QuotaManager, Rate, find_quota
from controller.quotas import FilterComponent, alter, describe, entity_of
from protocol.errors import ErrorCode, KafkaError

C, U = "client-id", "user"


def test_alter_checks_entities_as_kafka() -> None:
    for entity, message in [
        ([], "Invalid empty client quota entity"),
        ([("group", "g")], "Unhandled client quota entity type: group"),
        ([(C, "")], "Empty client-id not supported"),
    ]:
        with pytest.raises(KafkaError) as e:
            alter(entity, [("producer_byte_rate", 1.0)], {})
        assert (e.value.code, e.value.message) == (ErrorCode.invalid_request, message)
    with pytest.raises(KafkaError):
        alter([("ip", "127.0.0.1")], [("connection_creation_rate", 1.0)], {})  # not enforced: refused
    with pytest.raises(KafkaError):
        alter([(C, "c")], [("controller_mutation_rate", 1.0)], {})


def test_alter_sets_and_removes_values() -> None:
    current = {"producer_byte_rate": 1024.0, "request_percentage": 50.0}
    assert alter([(C, None)], [("producer_byte_rate", 2048.0), ("request_percentage", None)], current) == {
        "producer_byte_rate": 2048.0
    }
    assert alter([(U, "u")], [("request_percentage", 12.5)], {}) == {"request_percentage": 12.5}
    # Kafka 4.3's value checks: a fraction of a whole-number key first, then keys and signs
    for ops, message in [
        ([("nonsense", 1.0), ("consumer_byte_rate", 1.5)], "consumer_byte_rate cannot be a fractional value."),
        ([("nonsense", 1.0)], "Invalid configuration key nonsense"),
        ([("producer_byte_rate", 0.0)], "Quota producer_byte_rate must be greater than 0"),
    ]:
        with pytest.raises(KafkaError) as e:
            alter([(U, "u")], ops, {})
        assert e.value.message == message


def test_describe_filters() -> None:
    quotas = {
        entity_of([(C, "c1")]): {"producer_byte_rate": 1.0},
        entity_of([(C, None)]): {"producer_byte_rate": 2.0},
        entity_of([(U, "u"), (C, "c1")]): {"consumer_byte_rate": 3.0},
    }
    assert set(describe(quotas, [FilterComponent(C, 0, "c1")], strict=False)) == {
        entity_of([(C, "c1")]), entity_of([(U, "u"), (C, "c1")])}  # fmt: skip
    assert set(describe(quotas, [FilterComponent(C, 0, "c1")], strict=True)) == {entity_of([(C, "c1")])}
    assert set(describe(quotas, [FilterComponent(C, 1)], strict=False)) == {entity_of([(C, None)])}
    assert len(describe(quotas, [FilterComponent(C, 2)], strict=False)) == 3
    assert set(describe(quotas, [FilterComponent(U, 2)], strict=False)) == {entity_of([(U, "u"), (C, "c1")])}
    for bad in ([FilterComponent(C, 0)], [FilterComponent(C, 1, "x")], [FilterComponent(C, 2), FilterComponent(C, 2)],
                [FilterComponent("ip", 2), FilterComponent(U, 2)], [FilterComponent("", 2)]):  # fmt: skip
        with pytest.raises(KafkaError):
            describe(quotas, bad, strict=False)


def test_precedence_is_kafkas() -> None:
    levels = [
        ([(U, "u"), (C, "c")], ("u", "c")), ([(U, "u"), (C, None)], ("u", "c")), ([(U, "u")], ("u", "")),
        ([(U, None), (C, "c")], ("u", "c")), ([(U, None), (C, None)], ("u", "c")), ([(U, None)], ("u", "")),
        ([(C, "c")], ("", "c")), ([(C, None)], ("", "c")),
    ]  # fmt: skip
    quotas = {entity_of(e): {"producer_byte_rate": float(i)} for i, (e, _) in enumerate(levels)}
    for i, (entity, tags) in enumerate(levels):
        assert find_quota(quotas, "producer_byte_rate", "u", "c") == (float(i), tags)
        del quotas[entity_of(entity)]
    assert find_quota(quotas, "producer_byte_rate", "u", "c") is None


def test_rate_and_throttle_time() -> None:
    rate = Rate(samples=11, window_ms=1000)
    rate.record(10_000, 0)
    assert rate.window_size_ms(0) == 10_000  # at least samples - 1 full windows
    assert rate.rate(0) == 1000.0
    quotas = {entity_of([(C, "c")]): {"producer_byte_rate": 1000.0}}
    manager = QuotaManager(samples=11, window_ms=1000)
    assert manager.record(quotas, "producer_byte_rate", "ANONYMOUS", "c", 10_000, 0) == 0  # exactly the quota
    # 20 000 bytes over a 10 s window: 2000 B/s against 1000: (2000 - 1000) / 1000 * 10 s
    assert manager.record(quotas, "producer_byte_rate", "ANONYMOUS", "c", 10_000, 0) == 10_000
    assert manager.record(quotas, "producer_byte_rate", "ANONYMOUS", "other", 10_000, 0) == 0  # no quota
    # samples older than samples * window are forgotten
    assert manager.record(quotas, "producer_byte_rate", "ANONYMOUS", "c", 1, 20_000) == 0
    # the throttle time is capped at samples * window
    assert manager.record(quotas, "producer_byte_rate", "ANONYMOUS", "c", 10**9, 20_000) == 11_000
