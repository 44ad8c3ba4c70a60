"""Shared scenario of the consumer-group tests: three members of one group (each a process running
groups_member.py with one client library) split a topic's partitions; one closes, one is killed
with SIGKILL, and its partitions move to the survivor within the session timeout; the offsets they
committed are where a new member resumes after a broker restart."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from broker.testing import SamsaProcess

MEMBER_SCRIPT = Path(__file__).with_name("groups_member.py")
SESSION_MS = 3000
PARTITIONS = 6
PER_PARTITION = 10
# group.min.session.timeout.ms lowered so members can use a 3 s session; no initial delay
BROKER_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "num.partitions": "1",
    # the same session for KIP-848 members, whose timeouts are the broker's (each within its
    # min/max, as Kafka requires to start)
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": str(SESSION_MS),
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "300",
}


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll until predicate() holds; returns the seconds it took, fails the test after timeout."""
    started = time.monotonic()
    while True:
        if predicate():
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class Member:
    """A group member process and what it reported."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, log_path: Path) -> None:
        self.name = log_path.stem
        self._log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER_SCRIPT), client, bootstrap, topic, group, str(SESSION_MS)],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=str(Path(__file__).resolve().parents[2]),
        )
        self.assignment: list[int] | None = None
        self.records: list[tuple[int, int]] = []
        self.closed = False
        self._lock = threading.Lock()
        self._events: queue.Queue[dict[str, object]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if "assignment" in event:
                    self.assignment = list(event["assignment"])
                elif "record" in event:
                    p, o = event["record"]
                    self.records.append((int(p), int(o)))
                elif "closed" in event:
                    self.closed = True

    def current(self) -> set[int]:
        with self._lock:
            return set(self.assignment or ())

    def seen(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self.records)

    def terminate(self) -> None:
        """Clean close (the member sends LeaveGroup)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        self._log.close()

    def describe(self, lines: int = 10) -> str:
        """Its state and the last lines of its log (the client's warnings), for a failure message."""
        self._log.flush()
        tail = self._log_path.read_text(errors="replace").splitlines()[-lines:]
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        return "\n".join([f"member {self.name}: {state}, assignment {sorted(self.current())}", *tail])


def produce(bootstrap: str, topic: str, per_partition: int, start: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for p in range(PARTITIONS):
        for i in range(start, start + per_partition):
            producer.send(topic, f"{p}-{i}".encode(), partition=p)
    producer.flush(30)
    producer.close()


def committed(bootstrap: str, group: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(group).get(group, {})
        return {tp.partition: om.offset for tp, om in offsets.items()}
    finally:
        admin.close()


def run_group_scenario(client: str, tmp_path: Path, *, crash_broker: bool) -> None:
    broker = SamsaProcess(tmp_path / "data", BROKER_OVERRIDES).start()
    members: list[Member] = []
    topic, group = f"orders-{client}", f"group-{client}"
    try:
        bs = broker.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bs)
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        admin.close()
        produce(bs, topic, PER_PARTITION)
        all_partitions = set(range(PARTITIONS))

        def start(name: str) -> Member:
            m = Member(client, broker.bootstrap_servers, topic, group, tmp_path / f"{name}.log")
            members.append(m)
            return m

        a, b, c = start("a"), start("b"), start("c")

        def split_three() -> bool:
            parts = [a.current(), b.current(), c.current()]
            return all(parts) and sum(len(p) for p in parts) == PARTITIONS and set().union(*parts) == all_partitions

        wait_until(split_three, 60, "three members to split the partitions")
        assert [len(m.current()) for m in (a, b, c)] == [2, 2, 2]

        # a leaves cleanly: b and c take over its partitions
        a.terminate()
        assert a.closed
        wait_until(
            lambda: b.current() | c.current() == all_partitions and len(b.current()) + len(c.current()) == PARTITIONS,
            30,
            "b and c to take over a's partitions",
        )

        # b dies without a word: its partitions move to c once its session times out
        b.kill()
        moved_in = wait_until(lambda: c.current() == all_partitions, SESSION_MS / 1000 + 20, "c to own everything")
        assert moved_in < SESSION_MS / 1000 + 5, f"partitions moved after {moved_in:.1f}s"

        everything = {(p, o) for p in all_partitions for o in range(PER_PARTITION)}
        wait_until(lambda: everything <= a.seen() | b.seen() | c.seen(), 30, "every record consumed")
        wait_until(
            lambda: committed(bs, group) == {p: PER_PARTITION for p in all_partitions}, 30, "final commits"
        )
        c.terminate()

        if crash_broker:
            broker.kill()
            broker.start()
        else:
            broker.restart()
        assert committed(broker.bootstrap_servers, group) == {p: PER_PARTITION for p in all_partitions}
        produce(broker.bootstrap_servers, topic, 1, start=PER_PARTITION)

        d = start("d")
        fresh = {(p, PER_PARTITION) for p in all_partitions}
        wait_until(lambda: fresh <= d.seen(), 60, "d to read the records produced after the restart")
        time.sleep(0.5)
        assert d.seen() == fresh, "d must resume at the committed offsets, not re-read old records"
        d.terminate()
    except AssertionError as e:
        details = "\n".join(m.describe() for m in members)
        coordinator = [line for line in broker.log_path.read_text().splitlines() if "samsa.coordinator" in line]
        raise AssertionError("\n".join([str(e), details, "broker's group coordinator:", *coordinator[-15:]])) from None
    finally:
        for m in members:
            m.close()
        broker.close()
