"""Fetch is zero-copy: record bytes go from the segment file to the socket with sendfile(2).

The broker runs under `strace -f -yy`, which logs every sendfile, read, pread64, readv and recvfrom
with the path or socket behind each file descriptor. After ~10 MB are produced and consumed with
kafka-python, the trace must show sendfile calls from segment (.log) files to TCP sockets that
carried at least those 10 MB, and reads of segment files that add up to almost nothing: the record
bytes never passed through Python.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from broker.testing import SamsaProcess
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from tests.support.fidelity import create_topic
from tests.support.raw_client import RawClient
from tests.support.wire import fetch_batches, produce

TOPIC = "zero-copy"
RECORD_SIZE = 1024
RECORDS = 10 * 1024  # 10 MiB of values
TRACED = "sendfile,read,pread64,readv,preadv,preadv2,recvfrom"
READS = ("read", "pread64", "readv", "preadv", "preadv2")


class StracedSamsa(SamsaProcess):
    """A SamsaProcess whose command runs under strace, writing the trace to `trace_path`.

    strace only detaches from (and does not stop) its tracee when it is signalled, so stop and kill
    signal the broker itself, then wait for strace to exit with it."""

    def __init__(self, trace_path: Path, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.trace_path = trace_path

    def command(self) -> list[str]:
        strace = shutil.which("strace")
        assert strace, "strace is not installed (tests/run.sh installs it)"
        return [
            strace,
            "-f",
            "-qq",
            "-yy",
            "-e",
            f"trace={TRACED}",
            "-o",
            str(self.trace_path),
            *super().command(),
        ]

    def broker_pid(self) -> int | None:
        assert self.proc is not None
        try:
            children = (
                Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
                .read_text()
                .split()
            )
        except FileNotFoundError:
            return None
        return int(children[0]) if children else None

    def _signal_broker(self, sig: signal.Signals, timeout: float) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        pid = self.broker_pid()
        if pid is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 20.0) -> int | None:
        self._signal_broker(signal.SIGTERM, timeout)
        return self._finish()

    def kill(self) -> None:
        self._signal_broker(signal.SIGKILL, 10)
        self._finish()


# -- reading the trace ---------------------------------------------------------------------------

_LINE = re.compile(r"^(\d+)\s+(.*)$")
_CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+)")
_FD = re.compile(r"(\d+)<((?:TCP|TCPv6|UDP|UNIX)(?::\[[^\]]*\])?|[^>]*)>")


@dataclass
class Syscall:
    name: str
    fds: list[tuple[int, str]]
    result: int


@dataclass
class Trace:
    calls: list[Syscall] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> Trace:
        """Parse `strace -f -yy` output, joining "<unfinished ...>" with "<... resumed>" halves."""
        trace = cls()
        pending: dict[str, str] = {}
        for raw in text.splitlines():
            m = _LINE.match(raw)
            if not m:
                continue
            pid, rest = m.groups()
            if rest.endswith("<unfinished ...>"):
                pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
                continue
            resumed = re.match(r"^<\.\.\. (\w+) resumed>(.*)$", rest)
            if resumed:
                rest = pending.pop(pid, resumed.group(1) + "(") + resumed.group(2)
            call = _CALL.match(rest)
            if not call:
                continue  # signals, exits
            name, args, result = call.group(1), call.group(2), int(call.group(3))
            fds = [(int(fd), what) for fd, what in _FD.findall(args)]
            trace.calls.append(Syscall(name, fds, result))
        return trace

    def sendfile_bytes(self) -> dict[tuple[str, str], int]:
        """Bytes moved by sendfile, by (out kind, in path)."""
        moved: dict[tuple[str, str], int] = defaultdict(int)
        for c in self.calls:
            if c.name == "sendfile" and c.result > 0 and len(c.fds) >= 2:
                out, src = c.fds[0][1], c.fds[1][1]
                moved[(out.split(":")[0], src)] += c.result
        return moved

    def read_bytes_from(self, predicate: Callable[[str], bool]) -> int:
        return sum(
            c.result
            for c in self.calls
            if c.name in READS and c.result > 0 and c.fds and predicate(c.fds[0][1])
        )


def is_segment(path: str) -> bool:
    return path.endswith(".log") and re.search(r"/\d{20}\.log$", path) is not None


def test_trace_parser_joins_unfinished_calls() -> None:
    sendfile = (
        "101 sendfile(7<TCP:[127.0.0.1:9092->127.0.0.1:5555]>, 9</d/t-0/00000000000000000000.log>, "
        "[0] => [4096], 4096) = 4096"
    )
    text = "\n".join(  # noqa: FLY002 - one trace line per element
        [
            sendfile,
            "102 pread64(9</d/t-0/00000000000000000000.log>, <unfinished ...>",
            '101 recvfrom(7<TCP:[127.0.0.1:9092->127.0.0.1:5555]>, "abc", 65536, 0, NULL, NULL) = 3',
            '102 <... pread64 resumed>"\\0\\0", 12, 0) = 12',
            "101 +++ exited with 0 +++",
        ]
    )
    trace = Trace.parse(text)
    assert [c.name for c in trace.calls] == [
        "sendfile",
        "recvfrom",
        "pread64",
    ]  # in completion order
    assert trace.sendfile_bytes() == {("TCP", "/d/t-0/00000000000000000000.log"): 4096}
    assert trace.read_bytes_from(is_segment) == 12


# -- the test ------------------------------------------------------------------------------------


@pytest.fixture
def traced_broker(tmp_path: Path) -> Iterator[StracedSamsa]:
    broker = StracedSamsa(
        tmp_path / "broker.strace", tmp_path / "data", startup_timeout=60.0
    )
    broker.start()
    yield broker
    broker.close()
    assert not broker.running


def test_fetch_uses_sendfile_and_never_reads_segments(
    traced_broker: StracedSamsa,
) -> None:
    broker = traced_broker
    payloads = [os.urandom(RECORD_SIZE) for _ in range(RECORDS)]
    digest = hashlib.sha256(b"".join(payloads)).hexdigest()

    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers,
        acks=1,
        linger_ms=10,
        batch_size=256 * 1024,
    )
    try:
        futures = [producer.send(TOPIC, value=p) for p in payloads]
        producer.flush(60)
        offsets = [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(timeout=10)
    assert offsets == list(range(RECORDS))

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        max_partition_fetch_bytes=1024 * 1024,
        fetch_max_bytes=4 * 1024 * 1024,
    )
    got: list[bytes] = []
    try:
        tp = KafkaTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 60
        while len(got) < RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
    finally:
        consumer.close()
    assert len(got) == RECORDS
    assert hashlib.sha256(b"".join(got)).hexdigest() == digest

    broker.stop()
    trace = Trace.parse(broker.trace_path.read_text(errors="replace"))
    assert any(c.name == "recvfrom" for c in trace.calls), (
        "trace has no socket reads: strace output not parsed"
    )

    record_bytes = RECORDS * RECORD_SIZE
    sent = trace.sendfile_bytes()
    to_sockets = sum(
        n for (out, src), n in sent.items() if out.startswith("TCP") and is_segment(src)
    )
    assert to_sockets >= record_bytes, (
        f"sendfile from segments to sockets moved {to_sockets} bytes: {dict(sent)}"
    )

    # The log does read segment files to find batch boundaries (offset index lookup, then a scan of
    # batch headers through small pread windows), but never the fetched records themselves: a
    # copying fetch would read at least the 10 MiB it sends, in reads the size of a fetch.
    segment_reads = trace.read_bytes_from(is_segment)
    assert segment_reads < record_bytes // 20, (
        f"the broker read {segment_reads} bytes of segment files"
    )
    largest = max(
        (
            c.result
            for c in trace.calls
            if c.name in READS and c.fds and is_segment(c.fds[0][1])
        ),
        default=0,
    )
    assert largest <= 64 * 1024, (
        f"a {largest}-byte read of a segment file: records read into Python"
    )


class _SlowReader(RawClient):
    """A client with a 64 KiB receive buffer (the Java consumer's receive.buffer.bytes) that
    reads each response only after 0.3 s, so the broker's socket cannot take a 4 MiB fetch's
    records at once (here it takes about 4.1 MB of them)."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)

    def recv_frame(self) -> bytes:
        time.sleep(0.3)
        return super().recv_frame()


def test_a_fetch_larger_than_the_socket_takes_at_once(samsa_broker: SamsaProcess) -> None:
    """The first sendfile of a region sends what the socket takes (Connection._sendfile_now);
    the rest goes when the socket drains (loop.sendfile): every byte arrives, in order."""
    values = [os.urandom(1024) for _ in range(4 * 1024)]  # 4 MiB in batches of 512 KiB
    with RawClient(samsa_broker.port) as client:
        create_topic(client, "slow-reader")
        for i in range(0, len(values), 512):
            answer = produce(client, "slow-reader", 0, build_batch([NewRecord(None, v, (), None) for v in values[i:i + 512]]))
            assert answer.error == ErrorCode.none, answer
    with _SlowReader(samsa_broker.port) as slow:
        error, _, batches = fetch_batches(slow, "slow-reader", 0, 0, max_bytes=8 << 20)
        assert error == ErrorCode.none
        assert [r.value for _, _, records in batches for r in records] == values
        error, _, again = fetch_batches(slow, "slow-reader", 0, 2048)  # the connection serves on
        assert error == ErrorCode.none and again[0][0] == 2048
