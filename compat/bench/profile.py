"""Profile a Samsa broker under load with py-spy: where the broker's CPU goes on produce and fetch.

    .venv/bin/python -m compat.bench.profile [--records 200000] [--workload produce,consume] [--out DIR]

Starts one Samsa broker (the benchmark's settings), attaches `py-spy record --format raw` to it for
the length of each workload (produce: librdkafka acks=1 of 1 KiB records; consume: the same
records from the page cache; java-produce / java-consume: the same with ProducerPerformance /
ConsumerPerformance, whose requests are smaller: 64 KiB batches), and prints per workload the functions with the most samples on top
of the stack (self) and anywhere on it (inclusive). The raw stacks stay in --out (folded format:
flamegraph.pl or speedscope read them).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from compat.bench import loads
from compat.bench.targets import SamsaTarget, cpu_seconds, create_topic


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise RuntimeError("py-spy not installed: pip install -e '.[bench]'")
    return found


def summarize(folded: Path, top: int) -> dict[str, list[tuple[str, float]]]:
    """Self and inclusive shares (percent of samples) per function from py-spy's raw output."""
    self_c: collections.Counter[str] = collections.Counter()
    incl_c: collections.Counter[str] = collections.Counter()
    total = 0
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = [f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0].replace(str(Path.cwd()) + "/", "") + ")"
                  if " (" in f else f for f in stack.split(";")]  # fmt: skip
        self_c[frames[-1]] += n
        for f in set(frames):
            incl_c[f] += n
    def pct(c: Counter[str]) -> list[tuple[str, float]]:
        return [(f, round(100.0 * n / total, 1)) for f, n in c.most_common(top)]
    return {
        "samples": [("total", float(total))],
        "self": pct(self_c),
        "inclusive": pct(incl_c),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--workload", default="produce,consume")
    parser.add_argument(
        "--rate", type=int, default=250, help="py-spy samples per second"
    )
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", type=Path, default=Path("compat/target/profile"))
    parser.add_argument(
        "--no-spy",
        action="store_true",
        help="only measure the broker's CPU per workload",
    )
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    broker = SamsaTarget().start()
    report: dict[str, object] = {}
    try:
        bs = broker.bootstrap_servers
        create_topic(bs, "prof")
        pid = broker.pids()[0]
        for workload in args.workload.split(",") * args.repeat:
            folded = args.out / f"{workload}.folded"
            spy = None
            if not args.no_spy:
                spy = subprocess.Popen(
                    [
                        py_spy(),
                        "record",
                        # without pausing the broker for each sample: a paused thread inside a
                        # write counts as blocked, and the log writer would move writes to threads
                        "--nonblocking",
                        "--format",
                        "raw",
                        "--rate",
                        str(args.rate),
                        "--pid",
                        str(pid),
                        "-o",
                        str(folded),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1.0)
            cpu0 = cpu_seconds(pid)
            if workload == "produce":
                res = loads.rdkafka_produce(bs, "prof", args.records, args.size, "1")
            elif workload == "consume":
                res = loads.rdkafka_consume(bs, "prof", args.records)
            elif workload == "java-produce":
                res = loads.producer_perf(bs, "prof", args.records, args.size, "1")
            elif workload == "java-consume":
                res = loads.consumer_perf(bs, "prof", args.records)
            else:
                raise SystemExit(f"unknown workload {workload}")
            cpu = cpu_seconds(pid) - cpu0
            ms_per_100mb = 1000 * cpu / (res.bytes / 1e8)
            print(
                f"== {workload}: {res.mb_per_s:.1f} MB/s; broker CPU {ms_per_100mb:.0f} ms per 100 MB",
                file=sys.stderr,
            )
            if spy is None:
                continue
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
            summary = summarize(folded, args.top)
            summary["result"] = [
                ("MB/s", round(res.mb_per_s, 1)),
                ("records/s", round(res.records_per_s)),
                ("broker CPU ms per 100 MB", round(ms_per_100mb)),
            ]
            report[workload] = summary
            print(f"   {int(summary['samples'][0][1])} samples", file=sys.stderr)
            for kind in ("self", "inclusive"):
                print(f"-- {kind}", file=sys.stderr)
                for f, p in summary[kind]:
                    print(f"  {p:5.1f}%  {f}", file=sys.stderr)
    finally:
        broker.close()
    if report:
        (args.out / "summary.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
