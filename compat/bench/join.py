"""Group join latency, Samsa against Apache Kafka: three consumers, time to a stable assignment.

    .venv/bin/python -m compat.bench.join [--repeat 5]

One broker of each (BENCH_SETTINGS: no initial rebalance delay, KIP-848 heartbeats every 500 ms),
a topic of six partitions; each round, on each broker in turn, three librdkafka consumers
subscribe to a new group with `group.protocol=classic` and then with `group.protocol=consumer`
(KIP-848), and the time from the subscriptions to a stable assignment (every partition owned by
exactly one member, each member owning some) is measured (`loads.group_join`). Printed per broker
and protocol: median (min-max) milliseconds, and the ratio of the medians. `python -m compat.bench`
runs the same measurement (three joins per repeat) into docs/benchmarks.md's table.

A classic join takes one JoinGroup round when the three requests arrive together and a second
one (librdkafka's 3 s heartbeat tells a member to rejoin) when one arrives after the group formed,
on both brokers: the spread is the clients' timing, the median what a user sees most.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from broker.testing.ports import free_port
from compat.bench import loads
from compat.bench.targets import BenchTls, KafkaTarget, SamsaTarget, compile_sources, create_topic

ROOT = Path(__file__).resolve().parents[2]

PROTOCOLS = ("classic", "consumer")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    compile_sources(ROOT)
    with tempfile.TemporaryDirectory(prefix="samsa-bench-join-") as tmp:
        tls = BenchTls.make(Path(tmp))
        samsa, kafka = SamsaTarget(port=free_port(), tls=tls), KafkaTarget(1, port=free_port(), tls=tls)
        times: dict[tuple[str, str], list[float]] = {}
        try:
            samsa.process.start()
            kafka.format()
            kafka.launch()
            kafka.wait_ready()
            for target in (samsa, kafka):
                create_topic(target.bootstrap_servers, "join", partitions=6)
                loads.group_join(target.bootstrap_servers, "join", 6, "classic")  # __consumer_offsets created
            for i in range(args.repeat):
                for target in (samsa, kafka) if i % 2 == 0 else (kafka, samsa):
                    for protocol in PROTOCOLS:
                        seconds = loads.group_join(target.bootstrap_servers, "join", 6, protocol)
                        times.setdefault((target.name, protocol), []).append(seconds * 1000)
                print(f"[join] {i + 1}/{args.repeat} rounds", file=sys.stderr, flush=True)
        finally:
            samsa.close()
            kafka.close()
    for protocol in PROTOCOLS:
        s, k = times[("samsa", protocol)], times[("kafka", protocol)]
        print(f"{protocol}: samsa {statistics.median(s):.0f} ({min(s):.0f}-{max(s):.0f}) ms, "
              f"kafka {statistics.median(k):.0f} ({min(k):.0f}-{max(k):.0f}) ms, "
              f"ratio {statistics.median(s) / statistics.median(k):.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
