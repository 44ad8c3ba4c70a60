"""The pytest plugin, used the way a user's project would: a separate pytest run (in a subprocess)
of a test file that only knows the plugin's fixtures, found through the `pytest11` entry point of
the installed package. A process or in-process broker is the test's own, on its own port; tests
on the session broker share it and keep apart by their namespaces, whose topics go when the test
ends; every broker is gone when the run ends."""

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


def _remember(broker, name, pid=-1, topic="user-topic"):
    pid = broker.proc.pid if pid == -1 else pid
    with open(RECORD, "a") as f:
        f.write(json.dumps({{"test": name, "port": broker.port, "pid": pid, "topic": topic}}) + "\\n")


def _roundtrip(broker, value, topic="user-topic"):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    sent = producer.send(topic, key=b"k", value=value).get(timeout=30)
    producer.close()
    assert sent.offset == 0, "not a fresh broker: the topic already had records"
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
    tp = TopicPartition(topic, 0)
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


def test_inprocess_first(samsa_inprocess_broker):
    _remember(samsa_inprocess_broker, "inprocess-first", pid=None)
    _roundtrip(samsa_inprocess_broker, b"three")


def test_inprocess_second(samsa_inprocess_broker):
    _remember(samsa_inprocess_broker, "inprocess-second", pid=None)
    _roundtrip(samsa_inprocess_broker, b"four")


def test_shared_first(samsa_session_broker, samsa_namespace):
    _remember(samsa_session_broker, "shared-first", pid=None, topic=samsa_namespace.topic("user-topic"))
    _roundtrip(samsa_session_broker, b"five", samsa_namespace.topic("user-topic"))


def test_shared_second(samsa_session_broker, samsa_namespace):
    _remember(samsa_session_broker, "shared-second", pid=None, topic=samsa_namespace.topic("user-topic"))
    _roundtrip(samsa_session_broker, b"six", samsa_namespace.topic("user-topic"))
    with open(RECORD) as f:
        first = [json.loads(line) for line in f if '"shared-first"' in line][0]
    assert first["topic"] != samsa_namespace.topic("user-topic")
    # the first test's topic went with its namespace
    assert first["topic"] not in samsa_session_broker.broker.controller.image.topics


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
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(
        ["plugins:*samsa*"]
    )  # loaded through the entry point, not a conftest

    brokers = [json.loads(line) for line in record.read_text().splitlines()]
    assert [b["test"] for b in brokers] == [
        "first", "second", "inprocess-first", "inprocess-second", "shared-first", "shared-second", "factory"]
    by_test = {b["test"]: b for b in brokers}
    # the in-process brokers run in the pytest process itself; the session broker is one broker
    assert by_test["shared-first"]["port"] == by_test["shared-second"]["port"]
    ports = {b["port"] for b in brokers}
    assert len(ports) == 6, brokers
    pids = {b["pid"] for b in brokers if b["pid"] is not None}
    assert len(pids) == 3, brokers
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
