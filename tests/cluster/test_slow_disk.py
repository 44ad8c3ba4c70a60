"""A leader on a slow disk (every write to its data directory 100 ms slower, an LD_PRELOAD library
under the broker: broker/testing/slowdisk.c) while an idempotent acks=all producer writes to every
partition, two of which it leads. Its appends' bytes are written on the writer threads
(broker/log/writer.py), so its event loop keeps serving: Metadata requests to it are answered
without waiting for writes, it keeps its leaderships (same leader epochs), and no partition goes
2 s without an acknowledgement. When its disk heals the writes come back to the loop. Every
acknowledged record is in the log once, at its offset.

    .venv/bin/python -m pytest -s tests/cluster/test_slow_disk.py
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.testing.cluster import SamsaCluster
from compat.bench.traffic import AckLog, ConsumedLog, read_topic, run_consumer, run_producer
from tests.cluster.conftest import broker_logs, create_topic

TOPIC = "slowdisk"
PARTITIONS = 3
SLOW_WRITE_MS = 100
SLOW_FOR_S = 8.0
GAP_LIMIT_S = 2.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SamsaCluster]:
    with SamsaCluster(tmp_path, brokers=3, slow_disk=True, overrides={"min.insync.replicas": "2"}) as c:
        yield c


def test_leader_on_a_slow_disk_keeps_leading_and_acknowledging(cluster: SamsaCluster) -> None:
    create_topic(cluster, TOPIC, PARTITIONS, 3, configs={"min.insync.replicas": "2"},
                 assignments=[[1, 2, 3], [2, 3, 1], [1, 3, 2]])  # fmt: skip
    victim = 1  # leads partitions 0 and 2, follows 1
    cluster.wait_for(
        lambda: all(len(p.isr) == 3 for p in cluster.metadata(topics=[TOPIC]).topics[TOPIC].values()), 30, "full ISR"
    )
    before = cluster.metadata(topics=[TOPIC]).topics[TOPIC]
    assert (before[0].leader, before[2].leader) == (victim, victim)
    acks, seen = AckLog(), ConsumedLog()
    stop = threading.Event()
    threads = [
        threading.Thread(target=run_producer, args=(cluster.bootstrap_servers, TOPIC, PARTITIONS, acks, stop), daemon=True),
        *(threading.Thread(target=run_consumer, args=(cluster.bootstrap_servers, TOPIC, seen, stop, "slowdisk"), daemon=True)
          for _ in range(2)),
    ]  # fmt: skip
    for t in threads:
        t.start()
    try:
        cluster.wait_for(lambda: all(acks.count(q) > 20 for q in range(PARTITIONS)), 30, "traffic on every partition")
        slowed_at = time.monotonic()
        acked_before = acks.count(0)
        cluster.slow_disk(victim, write_ms=SLOW_WRITE_MS)
        latencies: list[float] = []  # Metadata round trips to the victim (a new connection each)
        while time.monotonic() < slowed_at + SLOW_FOR_S:
            sent = time.monotonic()
            cluster.metadata(victim, topics=[TOPIC])
            latencies.append(time.monotonic() - sent)
            time.sleep(0.02)
        latencies.sort()
        median, p90 = latencies[len(latencies) // 2], latencies[len(latencies) * 9 // 10]
        gaps = {q: acks.longest_gap(q, slowed_at) for q in range(PARTITIONS)}
        acked_slow = acks.count(0) - acked_before
        during = cluster.metadata(topics=[TOPIC]).topics[TOPIC]
        cluster.slow_disk(victim, 0)
        print(f"\nSLOW DISK broker {victim} writes +{SLOW_WRITE_MS} ms for {SLOW_FOR_S:.0f} s: longest ack gap "
              + ", ".join(f"p{q} {g:.2f}s" for q, g in gaps.items())
              + f"; {acked_slow} acks on p0 meanwhile; Metadata from it: median {median * 1000:.0f} ms, "
              f"p90 {p90 * 1000:.0f} ms ({len(latencies)})")  # fmt: skip
        logs = broker_logs(cluster, 6000)
        assert [(during[q].leader, during[q].leader_epoch) for q in (0, 2)] == [
            (victim, before[q].leader_epoch) for q in (0, 2)
        ], logs
        # a write takes 100 ms: a loop that wrote would keep most answers waiting for one
        assert median < 0.03, f"median {median:.3f}s, p90 {p90:.3f}s"
        assert all(g < GAP_LIMIT_S for g in gaps.values()), logs
        assert acked_slow > 0
        victim_log = cluster.process(victim).read_log()
        assert "slow log write: writing on threads" in victim_log
        # healed: writes are fast again, acknowledgements go on
        healed_at = time.monotonic()
        cluster.wait_for(lambda: acks.count(0) > acked_before + acked_slow + 50, 30, "acks after the disk healed")
        assert acks.longest_gap(0, healed_at) < GAP_LIMIT_S
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not acks.errors, acks.errors
    problems = acks.check_against(read_topic(cluster.bootstrap_servers, TOPIC, PARTITIONS))
    assert not problems, problems[:5]
