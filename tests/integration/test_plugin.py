"""The pytest plugin, used the way a user's project would: a separate pytest run (in a subprocess)
of a test file that only knows the `samsa_broker` and `samsa_broker_factory` fixtures, found
through the `pytest11` entry point of the installed package. Each test gets its own broker on its
own port, and every broker is gone when the run ends."""

from __future__ import annotations

import json
import os
import socket
import textwrap
import time
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
import json

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

RECORD = {record!r}


def _remember(broker, name):
    with open(RECORD, "a") as f:
        f.write(json.dumps({{"test": name, "port": broker.port, "pid": broker.proc.pid}}) + "\\n")


def _roundtrip(broker, value):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    sent = producer.send("user-topic", key=b"k", value=value).get(timeout=30)
    producer.close()
    assert sent.offset == 0, "not a fresh broker: the topic already had records"
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
    tp = TopicPartition("user-topic", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    for _ in range(60):
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
        if got:
            break
    consumer.close()
    assert got == [value]


def test_first(samsa_broker):
    _remember(samsa_broker, "first")
    _roundtrip(samsa_broker, b"one")


def test_second(samsa_broker):
    _remember(samsa_broker, "second")
    _roundtrip(samsa_broker, b"two")


def test_factory_with_config(samsa_broker_factory):
    broker = samsa_broker_factory(num_partitions=3)
    _remember(broker, "factory")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    producer.send("three-partitions", b"x").get(timeout=30)
    assert producer.partitions_for("three-partitions") == {{0, 1, 2}}
    producer.close()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie has exited but not been reaped by its (gone) parent yet
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_plugin_gives_each_test_a_fresh_broker(pytester: pytest.Pytester) -> None:
    record = pytester.path / "brokers.jsonl"
    pytester.makepyfile(
        test_user_suite=textwrap.dedent(USER_TESTS.format(record=str(record)))
    )
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", timeout=180)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["plugins:*samsa*"]
    )  # loaded through the entry point, not a conftest

    brokers = [json.loads(line) for line in record.read_text().splitlines()]
    assert [b["test"] for b in brokers] == ["first", "second", "factory"]
    ports = {b["port"] for b in brokers}
    pids = {b["pid"] for b in brokers}
    assert len(ports) == 3 and len(pids) == 3, brokers
    assert all(port > 0 and port != 9092 for port in ports)

    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if _alive(pid)], "a broker outlived the test run"
    assert not [port for port in ports if _listening(port)], (
        "a broker port is still open"
    )


def test_plugin_reports_a_broker_that_cannot_start(pytester: pytest.Pytester) -> None:
    """A bad config makes the fixture fail with the broker's own message, not hang."""
    pytester.makepyfile(
        test_bad_config=textwrap.dedent(
            """
            def test_uses_bad_broker(samsa_broker_factory):
                samsa_broker_factory({"num.partitions": "not-a-number"})
            """
        )
    )
    started = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*samsa exited with*"])
    assert time.monotonic() - started < 60
