"""A full disk never loses, hides or breaks an acknowledged record.

The broker's log.dirs is a real 12 MiB tmpfs (tests/support/small_fs.py). Two producers with
acks=all and no retries (confluent-kafka and kafka-python, so every failure reaches the test with
the broker's own error code) write 1 KiB records into small segments while the test fills the
filesystem to the last byte and frees it again, several times, with the broker restarted in
between: cleanly with space, cleanly while the disk is full, and with kill -9 while it is full.

Every produce either is acknowledged or fails with KAFKA_STORAGE_ERROR; while the disk is full the
broker still answers CreateTopics (KAFKA_STORAGE_ERROR) and FindCoordinator
(COORDINATOR_NOT_AVAILABLE) instead of closing the connection; writes resume by themselves once
space is back; after every restart both clients read every acknowledged record back, at the offset
it was acknowledged with, with no gap and nothing else in the log; and the broker logged no
traceback.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.static.primitive import i8

from broker.testing import SamsaProcess
from protocol.errors import ErrorCode
from tests.support.clients import consume, create_topic, end_offset
from tests.support.raw_client import RawClient
from tests.support.small_fs import SmallFilesystem, mount_command

TOPIC = "disk-full"
PARTITIONS = 2
RECORD = 1024
FS_BYTES = 12 << 20

pytestmark = pytest.mark.skipif(
    isinstance(mount_command(), str), reason=str(mount_command())
)


@dataclass
class Ledger:
    """What the clients were told: acknowledged (partition, offset) -> value, and the errors."""

    acked: dict[tuple[int, int], bytes] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    sent: int = 0

    def error(self, name: str) -> None:
        self.errors[name] = self.errors.get(name, 0) + 1


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[SmallFilesystem]:
    small = SmallFilesystem(tmp_path / "fs", FS_BYTES)
    try:
        yield small
    finally:
        small.close()


def _value(tag: str, i: int) -> bytes:
    head = f"{tag}-{i}|".encode()
    return head + os.urandom(RECORD - len(head))


def produce_confluent(bootstrap: str, ledger: Ledger, tag: str, count: int) -> None:
    from confluent_kafka import KafkaError, Producer

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "enable.idempotence": False,
        "linger.ms": 2, "message.timeout.ms": 15000, "batch.size": 32768,
    })  # fmt: skip

    def delivered(err: object, msg: object) -> None:
        if err is None:
            ledger.acked[(msg.partition(), msg.offset())] = msg.value()  # type: ignore[attr-defined]
        else:
            code = err.code()  # type: ignore[attr-defined]
            ledger.error("KAFKA_STORAGE_ERROR" if code == KafkaError.KAFKA_STORAGE_ERROR else str(err))

    for i in range(count):
        producer.produce(TOPIC, _value(f"ck-{tag}", i), partition=i % PARTITIONS, on_delivery=delivered)
        ledger.sent += 1
        producer.poll(0)
    assert producer.flush(30) == 0


def produce_kafka_python(bootstrap: str, ledger: Ledger, tag: str, count: int) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaStorageError

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0, linger_ms=2)
    try:
        futures = []
        for i in range(count):
            value = _value(f"kp-{tag}", i)
            futures.append((value, producer.send(TOPIC, value, partition=i % PARTITIONS)))
            ledger.sent += 1
        for value, future in futures:
            try:
                md = future.get(timeout=30)
            except KafkaStorageError:
                ledger.error("KAFKA_STORAGE_ERROR")
            except Exception as exc:  # noqa: BLE001 - the test reports any other error
                ledger.error(repr(exc)[:100])
            else:
                ledger.acked[(md.partition, md.offset)] = value
    finally:
        producer.close(timeout=10)


def produce_both(bootstrap: str, ledger: Ledger, tag: str, count: int) -> None:
    produce_confluent(bootstrap, ledger, tag, count)
    produce_kafka_python(bootstrap, ledger, tag, count)


def check_log(bootstrap: str, ledger: Ledger) -> None:
    """Both clients read every partition from 0: contiguous offsets, every acknowledged record at
    its offset, nothing that was not acknowledged."""
    for p in range(PARTITIONS):
        expected = sorted(off for part, off in ledger.acked if part == p)
        assert expected == list(range(len(expected))), f"partition {p}: acknowledged offsets have gaps"
        assert end_offset(bootstrap, TOPIC, p) == len(expected), f"partition {p}: unacknowledged records"
        for client in ("confluent", "kafka-python"):
            got = consume(client, bootstrap, TOPIC, len(expected), partition=p, timeout=15)
            assert [g.offset for g in got] == expected, f"{client} partition {p}: offsets differ"
            wrong = [g.offset for g in got if g.value != ledger.acked[(p, g.offset)]]
            assert not wrong, f"{client} partition {p}: wrong records at {wrong[:5]}"


def find_coordinator_error(port: int) -> ErrorCode:
    with RawClient(port) as c:
        resp = c.request(FindCoordinatorRequest(key="disk-full-group", key_type=i8(0)), api_version=3)
        return ErrorCode(resp.error_code)


def create_topic_error(bootstrap: str) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic("while-full", num_partitions=1, replication_factor=1)],
                                 request_timeout=10)["while-full"]  # fmt: skip
    try:
        future.result(15)
    except Exception as exc:  # noqa: BLE001 - KafkaException carrying the broker's code
        return int(exc.args[0].code())
    return 0


def test_disk_full_loses_nothing(fs: SmallFilesystem) -> None:
    broker = SamsaProcess(
        fs.path / "data",
        {"log.segment.bytes": str(256 << 10), "num.partitions": "1", "offsets.topic.num.partitions": "1"},
    )
    broker.start()
    ledger = Ledger()
    try:
        create_topic(broker.bootstrap_servers, TOPIC, partitions=PARTITIONS)
        produce_both(broker.bootstrap_servers, ledger, "a", 300)
        assert not ledger.errors, ledger.errors

        # 1. full: produces fail with KAFKA_STORAGE_ERROR, nothing else; admin APIs answer
        fs.fill()
        assert fs.free_bytes() == 0
        produce_both(broker.bootstrap_servers, ledger, "b", 200)
        assert set(ledger.errors) == {"KAFKA_STORAGE_ERROR"}, ledger.errors
        assert find_coordinator_error(broker.port) == ErrorCode.coordinator_not_available
        assert create_topic_error(broker.bootstrap_servers) == ErrorCode.kafka_storage_error
        check_log(broker.bootstrap_servers, ledger)  # reads go on

        # 2. space back: writes resume by themselves, at the right offsets
        fs.free()
        errors_before = sum(ledger.errors.values())
        produce_both(broker.bootstrap_servers, ledger, "c", 200)
        assert sum(ledger.errors.values()) == errors_before, ledger.errors
        check_log(broker.bootstrap_servers, ledger)

        # 3. clean restart with space
        assert broker.stop() == 0
        broker.start()
        check_log(broker.bootstrap_servers, ledger)

        # 4. clean shutdown while the disk is full, start once space is back
        fs.fill()
        produce_both(broker.bootstrap_servers, ledger, "d", 100)
        assert broker.stop() == 0
        fs.free()
        broker.start()
        check_log(broker.bootstrap_servers, ledger)
        produce_both(broker.bootstrap_servers, ledger, "e", 100)

        # 5. kill -9 while the disk is full, start once space is back
        fs.fill()
        produce_both(broker.bootstrap_servers, ledger, "f", 100)
        broker.kill()
        fs.free()
        broker.start()
        check_log(broker.bootstrap_servers, ledger)
        produce_both(broker.bootstrap_servers, ledger, "g", 100)
        check_log(broker.bootstrap_servers, ledger)
        assert find_coordinator_error(broker.port) == ErrorCode.none

        assert set(ledger.errors) <= {"KAFKA_STORAGE_ERROR"}, ledger.errors
        log_text = broker.read_log()
        assert "Traceback" not in log_text, log_text[log_text.index("Traceback") - 2000 :][:6000]
        assert "log storage error" in log_text and "log storage recovered" in log_text
        print(
            f"\nDISK FULL sent={ledger.sent} acknowledged={len(ledger.acked)} "
            f"storage_errors={ledger.errors.get('KAFKA_STORAGE_ERROR', 0)}"
        )
    finally:
        broker.close()
        time.sleep(0)  # the fixture unmounts after the broker is gone
