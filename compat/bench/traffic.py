"""Steady traffic with timed acknowledgements and reads, for availability measurements.

`run_producer` sends to every partition of a topic in turn at a fixed rate with an idempotent
acks=all confluent-kafka producer and records, per partition, each acknowledgement with the
monotonic time its delivery report arrived; `run_consumer` reads the topic in a consumer group and
records each record with the time it was read. `longest_gap` is the measure of issue 15: the
longest time between two consecutive events (acknowledgements, or reads) on one partition within
a window, the window's end counting as an event so that a partition that never recovers shows its
whole stall. The cluster tests (tests/cluster) and the fault benchmark (compat.bench.faults) use
the same code, against Samsa and against Kafka.

librdkafka reports some acknowledgements without an offset (`offset` None): an idempotent
producer whose request R1 failed with an unknown outcome (a timeout, a broken connection) and whose
later request R2 succeeded knows that R1's messages were written, since the sequence numbers
follow, and acknowledges them "implicitly" (rd_kafka_dr_implicit_ack, rdkafka_broker.c; called from
rd_kafka_handle_idempotent_Produce_success in rdkafka_request.c), with status PERSISTED and no
offset. `AckLog.check_against` holds such a record to the same promise without the offset: it must
be in the final log exactly once, after the records the producer acknowledged before it and before
those it acknowledged after it on the same partition.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


@dataclass
class AckLog:
    """Acknowledged records (partition, offset or None, value) in delivery-report order, with
    their times per partition, and the errors the producer reported."""

    records: list[tuple[int, int | None, bytes]] = field(default_factory=list)
    times: dict[int, list[float]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, partition: int, offset: int | None, value: bytes, at: float | None = None) -> None:
        """Record an acknowledgement; `at` (monotonic) when its time is known."""
        with self.lock:
            self.records.append((partition, offset, value))
            if at is not None:
                self.times.setdefault(partition, []).append(at)

    def error(self, what: object) -> None:
        with self.lock:
            self.errors[str(what)[:160]] += 1

    def count(self, partition: int) -> int:
        with self.lock:
            return len(self.times.get(partition, ()))

    def longest_gap(self, partition: int, since: float, until: float | None = None) -> float:
        with self.lock:
            return longest_gap(self.times.get(partition, []), since, until)

    def gap_interval(self, partition: int, since: float, until: float | None = None) -> tuple[float, float]:
        with self.lock:
            return gap_interval(self.times.get(partition, []), since, until)

    def check_against(self, log: Mapping[tuple[int, int], bytes]) -> list[str]:
        """Problems with these acknowledgements against the final log ((partition, offset) ->
        value): a record not at its offset, not in the log exactly once, or out of ack order."""
        where: dict[bytes, list[tuple[int, int]]] = {}
        for key, v in log.items():
            where.setdefault(v, []).append(key)
        problems: list[str] = []
        last: dict[int, int] = {}
        for q, off, v in self.records:
            places = where.get(v, [])
            if len(places) != 1:
                problems.append(f"{v!r} acknowledged on partition {q} is in the log {len(places)} times")
                continue
            at_q, at_off = places[0]
            if at_q != q or (off is not None and at_off != off):
                problems.append(f"{v!r} acknowledged at {q}/{off} is at {at_q}/{at_off}")
                continue
            if at_off <= last.get(q, -1):
                problems.append(f"{v!r} at {q}/{at_off} acknowledged after {q}/{last[q]}")
            last[q] = max(last.get(q, -1), at_off)
        return problems


def longest_gap(times: list[float], since: float, until: float | None = None) -> float:
    """Longest interval between consecutive times in [since, until], counting from the last time
    before `since` (or `since` itself) and up to `until` (default: now)."""
    start, end = gap_interval(times, since, until)
    return end - start


def gap_interval(times: list[float], since: float, until: float | None = None) -> tuple[float, float]:
    """(start, end) of the longest interval `longest_gap` measures."""
    end = time.monotonic() if until is None else until
    i = bisect.bisect_left(times, since)
    prev = since
    best = (since, since)
    for t in times[i:]:
        if t > end:
            break
        if t - prev > best[1] - best[0]:
            best = (prev, t)
        prev = t
    return best if end - prev <= best[1] - best[0] else (prev, end)


def producer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": 120_000,
        "topic.metadata.refresh.interval.ms": 1000,
        **extra,
    }


def run_producer(
    bootstrap: str,
    topic: str,
    partitions: int,
    acks: AckLog,
    stop: threading.Event,
    rate: float = 300.0,
    prefix: str = "m",
    **config: Any,
) -> None:
    """Send `rate` records a second, round-robin over the partitions, until `stop`; then flush."""
    p = Producer(producer_config(bootstrap, **config))

    def on_delivery(err: Any, msg: Any) -> None:
        now = time.monotonic()
        if err is None:
            acks.ack(msg.partition(), msg.offset(), msg.value(), now)
        else:
            acks.error(err)

    n = 0
    next_at = time.monotonic()
    while not stop.is_set():
        p.produce(topic, value=f"{prefix}-{n}".encode(), partition=n % partitions, on_delivery=on_delivery)
        n += 1
        next_at += 1 / rate
        while True:
            left = next_at - time.monotonic()
            if left <= 0:
                break
            p.poll(min(left, 0.005))
    if p.flush(150) != 0:
        acks.error("records neither delivered nor failed after 150 s")


@dataclass
class ConsumedLog:
    """Records read by a consumer group: (partition, offset, value), with read times per partition."""

    records: list[tuple[int, int, bytes]] = field(default_factory=list)
    times: dict[int, list[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def longest_gap(self, partition: int, since: float, until: float | None = None) -> float:
        with self.lock:
            return longest_gap(self.times.get(partition, []), since, until)


def run_consumer(
    bootstrap: str, topic: str, seen: ConsumedLog, stop: threading.Event, group: str = "readers", **config: Any
) -> None:
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": True, "auto.commit.interval.ms": 1000, "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": 1000, "topic.metadata.refresh.interval.ms": 1000, "fetch.wait.max.ms": 100,
        **config,
    })  # fmt: skip
    c.subscribe([topic])
    try:
        while not stop.is_set():
            for m in c.consume(500, 0.1):
                q, off, value = m.partition(), m.offset(), m.value()
                if m.error() is None and q is not None and off is not None and value is not None:
                    now = time.monotonic()
                    with seen.lock:
                        seen.records.append((q, off, value))
                        seen.times.setdefault(q, []).append(now)
    finally:
        c.close()


_LEADERSHIP_MOVING = frozenset({
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError._TRANSPORT,
})  # fmt: skip


def _watermarks(c: Consumer, topic: str, p: int, timeout: float = 30.0) -> tuple[int, int]:
    """The partition's (log start, high watermark), asked again while the answer is a retriable
    error: right after a leadership change the broker a client asks may still name the old
    leader, which answers NOT_LEADER_OR_FOLLOWER (Kafka's brokers too); librdkafka's
    query_watermark_offsets does not retry by itself."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=max(1.0, deadline - time.monotonic()))
            return low, high
        except KafkaException as e:
            error = e.args[0]
            if not (error.retriable() or error.code() in _LEADERSHIP_MOVING) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> dict[tuple[int, int], bytes]:
    """Every record of the topic, (partition, offset) -> value, from each partition's log start to its
    high watermark (the final log the checks compare acknowledgements and reads with)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-reader", "enable.auto.commit": False})
    out: dict[tuple[int, int], bytes] = {}
    try:
        for p in range(partitions):
            low, high = _watermarks(c, topic, p)
            c.assign([TopicPartition(topic, p, low)])
            last, deadline = low - 1, time.monotonic() + timeout
            while last < high - 1 and time.monotonic() < deadline:
                m = c.poll(0.5)
                off, value = (m.offset(), m.value()) if m is not None and m.error() is None else (None, None)
                if off is not None and value is not None:
                    out[(p, off)] = value
                    last = off
            if last < high - 1:
                raise TimeoutError(f"{topic}-{p}: read to offset {last}, high watermark {high}")
    finally:
        c.close()
    return out
