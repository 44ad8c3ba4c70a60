"""Kafka Streams exactly_once_v2 on a 3-broker Samsa cluster, a broker kill -9'd mid-run.

compat/jvm/harness/streams/StreamsEos.java (kafka-streams 4.3.1 from Maven Central, compat/pom.xml
profile `streams`): re-key by word (a repartition topic), count per word in 10-second windows
(a windowed state store with a changelog topic, RF=3), write "<word>@<window start>" -> count.
Input is produced in two halves; while the application processes the first, the broker leading
the most partitions is killed (SIGKILL) and restarted. The last count of every key in the output,
read read_committed, must equal the count computed here from the input: no update lost, none
counted twice (a replayed, uncommitted transaction would count its records again).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from broker.testing.cluster import SamsaCluster
from compat.jvm import TOOL_JVM, compile_harness
from compat.kafka import classpath, java
from tests.cluster.conftest import broker_logs, create_topic

INPUT, OUTPUT, PARTITIONS = "eos-input", "eos-output", 3
WORDS = [f"w{i}" for i in range(7)]
WINDOW_MS = 10_000
RECORDS = 3000  # in two halves


def _produce(cluster: SamsaCluster, first: int, count: int, base_ms: int) -> Counter[str]:
    """Records first..first+count-1: value a word, timestamp spread over three windows."""
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5})  # fmt: skip
    expected: Counter[str] = Counter()
    for i in range(first, first + count):
        word, ts = WORDS[i * 31 % len(WORDS)], base_ms + (i * 10) % (3 * WINDOW_MS)
        p.produce(INPUT, key=f"k{i}".encode(), value=word.encode(), timestamp=ts)
        expected[f"{word}@{ts // WINDOW_MS * WINDOW_MS}"] += 1
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return expected


def _final_counts(cluster: SamsaCluster, expected: Counter[str], timeout: float) -> dict[str, int]:
    """The last count of each key in the output (read_committed), once they equal `expected` or
    the timeout passes."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"eos-check-{uuid.uuid4()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    c.assign([TopicPartition(OUTPUT, q, 0) for q in range(PARTITIONS)])
    last: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and last != dict(expected):
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    last[m.key().decode()] = struct.unpack(">q", m.value())[0]
    finally:
        c.close()
    return last


def _busiest(cluster: SamsaCluster) -> int:
    md = cluster.metadata(topics=[INPUT, OUTPUT])
    leaders = Counter(p.leader for t in (INPUT, OUTPUT) for p in md.topics[t].values())
    return leaders.most_common(1)[0][0]


def test_streams_exactly_once_v2_counts_survive_a_broker_kill(tmp_path: Path) -> None:
    overrides = {
        "transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5",
        "min.insync.replicas": "2", "transaction.state.log.min.isr": "2",
        "replica.lag.time.max.ms": "3000", "group.initial.rebalance.delay.ms": "0",
    }  # fmt: skip
    with SamsaCluster(tmp_path / "cluster", 3, overrides=overrides) as cluster:
        for topic in (INPUT, OUTPUT):
            create_topic(cluster, topic, PARTITIONS, 3)
        classes = compile_harness("streams")
        err = tmp_path / "streams.err"
        app = subprocess.Popen(
            [java(), *[o for o in TOOL_JVM if not o.startswith("-Xmx")], "-Xmx384m", "-cp",
             f"{classpath('streams')}{os.pathsep}{classes}", "StreamsEos", cluster.bootstrap_servers,
             f"eos-{uuid.uuid4().hex[:8]}", INPUT, OUTPUT, str(tmp_path / "state")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err.open("w"), text=True,
        )  # fmt: skip
        lines: list[dict[str, Any]] = []
        reader = threading.Thread(
            target=lambda: lines.extend(json.loads(x) for x in app.stdout or () if x.startswith("{")), daemon=True
        )
        reader.start()
        try:
            base = (int(time.time() * 1000) // WINDOW_MS - 6) * WINDOW_MS
            expected = _produce(cluster, 0, RECORDS // 2, base)
            cluster.wait_for(lambda: any(o.get("state") == "RUNNING" for o in lines), 90, "the application running")
            victim = _busiest(cluster)
            time.sleep(1.0)  # mid-processing of the first half
            cluster.kill(victim)
            expected += _produce(cluster, RECORDS // 2, RECORDS // 2, base)
            time.sleep(2.0)
            cluster.restart(victim)
            final = _final_counts(cluster, expected, 150)
            wrong = {k: (final.get(k), n) for k, n in expected.items() if final.get(k) != n}
            extra = set(final) - set(expected)
            assert not wrong and not extra, (
                f"(final, expected) per key {wrong}; keys never sent {extra}; app: {lines[-20:]}\n"
                + broker_logs(cluster)
            )
            assert sum(final.values()) == RECORDS
        finally:
            if app.stdin is not None:
                app.stdin.close()
            try:
                app.wait(60)
            except subprocess.TimeoutExpired:
                app.kill()
                app.wait()
            reader.join(5)
        # closed cleanly: it got to its end (the state listener's NOT_RUNNING may be printed after
        # it, from a Streams thread) with no uncaught exception on the way
        assert {"step": "end"} in lines and not [x for x in lines if x["step"] == "uncaught"], (
            err.read_text()[-3000:], lines[-10:])
