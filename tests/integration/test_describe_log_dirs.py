"""DescribeLogDirs on a broker with two log.dirs, through Kafka's kafka-log-dirs tool: both dirs,
the partitions spread over them, each replica's size as on disk, offset lag 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from broker.testing.process import SamsaProcess
from compat.jvm import run_tool
from tests.support import fidelity
from tests.support.raw_client import RawClient


def test_two_log_dirs_with_kafka_log_dirs(samsa_broker_factory: Any, tmp_path: Path) -> None:
    dirs = [tmp_path / "dir-a", tmp_path / "dir-b"]
    broker: SamsaProcess = samsa_broker_factory({"log.dirs": ",".join(str(d) for d in dirs)})
    with RawClient(broker.port) as c:
        fidelity.create_topic(c, "spread", partitions=4)
        for p in range(4):
            fidelity.wait_for_leader(c, "spread", p)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for p in range(4):
        for _ in range(p + 1):  # partition p holds p + 1 records
            producer.produce("spread", b"x" * 100, partition=p)
    assert producer.flush(10) == 0

    out = run_tool("kafka-log-dirs", "--bootstrap-server", broker.bootstrap_servers, "--describe",
                   "--topic-list", "spread").stdout  # fmt: skip
    answer = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    (b,) = answer["brokers"]
    by_dir = {Path(d["logDir"]): d for d in b["logDirs"]}
    assert set(by_dir) == {d.absolute() for d in dirs}
    seen: dict[str, tuple[Path, int]] = {}
    for path, d in by_dir.items():
        assert d["error"] is None
        for p in d["partitions"]:
            assert p["offsetLag"] == 0 and p["isFuture"] is False
            seen[p["partition"]] = (path, p["size"])
    assert sorted(seen) == [f"spread-{p}" for p in range(4)]
    assert {path for path, _ in seen.values()} == set(by_dir), "the partitions are spread over both dirs"
    for name, (path, size) in seen.items():
        on_disk = sum(f.stat().st_size for f in (path / name).glob("*.log"))
        assert size == on_disk > 0, (name, size, on_disk)
