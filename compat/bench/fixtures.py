"""What a test pays for its broker, by the pytest plugin's three fixtures.

    .venv/bin/python -m compat.bench.fixtures [--repeat 20]

For each way (rounds alternate between them, so that load on the machine falls on all alike):
* process: `SamsaProcess` (the `samsa_broker` fixture): a new `samsa serve` process, started,
  then a first produce acknowledged, then stopped (SIGTERM) and its directory removed;
* in-process: `SamsaInProcess` (the `samsa_inprocess_broker` fixture): a new broker on a loop
  thread of this process, the same steps;
* session + namespace: one in-process broker for all rounds (`samsa_session_broker`); each round
  is a test's namespace: a first produce to a new topic (auto-created) acknowledged, then the
  topic deleted, as the `samsa_namespace` fixture does when the test ends.
Printed per way, median (min-max) milliseconds: ready (start() returned), first ack (from the
start of the round; librdkafka producer created at once, as in `python -m compat.bench`), and the
round's whole cost including the stop. The first in-process round also pays the broker's imports
(~0.3 s, once per test process); it is left out of the figures and printed apart.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from compat.bench import loads
from compat.bench.targets import compile_sources

ROOT = Path(__file__).resolve().parents[2]
Round = tuple[float, float, float]  # ready, first ack, whole round (seconds)


def process_round() -> Round:
    from broker.testing.process import SamsaProcess

    with tempfile.TemporaryDirectory(prefix="samsa-fixture-") as tmp:
        started = time.perf_counter()
        broker = SamsaProcess(Path(tmp) / "data", log_level="WARNING").start()
        ready = time.perf_counter() - started
        first = loads.first_ack(broker.bootstrap_servers, "first-ack", started, timeout=60)
        broker.close()
        return ready, first, time.perf_counter() - started


def inprocess_round() -> Round:
    from broker.testing.inprocess import SamsaInProcess

    started = time.perf_counter()
    broker = SamsaInProcess().start()
    ready = time.perf_counter() - started
    first = loads.first_ack(broker.bootstrap_servers, "first-ack", started, timeout=60)
    broker.close()
    return ready, first, time.perf_counter() - started


def namespace_rounds() -> Callable[[], Round]:
    from broker.testing.inprocess import SamsaInProcess

    shared = SamsaInProcess().start()
    count = 0

    def one() -> Round:
        nonlocal count
        count += 1
        topic = f"test-{count}.first-ack"
        started = time.perf_counter()
        first = loads.first_ack(shared.bootstrap_servers, topic, started, timeout=60)
        controller = shared.broker.controller
        shared.run(controller.delete_topics([topic]))
        return 0.0, first, time.perf_counter() - started

    return one


def _summary(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{statistics.median(ms):.1f} ({min(ms):.1f}-{max(ms):.1f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    compile_sources(ROOT)
    imports_started = time.perf_counter()
    inprocess_round()  # the broker's imports, paid once per test process
    print(f"first in-process broker (with imports): {time.perf_counter() - imports_started:.3f} s")
    ways: dict[str, Callable[[], Round]] = {
        "process": process_round,
        "in-process": inprocess_round,
        "session + namespace": namespace_rounds(),
    }
    runs: dict[str, list[Round]] = {name: [] for name in ways}
    for i in range(args.repeat):
        for name, way in ways.items():
            runs[name].append(way())
        print(f"[fixtures] {i + 1}/{args.repeat} rounds", file=sys.stderr)
    for name, results in runs.items():
        ready, first, whole = (list(column) for column in zip(*results))
        shown = "-" if name == "session + namespace" else _summary(ready)
        print(f"{name}: ready {shown} ms, first ack {_summary(first)} ms, whole round {_summary(whole)} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
