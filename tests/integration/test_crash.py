"""kill -9 of the broker during heavy produce, then restart: every acknowledged record is there
at its acknowledged offset with its payload, the log recovered (and says so), and the indexes
are right: fetches from arbitrary offsets and ListOffsets by timestamp agree with a full scan.

Four librdkafka producers (two acks=1, two acks=all), each on its own partition, write records of
varying size with explicit, increasing timestamps into small segments (many rolls, dense offset
and time indexes) for about two seconds; the broker is killed while they are sending.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.testing import SamsaProcess
from protocol.errors import ErrorCode
from protocol.records import Record
from tests.support.clients import create_topic, now_ms
from tests.support.logfiles import segment_files
from tests.support.wire import RawClient, fetch_all, fetch_batches, list_offset

TOPIC = "crash"
PARTITIONS = 4
LOAD_SECONDS = 2.0
MAX_RECORDS_PER_PRODUCER = 60_000
MIN_ACKED = 1000
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


@dataclass
class Acked:
    key: bytes
    value: bytes
    timestamp: int


@dataclass
class ProducerRun:
    partition: int
    acks: str
    acked: dict[int, Acked] = field(default_factory=dict)  # offset -> record
    errors: int = 0
    sent: int = 0


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SamsaProcess]:
    b = SamsaProcess(tmp_path / "data")
    b.start()
    yield b
    b.close()


def _payload(rng: random.Random, partition: int, i: int) -> bytes:
    head = b"p%d-%d|" % (partition, i)
    return head + rng.randbytes(rng.randint(10, 3000))


def _produce_until(
    bootstrap: str, run: ProducerRun, base_ts: int, stop: threading.Event
) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": run.acks,
            "linger.ms": 2,
            "batch.num.messages": 200,
            "compression.codec": "lz4" if run.partition % 2 else "none",
            "message.timeout.ms": 10000,
            # backpressure: produce() blocks (BufferError) instead of queueing records that
            # would expire before they are sent
            "queue.buffering.max.messages": 2000,
            "request.timeout.ms": 2000,
            "retries": 0,  # a retry after the kill could store a record twice (not idempotent)
            "log_level": 2,  # the connection errors after the kill are expected
        }
    )
    rng = random.Random(run.partition)

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            run.errors += 1
        else:
            ts_type, ts = msg.timestamp()  # type: ignore[attr-defined]
            run.acked[msg.offset()] = Acked(msg.key(), msg.value(), ts)  # type: ignore[attr-defined]

    i = 0
    while not stop.is_set() and i < MAX_RECORDS_PER_PRODUCER:
        try:
            producer.produce(
                TOPIC,
                key=b"k%d" % i,
                value=_payload(rng, run.partition, i),
                partition=run.partition,
                timestamp=base_ts + i,
                on_delivery=delivered,
            )
            i += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    run.sent = i
    producer.flush(10)


def _scan(client: RawClient, partition: int) -> list[Record]:
    records = fetch_all(client, TOPIC, partition)
    assert [r.offset for r in records] == list(range(len(records))), "offsets not contiguous"
    return records


def _tear_tails(data_dir: Path) -> dict[int, str]:
    """After the kill, damage the tail of two partitions as a crash mid-write can: partition 0
    gets half a batch, partition 1 a whole batch whose CRC does not match. Recovery must cut
    both off and keep everything before them."""
    from protocol.records import build_batch, iter_batch_headers

    damage: dict[int, str] = {}
    for p, kind in ((0, "torn"), (1, "crc")):
        last = segment_files(data_dir, TOPIC, p)[-1]
        data = last.read_bytes()
        next_offset = max((h.next_offset for _, h in iter_batch_headers(data)), default=0)
        junk = bytearray(build_batch([(b"junk", b"x" * 500)], base_offset=next_offset))
        if kind == "torn":
            junk = junk[: len(junk) // 2]
        else:
            junk[-1] ^= 0xFF
        with open(last, "ab") as f:
            f.write(junk)
        damage[p] = kind
    return damage


@pytest.mark.parametrize("tail", ["as-killed", "torn-tail"])
def test_kill_during_heavy_produce(broker: SamsaProcess, tail: str) -> None:
    create_topic(
        broker.bootstrap_servers,
        TOPIC,
        partitions=PARTITIONS,
        configs={"segment.bytes": str(256 * 1024), "index.interval.bytes": "1024"},
    )
    base_ts = now_ms() - 3_600_000
    runs = [ProducerRun(p, "1" if p < 2 else "all") for p in range(PARTITIONS)]
    stop = threading.Event()
    threads = [
        threading.Thread(target=_produce_until, args=(broker.bootstrap_servers, run, base_ts, stop), daemon=True)
        for run in runs
    ]
    for t in threads:
        t.start()
    # load for LOAD_SECONDS, and until every producer has had a fair share acknowledged
    started = time.monotonic()
    while time.monotonic() - started < LOAD_SECONDS or (
        min(len(run.acked) for run in runs) < MIN_ACKED and time.monotonic() - started < 15
    ):
        time.sleep(0.05)
    before_kill = {run.partition: len(run.acked) for run in runs}
    broker.kill()
    print(f"acknowledged before the kill: {before_kill}")
    stop.set()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    for run in runs:
        assert before_kill[run.partition] >= MIN_ACKED, f"too little load: {before_kill}"
    assert len(segment_files(broker.data_dir, TOPIC, 0)) > 3, "segments should have rolled"

    damage = _tear_tails(broker.data_dir) if tail == "torn-tail" else {}

    log_before = len(broker.read_log())
    broker.start()
    restart_log = broker.read_log()[log_before:]
    assert "clean_shutdown=False" in restart_log
    for p in range(PARTITIONS):
        truncated = f"log recovery truncated a corrupt tail topic={TOPIC} partition={p} " in restart_log
        done = f"log recovery done topic={TOPIC} partition={p} " in restart_log
        # the kill itself may tear the last write (a SIGKILL can stop a large write() part way),
        # so an undamaged partition may be cut too; a damaged one must be
        assert truncated if p in damage else (truncated or done), restart_log[-3000:]

    with RawClient(broker.port) as client:
        for run in runs:
            p = run.partition
            scan = _scan(client, p)
            # every acknowledged record is there, at its offset, unchanged
            for offset, acked in run.acked.items():
                assert offset < len(scan), f"partition {p}: acknowledged offset {offset} lost (log has {len(scan)})"
                r = scan[offset]
                assert (r.key, r.value, r.timestamp) == (acked.key, acked.value, acked.timestamp), (p, offset)
            # nothing was invented: every stored record is one this producer sent, each once
            heads = [(r.value or b"").split(b"|", 1)[0] for r in scan]
            assert len(set(heads)) == len(heads), f"partition {p}: a record stored twice"
            assert all(h.startswith(b"p%d-" % p) for h in heads)

            _check_fetch_from_any_offset(client, p, scan)
            _check_list_offsets(client, p, scan)

        # the log continues after the recovered end
        from tests.support.wire import idempotent_batch, produce

        ends = {p: len(_scan(client, p)) for p in range(PARTITIONS)}
        answer = produce(client, TOPIC, 0, idempotent_batch([b"after"], -1, -1, -1))
        assert (answer.error, answer.base_offset) == (ErrorCode.none, ends[0])


def _check_fetch_from_any_offset(client: RawClient, partition: int, scan: list[Record]) -> None:
    """A fetch from any offset returns, first, the whole batch holding it (through the offset
    index), and the records that follow as a full scan has them."""
    rng = random.Random(partition)
    targets = {0, len(scan) - 1} | {rng.randrange(len(scan)) for _ in range(60)}
    for target in sorted(targets):
        error, hw, batches = fetch_batches(client, TOPIC, partition, target, max_bytes=64 * 1024)
        assert error == ErrorCode.none
        assert hw == len(scan)
        assert batches, f"partition {partition}: empty fetch at {target}"
        base, last, records = batches[0]
        assert base <= target <= last, f"partition {partition}: fetch at {target} began with batch {base}..{last}"
        got = [r for _, _, rs in batches for r in rs]
        assert got == scan[base : base + len(got)], f"partition {partition}: fetch at {target}"


def _check_list_offsets(client: RawClient, partition: int, scan: list[Record]) -> None:
    """ListOffsets by timestamp (through the time index) gives the first offset whose timestamp
    is at or after the target, as a scan finds it; -1 past the newest."""

    def expected(ts: int) -> tuple[int, int]:
        for r in scan:
            if r.timestamp >= ts:
                return r.offset, r.timestamp
        return -1, -1

    rng = random.Random(1000 + partition)
    stamps = [r.timestamp for r in scan]
    targets = {stamps[0], stamps[0] - 1000, max(stamps), max(stamps) + 1}
    targets |= {rng.choice(stamps) + rng.choice((-1, 0, 1)) for _ in range(60)}
    for ts in sorted(targets):
        error, offset, timestamp = list_offset(client, TOPIC, partition, ts)
        assert error == ErrorCode.none
        assert (offset, timestamp) == expected(ts), f"partition {partition}: ListOffsets({ts})"
    assert list_offset(client, TOPIC, partition, EARLIEST)[:2] == (ErrorCode.none, 0)
    assert list_offset(client, TOPIC, partition, LATEST)[:2] == (ErrorCode.none, len(scan))
    newest = max(scan, key=lambda r: (r.timestamp, -r.offset))
    assert list_offset(client, TOPIC, partition, MAX_TIMESTAMP) == (ErrorCode.none, newest.offset, newest.timestamp)
