"""Throughput benchmarks: produce and consume MB/s and records/s with a standard client.

    .venv/bin/python -m compat.bench.run [--records 200000] [--size 1024] [--repeat 3] [--out docs/benchmarks.md]

The load generator is confluent-kafka (librdkafka), a standard client. Each workload runs
`--repeat` times against a fresh broker; the median, min and max are reported because the machine
is noisy. Progress goes to stderr; the table (and the exact command) to --out.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing import SamsaProcess

TOPIC = "bench"


@dataclass(frozen=True)
class Result:
    records: int
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


def progress(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])
    for f in futures.values():
        f.result(30)


def produce(bootstrap: str, records: int, size: int, acks: str) -> Result:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "enable.idempotence": False,
        }
    )
    payload = os.urandom(size)
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, payload, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} produce errors, first: {errors[0]}")
    return Result(records, records * size, elapsed)


def consume(bootstrap: str, records: int, size: int) -> Result:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got = 0
    nbytes = 0
    started = time.perf_counter()
    deadline = started + 300
    while got < records and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
                nbytes += len(msg.value())
    elapsed = time.perf_counter() - started
    consumer.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records}")
    return Result(got, nbytes, elapsed)


def run_samsa(fn: Callable[[str], Result], *, preload: Callable[[str], object] | None = None) -> Result:
    with tempfile.TemporaryDirectory(prefix="samsa-bench-") as tmp:
        broker = SamsaProcess(Path(tmp) / "data", {"log.segment.bytes": str(256 * 1024 * 1024)}, log_level="WARNING")
        broker.start()
        try:
            create_topic(broker.bootstrap_servers)
            if preload is not None:
                preload(broker.bootstrap_servers)
            return fn(broker.bootstrap_servers)
        finally:
            broker.close()


def summarize(results: list[Result]) -> tuple[float, float, float, float, float, float]:
    mbs = [r.mb_per_s for r in results]
    rps = [r.records_per_s for r in results]
    return (
        statistics.median(mbs),
        min(mbs),
        max(mbs),
        statistics.median(rps),
        min(rps),
        max(rps),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    command = "python -m compat.bench.run " + shlex.join(argv if argv is not None else sys.argv[1:])

    workloads: dict[str, Callable[[], Result]] = {
        "produce acks=1": lambda: run_samsa(lambda b: produce(b, args.records, args.size, "1")),
        "produce acks=all": lambda: run_samsa(lambda b: produce(b, args.records, args.size, "all")),
        "consume (log in page cache)": lambda: run_samsa(
            lambda b: consume(b, args.records, args.size),
            preload=lambda b: produce(b, args.records, args.size, "1"),
        ),
    }
    rows = []
    for name, run in workloads.items():
        results = []
        for i in range(args.repeat):
            progress(f"{name}: run {i + 1}/{args.repeat} ({args.records} records of {args.size} B)")
            r = run()
            progress(f"{name}: {r.mb_per_s:.1f} MB/s, {r.records_per_s:,.0f} records/s")
            results.append(r)
        rows.append((name, summarize(results)))

    lines = [
        f"Command: `{command}`",
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}; "
        f"client: confluent-kafka (librdkafka); {args.records} records of {args.size} bytes, one partition, "
        f"replication factor 1, no fsync per message; median of {args.repeat} runs (min-max).",
        "",
        "| workload | MB/s | records/s |",
        "|---|---|---|",
    ]
    for name, (mb, mb_lo, mb_hi, rps, rps_lo, rps_hi) in rows:
        lines.append(
            f"| {name} | {mb:.1f} ({mb_lo:.1f}-{mb_hi:.1f}) | {rps:,.0f} ({rps_lo:,.0f}-{rps_hi:,.0f}) |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
