"""Client quotas enforced on one broker: a confluent-kafka producer and consumer over their byte
rate quotas are throttled to about the quota (throttle_time_ms in the responses, the connection
muted), a client without a quota is not, and a request_percentage quota throttles too. Windows of
1 s (quota.window.num=2) keep it short: a quota lets through one window's worth at once, so the
producer's rate is measured once it is throttled (its last half), and the consumer's over all."""

from __future__ import annotations

import statistics
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, EntityData, EntryData, OpData
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import f64

from broker.testing.process import SamsaProcess
from tests.support import fidelity
from tests.support.raw_client import RawClient

PRODUCE_QUOTA, CONSUME_QUOTA = 200_000, 100_000  # bytes per second
RECORDS, SIZE = 600, 1000


def set_quota(port: int, client_id: str, key: str, value: float) -> None:
    with RawClient(port) as c:
        r: Any = c.request(AlterClientQuotasRequest(entries=(EntryData(
            entity=(EntityData(entity_type="client-id", entity_name=client_id),),
            ops=(OpData(key=key, value=f64(float(value)), remove=False),),
        ),), validate_only=False))  # fmt: skip
    assert [int(e.error_code) for e in r.entries] == [0]


def produce(port: int, client_id: str, topic: str) -> tuple[float, float, list[int]]:
    """(seconds for all RECORDS, seconds for the last half, throttle times librdkafka saw)."""
    throttles: list[int] = []
    acked: list[float] = []
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": client_id, "linger.ms": 5,
                  "batch.size": 16384, "throttle_cb": lambda e: throttles.append(int(e.throttle_time * 1000))})  # fmt: skip
    start = time.monotonic()
    for _ in range(RECORDS):
        p.produce(topic, b"x" * SIZE, partition=0, on_delivery=lambda err, _m: acked.append(time.monotonic()))
        p.poll(0)
    assert p.flush(30) == 0 and len(acked) == RECORDS
    return acked[-1] - start, acked[-1] - acked[RECORDS // 2], throttles


def consume(port: int, client_id: str, topic: str, count: int) -> float:
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": client_id, "group.id": client_id,
                  "enable.auto.commit": False})  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    start, got = time.monotonic(), 0
    while got < count and time.monotonic() - start < 30:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    elapsed = time.monotonic() - start
    c.close()
    assert got == count
    return elapsed


def test_byte_rate_quotas_throttle_to_about_the_quota(samsa_broker_factory: Any) -> None:
    broker: SamsaProcess = samsa_broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})
    with RawClient(broker.port) as c:
        fidelity.create_topic(c, "quota")
        fidelity.wait_for_leader(c, "quota")
    set_quota(broker.port, "slow-writer", "producer_byte_rate", PRODUCE_QUOTA)
    set_quota(broker.port, "slow-reader", "consumer_byte_rate", CONSUME_QUOTA)

    free, _, _ = produce(broker.port, "free-writer", "quota")
    slow, last_half, throttles = produce(broker.port, "slow-writer", "quota")
    rate = RECORDS // 2 * SIZE / last_half
    # 181 kB/s here; Kafka 4.3.1 with the same settings and clients: 118 kB/s
    assert 0.5 * PRODUCE_QUOTA < rate < 1.3 * PRODUCE_QUOTA, (rate, slow, throttles)
    assert free < slow / 4 and throttles and max(throttles) > 0
    # a 16 kB batch at 200 kB/s is owed about 80 ms: the throttles of pipelined produces answered
    # one after another set one deadline, they must not add up (they grew 80, 160, 240, ... when
    # they did, and the rate fell below half the quota on a busy machine)
    assert statistics.median(throttles) < 150, throttles

    count = 300
    free_read = consume(broker.port, "free-reader", "quota", count)
    slow_read = consume(broker.port, "slow-reader", "quota", count)
    rate = count * SIZE / slow_read
    # 48-50 kB/s here and on Kafka 4.3.1 with the same settings (6.0 s): a fetch is capped at one
    # window's worth, and after it the next passes only once that sample has expired (2 windows)
    assert 0.3 * CONSUME_QUOTA < rate < 1.2 * CONSUME_QUOTA, (rate, slow_read)
    assert free_read < slow_read / 4


def test_request_percentage_quota_throttles(samsa_broker_factory: Any) -> None:
    broker: SamsaProcess = samsa_broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})
    set_quota(broker.port, "busy", "request_percentage", 0.001)  # 10 us of handling per second
    request = MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    throttles: list[int] = []
    with RawClient(broker.port) as c:
        while len(throttles) < 50 and not any(throttles):  # a Metadata request takes tens of microseconds
            r: Any = c.request(request, client_id="busy")
            throttles.append(int(r.throttle_time.total_seconds() * 1000))
    with RawClient(broker.port) as c:  # (the first connection is muted for the throttle time)
        other: Any = c.request(request, client_id="idle")
    assert max(throttles) > 0, throttles
    assert int(other.throttle_time.total_seconds() * 1000) == 0
