"""Spark (PySpark 4.0 and the stock spark-sql-kafka-0-10 connector) against Samsa and Apache Kafka.

The jobs are compat/spark/pipeline.py's; this module sets up their input with confluent-kafka
(explicit partitions and CreateTime timestamps, so every run sees the same data), reads their
output back with confluent-kafka and asserts it on each target; the `differential` fixture also
asserts that Samsa's observations equal Kafka's. One SparkSession serves the module.

- streaming: the windowed aggregation runs twice on the same checkpoint (availableNow, clean
  stop). Run 1 sees the first half of the events, run 2 the rest. The output topic must hold
  exactly the windows the watermark closed, once each: run 1's after run 1, all of them after
  run 2 (state carried across the restart, late events dropped, nothing replayed).
- batch read with JSON offsets per partition (including -2/-1) and a full earliest..latest read.
- batch read by timestamp, per partition and for every partition (ListOffsets by timestamp from
  the AdminClient; one partition's timestamps are out of order; an ending timestamp past every
  record means "latest").
- batch write with keys, values (one null), headers (repeated names, a null value) and explicit
  partitions (and two rows left to the producer's key hash).
- batch read of a topic written transactionally (confluent-kafka: three transactions committed,
  one aborted, one left open) with kafka.isolation.level read_committed and read_uncommitted, with
  failOnDataLoss on: the offsets markers and aborted records leave are no data loss.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest

from compat.spark import pipeline

CLIENT = "spark 4.0 (pyspark)"
# The events' clock: an hour ago, on a minute boundary (so windows align with it). Not a fixed date:
# Kafka's time retention (7 days by default) deletes old-timestamped data in its first pass, 30 s
# after start-up (log.initial.task.delay.ms), and the jobs would then read nothing.
BASE = (int(time.time() * 1000) // 60_000 - 60) * 60_000
WINDOW_MS = 10_000
WATERMARK_MS = 10_000


def _compat(scenario: str) -> Any:
    return pytest.mark.compat(client=CLIENT, scenario=scenario)


@pytest.fixture(scope="module")
def spark() -> Any:
    session = pipeline.spark_session("samsa-compat-spark")
    yield session
    session.stop()


# ------------------------------------------------------------------------- confluent-kafka side


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:  # until the metadata lists every partition with a leader
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if md.error is None and len(md.partitions) == partitions and all(p.leader >= 0 for p in md.partitions.values()):
            return
        assert time.monotonic() < deadline, f"{topic} has no leaders: {md.partitions}"
        time.sleep(0.1)


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < total:
        assert time.monotonic() < deadline, f"{topic} did not grow to {total} partitions"
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    """records: {partition, key, value, timestamp, headers}; all acknowledged or this fails."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for r in records:
        producer.produce(
            topic,
            key=r.get("key"),
            value=r.get("value"),
            partition=r["partition"],
            timestamp=r.get("timestamp", 0),
            headers=r.get("headers"),
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
    assert producer.flush(30) == 0, "records not delivered in 30 s"
    assert not errors, errors


def consume_all(bootstrap: str, topic: str) -> list[dict]:
    """Every record of `topic` (to each partition's high watermark), sorted by (partition, offset)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"compat-spark-{uuid.uuid4()}", "enable.auto.commit": False}
    )
    try:
        parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        got: list[dict] = []
        done = {p for p in parts if ends[p] == 0}
        deadline = time.monotonic() + 30
        while len(done) < len(parts):
            assert time.monotonic() < deadline, f"{topic}: read {len(got)} records, ends {ends}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(
                {
                    "partition": msg.partition(),
                    "offset": msg.offset(),
                    "key": None if msg.key() is None else msg.key().decode(),
                    "value": None if msg.value() is None else msg.value().decode(),
                    "headers": [[k, None if v is None else v.decode()] for k, v in (msg.headers() or [])],
                    "timestampType": {1: "CreateTime", 2: "LogAppendTime"}.get(msg.timestamp()[0]),
                }
            )
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return sorted(got, key=lambda r: (r["partition"], r["offset"]))
    finally:
        consumer.close()


# ------------------------------------------------------------------------- streaming


def _event(i: int, user: str, amount: int, at_ms: int, partitions: int = 3) -> dict:
    return {
        "partition": i % partitions,
        "key": user.strip().lower(),
        "value": json.dumps({"user": user, "amount": amount, "ts": BASE + at_ms}),
        "timestamp": BASE + at_ms,
    }


USERS = ["Alice", " bob", "CAROL", "dave "]

# Run 1: event times 0..36 s (max 37.5 s) -> watermark 27.5 s, closes [0,10) and [10,20).
RUN1 = [_event(i, USERS[i % 4], (i * 7) % 50 + 1, i * 1500) for i in range(25)] + [
    _event(25, "alice", 0, 3_000),  # invalid amount: dropped by the filter
    {"partition": 2, "key": "x", "value": "not json", "timestamp": BASE + 4_000},  # unparsable: dropped
    _event(27, "Bob", 11, 37_500),
]
# Run 2: a late event (5 s <= watermark 27.5 s: dropped), one in the still-open [20,30) window
# (29 s > 27.5 s: merged with run 1's state from the checkpoint), 38..58 s, then a flush event at
# 300 s that moves the watermark to 290 s and closes every window but its own. Before run 2 the
# source topic grows to 4 partitions: the restarted query must find the new one and read it from 0.
RUN2 = [
    _event(i, *e, partitions=4)
    for i, e in enumerate(
        [("alice", 40, 5_000), ("CAROL", 13, 29_000)]
        + [(USERS[(j + 1) % 4], (j * 11) % 40 + 1, 38_000 + j * 1_250) for j in range(17)]
        + [("dave", 1, 300_000)],
        start=30,
    )
]


def expected_windows(runs: list[list[dict]]) -> list[list[dict]]:
    """What each run must emit: the aggregation Spark defines (late = event time <= watermark,
    dropped; a window is emitted once the watermark reaches its end), simulated per run."""
    state: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    watermark = None
    emitted: list[list[dict]] = []
    for run in runs:
        max_ts = None
        for r in run:
            try:
                e = json.loads(r["value"])
            except ValueError:
                continue
            if e["amount"] <= 0:
                continue
            ts = e["ts"]
            max_ts = ts if max_ts is None else max(max_ts, ts)
            if watermark is not None and ts <= watermark:
                continue
            start = ts - ts % WINDOW_MS
            s = state[(start, e["user"].strip().lower())]
            s[0] += 1
            s[1] += e["amount"]
        if max_ts is not None:
            watermark = max(watermark or 0, max_ts - WATERMARK_MS)
        out = []
        for (start, user), (count, total) in sorted(state.items()):
            if start + WINDOW_MS <= watermark:
                out.append(
                    {
                        "user": user,
                        "window_start": start,
                        "window_end": start + WINDOW_MS,
                        "events": count,
                        "total": total,
                    }
                )
        for o in out:
            del state[(o["window_start"], o["user"])]
        emitted.append(out)
    return emitted


def _iso(ms: int) -> str:
    """Spark's rendering of a watermark in query progress (UTC, milliseconds)."""
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _outputs(records: list[dict]) -> list[dict]:
    """The sink's records as the comparison sees them: partition, key and parsed value, sorted
    (Spark's two output tasks interleave, so offsets within a partition may differ run to run)."""
    out = [{"partition": r["partition"], "key": r["key"], "value": json.loads(r["value"])} for r in records]
    return sorted(out, key=lambda o: json.dumps(o, sort_keys=True))


def _streaming(spark: Any, tmp_root: Any) -> Any:
    def run(target: Any) -> list[dict]:
        bs = target.bootstrap_servers
        source, sink = "spark-events", "spark-user-totals"
        create_topic(bs, source, 3)
        create_topic(bs, sink, 2)
        checkpoint = str(tmp_root / f"checkpoint-{target.name}-{uuid.uuid4().hex[:8]}")
        obs: list[dict] = []
        for step, events in (("run1", RUN1), ("run2", RUN2)):
            if step == "run2":
                add_partitions(bs, source, 4)
            produce(bs, source, events)
            progress = pipeline.aggregate_events(spark, bs, source, sink, checkpoint)
            obs.append({"step": step, "watermark": progress["watermark"], "sources": progress["sources"]})
            obs.append({"step": f"{step}-output", "records": _outputs(consume_all(bs, sink))})
        return obs

    return run


@_compat("structured streaming: windowed aggregation with watermark, stop and restart from checkpoint")
def test_streaming_aggregation_restart(spark, differential, tmp_path_factory):
    obs = differential("spark-streaming", _streaming(spark, tmp_path_factory.mktemp("spark-stream")))
    run1, run2 = expected_windows([RUN1, RUN2])
    assert run1 and run2 and any(w["window_start"] == BASE + 20_000 and w["events"] >= 2 for w in run2)
    by_step = {o["step"]: o for o in obs}
    out1 = [o["value"] for o in by_step["run1-output"]["records"]]
    out2 = [o["value"] for o in by_step["run2-output"]["records"]]

    def key(w: dict) -> tuple:
        return (w["window_start"], w["user"])

    assert sorted(out1, key=key) == run1, "run 1 output"
    # Exactly once over the restart: run 1's windows are not written again, run 2 adds the rest.
    assert sorted(out2, key=key) == sorted(run1 + run2, key=key), "output after the restart"
    assert by_step["run1"]["watermark"] == _iso(BASE + 27_500)
    assert by_step["run2"]["watermark"] == _iso(BASE + 290_000)
    produced: dict[str, int] = defaultdict(int)
    for r in RUN1 + RUN2:
        produced[str(r["partition"])] += 1
    assert set(produced) == {"0", "1", "2", "3"}
    assert by_step["run2"]["sources"] == [{"spark-events": dict(produced)}]
    for o in by_step["run2-output"]["records"]:
        assert o["key"] == o["value"]["user"]


# ------------------------------------------------------------------------- batch


def _batch_source() -> list[dict]:
    records = []
    for p in range(3):
        for i in range(10):
            ts = BASE + i * 1000 + p * 100
            if p == 2 and i == 5:
                ts = BASE + 1_250  # out of order: lookups must still find the first record at or after
            records.append(
                {
                    "partition": p,
                    "key": f"k{p}-{i}",
                    "value": f"v{p}-{i}",
                    "timestamp": ts,
                    "headers": [("i", str(i).encode())],
                }
            )
    return records


def _relative(rows: list[dict]) -> list[dict]:
    return [{**r, "timestamp": r["timestamp"] - BASE} for r in rows]


def _batch_reads(spark: Any) -> Any:
    def run(target: Any) -> list[dict]:
        bs = target.bootstrap_servers
        topic = "spark-batch-source"
        create_topic(bs, topic, 3)
        produce(bs, topic, _batch_source())
        return [
            {"step": "all", "rows": _relative(pipeline.read_range(spark, bs, topic))},
            {
                "step": "json-offsets",
                "rows": _relative(pipeline.read_range(spark, bs, topic, {0: 3, 1: -2, 2: 7}, {0: 8, 1: 4, 2: -1})),
            },
            {
                "step": "by-timestamp",
                "rows": _relative(
                    pipeline.read_by_timestamp(
                        spark,
                        bs,
                        topic,
                        {0: BASE + 2_500, 1: BASE, 2: BASE + 4_150},
                        {0: BASE + 6_000, 1: BASE + 2_100, 2: BASE + 99_999},
                    )
                ),
            },
            {
                "step": "global-timestamp",
                "rows": _relative(pipeline.read_by_timestamp(spark, bs, topic, BASE + 7_000, BASE + 9_000)),
            },
        ]

    return run


def _offsets(rows: list[dict]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        out[r["partition"]].append(r["offset"])
    return dict(out)


@_compat("batch read: startingOffsets/endingOffsets as JSON (-2/-1), by timestamp")
def test_batch_reads(spark, differential):
    obs = {o["step"]: o["rows"] for o in differential("spark-batch-reads", _batch_reads(spark))}
    every = obs["all"]
    assert len(every) == 30
    r = every[12]
    assert (r["partition"], r["offset"], r["key"], r["value"], r["timestamp"], r["timestampType"], r["headers"]) == (
        1,
        2,
        "k1-2",
        "v1-2",
        2_100,
        0,
        [["i", "2"]],
    )
    assert _offsets(obs["json-offsets"]) == {0: [3, 4, 5, 6, 7], 1: [0, 1, 2, 3], 2: [7, 8, 9]}
    assert _offsets(obs["by-timestamp"]) == {0: [3, 4, 5], 1: [0, 1], 2: [4, 5, 6, 7, 8, 9]}
    assert _offsets(obs["global-timestamp"]) == {0: [7, 8], 1: [7, 8], 2: [7, 8]}


def _after_delete_records(spark: Any) -> Any:
    def run(target: Any) -> list[dict]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient

        bs = target.bootstrap_servers
        topic = "spark-truncated"
        create_topic(bs, topic, 3)
        produce(bs, topic, _batch_source())
        admin = AdminClient({"bootstrap.servers": bs})
        deleted = admin.delete_records([TopicPartition(topic, 0, 4), TopicPartition(topic, 2, 10)])
        low = {tp.partition: f.result(timeout=30).low_watermark for tp, f in deleted.items()}
        obs: list[dict] = [{"step": "deleteRecords", "lowWatermarks": low}]
        obs.append({"step": "earliest", "offsets": _offsets(pipeline.read_range(spark, bs, topic))})
        obs.append(
            {
                "step": "json-earliest",
                "offsets": _offsets(pipeline.read_range(spark, bs, topic, {0: -2, 1: -2, 2: -2}, {0: 7, 1: 3, 2: -1})),
            }
        )
        below = pipeline.read_range(spark, bs, topic, {0: 1, 1: 0, 2: 0}, {0: 6, 1: 2, 2: -1}, fail_on_data_loss=False)
        obs.append({"step": "below-start-lenient", "offsets": _offsets(below)})
        try:
            pipeline.read_range(spark, bs, topic, {0: 1, 1: 0, 2: 0}, {0: 6, 1: 2, 2: -1})
            obs.append({"step": "below-start-strict", "failed": False})
        except Exception as e:  # noqa: BLE001 - the observation is that it fails
            obs.append(
                {
                    "step": "below-start-strict",
                    "failed": True,
                    "data_loss": "OffsetOutOfRange" in str(e) or "data loss" in str(e).lower(),
                }
            )
        return obs

    return run


@_compat("batch read after DeleteRecords: log start offset, failOnDataLoss")
def test_batch_read_after_delete_records(spark, differential):
    obs = {o["step"]: o for o in differential("spark-truncated", _after_delete_records(spark))}
    assert obs["deleteRecords"]["lowWatermarks"] == {0: 4, 2: 10}
    assert obs["earliest"]["offsets"] == {0: list(range(4, 10)), 1: list(range(10))}
    assert obs["json-earliest"]["offsets"] == {0: [4, 5, 6], 1: [0, 1, 2]}
    # Offsets below the log start are skipped (logged as data loss) or fail the job.
    assert obs["below-start-lenient"]["offsets"] == {0: [4, 5], 1: [0, 1]}
    assert obs["below-start-strict"] == {"step": "below-start-strict", "failed": True, "data_loss": True}


WRITES = [
    {"partition": 0, "key": "a", "value": "first", "headers": [["h", "1"]]},
    {"partition": 1, "key": "b", "value": "second", "headers": [["h", "1"], ["h", "2"], ["empty", None]]},
    {"partition": 2, "key": None, "value": "keyless", "headers": []},
    {"partition": 0, "key": "c", "value": None, "headers": [["tombstone", "yes"]]},
    {"partition": 2, "key": "d", "value": "", "headers": [["h", ""]]},
    {"partition": 1, "key": "e", "value": "x" * 3000, "headers": []},
    {"partition": None, "key": "hashed-1", "value": "by key hash", "headers": []},
    {"partition": None, "key": "hashed-2", "value": "by key hash", "headers": [["h", "3"]]},
]


def _batch_write(spark: Any) -> Any:
    def run(target: Any) -> list[dict]:
        bs = target.bootstrap_servers
        topic = "spark-batch-written"
        create_topic(bs, topic, 3)
        pipeline.write_records(spark, bs, [{**w, "topic": topic} for w in WRITES])
        consumed = consume_all(bs, topic)
        read_back = [
            {k: r[k] for k in ("partition", "offset", "key", "value", "headers")}
            for r in pipeline.read_range(spark, bs, topic)
        ]
        return [{"step": "consumed", "records": consumed}, {"step": "spark-read", "records": read_back}]

    return run


@_compat("batch write: keys, values, headers, explicit partitions")
def test_batch_write(spark, differential):
    obs = {o["step"]: o["records"] for o in differential("spark-batch-write", _batch_write(spark))}
    consumed = obs["consumed"]
    assert len(consumed) == len(WRITES)
    explicit = [
        (r["partition"], r["offset"], r["key"], r["value"], r["headers"])
        for r in consumed
        if not (r["key"] or "").startswith("hashed")
    ]
    want = []
    next_offset: dict[int, int] = defaultdict(int)
    for w in WRITES:
        if w["partition"] is not None:
            want.append((w["partition"], next_offset[w["partition"]], w["key"], w["value"], w["headers"]))
            next_offset[w["partition"]] += 1
    assert sorted(explicit, key=repr) == sorted(want, key=repr)
    assert {r["timestampType"] for r in consumed} == {"CreateTime"}
    # Spark reads back what confluent-kafka reads (same partitions, offsets, keys, values, headers).
    assert obs["spark-read"] == [
        {k: r[k] for k in ("partition", "offset", "key", "value", "headers")} for r in consumed
    ]


def _transactional(spark: Any) -> Any:
    def run(target: Any) -> list[dict]:
        from confluent_kafka import Producer

        bs, topic = target.bootstrap_servers, "spark-txn"
        create_topic(bs, topic, 2)
        p = Producer({"bootstrap.servers": bs, "transactional.id": "spark-txn-tid", "linger.ms": 5})
        p.init_transactions(30)
        for n in range(5):
            p.begin_transaction()
            for i in range(6):
                p.produce(topic, key=f"t{n}".encode(), value=f"t{n}.{i}".encode(), partition=i % 2)
            p.flush(30)
            if n == 1:
                p.abort_transaction(30)
            elif n < 4:
                p.commit_transaction(30)
        obs: list[dict] = []
        for isolation in ("read_committed", "read_uncommitted"):
            rows = pipeline.read_range(spark, bs, topic, isolation=isolation)
            obs.append({"step": isolation, "records": [[r["partition"], r["offset"], r["value"]] for r in rows]})
        p.abort_transaction(30)  # the open one
        return obs

    return run


@_compat("batch read of transactionally written data, read_committed and read_uncommitted")
def test_batch_read_committed(spark, differential):
    obs = {o["step"]: o for o in differential("spark-read-committed", _transactional(spark))}
    committed = sorted(r[2] for r in obs["read_committed"]["records"])
    assert committed == sorted(f"t{n}.{i}" for n in (0, 2, 3) for i in range(6))
    # every record but the markers, the open transaction's too
    assert len(obs["read_uncommitted"]["records"]) == 30
