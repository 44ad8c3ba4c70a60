"""Malformed batches, compression bombs and duplicate partitions against a running broker, while a
well-behaved producer (confluent-kafka, zstd, acks=all) and consumer (kafka-python) keep working.

- Every batch of tests/support/malformed.py's catalogue is answered with Samsa's code (Kafka's,
  or the explained difference) and nothing of a rejected batch is appended: the log end offset of
  its topic does not move, and the good consumer keeps reading.
- Compression bombs of every codec (gzip, snappy raw and xerial, lz4, zstd with and without its
  content size; a Produce v2 legacy wrapper; a zstd bomb to a topic whose compression.type makes
  the broker recompress) are refused with MESSAGE_TOO_LARGE, the broker's peak RSS
  (/proc/<pid>/status VmHWM) grows by less than ten times the decompression bound, and a concurrent client's requests are
  answered within 200 ms throughout. A zstd batch of a million records (under the bound, as
  Kafka takes it) is accepted, checked off the event loop.
- A partition named twice in one Produce request: only the last entry's batch is appended.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cramjam
import lz4.frame
import pytest
import zstandard
from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v12 import request as metadata
from kio.schema.produce.v11.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from broker.testing import SamsaProcess
from protocol import messages
from protocol.compression import CompressionType
from protocol.errors import ErrorCode
from protocol.records import BatchHeader, NewRecord, build_batch
from tests.support import malformed
from tests.support.clients import create_topic
from tests.support.raw_client import RawClient

GOOD_TOPIC = "records-fuzz-good"
TOPICS = {
    malformed.PLAIN: ("records-fuzz-plain", {}),
    malformed.COMPACTED: ("records-fuzz-compacted", {"cleanup.policy": "compact"}),
    malformed.LOG_APPEND_TIME: ("records-fuzz-log-append-time", {"message.timestamp.type": "LogAppendTime"}),
}
RECOMPRESSED_TOPIC = "records-fuzz-gzip-topic"
MILLION_TOPIC = "records-fuzz-million"
PROBE_TOPIC = "records-fuzz-probe"
MAX_MESSAGE_BYTES = 1_048_588
BOUND = 16 * MAX_MESSAGE_BYTES
LATENCY_LIMIT = 0.2
RSS_GROWTH_LIMIT = 10 * BOUND
"""Bounded by the decompression bound, not by the bomb: a check holds at most the bound a few
times over (the record being walked, the decoder's output, a recompressed copy), and the worker
thread's malloc arena keeps what it freed (85-115 MiB measured here over 16 GB bombs; without the
bound a 33 KB bomb took 2.1 GB)."""
_TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=20))


# -- the broker and the clients ------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaProcess]:
    b = SamsaProcess(tmp_path_factory.mktemp("records-fuzz") / "data", {}).start()
    try:
        for topic, configs in TOPICS.values():
            create_topic(b.bootstrap_servers, topic, configs=configs)
        create_topic(b.bootstrap_servers, RECOMPRESSED_TOPIC, configs={"compression.type": "gzip"})
        for topic in (MILLION_TOPIC, PROBE_TOPIC, GOOD_TOPIC):
            create_topic(b.bootstrap_servers, topic)
        yield b
    finally:
        b.close()


@dataclass
class WellBehaved:
    """A confluent-kafka producer (zstd, acks=all) and a kafka-python consumer on GOOD_TOPIC."""

    bootstrap: str
    acked: list[bytes] = field(default_factory=list)
    consumed: list[bytes] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    tag: bytes = field(default_factory=lambda: uuid.uuid4().hex[:8].encode())

    def produce(self) -> None:
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "compression.type": "zstd",
            "linger.ms": 5, "enable.idempotence": True, "message.timeout.ms": 30000,
        })

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(f"producer: {err}")
            else:
                self.acked.append(msg.value())

        i = 0
        while not self.stop.is_set():
            for _ in range(20):
                producer.produce(GOOD_TOPIC, value=b"good-%s-%08d" % (self.tag, i), on_delivery=delivered)
                i += 1
            producer.poll(0.01)
        if producer.flush(30) != 0:
            self.errors.append("producer: records left unsent")

    def consume(self, until: threading.Event) -> None:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100)
        try:
            tp = KafkaTopicPartition(GOOD_TOPIC, 0)
            consumer.assign([tp])
            consumer.seek(tp, len(self.consumed))
            while not until.is_set():
                for records in consumer.poll(timeout_ms=100).values():
                    self.consumed.extend(r.value for r in records)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(f"consumer: {e!r}")
        finally:
            consumer.close()


@contextlib.contextmanager
def well_behaved_clients(broker: SamsaProcess) -> Iterator[WellBehaved]:
    """The good clients run for the whole block; then every acknowledged record must have been
    consumed, in order, and neither client saw an error."""
    good = WellBehaved(broker.bootstrap_servers)
    consumed_all = threading.Event()
    threads = [threading.Thread(target=good.produce), threading.Thread(target=good.consume, args=(consumed_all,))]
    for t in threads:
        t.start()
    try:
        yield good
    finally:
        good.stop.set()
        threads[0].join(60)
        deadline = time.monotonic() + 30
        while len(good.consumed) < len(good.acked) and time.monotonic() < deadline and not good.errors:
            time.sleep(0.05)
        consumed_all.set()
        threads[1].join(30)
    assert good.errors == []
    assert len(good.acked) >= 100, len(good.acked)
    first = good.acked[0]
    start = good.consumed.index(first) if first in good.consumed else 0
    assert good.consumed[start : start + len(good.acked)] == good.acked


@dataclass
class LatencyProbe:
    """Another client on its own connection: a small Produce acks=1 and a Metadata request in
    turn, every 20 ms; the slowest answer is kept."""

    port: int
    worst: float = 0.0
    answered: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    def run(self) -> None:
        small = build_batch([NewRecord(None, b"probe")])
        try:
            with RawClient(self.port, timeout=10) as client:
                while not self.stop.is_set():
                    started = time.monotonic()
                    answer = produce(client, PROBE_TOPIC, small, acks=1)
                    client.request(metadata.MetadataRequest(
                        topics=(metadata.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=GOOD_TOPIC),),
                        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
                    ))
                    self.worst = max(self.worst, time.monotonic() - started)
                    self.answered += 1
                    if answer.error_code != 0:
                        self.errors.append(answer.error_code.name)
                    time.sleep(0.02)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(repr(e))


@contextlib.contextmanager
def latency_probe(broker: SamsaProcess) -> Iterator[LatencyProbe]:
    probe = LatencyProbe(broker.port)
    thread = threading.Thread(target=probe.run)
    thread.start()
    try:
        time.sleep(0.3)
        yield probe
    finally:
        probe.stop.set()
        thread.join(30)
    assert probe.errors == []
    assert probe.answered >= 10
    assert probe.worst < LATENCY_LIMIT, f"a concurrent request waited {probe.worst * 1000:.0f} ms"
    print(f"concurrent client: {probe.answered} round trips, slowest {probe.worst * 1000:.0f} ms")


def produce_partitions(client: RawClient, topic: str, parts: tuple[tuple[int, bytes], ...], acks: int = -1) -> Any:
    """One Produce v11 request for `parts` ((partition, records), ...) of `topic`: the answers."""
    response = client.request(ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=_TIMEOUT,
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=tuple(
            PartitionProduceData(index=i32(i), records=d) for i, d in parts
        )),),
    ))
    (answers,) = response.responses
    return answers.partition_responses


def produce(client: RawClient, topic: str, data: bytes, *, acks: int = -1) -> Any:
    (answer,) = produce_partitions(client, topic, ((0, data),), acks)
    return answer


def end_offset(client: RawClient, topic: str, partition: int = 0) -> int:
    response = client.request(ListOffsetsRequest(
        replica_id=BrokerId(-1), isolation_level=i8(0),
        topics=(ListOffsetsTopic(name=TopicName(topic), partitions=(
            ListOffsetsPartition(partition_index=i32(partition), current_leader_epoch=i32(-1), timestamp=i64(-1)),
        )),),
    ))
    return int(response.topics[0].partitions[0].offset)


def peak_rss(broker: SamsaProcess) -> int:
    assert broker.proc is not None
    for line in Path(f"/proc/{broker.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


# -- malformed batches ---------------------------------------------------------------------------


def test_each_malformed_batch_is_rejected_and_nothing_appended(broker: SamsaProcess) -> None:
    with well_behaved_clients(broker), RawClient(broker.port) as client:
        for case in malformed.CASES:
            topic = TOPICS[case.topic][0]
            before = end_offset(client, topic)
            answer = produce(client, topic, case.build())
            assert (answer.error_code, tuple(e.batch_index for e in answer.record_errors)) == (
                case.code, case.record_errors,
            ), case.name
            assert end_offset(client, topic) - before == (case.appended if case.code == 0 else 0), case.name
    log = broker.read_log()
    assert "Traceback" not in log
    assert "produce rejected" in log and "error=invalid_record" in log


# -- compression bombs ---------------------------------------------------------------------------

_ZEROS = bytes(1 << 20)


def _record_prefix(value_size: int) -> bytes:
    """A record's bytes up to its value: the value is `value_size` zero bytes that follow."""
    body_size = 1 + 1 + 1 + 1 + len(malformed.varint(value_size)) + value_size + 1
    return malformed.varint(body_size) + b"\x00\x00\x00\x01" + malformed.varint(value_size)


def _zero_stream(value_size: int) -> Iterator[bytes]:
    """One record holding `value_size` zero bytes, a MiB at a time (never all in memory)."""
    yield _record_prefix(value_size)
    for _ in range(value_size >> 20):
        yield _ZEROS
    yield b"\x00"  # no headers


def _gzip(chunks: Iterator[bytes]) -> bytes:
    out = zlib.compressobj(9, zlib.DEFLATED, 31)  # zeros compress ~1000:1
    return b"".join(out.compress(c) for c in chunks) + out.flush()


def _zstd(chunks: Iterator[bytes], size: int | None) -> bytes:
    out = zstandard.ZstdCompressor().compressobj(size=-1 if size is None else size)
    return b"".join(out.compress(c) for c in chunks) + out.flush()


def _lz4(chunks: Iterator[bytes]) -> bytes:
    out = lz4.frame.LZ4FrameCompressor(block_linked=False)
    return out.begin() + b"".join(out.compress(c) for c in chunks) + out.flush()


def _snappy_xerial(value_size: int) -> bytes:
    """Xerial framing: the same compressed 32 KiB block of zeros over and over."""
    stream = b"".join(_zero_stream(value_size))  # snappy's ratio is ~21: 20 MiB fits a request
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for start in range(0, len(stream), 32 << 10):
        block = bytes(cramjam.snappy.compress_raw(stream[start : start + (32 << 10)]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def _bomb_batch(codec: CompressionType, section: bytes, count: int = 1) -> bytes:
    return malformed.batch(section, count, attributes=int(codec))


GIB = 1 << 30
BOMBS: dict[str, Callable[[], bytes]] = {
    "gzip": lambda: _bomb_batch(CompressionType.GZIP, _gzip(_zero_stream(512 << 20))),
    "snappy xerial": lambda: _bomb_batch(CompressionType.SNAPPY, _snappy_xerial(20 << 20)),
    "snappy raw": lambda: _bomb_batch(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(b"".join(_zero_stream(20 << 20))))),
    "lz4": lambda: _bomb_batch(CompressionType.LZ4, _lz4(_zero_stream(200 << 20))),
    "zstd with content size": lambda: _bomb_batch(CompressionType.ZSTD, _zstd(_zero_stream(GIB), len(_record_prefix(GIB)) + GIB + 1)),
    "zstd without content size": lambda: _bomb_batch(CompressionType.ZSTD, _zstd(_zero_stream(GIB), None)),
}


@functools.cache
def _empty_records(count: int) -> bytes:
    """`count` records with a null key and an empty value (9 bytes or fewer each)."""
    out = bytearray()
    for i in range(count):
        body = b"\x00\x00" + malformed.varint(i) + b"\x01\x00\x00"
        out += malformed.varint(len(body)) + body
    return bytes(out)


def _legacy_bomb() -> bytes:
    """A Produce v0-2 message set: one gzip wrapper (magic 1) around one message of 512 MiB."""
    value_size = 512 << 20
    head = struct.pack(">bbqi", 1, 0, int(time.time() * 1000), -1) + struct.pack(">i", value_size)
    crc = zlib.crc32(head)
    for _ in range(value_size >> 20):
        crc = zlib.crc32(_ZEROS, crc)
    inner_head = struct.pack(">qiI", 0, 4 + len(head) + value_size, crc) + head
    value = _gzip(iter([inner_head, *(_ZEROS for _ in range(value_size >> 20))]))
    body = struct.pack(">bbqi", 1, int(CompressionType.GZIP), int(time.time() * 1000), -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", 0, 4 + len(body), zlib.crc32(body)) + body


def _produce_v2(client: RawClient, topic: str, message_set: bytes) -> ErrorCode:
    request = messages.convert(
        ProduceRequest(
            transactional_id=None, acks=i16(-1), timeout=_TIMEOUT,
            topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(PartitionProduceData(index=i32(0), records=message_set),)),),
        ),
        messages.request_class(0, 2),
    )
    response = client.request(request, api_version=2)
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def test_compression_bombs_are_refused_with_bounded_memory_and_latency(broker: SamsaProcess) -> None:
    bombs = {name: (build(), ErrorCode.message_too_large) for name, build in BOMBS.items()}
    # a million empty records all at offset delta 0 (the 740 KB batch stalled 19 s): the
    # second record is refused; records with deltas 0, 1, 2, ... do not compress below ~0.8 byte
    # each, so a request cannot carry enough of them to pass the bound (see the next test)
    same_delta = b"\x0c\x00\x00\x00\x01\x00\x00" * 1_000_000
    bombs["zstd: a million records at offset delta 0"] = (
        _bomb_batch(CompressionType.ZSTD, _zstd(iter([same_delta]), None), 1_000_000), ErrorCode.invalid_record,
    )
    for name, (data, _) in bombs.items():
        assert len(data) < MAX_MESSAGE_BYTES, (name, len(data))
    legacy = _legacy_bomb()
    assert len(legacy) < MAX_MESSAGE_BYTES
    rss_before = peak_rss(broker)
    plain = TOPICS[malformed.PLAIN][0]
    with well_behaved_clients(broker), latency_probe(broker), RawClient(broker.port, timeout=60) as client:
        for name, (data, code) in bombs.items():
            for topic in (plain, RECOMPRESSED_TOPIC):
                before = end_offset(client, topic)
                answer = produce(client, topic, data)
                assert answer.error_code == code, (name, topic, answer)
                assert end_offset(client, topic) == before
        assert _produce_v2(client, plain, legacy) == ErrorCode.message_too_large
    growth = peak_rss(broker) - rss_before
    print(f"broker peak RSS {rss_before >> 20} MiB before the bombs, {(rss_before + growth) >> 20} MiB after")
    assert growth < RSS_GROWTH_LIMIT, f"peak RSS grew by {growth >> 20} MiB"
    assert broker.running
    assert "Traceback" not in broker.read_log()


def test_a_million_record_batch_is_checked_off_the_event_loop(broker: SamsaProcess) -> None:
    section = _empty_records(1_000_000)
    assert len(section) < BOUND
    data = _bomb_batch(CompressionType.ZSTD, _zstd(iter([section]), len(section)), 1_000_000)
    with latency_probe(broker), RawClient(broker.port, timeout=60) as client:
        started = time.monotonic()
        answer = produce(client, MILLION_TOPIC, data)
        took = time.monotonic() - started
        assert answer.error_code == ErrorCode.none, answer
        assert end_offset(client, MILLION_TOPIC) == answer.base_offset + 1_000_000
    print(f"a zstd batch of 1,000,000 records ({len(data)} bytes) accepted in {took * 1000:.0f} ms")


# -- duplicate partitions ------------------------------------------------------------------------


def test_a_partition_named_twice_appends_only_its_last_batch(broker: SamsaProcess) -> None:
    topic = f"records-fuzz-duplicates-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    first = build_batch([NewRecord(None, b"first")])
    last = build_batch([NewRecord(None, b"last-1"), NewRecord(None, b"last-2")])
    with RawClient(broker.port) as client:
        answers = produce_partitions(client, topic, ((0, first), (1, first), (0, last)))
        assert sorted((int(p.index), p.error_code, int(p.base_offset)) for p in answers) == [
            (0, ErrorCode.none, 0), (1, ErrorCode.none, 0),
        ]
        assert (end_offset(client, topic, 0), end_offset(client, topic, 1)) == (2, 1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        tp = KafkaTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(values) < 2 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values += [r.value for r in records]
    finally:
        consumer.close()
    assert values == [b"last-1", b"last-2"]
    assert BatchHeader.parse(last).records_count == 2
