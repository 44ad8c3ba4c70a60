"""Side-by-side benchmarks: Samsa against Apache Kafka on this machine, same settings, same loads.

    .venv/bin/python -m compat.bench                # full run (~10 min on 2 cores)
    .venv/bin/python -m compat.bench --quick        # ~5 min: fewer records, one repeat, no 1,000 partitions
    .venv/bin/python -m compat.bench --only single  # or: cluster
    .venv/bin/python -m compat.bench --quick --targets samsa --metrics   # Samsa scraped every second
    .venv/bin/python -m compat.bench --render compat/target/bench-results.json   # doc + chart again

For each repeat and each broker (order alternates between repeats), one fresh broker is started and
measured: start to first acknowledged produce, idle RSS, a warm-up pass (not measured: the JVM's
JIT), produce throughput acks=1, acks=all and with zstd and lz4 batches (ProducerPerformance, 1 KiB
records), consume throughput from the page cache (ConsumerPerformance over what the acks=1 run
wrote), produce and consume over TLS (an SSL listener on both brokers, certificates made for the
run), each with the broker's CPU seconds (user + system, from /proc) per GB of records moved, produce latency at a fixed rate (ProducerPerformance --throughput,
linger.ms=0), the same produce/consume with librdkafka, 50 librdkafka connections, three
librdkafka consumers joining a new group until their assignment is stable (classic and KIP-848
consumer protocols; `python -m compat.bench.join`), and produce throughput and RSS at 100 and
1,000 partitions. Then a three-broker cluster (RF=3,
min.insync.replicas=2, acks=all; CPU per GB summed over the three brokers; Samsa's ZooKeeper is
not counted, Kafka's nodes are combined broker and controller); on Samsa's cluster also star
versus chain replication (replication.pipeline.enable) on a topic led by broker 1: RF=3 acks=all
throughput and latency, the leader's CPU per GB and its replication bytes sent per byte produced
(about 2 star, 1 chain). Medians with min and max go to docs/benchmarks.md (between the
generated-section markers; the rest of the file is kept), the chart to docs/benchmarks.png, every
sample to compat/target/bench-results.json. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from broker.testing.ports import free_port
from compat.bench import loads, report
from compat.bench.targets import (
    BenchTls,
    KafkaTarget,
    SamsaClusterTarget,
    SamsaTarget,
    Target,
    compile_sources,
    cpu_seconds,
    create_topic,
    rss_bytes,
    start_target,
)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "compat" / "target" / "bench-results.json"


T = TypeVar("T")


def cpu_per_gb(pids: Sequence[int], nbytes: int, load: Callable[[], T]) -> tuple[T, float]:
    """Run a load; (its result, the brokers' CPU seconds (user + system) per GB it moved)."""
    before = sum(cpu_seconds(pid) for pid in pids)
    result = load()
    return result, (sum(cpu_seconds(pid) for pid in pids) - before) / (nbytes / 1e9)


@dataclass
class Sample:
    target: str  # samsa | kafka
    metric: str  # a key of report.METRICS
    value: float
    repeat: int


@dataclass
class Params:
    records: int
    size: int
    repeat: int
    latency_rate: int
    latency_records: int
    partitions: tuple[int, ...]
    connections: int


class Run:
    def __init__(self, params: Params) -> None:
        self.params = params
        self._tls_dir = tempfile.TemporaryDirectory(prefix="samsa-bench-tls-")
        self.tls = BenchTls.make(Path(self._tls_dir.name))
        """One certificate authority and broker certificate for every broker's SSL listener."""
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self.started = time.monotonic()
        self.steps_done = 0
        self.steps_total = 0

    def progress(self, msg: str) -> None:
        el = time.monotonic() - self.started
        print(
            f"[bench {int(el) // 60:02d}:{int(el) % 60:02d} {self.steps_done}/{self.steps_total}] {msg}",
            file=sys.stderr,
            flush=True,
        )

    def add(self, target: str, metric: str, value: float, repeat: int) -> None:
        self.samples.append(Sample(target, metric, value, repeat))
        unit = report.METRICS[metric].unit
        self.progress(f"  {target:5s} {metric}: {report.fmt(value, unit)} {unit}")

    def step(self, target: str, what: str, fn: Callable[[], None]) -> None:
        self.progress(f"{target}: {what}")
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - a failed workload is reported, the run goes on
            msg = f"{target}: {what}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            self.errors.append(msg)
            self.progress("  FAILED " + msg)
            traceback.print_exc(file=sys.stderr)
        self.steps_done += 1

    # -- one broker ------------------------------------------------------------------------------

    def single(self, name: str, r: int) -> None:
        p = self.params
        port = free_port()
        target: SamsaTarget | KafkaTarget = (
            SamsaTarget(port=port, tls=self.tls) if name == "samsa" else KafkaTarget(1, port=port, tls=self.tls)
        )
        try:
            if isinstance(target, KafkaTarget):
                target.format()  # storage format is a separate tool run, not part of the start
            started = time.perf_counter()
            launcher = threading.Thread(
                target=target.process.start
                if isinstance(target, SamsaTarget)
                else target.launch
            )
            launcher.start()
            first = loads.first_ack(f"127.0.0.1:{port}", "first-ack", started)
            launcher.join()
            if isinstance(target, KafkaTarget):
                target.wait_ready()
            else:
                target.start_scraper()
            self.add(name, "start_first_ack", first, r)
            self.steps_done += 1
            bs = target.bootstrap_servers
            pid = target.pids()[0]
            time.sleep(2.0)
            self.add(name, "rss_idle", rss_bytes(pid) / 2**20, r)
            self.steps_done += 1

            nbytes = p.records * p.size

            def warm_up() -> None:
                create_topic(bs, "warm")
                loads.producer_perf(bs, "warm", p.records // 5, p.size, "1")
                loads.consumer_perf(bs, "warm", p.records // 5)

            self.step(name, "warm-up pass, not measured (the JVM's JIT; CPU per GB counts after it)", warm_up)

            def produce(acks: str, metric: str, topic: str, compression: str = "none") -> Callable[[], None]:
                def go() -> None:
                    create_topic(bs, topic)
                    res, cpu = cpu_per_gb([pid], nbytes, lambda: loads.producer_perf(
                        bs, topic, p.records, p.size, acks, warmup=p.records // 5, compression=compression))  # fmt: skip
                    self.add(name, metric + "_mbs", res.mb_per_s, r)
                    if compression == "none":
                        self.add(name, metric + "_rps", res.records_per_s, r)
                    self.add(name, "cpu_" + metric, cpu, r)

                return go

            self.step(
                name,
                f"produce acks=1, {p.records} x {p.size} B (ProducerPerformance)",
                produce("1", "produce_acks1", "p1"),
            )
            self.step(
                name,
                f"produce acks=all, {p.records} x {p.size} B (ProducerPerformance)",
                produce("all", "produce_acksall", "pall"),
            )
            for codec in ("zstd", "lz4"):
                self.step(
                    name,
                    f"produce acks=1, {codec} batches (ProducerPerformance)",
                    produce("1", f"produce_{codec}", f"p{codec}", compression=codec),
                )

            def consume() -> None:
                res, cpu = cpu_per_gb([pid], nbytes, lambda: loads.consumer_perf(bs, "p1", p.records))
                self.add(name, "consume_mbs", res.mb_per_s, r)
                self.add(name, "consume_rps", res.records_per_s, r)
                self.add(name, "cpu_consume", cpu, r)

            self.step(
                name, "consume from the page cache (ConsumerPerformance)", consume
            )

            def tls() -> None:
                create_topic(bs, "ptls")
                props = self.tls.client_props()
                res, cpu = cpu_per_gb([pid], nbytes, lambda: loads.producer_perf(
                    target.ssl_bootstrap_servers, "ptls", p.records, p.size, "1", warmup=p.records // 5,
                    client_props=props))  # fmt: skip
                self.add(name, "tls_produce_mbs", res.mb_per_s, r)
                self.add(name, "cpu_tls_produce", cpu, r)
                res, cpu = cpu_per_gb([pid], nbytes, lambda: loads.consumer_perf(
                    target.ssl_bootstrap_servers, "ptls", p.records, client_props=props))  # fmt: skip
                self.add(name, "tls_consume_mbs", res.mb_per_s, r)
                self.add(name, "cpu_tls_consume", cpu, r)

            self.step(name, "produce acks=1 and consume over TLS (SSL listener, no client certificate)", tls)

            def latency() -> None:
                create_topic(bs, "lat")
                res = loads.producer_perf(
                    bs,
                    "lat",
                    p.latency_records,
                    p.size,
                    "1",
                    throughput=p.latency_rate,
                    linger_ms=0,
                    warmup=p.latency_rate,
                )
                for q in ("p50", "p99", "p99.9"):
                    self.add(name, f"latency_{q}", res.latency_ms[q], r)

            self.step(
                name,
                f"produce latency at {p.latency_rate} records/s (ProducerPerformance --throughput)",
                latency,
            )

            def rdkafka() -> None:
                create_topic(bs, "rd")
                res = loads.rdkafka_produce(bs, "rd", p.records, p.size, "1")
                self.add(name, "rd_produce_mbs", res.mb_per_s, r)
                res = loads.rdkafka_consume(bs, "rd", p.records)
                self.add(name, "rd_consume_mbs", res.mb_per_s, r)

            self.step(
                name, "produce + consume with librdkafka (confluent-kafka)", rdkafka
            )

            def transactions() -> None:
                create_topic(bs, "rdtxn")
                res = loads.rdkafka_txn_produce(bs, "rdtxn", p.records // 4, p.size)
                self.add(name, "rd_txn_produce_mbs", res.mb_per_s, r)
                self.add(name, "rd_txn_produce_rps", res.records_per_s, r)
                res = loads.rdkafka_consume(bs, "rdtxn", res.records, "read_committed")
                self.add(name, "rd_rc_consume_mbs", res.mb_per_s, r)

            self.step(
                name,
                f"transactional produce ({p.records // 4} records, 100 a transaction) + read_committed consume (librdkafka)",
                transactions,
            )

            def group_join() -> None:
                create_topic(bs, "join", partitions=6)
                for _ in range(3):  # a classic join takes one round or two (a member joining late), ~0.1 s or 1-3 s
                    for protocol in ("classic", "consumer"):
                        self.add(name, f"join_{protocol}", loads.group_join(bs, "join", 6, protocol) * 1000, r)

            self.step(name, "three librdkafka consumers join a new group, three times (classic and consumer protocols)",
                      group_join)

            def conns() -> None:
                create_topic(bs, "conns")
                res = loads.rdkafka_produce(
                    bs, "conns", p.records, p.size, "1", connections=p.connections
                )
                self.add(name, f"conn{p.connections}_mbs", res.mb_per_s, r)
                self.add(name, f"conn{p.connections}_rss", rss_bytes(pid) / 2**20, r)

            self.step(
                name, f"produce with {p.connections} librdkafka connections", conns
            )

            for n in p.partitions:

                def parts(n: int = n) -> None:
                    create_topic(bs, f"parts{n}", partitions=n)
                    self.add(name, f"parts{n}_rss_idle", rss_bytes(pid) / 2**20, r)
                    res = loads.producer_perf(
                        bs,
                        f"parts{n}",
                        p.records // 4,
                        p.size,
                        "1",
                        warmup=p.records // 20,
                    )
                    self.add(name, f"parts{n}_mbs", res.mb_per_s, r)
                    self.add(name, f"parts{n}_rss", rss_bytes(pid) / 2**20, r)

                self.step(
                    name,
                    f"{n} partitions: create, produce {p.records // 4} records acks=1",
                    parts,
                )
        finally:
            target.close()

    # -- three brokers ---------------------------------------------------------------------------

    def cluster(self, name: str, r: int) -> None:
        p = self.params
        self.progress(f"{name}: starting three brokers")
        target: Target = start_target(name, 3)
        try:
            bs = target.bootstrap_servers

            def produce() -> None:
                create_topic(bs, "r3", replication=3)
                res, cpu = cpu_per_gb(target.pids(), p.records * p.size, lambda: loads.producer_perf(
                    bs, "r3", p.records, p.size, "all", warmup=p.records // 5))  # fmt: skip
                self.add(name, "rf3_produce_mbs", res.mb_per_s, r)
                self.add(name, "rf3_produce_rps", res.records_per_s, r)
                self.add(name, "cpu_rf3_produce", cpu, r)

            self.step(
                name,
                f"RF=3 produce acks=all, {p.records} x {p.size} B (ProducerPerformance)",
                produce,
            )

            def consume() -> None:
                res = loads.consumer_perf(bs, "r3", p.records)
                self.add(name, "rf3_consume_mbs", res.mb_per_s, r)

            self.step(name, "RF=3 consume (ConsumerPerformance)", consume)

            def latency() -> None:
                create_topic(bs, "r3lat", replication=3)
                res = loads.producer_perf(
                    bs,
                    "r3lat",
                    p.latency_records,
                    p.size,
                    "all",
                    throughput=p.latency_rate,
                    linger_ms=0,
                    warmup=p.latency_rate,
                )
                for q in ("p50", "p99", "p99.9"):
                    self.add(name, f"rf3_latency_{q}", res.latency_ms[q], r)

            self.step(
                name, f"RF=3 acks=all latency at {p.latency_rate} records/s", latency
            )
            if isinstance(target, SamsaClusterTarget):
                for mode in ("star", "chain"):
                    self.step(name, f"RF=3 acks=all, {mode} replication (replicas 1, 2, 3)",
                              lambda mode=mode: self.pipeline(name, r, target, mode))  # type: ignore[misc]
            rss = [rss_bytes(pid) / 2**20 for pid in target.pids()]
            self.add(name, "rf3_rss", max(rss), r)
        finally:
            target.close()

    def pipeline(self, name: str, r: int, target: SamsaClusterTarget, mode: str) -> None:
        """Star versus chain replication (replication.pipeline.enable) on a topic whose leader is
        broker 1: throughput, the leader's CPU per GB and replication bytes sent per byte
        produced, and latency at a fixed rate."""
        p = self.params
        bs = target.bootstrap_servers
        config = {"replication.pipeline.enable": "true"} if mode == "chain" else {}
        topic, lat_topic = f"r3{mode}", f"r3{mode}lat"
        for t in (topic, lat_topic):
            create_topic(bs, t, assignment=[[1, 2, 3]], config=config)
        deadline = time.monotonic() + 30  # until the chain has formed: the middle follower serves the tail
        while True:
            middle = target.replication_bytes_out(2)
            loads.producer_perf(bs, topic, 1000, p.size, "all")
            time.sleep(0.5)
            if mode == "star" or target.replication_bytes_out(2) > middle or time.monotonic() > deadline:
                break
        before = target.replication_bytes_out(1)
        res, cpu = cpu_per_gb([target.pid_of(1)], p.records * p.size, lambda: loads.producer_perf(
            bs, topic, p.records, p.size, "all"))  # fmt: skip
        time.sleep(1.0)  # the followers' last fetches
        sent = target.replication_bytes_out(1) - before
        self.add(name, f"rf3_{mode}_produce_mbs", res.mb_per_s, r)
        self.add(name, f"cpu_rf3_{mode}_leader", cpu, r)
        self.add(name, f"rf3_{mode}_leader_sent", sent / (p.records * p.size), r)
        res = loads.producer_perf(bs, lat_topic, p.latency_records, p.size, "all", throughput=p.latency_rate,
                                  linger_ms=0, warmup=p.latency_rate)  # fmt: skip
        for q in ("p50", "p99"):
            self.add(name, f"rf3_{mode}_latency_{q}", res.latency_ms[q], r)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="~5 minutes: fewer records, one repeat, no 1,000 partitions",
    )
    parser.add_argument("--records", type=int)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--only", choices=("single", "cluster"))
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="Samsa serves metrics.prometheus.port and is scraped every second throughout "
        "(compare with a run without it: the cost of the metrics)",
    )
    parser.add_argument("--targets", default="samsa,kafka")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--render", type=Path, help="only write the doc and chart from a results JSON"
    )
    args = parser.parse_args(argv)
    try:  # the chart is drawn at the end: fail now, not after the run
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        parser.error("the benchmark needs its extras: .venv/bin/pip install -e '.[bench]'")
    command = ".venv/bin/python -m compat.bench " + shlex.join(
        argv if argv is not None else sys.argv[1:]
    )

    if args.render:
        data = json.loads(args.render.read_text())
        report.write(args.out, data)
        return 0

    quick = args.quick
    if args.metrics:
        from compat.bench import targets

        targets.METRICS_SCRAPE_S = 1.0
    params = Params(
        records=args.records or (100_000 if quick else 200_000),
        size=args.size,
        repeat=args.repeat or (1 if quick else 3),
        latency_rate=1_000,
        latency_records=8_000 if quick else 15_000,
        partitions=(100,) if quick else (100, 1000),
        connections=50,
    )
    names = [t for t in args.targets.split(",") if t]
    run = Run(params)
    single = args.only in (None, "single")
    cluster = args.only in (None, "cluster")
    run.steps_total = (
        params.repeat
        * len(names)
        * ((12 + len(params.partitions)) * single + 3 * cluster)
        + params.repeat * 2 * cluster * ("samsa" in names)
    )
    run.progress(f"params: {asdict(params)}")
    compile_sources(ROOT)

    def save() -> dict[str, object]:
        data = {
            "command": command,
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}",
            "load_average_at_end": os.getloadavg(),
            "duration_s": round(time.monotonic() - run.started),
            "params": asdict(params),
            "samples": [asdict(s) for s in run.samples],
            "errors": run.errors,
        }
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(data, indent=1))
        report.write(args.out, data)
        return data

    for r in range(params.repeat):
        order = names if r % 2 == 0 else names[::-1]
        if single:
            for name in order:
                run.progress(f"repeat {r + 1}/{params.repeat}: {name}, one broker")
                try:
                    run.single(name, r)
                except Exception as e:  # noqa: BLE001 - reported in the doc
                    run.errors.append(
                        f"{name}: single-broker run {r + 1}: {type(e).__name__}: {e}"
                    )
                    traceback.print_exc(file=sys.stderr)
                save()
        if cluster:
            for name in order:
                run.progress(f"repeat {r + 1}/{params.repeat}: {name}, three brokers")
                try:
                    run.cluster(name, r)
                except Exception as e:  # noqa: BLE001 - reported in the doc
                    run.errors.append(
                        f"{name}: cluster run {r + 1}: {type(e).__name__}: {e}"
                    )
                    traceback.print_exc(file=sys.stderr)
                save()
    data = save()
    run.progress(
        f"done in {data['duration_s']} s: {args.out}, {args.out.with_suffix('.png')}, {args.results}"
    )
    return 0
