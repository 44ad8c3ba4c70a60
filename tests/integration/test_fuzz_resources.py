"""Hostile use of resources against a real broker process, while a well-behaved client works.

Each test starts a broker (some with a low open-file limit), starts a kafka-python producer
(acks=all) and consumer on a topic of their own, then attacks: frames sent a byte at a time,
100 MB frames missing their last byte, more connections than max.connections or
max.connections.per.ip allow, a flood of connections past the open-file limit, a Metadata
request naming 10,000 unknown topics, client ids that try to forge log lines. Throughout, the
well-behaved client must see no error and keep getting acknowledgements, and every record it was
acknowledged must be consumed; the broker must stay up and log a bounded number of lines.
"""

from __future__ import annotations

import re
import socket
import struct
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kio.schema.metadata.v1 import request as metadata_v1
from kio.schema.metadata.v12 import request as metadata_v12

from broker.testing import SamsaProcess
from protocol import messages
from tests.support.raw_client import RawClient, encode_request, frame, request_header

GOOD_TOPIC = "well-behaved"
MiB = 1 << 20


# -- helpers -------------------------------------------------------------------------------------


def api_versions_frame(client_id: str = "hostile") -> bytes:
    return encode_request(messages.request_class(18, 0)(), 1, client_id)


def connect(port: int, source: str = "127.0.0.1", timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout, source_address=(source, 0))


def probe(sock: socket.socket, timeout: float) -> str:
    """Send ApiVersions: "answered", "closed" (EOF or reset) or "silent" within `timeout`."""
    try:
        sock.sendall(api_versions_frame())
        sock.settimeout(timeout)
        data = sock.recv(4)
    except TimeoutError:
        return "silent"
    except OSError:
        return "closed"
    return "answered" if data else "closed"


def closed_within(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1 << 16) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def rss(broker: SamsaProcess) -> int:
    assert broker.proc is not None
    status = Path(f"/proc/{broker.proc.pid}/status").read_text()
    m = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert m, status
    return int(m.group(1)) * 1024


def event_lines(log: str) -> list[str]:
    """Log records: lines that start a record (tracebacks are indented under theirs)."""
    return [line for line in log.splitlines() if line[:2].isdigit()]


def wait_until(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def create_topic(port: int, name: str) -> None:
    with RawClient(port) as c:
        deadline = time.monotonic() + 10
        while True:
            resp = c.request(metadata_v12.MetadataRequest(
                topics=(metadata_v12.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=name),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            ))
            if resp.topics[0].error_code == 0 and resp.topics[0].partitions:
                return
            assert time.monotonic() < deadline, resp
            time.sleep(0.05)


@dataclass
class GoodClient:
    """A kafka-python producer (acks=all) and consumer working on GOOD_TOPIC in two threads."""

    bootstrap: str
    acked: list[bytes] = field(default_factory=list)
    consumed: list[bytes] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> GoodClient:
        for target in (self._produce, self._consume):
            thread = threading.Thread(target=target, name=f"good-{target.__name__}", daemon=True)
            thread.start()
            self.threads.append(thread)
        wait_until(lambda: len(self.acked) >= 20 or self.errors, 20, "the good client's first acks")
        assert not self.errors, self.errors
        return self

    def acks_during(self, seconds: float) -> int:
        before = len(self.acked)
        time.sleep(seconds)
        return len(self.acked) - before

    def finish(self) -> None:
        """Stop producing, wait for the consumer to see every acknowledged record, check."""
        self.stop.set()
        self.threads[0].join(20)
        wait_until(lambda: set(self.acked) <= set(self.consumed) or self.errors, 20,
                   "the good consumer to catch up")
        self.threads[1].join(20)
        assert not self.errors, self.errors
        assert set(self.acked) <= set(self.consumed)

    def _produce(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", retries=0,
                                 linger_ms=5, request_timeout_ms=15000)
        try:
            i = 0
            while not self.stop.is_set():
                futures = []
                for _ in range(10):
                    value = f"good-{i:08d}".encode()
                    futures.append((value, producer.send(GOOD_TOPIC, value=value, partition=0)))
                    i += 1
                for value, future in futures:
                    future.get(timeout=15)
                    self.acked.append(value)
                time.sleep(0.02)
        except Exception as e:  # noqa: BLE001 - any error of the good client fails the test
            self.errors.append(f"producer: {e!r}")
        finally:
            producer.close(timeout=10)

    def _consume(self) -> None:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                 enable_auto_commit=False, fetch_max_wait_ms=200)
        try:
            tp = KafkaTopicPartition(GOOD_TOPIC, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            while not (self.stop.is_set() and set(self.acked) <= set(self.consumed)):
                for records in consumer.poll(timeout_ms=200).values():
                    self.consumed.extend(r.value for r in records)
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"consumer: {e!r}")
        finally:
            consumer.close()


class LimitedSamsaProcess(SamsaProcess):
    """A broker started under RLIMIT_NOFILE (soft, hard), as `prlimit` would start it."""

    def __init__(self, *args: object, nofile: tuple[int, int], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.nofile = nofile

    def command(self) -> list[str]:
        soft, hard = self.nofile
        cmd = super().command()
        launcher = ("import os, resource, sys; "
                    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard})); "
                    "os.execv(sys.executable, [sys.executable] + sys.argv[1:])")
        return [sys.executable, "-c", launcher, *cmd[1:]]


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[SamsaProcess]]:
    """Brokers a test started; each is stopped at the end."""
    brokers: list[SamsaProcess] = []
    yield brokers
    for b in brokers:
        b.close()


def start(started: list[SamsaProcess], broker: SamsaProcess) -> tuple[SamsaProcess, GoodClient]:
    started.append(broker.start())
    create_topic(broker.port, GOOD_TOPIC)
    return broker, GoodClient(broker.bootstrap_servers).start()


# -- unfinished frames -----------------------------------------------------------------------------


def test_slow_and_unfinished_frames_are_closed_and_their_memory_returned(
    tmp_path: Path, started: list[SamsaProcess]
) -> None:
    timeout_ms = 2000
    broker, good = start(started, SamsaProcess(
        tmp_path / "data", {"samsa.request.receive.timeout.ms": str(timeout_ms)}))
    rss_before = rss(broker)

    # slowloris: a valid ApiVersions frame, one byte every 0.2 s (it would take ~5 s)
    slow = [connect(broker.port) for _ in range(3)]
    # 100 MB frames missing their last byte
    big = [connect(broker.port) for _ in range(3)]
    size = 100 * MiB
    chunk = b"\x00" * MiB
    opened = time.monotonic()
    for s in big:
        head = struct.pack(">i", size) + request_header(18, 0, 1, "big", False)
        s.sendall(head)
        sent = len(head)
        while sent < size + 4 - 1:
            n = min(len(chunk), size + 4 - 1 - sent)
            s.sendall(chunk[:n])
            sent += n
    rss_peak = rss(broker)
    data = api_versions_frame()
    stop_slow = threading.Event()

    def drip() -> None:
        for i in range(len(data)):
            for s in slow:
                try:
                    s.sendall(data[i : i + 1])
                except OSError:
                    pass
            if stop_slow.wait(0.2):
                return

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    acks = good.acks_during(0.5)
    for s in big + slow:
        assert closed_within(s, timeout_ms / 1000 + 3), "a late frame was not closed"
    closed_after = time.monotonic() - opened
    stop_slow.set()
    dripper.join(5)
    for s in big + slow:
        s.close()
    wait_until(lambda: rss(broker) < rss_before + 40 * MiB, 5, "the broker's memory to return")
    rss_after = rss(broker)

    log = broker.read_log()
    timeouts = [line for line in log.splitlines() if "reason=receive_timeout" in line]
    assert len(timeouts) == 6, timeouts
    assert sum(f"frame_size={size}" in line for line in timeouts) == 3
    assert acks > 0, "the good client got no acknowledgement while frames were held"
    good.finish()
    assert broker.running
    # the big frames were held (memory followed their bytes), then released
    assert rss_peak > rss_before + 200 * MiB, (rss_before, rss_peak)
    print(f"rss before={rss_before >> 20} MiB peak={rss_peak >> 20} MiB after={rss_after >> 20} "
          f"MiB closed_after={closed_after:.1f}s")


def test_idle_connections_are_still_closed_after_connections_max_idle_ms(
    tmp_path: Path, started: list[SamsaProcess]
) -> None:
    broker = SamsaProcess(tmp_path / "data", {"connections.max.idle.ms": "500"})
    started.append(broker.start())
    with RawClient(broker.port) as idle, RawClient(broker.port) as busy:
        assert probe(busy.sock, 5) == "answered"
        started_at = time.monotonic()
        assert idle.closed_by_peer(5)
        assert 0.4 < time.monotonic() - started_at < 3
    assert "reason=idle" in broker.read_log()
    assert "reason=receive_timeout" not in broker.read_log()


def test_queued_max_request_bytes_stops_reading_until_memory_returns(
    tmp_path: Path, started: list[SamsaProcess]
) -> None:
    broker = SamsaProcess(tmp_path / "data", {"socket.request.max.bytes": str(MiB),
                                              "queued.max.request.bytes": str(MiB)})
    started.append(broker.start())
    with RawClient(broker.port) as holder, RawClient(broker.port) as other:
        holder.send_bytes(struct.pack(">i", MiB) + b"\xff" * 100)  # reserves the whole pool
        time.sleep(0.2)
        other.send_bytes(api_versions_frame())
        other.sock.settimeout(0.8)
        with pytest.raises(TimeoutError):
            other.sock.recv(4)  # not read: the pool is empty
        holder.send_bytes(b"\xff" * (MiB - 100))  # the frame completes (unknown key: closed)
        assert holder.closed_by_peer(5)
        other.sock.settimeout(5)
        assert other.recv_frame()  # now read and answered
    assert "request memory exhausted" in broker.read_log()


# -- connection limits -----------------------------------------------------------------------------


def test_max_connections_blocks_new_connections_until_one_closes(
    tmp_path: Path, started: list[SamsaProcess]
) -> None:
    limit = 12
    broker, good = start(started, SamsaProcess(tmp_path / "data",
                                               {"max.connections": str(limit)}))
    socks = [connect(broker.port) for _ in range(limit + 4)]  # the kernel queues them all
    results = [probe(s, 0.5) for s in socks]
    served = results.count("answered")
    assert results.count("closed") == 0, results
    # the good client holds a few of the limit's connections
    assert limit - 5 <= served <= limit - 1, results
    acks = good.acks_during(0.5)
    waiting = [s for s, r in zip(socks, results) if r == "silent"]
    for s in [s for s, r in zip(socks, results) if r == "answered"][:2]:
        s.close()
    for s in waiting[:2]:  # accepted once a slot frees, and their request is answered
        s.settimeout(5)
        assert s.recv(4), "a waiting connection was not served after others closed"
    for s in socks:
        s.close()
    assert acks > 0
    good.finish()
    lines = [line for line in broker.read_log().splitlines() if "connection limit reached" in line]
    assert 1 <= len(lines) <= 2, lines
    assert f"max_connections={limit}" in lines[0]


def test_max_connections_per_ip_closes_connections_beyond_the_limit(
    tmp_path: Path, started: list[SamsaProcess]
) -> None:
    broker, good = start(started, SamsaProcess(tmp_path / "data", {
        "max.connections.per.ip": "5",
        "max.connections.per.ip.overrides": "127.0.0.1:1000",
    }))
    hostile = [connect(broker.port, source="127.0.0.2") for _ in range(25)]
    results = [probe(s, 2) for s in hostile]
    assert results.count("answered") == 5 and results.count("closed") == 20, results
    acks = good.acks_during(0.3)
    for s in hostile:
        s.close()
    time.sleep(0.2)
    with connect(broker.port, source="127.0.0.2") as again:  # slots were returned
        assert probe(again, 5) == "answered"
    assert acks > 0
    good.finish()
    lines = [line for line in broker.read_log().splitlines()
             if "reason=max_connections_per_ip" in line]
    assert len(lines) == 1, lines  # one line per interval, not one per connection
    assert "client=127.0.0.2:" in lines[0] and "max_connections_per_ip=5" in lines[0]


def test_open_file_limit_is_raised_to_the_hard_limit(
    tmp_path: Path, started: list[SamsaProcess]
) -> None:
    broker = LimitedSamsaProcess(tmp_path / "data", nofile=(256, 4096))
    started.append(broker.start())
    assert broker.proc is not None
    limits = Path(f"/proc/{broker.proc.pid}/limits").read_text()
    assert re.search(r"Max open files\s+4096\s+4096", limits), limits
    assert "open file limit raised from=256 to=4096 hard=4096" in broker.read_log()


def test_connection_flood_past_the_open_file_limit(
    tmp_path: Path, started: list[SamsaProcess]
) -> None:
    # the good partition's segment descriptors are open before the flood (a file opened while the
    # flood holds every descriptor would answer KAFKA_STORAGE_ERROR)
    broker, good = start(started, LimitedSamsaProcess(tmp_path / "data", nofile=(160, 160)))
    lines_before = len(event_lines(broker.read_log()))
    flood: list[socket.socket] = []
    flood_started = time.monotonic()
    for _ in range(300):  # beyond the broker's descriptors: the rest wait (or retry their SYN)
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", broker.port))
        flood.append(s)
    acks = good.acks_during(2.5)
    flood_seconds = time.monotonic() - flood_started
    log = broker.read_log()
    new_lines = event_lines(log)[lines_before:]
    accept_errors = [line for line in new_lines if "accept failed" in line]
    assert accept_errors, f"the flood ({len(flood)} connections) did not exhaust the descriptors"
    assert "Too many open files" in accept_errors[0]
    # one line per interval: at most a few for the whole flood
    assert len(new_lines) <= 10, "\n".join(new_lines[:40])
    for s in flood:
        s.close()
    time.sleep(0.3)
    with RawClient(broker.port) as c:  # accepting again once descriptors are free
        assert probe(c.sock, 5) == "answered"
    assert acks > 0, "the good client starved during the flood"
    good.finish()
    print(f"flood connections={len(flood)} seconds={flood_seconds:.1f} lines={len(new_lines)}")


# -- auto-creation ---------------------------------------------------------------------------------


def _metadata_v1(port: int, names: list[str]) -> list[tuple[str, int, int]]:
    request = metadata_v1.MetadataRequest(
        topics=tuple(metadata_v1.MetadataRequestTopic(name=n) for n in names))  # type: ignore[arg-type]
    with RawClient(port, timeout=60) as c:
        resp = c.request(request)
    return [(t.name, t.error_code, len(t.partitions)) for t in resp.topics]


def test_metadata_naming_10000_unknown_topics_creates_a_capped_number(
    tmp_path: Path, started: list[SamsaProcess]
) -> None:
    broker, good = start(started, SamsaProcess(tmp_path / "data", {"num.partitions": "3"}))
    names = [f"unknown-{i:05d}" for i in range(10_000)]
    began = time.monotonic()
    answer = _metadata_v1(broker.port, names)
    first_seconds = time.monotonic() - began
    assert [a[0] for a in answer] == names
    # created or deferred, each is answered UNKNOWN_TOPIC_OR_PARTITION without partitions (Kafka 4.x)
    assert all(code == 3 and parts == 0 for _, code, parts in answer)
    capped = [line for line in broker.read_log().splitlines() if "auto-creation capped" in line]
    assert len(capped) == 1 and "requested=10000 creating=100 deferred=9900" in capped[0], capped
    # the client asks again: the next ones are created
    again = _metadata_v1(broker.port, names[:300])
    assert [(code, parts) for _, code, parts in again] == [(0, 3)] * 100 + [(3, 0)] * 200
    acks = good.acks_during(0.3)
    good.finish()
    assert acks > 0
    assert broker.stop() == 0
    broker.start()
    with RawClient(broker.port) as c:
        resp = c.request(metadata_v12.MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert len(resp.topics) == 201
    print(f"metadata 10000 names: {first_seconds:.2f}s")


# -- log injection ---------------------------------------------------------------------------------


def test_client_supplied_strings_cannot_forge_or_break_log_lines(
    tmp_path: Path, started: list[SamsaProcess]
) -> None:
    broker, good = start(started, SamsaProcess(tmp_path / "data", {
        "samsa.auto.create.topics.max.per.request": "1"}))
    forged = "2026-01-01 00:00:00,000 ERROR samsa.broker forged"
    evil = f"evil\n{forged}\r\x1b[31mred\x00\u2028end"
    with RawClient(broker.port) as c:
        c.request(messages.request_class(18, 0)(), client_id=evil)  # the connection's client id
        c.send_bytes(frame(request_header(52, 0, 2, evil, False)))  # a key not served: closed, logged
        assert c.closed_by_peer(5)
    with RawClient(broker.port) as c:  # the cap's line names the client id
        c.request(metadata_v1.MetadataRequest(topics=(
            metadata_v1.MetadataRequestTopic(name="inj-a"),  # type: ignore[arg-type]
            metadata_v1.MetadataRequestTopic(name="inj-b"),  # type: ignore[arg-type]
        )), client_id=evil)
    good.finish()
    raw = broker.log_path.read_bytes()
    assert b"\x1b" not in raw and b"\x00" not in raw and b"\r" not in raw
    assert "\u2028" not in raw.decode()
    lines = raw.decode().splitlines()
    assert not any(line.startswith(forged) for line in lines)
    escaped = "client_id=evil\\n" + forged + "\\r\\x1b[31mred\\x00\\u2028end"
    closed = [line for line in lines if "reason=unknown_api_key" in line]
    capped = [line for line in lines if "auto-creation capped" in line]
    assert len(closed) == 1 and escaped in closed[0], closed
    assert len(capped) == 1 and escaped in capped[0], capped
