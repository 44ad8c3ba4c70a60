"""Log compaction on a real broker with real clients.

- Many versions of many keys plus tombstones in a compacted topic (created through CreateTopics
  with small segments, a low min.cleanable.dirty.ratio and a short delete.retention.ms), written
  with every codec while the cleaner is off; then the broker restarts with the cleaner on. A
  consumer from offset 0 sees exactly the latest value of every live key at the offset it was
  acknowledged at, tombstones disappear after delete.retention.ms, the codec is kept, and the
  log on disk shrinks.
- kill -9 while a large clean runs ("cleaning started" in the broker log, no "cleaning done"
  yet): after a restart every latest value is there, nothing is duplicated or lost, and the
  cleaner then finishes the job.
- A producer and a consumer keep making progress while a large clean runs.
- `__consumer_offsets` is compacted: thousands of commits by one group leave a small log, and
  the last commit is what the group reads after a restart.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.testing import SamsaProcess
from protocol.records import Record
from tests.support.clients import consume, create_topic
from tests.support.logfiles import stored_codecs
from tests.support.wire import RawClient, fetch_all

pytestmark = pytest.mark.timeout(300)

FAST_CLEANER = {"log.cleaner.backoff.ms": "100"}
TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "65536",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1500",
    "file.delete.delay.ms": "1000",
}

Model = dict[int, tuple[bytes, bytes | None]]
"""offset -> (key, value) of every acknowledged record."""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SamsaProcess]:
    b = SamsaProcess(tmp_path / "data", {"log.cleaner.enable": "false"})
    b.start()
    yield b
    b.close()


def produce_pairs(
    bootstrap: str, topic: str, pairs: list[tuple[bytes, bytes | None]], codec: str = "none"
) -> Model:
    """Produce with librdkafka (acks=all, batched); returns offset -> (key, value) as acked."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 16_000,  # batches well under segment.bytes
            "compression.codec": codec,
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    acked: Model = {}
    errors: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.offset()] = (msg.key(), msg.value())  # type: ignore[attr-defined]

    for key, value in pairs:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0 and not errors, errors
    assert len(acked) == len(pairs)
    return acked


def latest(model: Model) -> dict[int, tuple[bytes, bytes]]:
    """The live records a fully compacted log holds: offset -> (key, value)."""
    last: dict[bytes, int] = {}
    for offset in sorted(model):
        last[model[offset][0]] = offset
    return {o: (k, v) for k, o in last.items() if (v := model[o][1]) is not None}


def read_all(bootstrap: str, topic: str) -> list[Record]:
    """Every record up to the high watermark, through plain Fetch requests."""
    host, port = bootstrap.rsplit(":", 1)
    with RawClient(int(port), host) as client:
        return fetch_all(client, topic)


def check_consistent(records: list[Record], model: Model) -> None:
    """Offsets strictly increase, every record is the one acked at its offset, every live key's
    latest record is present (the log may still hold older versions: it is not fully clean)."""
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "duplicate or out-of-order offsets"
    for r in records:
        assert (r.key, r.value) == model[r.offset], f"record at {r.offset} is not the acked one"
    present = set(offsets)
    missing = [o for o in latest(model) if o not in present]
    assert not missing, f"latest records lost at offsets {missing[:10]}"


def fully_compacted(records: list[Record]) -> bool:
    keys = [r.key for r in records]
    return len(keys) == len(set(keys)) and all(r.value is not None for r in records)


def wait_compacted(bootstrap: str, topic: str, model: Model, timeout: float = 90.0) -> list[Record]:
    deadline = time.monotonic() + timeout
    while True:
        records = read_all(bootstrap, topic)
        check_consistent(records, model)
        if fully_compacted(records):
            return records
        assert time.monotonic() < deadline, f"not compacted after {timeout}s: {len(records)} records"
        time.sleep(0.2)


def disk_bytes(data_dir: Path, topic: str) -> int:
    return sum(p.stat().st_size for p in (data_dir / f"{topic}-0").glob("*.log"))


def versions(keys: int, rounds: int, *, size: int = 40, deleted: range = range(0)) -> list[tuple[bytes, bytes | None]]:
    pairs: list[tuple[bytes, bytes | None]] = []
    for v in range(rounds):
        for k in range(keys):
            noise = os.urandom(size // 2).hex().encode()  # compresses poorly: segments roll
            pairs.append((b"key-%05d" % k, b"value-%d-%d-" % (k, v) + noise))
    pairs += [(b"key-%05d" % k, None) for k in deleted]
    # unique keys after the versions: the active segment holds no duplicates at the end
    pairs += [(b"filler-%05d" % i, os.urandom(100).hex().encode()) for i in range(400)]
    return pairs


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compacted_topic_keeps_latest_value_per_key_at_its_offset(
    broker: SamsaProcess, codec: str
) -> None:
    topic = f"table-{codec}"
    create_topic(broker.bootstrap_servers, topic, configs=TOPIC_CONFIG)
    model = produce_pairs(
        broker.bootstrap_servers, topic, versions(300, 20, deleted=range(0, 300, 10)), codec
    )
    before = read_all(broker.bootstrap_servers, topic)
    assert len(before) == len(model)
    bytes_before = disk_bytes(broker.data_dir, topic)

    broker.stop()
    broker.overrides.update({"log.cleaner.enable": "true", **FAST_CLEANER})
    broker.start()
    records = wait_compacted(broker.bootstrap_servers, topic, model)
    expected = latest(model)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (o, k, v) for o, (k, v) in sorted(expected.items())
    ]
    assert len(expected) == 270 + 400
    # a real consumer from offset 0 sees the same: latest values at their original offsets
    got = consume("confluent", broker.bootstrap_servers, topic, len(expected), timeout=30)
    assert [(g.offset, g.key, g.value) for g in got] == [
        (o, k, v) for o, (k, v) in sorted(expected.items())
    ]
    bytes_after = disk_bytes(broker.data_dir, topic)
    assert bytes_after < bytes_before / 3, (bytes_before, bytes_after)
    assert stored_codecs(broker.data_dir, topic) == {codec}
    log_text = broker.read_log()
    assert f"cleaning done topic={topic} partition=0" in log_text
    assert _tombstones_removed(log_text, topic) == 30
    print(f"codec={codec} bytes_before={bytes_before} bytes_after={bytes_after}")


def _tombstones_removed(log_text: str, topic: str) -> int:
    total = 0
    for line in log_text.splitlines():
        if f"cleaning done topic={topic} " in line:
            total += int(line.split("tombstones_removed=")[1].split()[0])
    return total


def large_log(broker: SamsaProcess, topic: str, records: int = 120_000) -> Model:
    """A big dirty compacted log (written with the cleaner off): 2000 keys, lz4 batches."""
    create_topic(broker.bootstrap_servers, topic, configs={**TOPIC_CONFIG, "segment.bytes": "1048576"})
    pairs: list[tuple[bytes, bytes | None]] = [
        (b"key-%05d" % (i % 2000), b"value-%d-" % i + os.urandom(30).hex().encode())
        for i in range(records)
    ]
    pairs += [(b"filler-%05d" % i, os.urandom(250).hex().encode()) for i in range(2500)]
    return produce_pairs(broker.bootstrap_servers, topic, pairs, "lz4")


def wait_for_log_line(broker: SamsaProcess, text: str, timeout: float = 60.0, start: int = 0) -> None:
    deadline = time.monotonic() + timeout
    while text not in broker.read_log()[start:]:
        assert time.monotonic() < deadline, f"{text!r} not logged within {timeout}s"
        time.sleep(0.02)


def test_kill_9_during_cleaning_loses_nothing(broker: SamsaProcess) -> None:
    topic = "crash-table"
    model = large_log(broker, topic)
    broker.stop()
    broker.overrides.update({"log.cleaner.enable": "true", **FAST_CLEANER})
    mark = len(broker.read_log())
    broker.start()
    wait_for_log_line(broker, f"cleaning started topic={topic}", start=mark)
    partition_dir = broker.data_dir / f"{topic}-0"
    deadline = time.monotonic() + 60
    while not [p for p in partition_dir.iterdir() if p.name.endswith(".log.cleaned")]:
        assert time.monotonic() < deadline, "the cleaner never started writing"
        time.sleep(0.01)
    time.sleep(0.3)  # mid-write: the map is built, cleaned segments are being written
    broker.kill()
    assert f"cleaning done topic={topic}" not in broker.read_log()[mark:], "clean ended before the kill"
    leftovers = [p.name for p in (broker.data_dir / f"{topic}-0").iterdir() if ".cleaned" in p.name]
    assert leftovers, "the kill should have caught the cleaner writing .cleaned files"

    broker.overrides["log.cleaner.enable"] = "false"
    broker.start()
    records = read_all(broker.bootstrap_servers, topic)
    check_consistent(records, model)
    assert len(records) == len(model), "nothing was swapped in, so nothing may be missing"
    assert not [p for p in (broker.data_dir / f"{topic}-0").iterdir() if ".cleaned" in p.name]

    broker.stop()
    broker.overrides["log.cleaner.enable"] = "true"
    broker.start()
    records = wait_compacted(broker.bootstrap_servers, topic, model)
    assert {r.offset for r in records} == set(latest(model))


def test_produce_and_fetch_continue_while_a_large_clean_runs(broker: SamsaProcess) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    topic = "big-table"
    large_log(broker, topic)
    create_topic(broker.bootstrap_servers, "live")
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def set_min_compaction_lag(value: str) -> None:
        entry = ConfigEntry("min.compaction.lag.ms", value, incremental_operation=AlterConfigOpType.SET)
        futures = admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])])
        for f in futures.values():
            f.result(30)

    # Nothing is cleanable until the clients run (a huge min.compaction.lag.ms), so the clean
    # starts under load however fast this machine is.
    set_min_compaction_lag(str(10**12))
    broker.stop()
    broker.overrides.update({"log.cleaner.enable": "true", **FAST_CLEANER})
    mark = len(broker.read_log())
    broker.start()
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    stop = threading.Event()
    acked: list[float] = []
    consumed: list[float] = []

    def produce_loop() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        i = 0
        while not stop.is_set():
            producer.produce("live", value=b"%d" % i, on_delivery=lambda e, m: e or acked.append(time.monotonic()))
            producer.flush(5)
            i += 1
        producer.flush(5)

    def consume_loop() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 50})  # fmt: skip
        from confluent_kafka import TopicPartition

        consumer.assign([TopicPartition("live", 0, 0)])
        while not stop.is_set():
            for m in consumer.consume(100, timeout=0.1):
                if m.error() is None:
                    consumed.append(time.monotonic())
        consumer.close()

    threads = [threading.Thread(target=produce_loop), threading.Thread(target=consume_loop)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 30
        while not (acked and consumed):
            assert time.monotonic() < deadline, "the clients did not start"
            time.sleep(0.05)
        set_min_compaction_lag("0")
        wait_for_log_line(broker, f"cleaning started topic={topic}", start=mark)
        started = time.monotonic()
        wait_for_log_line(broker, f"cleaning done topic={topic}", timeout=120, start=mark)
        ended = time.monotonic()
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert ended - started > 1.0, "the clean was too small to show anything"
    during_acks = [t for t in acked if started <= t <= ended]
    during_reads = [t for t in consumed if started <= t <= ended]
    # one synchronous acks=all produce at a time: the gaps show how long the loop stalled
    gaps = [b - a for a, b in itertools.pairwise(during_acks)]
    print(f"clean_s={ended - started:.2f} acks={len(during_acks)} reads={len(during_reads)} "
          f"max_gap_s={max(gaps, default=0):.3f}")  # fmt: skip
    assert len(during_acks) >= 20 and len(during_reads) >= 20
    assert max(gaps) < 1.0


def test_consumer_offsets_is_compacted(tmp_path: Path) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    b = SamsaProcess(
        tmp_path / "data",
        {**FAST_CLEANER, "offsets.topic.num.partitions": "1",
         "offsets.topic.segment.bytes": "32768"},
    )  # fmt: skip
    b.start()
    try:
        create_topic(b.bootstrap_servers, "events", partitions=4)
        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id="committer",
                                 enable_auto_commit=False)  # fmt: skip
        partitions = [TopicPartition("events", p) for p in range(4)]
        commits = 3000
        for i in range(commits):
            consumer.commit({tp: OffsetAndMetadata(i, "") for tp in partitions})
        consumer.close()
        offsets_dir = b.data_dir / "__consumer_offsets-0"
        # every commit appended a batch of 4 records; once cleaned only the latest 4 remain
        deadline = time.monotonic() + 60
        while True:
            size = sum(p.stat().st_size for p in offsets_dir.glob("*.log"))
            if size < 32768 * 3 and "cleaning done topic=__consumer_offsets" in b.read_log():
                break
            assert time.monotonic() < deadline, f"__consumer_offsets still {size} bytes"
            time.sleep(0.2)
        written = _bytes_written_to(b.read_log())
        print(f"__consumer_offsets commits={commits} on_disk={size} cleaned_from={written}")
        b.stop()
        b.start()
        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id="committer",
                                 enable_auto_commit=False)  # fmt: skip
        assert [consumer.committed(tp) for tp in partitions] == [commits - 1] * 4
        consumer.close()
    finally:
        b.close()


def _bytes_written_to(log_text: str) -> int:
    return sum(
        int(line.split("bytes_before=")[1].split()[0])
        for line in log_text.splitlines()
        if "cleaning done topic=__consumer_offsets" in line
    )
