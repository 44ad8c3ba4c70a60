"""The idempotent producer: confluent-kafka (librdkafka) with enable.idempotence=true loses and
duplicates nothing while its requests time out and the broker restarts under it; and, on the
wire, a batch sent twice is stored once, a sequence gap and a stale epoch are refused, and the
producer state survives a restart (clean and kill -9)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.testing import SamsaProcess
from protocol.compression import CompressionType
from protocol.errors import ErrorCode
from tests.support.clients import create_topic
from tests.support.wire import RawClient, fetch_all, idempotent_batch, init_producer_id, produce


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SamsaProcess]:
    b = SamsaProcess(tmp_path / "data")
    b.start()
    yield b
    b.close()


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


# ------------------------------------------------------------------------------ confluent-kafka


@pytest.mark.parametrize("restart", ["stop", "kill"])
def test_confluent_idempotent_producer_no_duplicates(broker: SamsaProcess, restart: str) -> None:
    """6000 messages in many small batches, five in flight. A third of the way in the broker is
    frozen (SIGSTOP) past request.timeout.ms, so requests time out and are retried while the
    originals still sit in the broker's socket buffer; two thirds in it is restarted. Every
    message must be stored exactly once, in order, at the offset its delivery report gave."""
    from confluent_kafka import Producer

    topic = "idem-confluent"
    create_topic(broker.bootstrap_servers, topic)
    capture = _Capture()
    rdlog = logging.getLogger(f"rdkafka.{restart}")
    rdlog.addHandler(capture)
    rdlog.setLevel(logging.DEBUG)
    rdlog.propagate = False
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 50,
            "request.timeout.ms": 1000,
            "message.timeout.ms": 60000,
            "retry.backoff.ms": 100,
            "socket.timeout.ms": 1000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200,
            "debug": "eos",
            "logger": rdlog,
        }
    )
    total = 6000
    acked: dict[int, int] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def delivered(err: object, msg: object) -> None:
        with lock:
            if err is not None:
                errors.append(str(err))
            else:
                acked[int(msg.value())] = msg.offset()  # type: ignore[attr-defined]

    def run() -> None:
        for i in range(total):
            while True:
                try:
                    producer.produce(topic, value=b"%d" % i, partition=0, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            if i % 100 == 0:
                time.sleep(0.01)  # spread the load over the disruptions
        producer.flush(90)

    def wait_acked(n: int) -> None:
        deadline = time.monotonic() + 60
        while len(acked) < n:
            assert time.monotonic() < deadline, f"only {len(acked)} acknowledged; errors {errors[:5]}"
            assert not errors, errors[:5]
            time.sleep(0.01)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        wait_acked(total // 3)
        broker.pause()
        time.sleep(2.5)
        broker.resume()
        wait_acked(2 * total // 3)
        if restart == "stop":
            broker.stop()
        else:
            broker.kill()
        broker.start()
    finally:
        worker.join(120)
    assert not worker.is_alive()
    assert errors == []
    assert len(acked) == total
    # the freeze really made librdkafka time out and retry produce requests
    assert any("Timed out ProduceRequest" in line for line in capture.lines), capture.lines[-20:]

    with RawClient(broker.port) as client:
        stored = fetch_all(client, topic)
    values = [int(r.value or b"-1") for r in stored]
    assert len(values) == len(set(values)), "duplicates stored"
    assert values == list(range(total))
    assert all(acked[int(r.value or b"-1")] == r.offset for r in stored)


# ------------------------------------------------------------------------------ raw protocol


def test_duplicate_batch_is_stored_once(broker: SamsaProcess) -> None:
    topic = "idem-raw"
    create_topic(broker.bootstrap_servers, topic)
    with RawClient(broker.port) as client:
        pid, epoch = init_producer_id(client)
        assert epoch == 0
        first = idempotent_batch([b"a", b"b", b"c"], pid, epoch, 0)
        answer = produce(client, topic, 0, first)
        assert (answer.error, answer.base_offset) == (ErrorCode.none, 0)
        again = produce(client, topic, 0, first)
        assert (again.error, again.base_offset) == (ErrorCode.none, 0), "duplicate keeps its original offset"

        # a compressed batch, then a duplicate of the older of two batches in the window
        second = idempotent_batch([b"d", b"e"], pid, epoch, 3, compression=CompressionType.GZIP)
        assert produce(client, topic, 0, second).base_offset == 3
        third = idempotent_batch([b"f"], pid, epoch, 5)
        assert produce(client, topic, 0, third).base_offset == 5
        assert produce(client, topic, 0, second).base_offset == 3
        assert produce(client, topic, 0, first).base_offset == 0

        values = [r.value for r in fetch_all(client, topic)]
        assert values == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_only_the_last_five_batches_are_remembered(broker: SamsaProcess) -> None:
    """Kafka keeps five batches per producer: a retry of the sixth-newest is out of sequence."""
    topic = "idem-window"
    create_topic(broker.bootstrap_servers, topic)
    with RawClient(broker.port) as client:
        pid, epoch = init_producer_id(client)
        batches = [idempotent_batch([b"%d" % i], pid, epoch, i) for i in range(7)]
        for i, batch in enumerate(batches):
            assert produce(client, topic, 0, batch).base_offset == i
        for i in range(2, 7):
            answer = produce(client, topic, 0, batches[i])
            assert (answer.error, answer.base_offset) == (ErrorCode.none, i)
        assert produce(client, topic, 0, batches[1]).error == ErrorCode.out_of_order_sequence_number
        assert len(fetch_all(client, topic)) == 7


def test_sequence_gap_and_stale_epoch_are_refused(broker: SamsaProcess) -> None:
    topic = "idem-errors"
    create_topic(broker.bootstrap_servers, topic)
    with RawClient(broker.port) as client:
        pid, epoch = init_producer_id(client)
        assert produce(client, topic, 0, idempotent_batch([b"0", b"1"], pid, epoch, 0)).base_offset == 0
        gap = produce(client, topic, 0, idempotent_batch([b"x"], pid, epoch, 3))
        assert gap.error == ErrorCode.out_of_order_sequence_number
        # a new epoch must start at sequence 0
        bad_start = produce(client, topic, 0, idempotent_batch([b"y"], pid, epoch + 1, 2))
        assert bad_start.error == ErrorCode.out_of_order_sequence_number
        bumped = produce(client, topic, 0, idempotent_batch([b"2"], pid, epoch + 1, 0))
        assert (bumped.error, bumped.base_offset) == (ErrorCode.none, 2)
        stale = produce(client, topic, 0, idempotent_batch([b"z"], pid, epoch, 2))
        assert stale.error == ErrorCode.invalid_producer_epoch
        # nothing refused reached the log, and the sequence continues after the errors
        assert produce(client, topic, 0, idempotent_batch([b"3"], pid, epoch + 1, 1)).base_offset == 3
        assert [r.value for r in fetch_all(client, topic)] == [b"0", b"1", b"2", b"3"]


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_producer_state_survives_restart(broker: SamsaProcess, how: str) -> None:
    topic = "idem-restart"
    create_topic(broker.bootstrap_servers, topic)
    with RawClient(broker.port) as client:
        pid, epoch = init_producer_id(client)
        batches = [idempotent_batch([b"%d" % i, b"%d+" % i], pid, epoch, 2 * i) for i in range(4)]
        for i, batch in enumerate(batches):
            assert produce(client, topic, 0, batch).base_offset == 2 * i
    if how == "stop":
        broker.stop()
    else:
        broker.kill()
    broker.start()
    with RawClient(broker.port) as client:
        last = produce(client, topic, 0, batches[-1])
        assert (last.error, last.base_offset) == (ErrorCode.none, 6), "duplicate after restart"
        older = produce(client, topic, 0, batches[1])
        assert (older.error, older.base_offset) == (ErrorCode.none, 2)
        gap = produce(client, topic, 0, idempotent_batch([b"gap"], pid, epoch, 10))
        assert gap.error == ErrorCode.out_of_order_sequence_number
        nxt = produce(client, topic, 0, idempotent_batch([b"next"], pid, epoch, 8))
        assert (nxt.error, nxt.base_offset) == (ErrorCode.none, 8)
        assert len(fetch_all(client, topic)) == 9
        # a new producer id is not one handed out before the restart
        new_pid, _ = init_producer_id(client)
        assert new_pid != pid
