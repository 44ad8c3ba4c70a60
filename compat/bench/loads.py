"""Load generators: Kafka's own perf tools (ProducerPerformance / ConsumerPerformance from the
kafka-tools jar, the classes behind kafka-producer-perf-test and kafka-consumer-perf-test) and a
librdkafka one (confluent-kafka in this process). Each returns a `Result`."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from compat.kafka import classpath, java

TOOLS_HEAP = "-Xmx512m"

_LOG4J2 = """\
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""


@dataclass
class Result:
    records: int
    bytes: int
    seconds: float
    latency_ms: dict[str, float] = field(
        default_factory=dict
    )  # "p50", "p99", "p99.9", "avg", "max"

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def _tool(main: str, *args: str, timeout: float = 600.0) -> str:
    log4j = Path(tempfile.gettempdir()) / "samsa-bench-log4j2.properties"
    if not log4j.exists():
        log4j.write_text(_LOG4J2)
    cmd = [
        java(),
        TOOLS_HEAP,
        "-XX:+UseG1GC",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        classpath("kafka"),
        main,
        *args,
    ]
    r = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, check=False
    )
    if r.returncode != 0:
        raise RuntimeError(
            f"{main.rsplit('.', 1)[-1]} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        )
    return r.stdout


_PRODUCER_FINAL = re.compile(
    r"(\d+)( steady state)? records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, "
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def producer_perf(
    bootstrap: str,
    topic: str,
    records: int,
    size: int,
    acks: str,
    *,
    throughput: int = -1,
    linger_ms: int = 5,
    warmup: int = 0,
    compression: str = "none",
    client_props: Mapping[str, str] | None = None,
) -> Result:
    """ProducerPerformance: `records` records of `size` bytes; --throughput caps records/s. With
    `warmup`, the figures are its steady-state summary (the first `warmup` records left out: the
    client's own start, metadata and JIT warm-up are not the broker's). `compression`: the
    producer's compression.type; `client_props`: more producer settings (TLS)."""
    out = _tool(
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", str(throughput),
        "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}", f"linger.ms={linger_ms}",
        "batch.size=65536", "buffer.memory=67108864", "enable.idempotence=false", f"compression.type={compression}",
        *(f"{k}={v}" for k, v in (client_props or {}).items()),
        *(["--warmup-records", str(warmup)] if warmup else []),
    )  # fmt: skip
    found = list(_PRODUCER_FINAL.finditer(out))
    steady = [f for f in found if f.group(2)]
    m = (steady or found or [None])[-1]
    if m is None:
        raise RuntimeError(f"ProducerPerformance printed no summary:\n{out[-2000:]}")
    n, rps = int(m.group(1)), float(m.group(3))
    seconds = n / rps if rps else 0.0
    lat = {"avg": float(m.group(5)), "max": float(m.group(6)), "p50": float(m.group(7)), "p95": float(m.group(8)),
           "p99": float(m.group(9)), "p99.9": float(m.group(10))}  # fmt: skip
    return Result(n, n * size, seconds, lat)


def consumer_perf(
    bootstrap: str, topic: str, records: int, client_props: Mapping[str, str] | None = None
) -> Result:
    """ConsumerPerformance (subscribe, fresh group): fetch.MB.sec / fetch.nMsg.sec, which leave out
    the group join (rebalance.time.ms). `client_props`: more consumer settings (TLS)."""
    config = _consumer_config(client_props or {})
    try:
        out = _tool(
            "org.apache.kafka.tools.ConsumerPerformance",
            "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records), "--timeout", "60000",
            "--consumer.config", config,
        )  # fmt: skip
    finally:
        os.unlink(config)
    lines = [line for line in out.splitlines() if line.strip()]
    header_i = next(i for i, line in enumerate(lines) if line.startswith("start.time"))
    header = [h.strip() for h in lines[header_i].split(",")]
    row = [v.strip() for v in lines[header_i + 1].split(",")]
    f = dict(zip(header, row))
    n = int(f["data.consumed.in.nMsg"])
    nbytes = float(f["data.consumed.in.MB"]) * 1024 * 1024
    fetch_ms = float(f["fetch.time.ms"])
    if n < records:
        raise RuntimeError(f"ConsumerPerformance consumed {n} of {records}")
    return Result(n, int(nbytes), fetch_ms / 1000.0)


def _consumer_config(extra: Mapping[str, str]) -> str:
    settings = {"auto.offset.reset": "earliest", "fetch.max.bytes": "52428800",
                "max.partition.fetch.bytes": "10485760", **extra}  # fmt: skip
    with tempfile.NamedTemporaryFile("w", prefix="samsa-bench-consumer-", suffix=".properties", delete=False) as f:
        f.write("".join(f"{k}={v}\n" for k, v in settings.items()))
    return f.name


# -- librdkafka (confluent-kafka) ------------------------------------------------------------------


def _producer(bootstrap: str, acks: str, **extra: object) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "enable.idempotence": False,
            **extra,
        }
    )


def rdkafka_produce(
    bootstrap: str, topic: str, records: int, size: int, acks: str, connections: int = 1
) -> Result:
    """`connections` librdkafka producers (one connection each), records split evenly, all at once."""
    payload = os.urandom(size)
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    producers = [_producer(bootstrap, acks) for _ in range(connections)]
    for p in producers:  # connect and fetch metadata before the clock starts
        p.list_topics(topic, timeout=30)
    per = records // connections

    def drive(p: Producer) -> None:
        for i in range(per):
            while True:
                try:
                    p.produce(topic, payload, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.01)
            if i % 10_000 == 0:
                p.poll(0)
        p.flush(300)

    started = time.perf_counter()
    if connections == 1:
        drive(producers[0])
    else:
        threads = [threading.Thread(target=drive, args=(p,)) for p in producers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} produce errors, first: {errors[0]}")
    return Result(per * connections, per * connections * size, elapsed)


def rdkafka_txn_produce(bootstrap: str, topic: str, records: int, size: int, per_txn: int = 100) -> Result:
    """One librdkafka transactional producer: transactions of `per_txn` records, each committed
    before the next begins (the clock starts after init_transactions)."""
    payload = os.urandom(size)
    p = Producer({
        "bootstrap.servers": bootstrap, "transactional.id": f"bench-txn-{os.getpid()}-{time.time_ns()}",
        "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
    })  # fmt: skip
    p.init_transactions(60)
    p.list_topics(topic, timeout=30)
    transactions = records // per_txn
    started = time.perf_counter()
    for _ in range(transactions):
        p.begin_transaction()
        for _ in range(per_txn):
            while True:
                try:
                    p.produce(topic, payload)
                    break
                except BufferError:
                    p.poll(0.01)
        p.commit_transaction(60)
    elapsed = time.perf_counter() - started
    n = transactions * per_txn
    return Result(n, n * size, elapsed)


def rdkafka_consume(
    bootstrap: str, topic: str, records: int, isolation: str = "read_uncommitted", partitions: int = 1,
    **extra: object,
) -> Result:
    """One librdkafka consumer reading `records` from the start of the topic's `partitions`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-rdkafka",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "isolation.level": isolation,
            **extra,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = nbytes = 0
    started = time.perf_counter()
    deadline = started + 300
    while got < records and time.perf_counter() < deadline:
        for msg in consumer.consume(min(10_000, records - got), 1.0):  # not waiting out the timeout at the end
            if msg.error() is None:
                got += 1
                nbytes += len(msg.value())
    elapsed = time.perf_counter() - started
    consumer.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records}")
    return Result(got, nbytes, elapsed)


def first_ack(
    bootstrap: str, topic: str, started: float, timeout: float = 120.0
) -> float:
    """Seconds from `started` until a produce is acknowledged; the producer is created at once and
    retries connecting every 10-50 ms while the broker is not up yet (topic auto-created)."""
    p = _producer(
        bootstrap,
        "1",
        **{
            "linger.ms": 0,
            "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 50,
            "retry.backoff.ms": 10,
            "retry.backoff.max.ms": 50,
            "topic.metadata.refresh.fast.interval.ms": 10,
            "message.timeout.ms": int(timeout * 1000),
            "log_level": 0,
        },
    )
    acked: list[float] = []
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is None:
            acked.append(time.perf_counter())
        else:
            errors.append(err)

    p.produce(topic, b"first", on_delivery=on_delivery)
    deadline = started + timeout
    while not acked and not errors and time.perf_counter() < deadline:
        p.poll(0.005)
    if not acked:
        raise RuntimeError(f"no acknowledged produce within {timeout}s: {errors[:1]}")
    return acked[0] - started


def group_join(bootstrap: str, topic: str, partitions: int, protocol: str, members: int = 3,
               timeout: float = 60.0) -> float:
    """Seconds from `members` librdkafka consumers subscribing to one group (`group.protocol`
    classic or consumer, the brokers' default timings) until their assignments are stable: every
    partition of `topic` owned by exactly one member, each member owning some (the time a user
    waits before a new group reads). The consumers are polled in turn from this thread."""
    group = f"bench-join-{protocol}-{time.time_ns()}"
    consumers = [
        Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                  "enable.auto.commit": False, "log_level": 0})
        for _ in range(members)
    ]  # fmt: skip
    try:
        started = time.perf_counter()
        for c in consumers:
            c.subscribe([topic])
        while time.perf_counter() - started < timeout:
            for c in consumers:
                c.poll(0.005)
            owned = [[tp.partition for tp in c.assignment()] for c in consumers]
            if all(owned) and sorted(p for o in owned for p in o) == list(range(partitions)):
                return time.perf_counter() - started
        raise RuntimeError(f"{protocol} group of {members} not stable within {timeout} s: {owned}")
    finally:
        for c in consumers:
            c.close()
