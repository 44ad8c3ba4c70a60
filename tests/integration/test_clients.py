"""Unmodified clients against a real Samsa broker: kafka-python, aiokafka, confluent-kafka
(librdkafka) and kcat (Debian's, librdkafka 2.0.2) each produce and each consume the same
records (keys, null keys, null values, headers with null values, explicit timestamps, a 1 MiB
value) with every codec, and every client reads what every other client wrote.

Also: CreateTime vs LogAppendTime topics, and a broker restart (clean and kill -9) between
produce and consume loses nothing.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.testing import SamsaProcess
from tests.support.clients import (
    CLIENTS,
    CODECS,
    CREATE_TIME,
    LOG_APPEND_TIME,
    Produced,
    Rec,
    assert_same_records,
    consume,
    create_topic,
    end_offset,
    now_ms,
    produce,
)
from tests.support.logfiles import codec_at, stored_codecs

MiB = 1024 * 1024
# A 1 MiB value does not fit the default max.message.bytes (1048588) once the batch header and
# record framing are added (uncompressed), as with Kafka: the topics raise it.
TOPIC_MAX_MESSAGE_BYTES = str(2 * MiB)


def big_value(size: int = MiB, seed: int = 1) -> bytes:
    """ASCII (kcat reads lines and prints JSON strings): pseudo-random words from a small
    vocabulary, so that every codec, LZ-only snappy and lz4 included, makes it smaller (clients
    send a batch uncompressed when compressing does not pay)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    words = ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(512)]
    text = " ".join(rng.choices(words, k=size // 4)).encode()
    return text[:size].ljust(size, b".")


BIG = big_value()


def records_for(producer: str, base_ts: int) -> list[Rec]:
    """The same records for every producer, within what its API can express: kcat cannot set
    timestamps (its records carry its clock); kafka-python refuses null header values (it sends
    empty ones instead)."""

    def ts(i: int) -> int | None:
        return None if producer == "kcat" else base_ts + i

    null_header = b"" if producer == "kafka-python" else None
    return [
        Rec(b"key-0", b"value-0", (("h1", b"v1"), ("h2", null_header)), ts(0)),
        Rec(None, b"no-key", (), ts(1)),
        Rec(b"key-null-value", None, (("only-null", null_header),), ts(2)),
        Rec(b"key-big", BIG, (("size", b"1MiB"),), ts(3)),
        Rec(b"key-4", b"value-4", (("h1", b"v1"), ("h2", null_header)), ts(4)),
        Rec(b"key-5", b"value-5" * 100, (), ts(5)),
    ]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaProcess]:
    b = SamsaProcess(tmp_path_factory.mktemp("clients") / "data")
    b.start()
    yield b
    b.close()


ProduceOnce = Callable[[str, str], tuple[str, list[Rec], Produced]]


@pytest.fixture(scope="module")
def produced_topic(broker: SamsaProcess) -> ProduceOnce:
    """(producer, codec) -> (topic, records, acknowledgement): produced once per module."""
    cache: dict[tuple[str, str], tuple[str, list[Rec], Produced]] = {}
    failed: dict[tuple[str, str], str] = {}
    base_ts = now_ms() - 3_600_000  # explicit timestamps an hour in the past

    def get(producer: str, codec: str) -> tuple[str, list[Rec], Produced]:
        if (producer, codec) in failed:
            pytest.fail(f"producing with {producer}/{codec} failed: {failed[(producer, codec)]}")
        if (producer, codec) not in cache:
            failed[(producer, codec)] = "see the first test that used it"
            topic = f"x-{producer}-{codec}"
            create_topic(
                broker.bootstrap_servers, topic, configs={"max.message.bytes": TOPIC_MAX_MESSAGE_BYTES}
            )
            records = records_for(producer, base_ts)
            result = produce(producer, broker.bootstrap_servers, topic, records, codec=codec)
            assert result.offsets == list(range(len(records))), f"{producer}/{codec} acknowledged offsets"
            # the producer really compressed (old librdkafka silently does not when the broker's
            # advertised Produce versions do not include v0); kafka-python and aiokafka send a
            # batch uncompressed when compression does not make it smaller
            assert stored_codecs(broker.data_dir, topic) <= {codec, "none"}, f"{producer}/{codec}"
            assert codec_at(broker.data_dir, topic, 3) == codec, f"{producer}/{codec}: 1 MiB batch"
            cache[(producer, codec)] = (topic, records, result)
            del failed[(producer, codec)]
        return cache[(producer, codec)]

    return get


@pytest.mark.parametrize("consumer", CLIENTS)
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("producer", CLIENTS)
def test_cross_client(
    broker: SamsaProcess, produced_topic: ProduceOnce, producer: str, codec: str, consumer: str
) -> None:
    topic, records, result = produced_topic(producer, codec)
    got = consume(consumer, broker.bootstrap_servers, topic, len(records))
    assert_same_records(
        got,
        records,
        result.offsets,
        window=(result.started_ms, result.finished_ms),
        context=f"{producer}/{codec} -> {consumer}",
    )


@pytest.mark.parametrize("consumer", CLIENTS)
def test_consume_from_the_middle(broker: SamsaProcess, produced_topic: ProduceOnce, consumer: str) -> None:
    """A fetch that starts inside a compressed batch returns the whole batch; the client skips
    to its position."""
    topic, records, result = produced_topic("aiokafka", "zstd")
    got = consume(consumer, broker.bootstrap_servers, topic, len(records) - 4, offset=4)
    assert_same_records(got, records[4:], result.offsets[4:], context=f"middle -> {consumer}")


@pytest.fixture(scope="module")
def log_append_topic(broker: SamsaProcess) -> ProduceOnce:
    cache: dict[tuple[str, str], tuple[str, list[Rec], Produced]] = {}

    def get(producer: str, codec: str) -> tuple[str, list[Rec], Produced]:
        if (producer, codec) not in cache:
            topic = f"lat-{producer}-{codec}"
            create_topic(
                broker.bootstrap_servers,
                topic,
                configs={
                    "message.timestamp.type": "LogAppendTime",
                    "max.message.bytes": TOPIC_MAX_MESSAGE_BYTES,
                },
            )
            # explicit old timestamps: the broker must replace them
            records = [r for i, r in enumerate(records_for(producer, now_ms() - 86_400_000)) if i != 3]
            result = produce(producer, broker.bootstrap_servers, topic, records, codec=codec)
            assert result.offsets == list(range(len(records)))
            if producer != "kcat":
                # the produce response carries the LogAppendTime, which these clients report
                for ts in result.timestamps:
                    assert result.started_ms - 5 <= ts <= result.finished_ms + 5, (producer, ts)
            cache[(producer, codec)] = (topic, records, result)
        return cache[(producer, codec)]

    return get


@pytest.mark.parametrize("consumer", CLIENTS)
@pytest.mark.parametrize("producer,codec", [(p, c) for p, c in zip(CLIENTS, ("gzip", "none", "zstd", "snappy"))])
def test_log_append_time(
    broker: SamsaProcess, log_append_topic: ProduceOnce, producer: str, codec: str, consumer: str
) -> None:
    topic, records, result = log_append_topic(producer, codec)
    got = consume(consumer, broker.bootstrap_servers, topic, len(records))
    assert_same_records(
        got,
        records,
        result.offsets,
        timestamp_type=LOG_APPEND_TIME,
        window=(result.started_ms, result.finished_ms),
        context=f"LogAppendTime {producer}/{codec} -> {consumer}",
    )


def test_create_time_is_default(broker: SamsaProcess, produced_topic: ProduceOnce) -> None:
    topic, records, result = produced_topic("kafka-python", "none")
    got = consume("confluent", broker.bootstrap_servers, topic, len(records))
    assert {g.timestamp_type for g in got} == {CREATE_TIME}
    assert [g.timestamp for g in got] == [r.timestamp for r in records]


# ---------------------------------------------------------------------------------------- restart


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_restart_between_produce_and_consume(tmp_path: Path, how: str) -> None:
    broker = SamsaProcess(tmp_path / "data")
    broker.start()
    try:
        base_ts = now_ms() - 60_000
        written: dict[str, tuple[list[Rec], Produced]] = {}
        for producer, codec in zip(CLIENTS, ("zstd", "lz4", "snappy", "gzip")):
            topic = f"restart-{producer}"
            create_topic(broker.bootstrap_servers, topic, configs={"max.message.bytes": TOPIC_MAX_MESSAGE_BYTES})
            records = records_for(producer, base_ts)
            # two rounds, so that each topic holds several batches
            first = produce(producer, broker.bootstrap_servers, topic, records[:3], codec=codec)
            second = produce(producer, broker.bootstrap_servers, topic, records[3:], codec=codec)
            acked = Produced(
                first.offsets + second.offsets, [], first.started_ms, second.finished_ms
            )
            assert acked.offsets == list(range(len(records)))
            written[topic] = (records, acked)

        if how == "stop":
            assert broker.stop() == 0, broker.read_log()[-3000:]
        else:
            broker.kill()
        broker.start()

        for topic, (records, acked) in written.items():
            assert end_offset(broker.bootstrap_servers, topic) == len(records), topic
            for consumer in CLIENTS:
                got = consume(consumer, broker.bootstrap_servers, topic, len(records))
                assert_same_records(
                    got,
                    records,
                    acked.offsets,
                    window=(acked.started_ms, acked.finished_ms),
                    context=f"{topic} after {how} -> {consumer}",
                )
        # the log continues where it was: new records get the next offsets
        topic = "restart-confluent"
        more = produce("confluent", broker.bootstrap_servers, topic, [Rec(b"after", b"restart")])
        assert more.offsets == [len(written[topic][0])]
    finally:
        broker.close()


# ---------------------------------------------------------------------------------------- errors, acks=0, long poll


@pytest.mark.parametrize("producer", CLIENTS)
def test_record_over_max_message_bytes_is_refused(broker: SamsaProcess, producer: str) -> None:
    """The broker, not the client, refuses a batch over the topic's max.message.bytes (the
    clients' own limits are set higher): every client reports MESSAGE_TOO_LARGE, nothing is
    stored, and the next record is accepted."""
    topic = f"too-large-{producer}"
    create_topic(broker.bootstrap_servers, topic, configs={"max.message.bytes": str(MiB)})
    with pytest.raises(Exception) as excinfo:
        produce(producer, broker.bootstrap_servers, topic, [Rec(b"k", big_value(MiB + MiB // 2))], timeout=20)
    text = f"{type(excinfo.value).__name__} {excinfo.value}".lower().replace("_", " ")
    assert "too large" in text or "toolarge" in text, text
    assert end_offset(broker.bootstrap_servers, topic) == 0
    assert produce(producer, broker.bootstrap_servers, topic, [Rec(b"k", b"small")]).offsets == [0]


def test_acks_zero(broker: SamsaProcess) -> None:
    """acks=0 produce gets no response; the records are stored all the same, in order."""
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    topic = "acks-zero"
    create_topic(broker.bootstrap_servers, topic)
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=0, linger_ms=5)
    for i in range(200):
        kp.send(topic, b"kp-%d" % i, partition=0)
    kp.flush(10)
    kp.close(5)
    cp = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": 0, "linger.ms": 5})
    for i in range(200):
        cp.produce(topic, b"ck-%d" % i, partition=0)
    assert cp.flush(10) == 0
    deadline = time.monotonic() + 10
    while end_offset(broker.bootstrap_servers, topic) < 400 and time.monotonic() < deadline:
        time.sleep(0.05)
    got = consume("aiokafka", broker.bootstrap_servers, topic, 400)
    assert [g.value for g in got] == [b"kp-%d" % i for i in range(200)] + [b"ck-%d" % i for i in range(200)]


@pytest.mark.parametrize("consumer", CLIENTS)
def test_waiting_consumer_gets_new_records(broker: SamsaProcess, consumer: str) -> None:
    """A consumer positioned at the end long-polls; records produced while it waits reach it
    when they are appended: the clients' fetch max wait (10 s) is above the bound (8 s), so a
    broker that answered only when the wait expired would fail."""
    topic = f"long-poll-{consumer}"
    create_topic(broker.bootstrap_servers, topic)
    produce("confluent", broker.bootstrap_servers, topic, [Rec(b"k", b"before")])
    late = [Rec(b"k", b"late-%d" % i) for i in range(3)]
    timer = threading.Timer(1.0, produce, ("kafka-python", broker.bootstrap_servers, topic, late))
    timer.start()
    try:
        started = time.monotonic()
        got = consume(consumer, broker.bootstrap_servers, topic, 3, offset=1, timeout=20, fetch_wait_ms=10_000)
        elapsed = time.monotonic() - started
    finally:
        timer.join()
    assert [g.value for g in got] == [r.value for r in late]
    assert [g.offset for g in got] == [1, 2, 3]
    assert elapsed < 8, f"records reached the waiting consumer only after {elapsed:.1f}s"
