"""Start-up of Samsa source trees side by side: process start to first acknowledged produce.

    .venv/bin/python -m compat.bench.startup [--repeat 10] [TREE ...]

Each TREE is a checkout of Samsa (default: this one); to compare a change with its parent, add a
worktree of the parent (`git worktree add /tmp/base HEAD~1`) and pass both. The trees run in
turn, `--repeat` times each, alternating, so that load on the machine falls on all of them alike.
Each run starts `python -m broker serve` (this venv's interpreter, the tree as working directory,
a fresh data directory; each tree byte-compiled first, as an installed broker is) and at once a
librdkafka producer that retries every 10-50 ms until its
record to an auto-created topic is acknowledged (`loads.first_ack`, as in `python -m
compat.bench`). Printed per tree, median (min-max): wall seconds to the first ack, wall seconds to
the listening line, the broker's CPU seconds (user + system from /proc/<pid>/stat) at the
first ack, which the machine's load distorts far less than wall time, and its RSS 2 s after the
first ack (the benchmark's "RSS idle").
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from broker.testing.ports import free_port
from compat.bench import loads
from compat.bench.targets import compile_sources, cpu_seconds, rss_bytes

ROOT = Path(__file__).resolve().parents[2]


def one_start(tree: Path) -> tuple[float, float, float]:
    """(seconds to first ack, seconds to listening, broker CPU seconds at the first ack, RSS in MiB
    2 s after it)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="samsa-startup-") as tmp:
        cmd = [sys.executable, "-m", "broker", "serve", "--log-level", "WARNING",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp}/data"]  # fmt: skip
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=tree, stdout=subprocess.PIPE, text=True)
        listening: list[float] = []

        def drain() -> None:
            assert proc.stdout is not None
            proc.stdout.readline()  # "samsa listening on ..."
            listening.append(time.perf_counter() - started)
            for _ in proc.stdout:
                pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            first = loads.first_ack(f"127.0.0.1:{port}", "first-ack", started, timeout=60)
            cpu = cpu_seconds(proc.pid)
            time.sleep(2)
            rss = rss_bytes(proc.pid) / (1 << 20)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        reader.join(timeout=5)
    return first, listening[0], cpu, rss


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", type=Path, default=[ROOT])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    runs: dict[Path, list[tuple[float, float, float, float]]] = {t: [] for t in args.trees}
    for tree in args.trees:
        compile_sources(tree)
    for i in range(args.repeat):
        for tree in args.trees:
            runs[tree].append(one_start(tree))
        print(f"[startup] {i + 1}/{args.repeat} rounds", file=sys.stderr)
    for tree, results in runs.items():
        first, listen, cpu, rss = (list(column) for column in zip(*results))
        print(
            f"{tree}: first ack {_summary(first)} s, listening {_summary(listen)} s, "
            f"broker CPU {_summary(cpu)} s, RSS idle {_summary(rss)} MiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
