"""KIP-932 share groups with Kafka's own share consumer, on Kafka 4.3.1 and on Samsa alike.

- Java kafka-clients 4.x (compat/jvm/harness/clients-4/ShareHarness.java): the group's
  share.auto.offset.reset=earliest and share.delivery.count.limit=2 set through the AdminClient;
  two KafkaShareConsumers (explicit acknowledgement) share one partition's records, each accepted
  record accepted once; a record released each time is delivered again until the delivery limit
  archives it, a rejected one is never delivered again; a consumer closed while holding records
  has them delivered to the next one with their delivery count raised.
- librdkafka (confluent-kafka's ShareConsumer, explicit acknowledgement): the group's
  share.delivery.count.limit=2; a consumer accepts four records, releases one (delivered again with
  delivery count 2, released again, then archived) and rejects one; two records it holds when it
  closes go to the next consumer with delivery count 2.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from compat.jvm import run_main
from tests.support import fidelity
from tests.support.raw_client import RawClient


def _java(target: Any) -> list[dict]:
    return run_main("clients-4", "ShareHarness", target.bootstrap_servers, "j4-share", timeout=180)[1:]


@pytest.mark.compat(client="java 4.x", scenario="KIP-932 share consumers: shared records, release, reject, redelivery")
def test_java_share_consumers(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("java-clients-4-share-consumers", _java)}
    assert obs["shared"] == {"step": "shared", "accepted": {"r0": 1, "r1": 1, "r2": 1, "r3": 1}, "r4": [1, 2],
                             "r5": [1], "others": ["r0", "r1", "r2", "r3"]}  # fmt: skip
    redelivered = obs["redelivered"]
    assert redelivered["held"] and set(redelivered["held"]) == {1}
    assert len(redelivered["again"]) == len(redelivered["held"]) and set(redelivered["again"].values()) == {2}


# -- librdkafka's share consumer (confluent-kafka's ShareConsumer) -----------------------------------

RK_TOPIC = "rk-share"
RK_GROUP = "rk-share"
GROUP_RESOURCE = 32  # ConfigResource type GROUP


def _rk_poll(consumer: Any, n: int, deadline_s: float = 30.0) -> list[Any]:
    """Poll until `n` records have come (explicit mode: the caller acknowledges each batch)."""
    got: list[Any] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < n:
        assert time.monotonic() < deadline, f"{len(got)} of {n} records"
        for m in consumer.poll(0.5):
            assert m.error() is None, m.error()
            got.append(m)
    return got


def _rk_records(messages: list[Any]) -> list[list[Any]]:
    return sorted([m.value().decode(), m.delivery_count()] for m in messages)


def _librdkafka(target: Any) -> list[dict[str, Any]]:
    """Six records: one consumer accepts four, releases one (delivered again, released again: the
    delivery limit of 2 archives it) and rejects one; two more are held by a consumer that closes
    without acknowledging them and go to the next consumer with their delivery count raised."""
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, RK_TOPIC)
        ops = [("share.auto.offset.reset", 0, "earliest"), ("share.delivery.count.limit", 0, "2")]
        assert fidelity.incremental_alter_configs(client, GROUP_RESOURCE, RK_GROUP, ops) == (0, None)
        deadline = time.monotonic() + 10  # Kafka applies group configs a moment after the alter
        while fidelity.describe_configs(client, GROUP_RESOURCE, RK_GROUP, ["share.auto.offset.reset"]).get(
                "share.auto.offset.reset", (None,))[0] != "earliest":  # fmt: skip
            assert time.monotonic() < deadline
            time.sleep(0.1)
    producer = Producer({"bootstrap.servers": target.bootstrap_servers, "acks": "all"})

    def produce(*values: str) -> None:
        for v in values:
            producer.produce(RK_TOPIC, value=v.encode(), partition=0)
        assert producer.flush(30) == 0

    def consumer() -> Any:
        c = ShareConsumer({"bootstrap.servers": target.bootstrap_servers, "group.id": RK_GROUP,
                           "share.acknowledgement.mode": "explicit"})  # fmt: skip
        c.subscribe([RK_TOPIC])
        return c

    def commit(c: Any) -> list[str]:
        return sorted(f"{tp.partition}:{'' if e is None else e}" for tp, e in c.commit_sync(30).items())

    obs: list[dict[str, Any]] = []
    produce(*(f"r{i}" for i in range(6)))
    first = consumer()
    got = _rk_poll(first, 6)
    for m in got:
        value = m.value().decode()
        first.acknowledge(m, {"r4": AcknowledgeType.RELEASE, "r5": AcknowledgeType.REJECT}.get(value, AcknowledgeType.ACCEPT))
    obs.append({"step": "first", "records": _rk_records(got), "committed": commit(first)})
    again = _rk_poll(first, 1)
    for m in again:
        first.acknowledge(m, AcknowledgeType.RELEASE)
    obs.append({"step": "released-again", "records": _rk_records(again), "committed": commit(first)})
    produce("r6", "r7")
    held = _rk_poll(first, 2)  # r4 is archived: only the two new records come
    obs.append({"step": "held", "records": _rk_records(held)})
    first.close()  # without acknowledging them: released
    second = consumer()
    redelivered = _rk_poll(second, 2)
    for m in redelivered:
        second.acknowledge(m, AcknowledgeType.ACCEPT)
    obs.append({"step": "redelivered", "records": _rk_records(redelivered), "committed": commit(second)})
    second.close()
    producer.flush(5)
    return obs


@pytest.mark.compat(client="confluent-kafka (librdkafka)", scenario="KIP-932 share consumer: accept, release, reject, redelivery")
def test_librdkafka_share_consumer(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("librdkafka-share-consumer", _librdkafka)}
    assert obs["first"]["records"] == [[f"r{i}", 1] for i in range(6)]
    assert obs["first"]["committed"] == ["0:"]
    assert obs["released-again"]["records"] == [["r4", 2]]
    assert obs["held"]["records"] == [["r6", 1], ["r7", 1]]
    assert obs["redelivered"]["records"] == [["r6", 2], ["r7", 2]]
