"""Damaged segment and index files after clean and unclean shutdowns: the broker starts, every
record before the damage is served, and nothing is skipped silently.

A broker writes 400 records into small segments with a dense offset index and stops (SIGTERM:
clean, with the clean-shutdown marker; or kill -9). The test then damages its files as a crash,
a torn write or bit rot would, starts it again, and reads the partition from offsets across the log
with confluent-kafka and kafka-python: each read returns exactly the records the log still holds
from that offset on, in order, with no gap. Each damage the broker finds is logged once.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from confluent_kafka import Producer

from broker.testing import SamsaProcess
from protocol.records import BatchHeader
from tests.support.clients import Rec, confluent_producer_config, consume, create_topic, end_offset
from tests.support.logfiles import segment_files

TOPIC = "damaged"
RECORDS = 400


def _batches(path: Path) -> list[tuple[int, BatchHeader]]:
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 61 <= len(data):
        header = BatchHeader.parse(data, pos)
        out.append((pos, header))
        pos += header.size
    return out


def cut_last_batch(data_dir: Path) -> tuple[int, tuple[int, ...]]:
    """Cut the last segment in the middle of its last batch; returns (the offsets kept, offsets
    worth reading from)."""
    last = segment_files(data_dir, TOPIC)[-1]
    pos, header = _batches(last)[-1]
    with open(last, "r+b") as f:
        f.truncate(pos + header.size // 2)
    return header.base_offset, ()


def flip_last_batch(data_dir: Path) -> tuple[int, tuple[int, ...]]:
    """Flip one byte inside the last batch's records (its CRC no longer matches)."""
    last = segment_files(data_dir, TOPIC)[-1]
    pos, header = _batches(last)[-1]
    data = bytearray(last.read_bytes())
    data[pos + header.size - 3] ^= 0xFF
    last.write_bytes(bytes(data))
    return header.base_offset, ()


def shift_index_entry(data_dir: Path) -> tuple[int, tuple[int, ...]]:
    """Move one position of the first segment's offset index by a few bytes: the entries still
    increase and stay inside the segment (the load checks pass), but the entry lies."""
    index = segment_files(data_dir, TOPIC)[0].with_suffix(".index")
    data = bytearray(index.read_bytes())
    entry = len(data) // 8 // 2
    rel, position = struct.unpack_from(">ii", data, entry * 8)
    struct.pack_into(">ii", data, entry * 8, rel, position + 5)
    index.write_bytes(bytes(data))
    return RECORDS, (rel, rel + 1, rel + 7)  # the first segment's base offset is 0


def garble_index(data_dir: Path) -> tuple[int, tuple[int, ...]]:
    """Overwrite the middle of the first segment's offset index with bytes out of order."""
    index = segment_files(data_dir, TOPIC)[0].with_suffix(".index")
    data = bytearray(index.read_bytes())
    middle = len(data) // 2 // 8 * 8
    rel = struct.unpack_from(">i", data, middle)[0]
    data[middle : middle + 16] = struct.pack(">iiii", 7, 1 << 20, 3, 9)
    index.write_bytes(bytes(data))
    return RECORDS, (rel, rel + 1)


CASES = {
    # damage, shutdown, expected log line
    "torn-tail-after-clean": (cut_last_batch, "clean", "log tail not whole after a clean shutdown"),
    "crc-tail-after-clean": (flip_last_batch, "clean", "log tail not whole after a clean shutdown"),
    "torn-tail-after-crash": (cut_last_batch, "kill", "log recovery truncated a corrupt tail"),
    "index-lies-after-clean": (shift_index_entry, "clean", "offset index does not match its log"),
    "index-garbled-after-clean": (garble_index, "clean", "rebuilding index"),
    "index-garbled-after-crash": (garble_index, "kill", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_broker_starts_and_serves_everything_before_the_damage(tmp_path: Path, case: str) -> None:
    damage, shutdown, line = CASES[case]
    broker = SamsaProcess(
        tmp_path / "data",
        {"log.segment.bytes": "16384", "log.index.interval.bytes": "256"},
    )
    broker.start()
    try:
        create_topic(broker.bootstrap_servers, TOPIC)
        records = [Rec(b"k%d" % i, b"value-%04d-" % i + b"x" * 90, ()) for i in range(RECORDS)]
        producer = Producer(confluent_producer_config(broker.bootstrap_servers))
        for chunk in range(0, RECORDS, 20):  # many small batches
            for rec in records[chunk : chunk + 20]:
                producer.produce(TOPIC, rec.value, rec.key, partition=0)
            assert producer.flush(15) == 0
        del producer  # librdkafka's threads go with the last reference
        assert len(segment_files(tmp_path / "data", TOPIC)) > 2
        if shutdown == "clean":
            assert broker.stop() == 0
        else:
            broker.kill()
        kept, probes = damage(tmp_path / "data")
        broker.start()

        assert end_offset(broker.bootstrap_servers, TOPIC) == kept
        for client in ("confluent", "kafka-python"):
            for start in sorted({*range(0, kept, 60), *probes, kept - 25, kept - 1}):
                got = consume(client, broker.bootstrap_servers, TOPIC, kept - start, offset=start, timeout=15)
                assert [g.offset for g in got] == list(range(start, kept)), f"{client} from {start}"
                assert all(g.value == records[g.offset].value for g in got), f"{client} from {start}"
        log_text = broker.read_log()
        if line is not None:
            assert log_text.count(line) >= 1, f"expected a log line {line!r}"
        assert "Traceback" not in log_text
    finally:
        broker.close()
