"""Transactions end to end on one broker process with real clients (confluent-kafka, kafka-python):
commit and abort seen by read_committed and read_uncommitted consumers, the LSO held by an open
transaction, consume-transform-produce with offsets sent to the transaction, fencing of a zombie
producer, a transaction timed out and aborted by the coordinator, and the state surviving a
restart (clean and kill -9) of the broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.testing import SamsaProcess
from tests.support.clients import create_topic

SETTINGS = {
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaProcess]:
    b = SamsaProcess(tmp_path_factory.mktemp("txn") / "data", SETTINGS)
    b.start()
    yield b
    b.close()


def _producer(bootstrap: str, txn_id: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})
    p.init_transactions(20)
    return p


def _consume(bootstrap: str, topic: str, isolation: str, expect: int, timeout: float = 10.0) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}", "auto.offset.reset": "earliest",
        "isolation.level": isolation, "enable.auto.commit": False,
    })  # fmt: skip
    c.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is None:
            if len(out) >= expect and time.monotonic() > deadline - timeout + 2:
                break
            continue
        if msg.error():
            continue
        out.append(msg.value())
    c.close()
    return out


def _lso(bootstrap: str, topic: str) -> tuple[int, int]:
    """(read_uncommitted latest, read_committed latest) through ListOffsets."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    out = []
    for level in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
        res = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level)
        out.append(res[tp].result().offset)
    return out[0], out[1]


def test_commit_abort_and_open_transaction(broker: SamsaProcess) -> None:
    topic = "txn-basic"
    create_topic(broker.bootstrap_servers, topic)
    p = _producer(broker.bootstrap_servers, "basic")
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"c{i}".encode())
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"a{i}".encode())
    p.flush(10)  # written, then aborted (librdkafka drops unsent messages on abort)
    p.abort_transaction(20)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"o{i}".encode())
    p.flush(10)
    # 10 committed + marker, 5 aborted + marker, then the open transaction at offset 17
    hw, lso = _lso(broker.bootstrap_servers, topic)
    assert (hw, lso) == (20, 17)
    committed = _consume(broker.bootstrap_servers, topic, "read_committed", 10)
    assert committed == [f"c{i}".encode() for i in range(10)]
    everything = _consume(broker.bootstrap_servers, topic, "read_uncommitted", 18)
    assert len(everything) == 18
    p.commit_transaction(20)
    assert _lso(broker.bootstrap_servers, topic) == (21, 21)
    committed = _consume(broker.bootstrap_servers, topic, "read_committed", 13)
    assert committed == [f"c{i}".encode() for i in range(10)] + [f"o{i}".encode() for i in range(3)]


def test_consume_transform_produce_commits_offsets_with_the_transaction(broker: SamsaProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    src, dst, group = "ctp-in", "ctp-out", "ctp-group"
    create_topic(broker.bootstrap_servers, src)
    create_topic(broker.bootstrap_servers, dst)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(20):
        plain.produce(src, f"m{i}".encode())
    plain.flush(10)
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed",
    })  # fmt: skip
    consumer.subscribe([src])
    p = _producer(broker.bootstrap_servers, "ctp")
    seen = 0
    deadline = time.monotonic() + 20
    while seen < 20 and time.monotonic() < deadline:
        msgs = consumer.consume(10, 1.0)
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, m.value().upper())
        seen += len(msgs)
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 10)
        p.commit_transaction(20)
    assert seen == 20
    committed = consumer.committed([TopicPartition(src, 0)], 10)
    assert committed[0].offset == 20
    consumer.close()
    out = _consume(broker.bootstrap_servers, dst, "read_committed", 20)
    assert out == [f"M{i}".encode() for i in range(20)]


def test_zombie_producer_is_fenced(broker: SamsaProcess) -> None:
    from confluent_kafka import KafkaException

    topic = "txn-fence"
    create_topic(broker.bootstrap_servers, topic)
    old = _producer(broker.bootstrap_servers, "fence")
    old.begin_transaction()
    old.produce(topic, b"zombie")
    old.flush(10)
    new = _producer(broker.bootstrap_servers, "fence")  # aborts the old transaction, bumps the epoch
    new.begin_transaction()
    new.produce(topic, b"new")
    new.commit_transaction(20)
    with pytest.raises(KafkaException) as err:
        old.produce(topic, b"late")
        old.commit_transaction(10)
    assert err.value.args[0].fatal() or "fenced" in str(err.value).lower()
    assert _consume(broker.bootstrap_servers, topic, "read_committed", 1) == [b"new"]


def test_timed_out_transaction_is_aborted(broker: SamsaProcess) -> None:
    topic = "txn-timeout"
    create_topic(broker.bootstrap_servers, topic)
    p = _producer(broker.bootstrap_servers, "timeout", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(topic, b"never")
    p.flush(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _lso(broker.bootstrap_servers, topic)[1] == 0:
        time.sleep(0.2)
    hw, lso = _lso(broker.bootstrap_servers, topic)
    assert lso == hw == 2  # the record and the coordinator's ABORT marker
    assert _consume(broker.bootstrap_servers, topic, "read_committed", 0, timeout=3) == []


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_open_transaction_survives_a_restart(tmp_path: Path, how: str) -> None:
    b = SamsaProcess(tmp_path / "data", SETTINGS)
    b.start()
    try:
        topic = "txn-restart"
        create_topic(b.bootstrap_servers, topic)
        p = _producer(b.bootstrap_servers, "restart")
        p.begin_transaction()
        p.produce(topic, b"before")
        p.commit_transaction(20)
        p.begin_transaction()
        p.produce(topic, b"open")
        p.flush(10)
        assert _lso(b.bootstrap_servers, topic) == (3, 2)
        if how == "kill":
            b.kill()
        else:
            b.stop()
        b.start()
        assert _lso(b.bootstrap_servers, topic) == (3, 2)  # the LSO is still held
        again = _producer(b.bootstrap_servers, "restart")  # the new coordinator aborts it
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _lso(b.bootstrap_servers, topic)[1] != 4:
            time.sleep(0.1)
        assert _lso(b.bootstrap_servers, topic) == (4, 4)
        assert _consume(b.bootstrap_servers, topic, "read_committed", 1) == [b"before"]
        del again
    finally:
        b.close()
