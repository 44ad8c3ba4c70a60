"""Every client under test, driven the same way.

A test describes records as `Rec` values; `produce(client, ...)` writes them with that client's
own API and returns the offsets the broker acknowledged, and `consume(client, ...)` reads a
partition from an explicit offset (assign, no consumer group) and returns `Got` values. Clients:
kafka-python, aiokafka, confluent-kafka (librdkafka) and kcat (Debian's, librdkafka 2.0.2).
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

CLIENTS = ("kafka-python", "aiokafka", "confluent", "kcat")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

CREATE_TIME = "create"
LOG_APPEND_TIME = "logappend"

MAX_REQUEST = 4 * 1024 * 1024  # client-side request/message size limit used for 1 MiB values

log = logging.getLogger("tests.clients")


@dataclass(frozen=True)
class Rec:
    """A record to produce. timestamp None: the producer's clock (CreateTime now)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None


@dataclass(frozen=True)
class Got:
    """A record as a consumer client saw it."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int
    timestamp_type: str  # CREATE_TIME / LOG_APPEND_TIME


@dataclass
class Produced:
    offsets: list[int]
    timestamps: list[int] = field(default_factory=list)
    """The timestamp each produce acknowledgement carried (-1 if the client does not report it)."""
    started_ms: int = 0
    finished_ms: int = 0


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------------------- produce


def produce(
    client: str,
    bootstrap: str,
    topic: str,
    records: Sequence[Rec],
    *,
    codec: str = "none",
    partition: int = 0,
    timeout: float = 30.0,
) -> Produced:
    started = now_ms()
    produced = _PRODUCERS[client](bootstrap, topic, records, codec, partition, timeout)
    produced.started_ms, produced.finished_ms = started, now_ms()
    assert len(produced.offsets) == len(records), (client, produced.offsets)
    return produced


def _kafka_python_produce(
    bootstrap: str, topic: str, records: Sequence[Rec], codec: str, partition: int, timeout: float
) -> Produced:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        max_request_size=MAX_REQUEST,
        acks="all",
        linger_ms=5,
    )
    try:
        futures = [
            producer.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers),
                partition=partition,
                timestamp_ms=r.timestamp,
            )
            for r in records
        ]
        producer.flush(timeout)
        metas = [f.get(timeout) for f in futures]
        return Produced([m.offset for m in metas], [m.timestamp for m in metas])
    finally:
        producer.close(timeout=5)


def _aiokafka_produce(
    bootstrap: str, topic: str, records: Sequence[Rec], codec: str, partition: int, timeout: float
) -> Produced:
    from aiokafka import AIOKafkaProducer

    async def run() -> Produced:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            max_request_size=MAX_REQUEST,
            acks="all",
            linger_ms=5,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(
                    topic,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers),
                    partition=partition,
                    timestamp_ms=r.timestamp,
                )
                for r in records
            ]
            metas = await asyncio.wait_for(asyncio.gather(*futures), timeout)
            return Produced([m.offset for m in metas], [m.timestamp for m in metas])
        finally:
            await producer.stop()

    return asyncio.run(run())


def confluent_producer_config(bootstrap: str, codec: str = "none", **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "compression.codec": codec,
        "message.max.bytes": MAX_REQUEST,
        "acks": "all",
        "linger.ms": 5,
        **extra,
    }


def _confluent_produce(
    bootstrap: str, topic: str, records: Sequence[Rec], codec: str, partition: int, timeout: float
) -> Produced:
    from confluent_kafka import KafkaException, Producer

    producer = Producer(confluent_producer_config(bootstrap, codec))
    results: list[tuple[int, int] | None] = [None] * len(records)
    errors: list[str] = []

    def delivered(i: int) -> Callable[[object, object], None]:
        def cb(err: object, msg: object) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                results[i] = (msg.offset(), msg.timestamp()[1])  # type: ignore[attr-defined]

        return cb

    for i, r in enumerate(records):
        kwargs: dict[str, object] = {"key": r.key, "value": r.value, "partition": partition}
        if r.headers:
            kwargs["headers"] = list(r.headers)
        if r.timestamp is not None:
            kwargs["timestamp"] = r.timestamp
        producer.produce(topic, on_delivery=delivered(i), **kwargs)
        producer.poll(0)
    left = producer.flush(timeout)
    if left or errors:
        raise KafkaException(f"confluent produce: {left} undelivered, errors {errors}")
    assert all(r is not None for r in results)
    return Produced([r[0] for r in results if r], [r[1] for r in results if r])


def kcat_command(bootstrap: str, *args: str) -> list[str]:
    return ["kcat", "-b", bootstrap, "-m", "15", "-X", "socket.timeout.ms=15000", *args]


def _kcat_produce(
    bootstrap: str, topic: str, records: Sequence[Rec], codec: str, partition: int, timeout: float
) -> Produced:
    """kcat -P sends stdin lines `key:value`; headers (-H) apply to a whole run, so records are
    sent in runs of equal headers. kcat cannot set timestamps (CreateTime is its clock), cannot
    send an empty key or value (with -Z those are null), and reports no offsets: they are taken
    from the log end offset before and after each run (the test owns the partition)."""
    offsets: list[int] = []
    runs: list[list[Rec]] = []
    for r in records:
        if r.timestamp is not None:
            raise ValueError("kcat cannot produce explicit timestamps")
        if runs and runs[-1][0].headers == r.headers and (runs[-1][0].key is None) == (r.key is None):
            runs[-1].append(r)
        else:
            runs.append([r])
    for run in runs:
        start = end_offset(bootstrap, topic, partition)
        lines = []
        for r in run:
            for part in (r.key, r.value):
                if part is not None and (b"\n" in part or part == b""):
                    raise ValueError("kcat cannot produce newlines or empty (non-null) keys/values")
            if r.key is not None and b":" in r.key:
                raise ValueError("kcat keys cannot contain the key delimiter")
            value = r.value or b""
            lines.append(value if r.key is None else r.key + b":" + value)
        args = ["-P", "-t", topic, "-p", str(partition), "-Z", "-X", f"message.max.bytes={MAX_REQUEST}"]
        if run[0].key is not None:
            args += ["-K", ":"]
        if codec != "none":
            args += ["-z", codec]
        for name, value in run[0].headers:
            args += ["-H", name if value is None else f"{name}={value.decode()}"]
        proc = subprocess.run(
            kcat_command(bootstrap, *args),
            input=b"\n".join(lines) + b"\n",
            capture_output=True,
            timeout=timeout,
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        end = end_offset(bootstrap, topic, partition)
        assert end - start == len(run), (start, end, len(run), proc.stderr.decode(errors="replace"))
        offsets += range(start, end)
    return Produced(offsets, [-1] * len(offsets))


_PRODUCERS: dict[str, Callable[[str, str, Sequence[Rec], str, int, float], Produced]] = {
    "kafka-python": _kafka_python_produce,
    "aiokafka": _aiokafka_produce,
    "confluent": _confluent_produce,
    "kcat": _kcat_produce,
}


# ---------------------------------------------------------------------------------------- consume


def consume(
    client: str,
    bootstrap: str,
    topic: str,
    count: int,
    *,
    partition: int = 0,
    offset: int = 0,
    timeout: float = 30.0,
    fetch_wait_ms: int = 500,
) -> list[Got]:
    """Read `count` records of one partition from `offset` (assigned, no group). Returns what
    was read when `timeout` passes first; more than `count` is never asked for. `fetch_wait_ms`
    is the client's fetch max wait (how long the broker may hold an unsatisfied fetch); kcat
    exits at the end of the partition (-e) unless it waits longer than the default."""
    return _CONSUMERS[client](bootstrap, topic, partition, offset, count, timeout, fetch_wait_ms)


def kafka_python_await_topics(consumer: object, *topics: str) -> None:
    """Fetch the subscribed topics' metadata before a kafka-python group consumer first polls.

    kafka-python 3.0 loses a join whose poll timed out while it was in flight when nothing but a
    metadata change asked for it: join_group_async loops on need_rejoin(), which the leader's own
    assignment turns false, so the finished join is never taken up and the member never becomes
    stable (no heartbeats, no fetches). A leader that joins before its first topic metadata
    arrives assigns nothing and rejoins for exactly that reason; with the metadata known first it
    assigns once and never rejoins for it.
    """
    for topic in topics:
        consumer.partitions_for_topic(topic)  # type: ignore[attr-defined]


def _kafka_python_consume(
    bootstrap: str, topic: str, partition: int, offset: int, count: int, timeout: float, fetch_wait_ms: int
) -> list[Got]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="none",
        max_partition_fetch_bytes=MAX_REQUEST,
        fetch_max_bytes=2 * MAX_REQUEST,
        fetch_max_wait_ms=fetch_wait_ms,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=count - len(out)).values():
                for m in records:
                    out.append(
                        Got(
                            m.offset,
                            m.key,
                            m.value,
                            tuple((k, v) for k, v in m.headers),
                            m.timestamp,
                            LOG_APPEND_TIME if m.timestamp_type == 1 else CREATE_TIME,
                        )
                    )
        return out
    finally:
        consumer.close()


def _aiokafka_consume(
    bootstrap: str, topic: str, partition: int, offset: int, count: int, timeout: float, fetch_wait_ms: int
) -> list[Got]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Got]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="none",
            max_partition_fetch_bytes=MAX_REQUEST,
            fetch_max_bytes=2 * MAX_REQUEST,
            fetch_max_wait_ms=fetch_wait_ms,
        )
        await consumer.start()
        try:
            tp = TopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, offset)
            out: list[Got] = []
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(tp, timeout_ms=500, max_records=count - len(out))
                for m in batches.get(tp, []):
                    out.append(
                        Got(
                            m.offset,
                            m.key,
                            m.value,
                            tuple((k, v) for k, v in m.headers),
                            m.timestamp,
                            LOG_APPEND_TIME if m.timestamp_type == 1 else CREATE_TIME,
                        )
                    )
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


def _confluent_consume(
    bootstrap: str, topic: str, partition: int, offset: int, count: int, timeout: float, fetch_wait_ms: int
) -> list[Got]:
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # librdkafka wants a group id for a Consumer; with assign() and no commits it is
            # never joined
            "group.id": "samsa-tests-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.message.max.bytes": MAX_REQUEST,
            "enable.partition.eof": False,
            "check.crcs": True,
            "fetch.wait.max.ms": fetch_wait_ms,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=count - len(out), timeout=0.5):
                err = m.error()
                if err is not None:
                    if m.topic() is None and not err.fatal():
                        # a consumer-group level event (the unused group id): not about our read
                        log.info("confluent consumer event: %s", err)
                        continue
                    raise AssertionError(f"confluent consume error: {err}")
                ts_type, ts = m.timestamp()
                out.append(
                    Got(
                        m.offset(),
                        m.key(),
                        m.value(),
                        tuple((k, v) for k, v in (m.headers() or [])),
                        ts,
                        LOG_APPEND_TIME if ts_type == TIMESTAMP_LOG_APPEND_TIME else CREATE_TIME,
                    )
                )
        return out
    finally:
        consumer.close()


def _kcat_consume(
    bootstrap: str, topic: str, partition: int, offset: int, count: int, timeout: float, fetch_wait_ms: int
) -> list[Got]:
    """kcat -C -J: one JSON object per record. Keys, values and header values are printed as
    strings (the tests use ASCII), null as JSON null."""
    args = [
        "-C", "-t", topic, "-p", str(partition), "-o", str(offset), "-c", str(count), "-J",
        "-X", f"fetch.message.max.bytes={MAX_REQUEST}", "-X", "check.crcs=true",
        "-X", f"fetch.wait.max.ms={fetch_wait_ms}",
    ]  # fmt: skip
    if fetch_wait_ms <= 500:
        args.append("-e")
    proc = subprocess.run(kcat_command(bootstrap, *args), capture_output=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out: list[Got] = []
    for line in proc.stdout.splitlines():
        if not line.strip():
            continue
        m = json.loads(line)
        out.append(
            Got(
                m["offset"],
                _kcat_bytes(m["key"]),
                _kcat_bytes(m["payload"]),
                _kcat_headers(m.get("headers")),
                m["ts"],
                {"create": CREATE_TIME, "logappend": LOG_APPEND_TIME}.get(m["tstype"], m["tstype"]),
            )
        )
    return out


def _kcat_bytes(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def _kcat_headers(headers: object) -> tuple[tuple[str, bytes | None], ...]:
    if headers is None:
        return ()
    if isinstance(headers, list):  # ["name", "value", "name", "value", ...]
        return tuple((headers[i], _kcat_bytes(headers[i + 1])) for i in range(0, len(headers), 2))
    assert isinstance(headers, dict)
    return tuple((k, _kcat_bytes(v)) for k, v in headers.items())


_CONSUMERS: dict[str, Callable[[str, str, int, int, int, float, int], list[Got]]] = {
    "kafka-python": _kafka_python_consume,
    "aiokafka": _aiokafka_consume,
    "confluent": _confluent_consume,
    "kcat": _kcat_consume,
}


# ---------------------------------------------------------------------------------------- admin


def end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The partition's high watermark, through librdkafka's ListOffsets."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "samsa-tests-unused"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
        return int(high)
    finally:
        consumer.close()


def create_topic(
    bootstrap: str,
    topic: str,
    *,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
    timeout: float = 15.0,
) -> None:
    """CreateTopics through confluent-kafka's AdminClient; fails the test on any error."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs or {})],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    futures[topic].result(timeout)
    # metadata propagation on a single node is immediate, but wait until a client sees it
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=timeout)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.05)
    raise AssertionError(f"topic {topic} not visible after creation")


# ---------------------------------------------------------------------------------------- checks


def assert_same_records(
    got: Sequence[Got],
    sent: Sequence[Rec],
    offsets: Sequence[int],
    *,
    timestamp_type: str = CREATE_TIME,
    window: tuple[int, int] | None = None,
    context: str = "",
) -> None:
    """`got` is exactly `sent` at `offsets`: keys, values, headers (in order, nulls kept),
    timestamps (explicit ones exactly; others, and all LogAppendTime ones, inside `window`, the
    wall-clock interval of the produce) and the timestamp type."""
    assert [g.offset for g in got] == list(offsets), f"{context}: offsets"
    for g, r in zip(got, sent):
        where = f"{context}: offset {g.offset}"
        assert g.key == r.key, where + " key"
        if g.value != r.value:
            raise AssertionError(
                f"{where} value: got {_describe(g.value)}, expected {_describe(r.value)}"
            )
        assert g.headers == r.headers, where + " headers"
        assert g.timestamp_type == timestamp_type, where + " timestamp type"
        if timestamp_type == CREATE_TIME and r.timestamp is not None:
            assert g.timestamp == r.timestamp, where + " timestamp"
        else:
            assert window is not None
            assert window[0] - 5 <= g.timestamp <= window[1] + 5, (where + " timestamp", g.timestamp, window)


def _describe(value: bytes | None) -> str:
    if value is None:
        return "null"
    return f"{len(value)} bytes {value[:20]!r}..."
