"""Throughput from one core to all of the machine's: Samsa brokers on one host against one Kafka node
on the same cores.

    .venv/bin/python -m compat.bench.scaling [--records 200000] [--repeat 3]

A Samsa broker is one Python process, whose broker work runs on one event loop: one core. A user
with N cores runs N brokers on the host (`samsa cluster --brokers N`, or N `samsa serve` processes
against one ZooKeeper); Kafka runs one JVM whose thread pools use every core. For n = 1 .. the
machine's cores, with every thread of every server process pinned to cores 0..n-1 (as
`taskset -a` does; threads started later inherit it):

* `samsa x1`: ZooKeeper and one Samsa broker on the n cores: what one process makes of more cores;
* `samsa xn`: ZooKeeper and n Samsa brokers on the n cores;
* `kafka`: one Kafka 4.x KRaft node (broker and controller) on the n cores.

The load is the same for each: a topic with as many partitions as the machine has cores (RF=1, so
that the n brokers of `samsa xn` lead them in turn), produced to by one librdkafka producer (acks=1,
1 KiB records) and read back by one librdkafka consumer assigned every partition (with
fetch.queue.backoff.ms=1: by default it pauses a partition's fetches for a second whenever 64 MiB
wait in its queue, which brokers this fast reach within a run). The clients are
not pinned: they share the machine with the servers, and on a machine of few cores their own CPU
is a large part of what there is (the table says how many cores the machine has). Targets run
in alternating order between repeats; medians (min-max) are printed as a markdown table and every
sample goes to compat/target/scaling-results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from compat.bench import loads
from compat.bench.targets import KafkaTarget, SamsaClusterTarget, compile_sources, create_topic

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "compat" / "target" / "scaling-results.json"
SINGLE_REPLICA = {"default.replication.factor": "1", "offsets.topic.replication.factor": "1",
                  "min.insync.replicas": "1"}  # fmt: skip


def pin(pids: Iterable[int], cores: set[int]) -> None:
    """Pin every thread of each process to `cores` (`taskset -a -p`)."""
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setaffinity(int(tid), cores)
            except ProcessLookupError:  # a thread that ended meanwhile
                pass


def measure(target: str, cores: int, records: int, size: int, partitions: int) -> dict[str, float]:
    """Start the target pinned to `cores` cores, run the load, stop it: {metric: value}."""
    if target == "kafka":
        kafka = KafkaTarget(1).start()
        servers: list[int] = kafka.pids()
        bootstrap, close = kafka.bootstrap_servers, kafka.close
    else:
        samsa = SamsaClusterTarget(1 if target == "samsa x1" else cores, SINGLE_REPLICA).start()
        servers = samsa.server_pids()
        bootstrap, close = samsa.bootstrap_servers, samsa.close
    try:
        pin(servers, set(range(cores)))
        create_topic(bootstrap, "scale", partitions=partitions)
        loads.rdkafka_produce(bootstrap, "scale", records // 5, size, "1")  # warm-up (the JVM's JIT)
        create_topic(bootstrap, "scaled", partitions=partitions)
        produced = loads.rdkafka_produce(bootstrap, "scaled", records, size, "1")
        # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) once its queue holds 64 MiB,
        # which servers fast enough hit within a run: the consumer would measure its own pause
        consumed = loads.rdkafka_consume(bootstrap, "scaled", produced.records, partitions=partitions,
                                         **{"fetch.queue.backoff.ms": 1})  # fmt: skip
        return {"produce_mbs": produced.mb_per_s, "consume_mbs": consumed.mb_per_s}
    finally:
        close()


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def table(samples: list[dict[str, object]], cores: int) -> str:
    """One row per (cores, target): produce and consume MB/s, and Samsa's ratio to Kafka."""

    def values(n: int, target: str, metric: str) -> list[float]:
        return [float(s["value"]) for s in samples  # type: ignore[arg-type]
                if s["cores"] == n and s["target"] == target and s["metric"] == metric]  # fmt: skip

    lines = ["| cores | target | produce MB/s | x Kafka | consume MB/s | x Kafka |", "|---|---|---|---|---|---|"]
    for n in range(1, cores + 1):
        for target in ("samsa x1", f"samsa x{n}", "kafka") if n > 1 else ("samsa x1", "kafka"):
            cells = []
            for metric in ("produce_mbs", "consume_mbs"):
                mine, kafka = values(n, target, metric), values(n, "kafka", metric)
                if not mine:
                    cells += ["-", "-"]
                    continue
                ratio = statistics.median(mine) / statistics.median(kafka) if kafka and target != "kafka" else None
                cells += [_cell(mine), f"{ratio:.2f}" if ratio is not None else ""]
            lines.append(f"| {n} | {target} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="up to this many cores")
    args = parser.parse_args(argv)
    compile_sources(ROOT)
    started = time.monotonic()
    samples: list[dict[str, object]] = []
    runs: list[tuple[int, str]] = [
        (n, target) for n in range(1, args.cores + 1)
        for target in (("samsa x1", f"samsa x{n}", "kafka") if n > 1 else ("samsa x1", "kafka"))
    ]  # fmt: skip
    for r in range(args.repeat):
        for n, target in runs if r % 2 == 0 else runs[::-1]:
            print(f"[scaling {int(time.monotonic() - started)} s] repeat {r + 1}/{args.repeat}: "
                  f"{target} on {n} core(s)", file=sys.stderr, flush=True)  # fmt: skip
            for metric, value in measure(target, n, args.records, args.size, args.cores).items():
                samples.append({"cores": n, "target": target, "metric": metric, "value": value, "repeat": r})
                print(f"  {metric}: {value:.1f}", file=sys.stderr, flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "command": "python -m compat.bench.scaling " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"), "cores": args.cores, "load_average_at_end": os.getloadavg(),
        "samples": samples,
    }, indent=1))  # fmt: skip
    print(table(samples, args.cores))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
