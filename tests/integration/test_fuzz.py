"""Malformed frames thrown at a running broker while a well-behaved client keeps working.

A seeded generator (reproducible: SAMSA_FUZZ_SEED, and every case carries its index) builds
FUZZ_CASES connections' worth of bad input: random bytes, mutated valid requests for every API key
and version the broker advertises (byte flips, extreme integers, truncation, insertion, deletion,
trailing garbage), truncated frames, wrong and negative sizes, unknown keys and versions, and bad
frames pipelined between good ones. Each goes to the broker on its own connection, many at once.

Meanwhile kafka-python produces (acks=all, no retries) and consumes on another topic. At the end:
the broker is alive, every acknowledged record was consumed and is readable from the start, the
good client saw no error, every bad connection was either answered or closed within the timeout
(none hung), and the broker logged no traceback: bad input gets one clear log line.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import random
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kio.static.primitive import i16

from broker.testing import SamsaProcess
from protocol import messages
from protocol.kio_compat import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
)
from protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    NewRecord,
    build_batch,
    compute_crc,
)
from tests.support.raw_client import RawClient, frame, request_header

SEED = int(os.environ.get("SAMSA_FUZZ_SEED", "20261122"))
FUZZ_CASES = int(os.environ.get("SAMSA_FUZZ_CASES", "3000"))
WORKERS = 24
CASE_TIMEOUT = 8.0
"""Seconds a bad connection may take to be answered or closed."""
SOCKET_REQUEST_MAX_BYTES = 1 << 20
GOOD_TOPIC = "well-behaved-client-topic-0001"
FUZZ_TOPIC = "fz"
LONG_WAIT_KEYS = frozenset({1, 11, 14})
"""Fetch, JoinGroup, SyncGroup: a valid request may legitimately wait (max_wait, rebalance)."""


# -- building valid requests to mutate -----------------------------------------------------------

_SMALL_INTS = (0, 0, 1, -1, 2)


def _sample_primitive(kafka_type: str, rng: random.Random) -> Any:
    if kafka_type in ("int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"):
        return rng.choice(_SMALL_INTS if not kafka_type.startswith("u") else (0, 1, 2))
    if kafka_type == "uint8":
        return rng.choice((0, 1))
    if kafka_type == "float64":
        return 0.0
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "string":
        return rng.choice((FUZZ_TOPIC, "", "x", "fuzz-group"))
    if kafka_type == "bytes":
        return rng.choice((b"", b"\x00\x01", b"fuzz"))
    if kafka_type == "records":
        return _records()
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type == "error_code":
        return messages.ErrorCode.none
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rng.choice((0, 0, 100)))
    if kafka_type == "datetime_i64":
        return None
    raise AssertionError(f"no sample for kafka type {kafka_type}")


def _records() -> bytes:
    return build_batch(
        [NewRecord(key=b"k", value=b"fuzz value"), NewRecord(key=None, value=b"v2")]
    )


def sample_entity(cls: type, rng: random.Random, depth: int = 0) -> Any:
    """A plausible instance of a kio entity: arrays of one or two elements, small numbers, the fuzz
    topic's name in strings, a valid record batch in records fields."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            n = 0 if depth > 3 else rng.choice((1, 1, 2))
            kwargs[f.name] = tuple(
                sample_entity(kind.type_, rng, depth + 1) for _ in range(n)
            )
        elif isinstance(kind, EntityField):
            kwargs[f.name] = sample_entity(kind.type_, rng, depth + 1)
        elif isinstance(kind, PrimitiveTupleField):
            kwargs[f.name] = tuple(
                _sample_primitive(get_schema_field_type(f), rng)
                for _ in range(rng.choice((0, 1, 2)))
            )
        else:
            kwargs[f.name] = _sample_primitive(get_schema_field_type(f), rng)
    return cls(**kwargs)


def produce_request(records: bytes) -> Any:
    from kio.schema.produce.v11 import request as pr

    return pr.ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            pr.TopicProduceData(
                name=FUZZ_TOPIC,
                partition_data=(pr.PartitionProduceData(index=0, records=records),),
            ),
        ),
    )


def template_request(key: int, version: int, rng: random.Random) -> Any:
    """A valid request to mutate: sampled, with the fields that would make it wait or go silent
    pinned (Produce always answers, Fetch does not long-poll)."""
    cls = messages.request_class(key, version)
    try:
        request = sample_entity(cls, rng)
    except Exception:  # noqa: BLE001 - a schema the sampler does not cover: all defaults
        request = messages._zero_entity(cls)
    if key == 0:
        request = messages.replace(request, acks=i16(rng.choice((1, -1))))
    if key == 1:
        request = messages.replace(request, max_wait=datetime.timedelta(0))
    return request


def encode_payload(request: Any, key: int, version: int, correlation_id: int) -> bytes:
    flexible = messages.is_flexible(key, version)
    request = messages.convert(request, messages.request_class(key, version))
    return request_header(
        key, version, correlation_id, "fuzzer", flexible
    ) + messages.encode_bytes(request)


# -- mutations -----------------------------------------------------------------------------------

_EXTREMES = (
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\xff\xff",
    b"\x7f\xff",
    b"\x80\x00",
    b"\xff\xff\xff\xff",
    b"\x7f\xff\xff\xff",
    b"\x80\x00\x00\x00",
    b"\x00\x00\x00\x00",
    b"\xff\xff\xff\xff\xff",
)


def mutate(payload: bytes, rng: random.Random, header_size: int) -> tuple[bytes, str]:
    """Mutate a request payload (header + body). Mostly the body, sometimes the header too."""
    data = bytearray(payload)
    start = header_size if rng.random() < 0.85 and len(data) > header_size else 0
    ops = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        op = rng.choice(
            ("flip", "extreme", "truncate", "insert", "delete", "append", "zero")
        )
        if len(data) <= start:
            op = "append"
        pos = rng.randrange(start, max(start + 1, len(data)))
        if op == "flip":
            data[pos] ^= 1 << rng.randrange(8)
        elif op == "extreme":
            chunk = rng.choice(_EXTREMES)
            data[pos : pos + len(chunk)] = chunk
        elif op == "truncate":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op == "delete":
            del data[pos : pos + rng.randint(1, 8)]
        elif op == "append":
            data += rng.randbytes(rng.randint(1, 16))
        elif op == "zero":
            data[pos : pos + 4] = b"\x00" * len(data[pos : pos + 4])
        ops.append(f"{op}@{pos}")
    return bytes(data), ",".join(ops)


# -- one fuzz case -------------------------------------------------------------------------------


@dataclass
class Case:
    index: int
    kind: str
    data: bytes
    """Everything sent on the connection."""
    half_close: bool
    """Shut the write side after sending (the frame is incomplete: the broker needs the EOF)."""
    may_wait: bool = False
    """A valid request that may legitimately take longer than CASE_TIMEOUT (long poll)."""
    expect_cid: int | None = None
    detail: str = ""
    must_answer: bool = False
    """A well-formed request: it gets a response (an error code), not a closed connection."""


@dataclass
class Outcome:
    case: Case
    result: str  # "answered", "closed", "hung"
    responses: int = 0
    error: str = ""


def _decodes(payload: bytes, key: int, version: int) -> Any | None:
    try:
        header = messages.request_class(key, version)  # noqa: F841 - raises KeyError if unknown
        flexible = messages.is_flexible(key, version)
        from protocol import frames

        h = frames.parse_request_header(
            payload, frames.request_header_version(key, version, flexible)
        )
        request, _ = messages.decode_request(key, version, payload, h.header_size)
        return request
    except Exception:  # noqa: BLE001 - any decoding failure means malformed
        return None


def _may_stay_silent(payload: bytes) -> bool:
    """Whether a (mutated) request may legitimately get no answer within CASE_TIMEOUT: a valid
    acks=0 Produce, a valid Fetch long-polling for longer, a valid JoinGroup/SyncGroup."""
    if len(payload) < 8:
        return False
    key, version = struct.unpack_from(">hh", payload, 0)
    decoded = _decodes(payload, key, version)
    if decoded is None:
        return False
    if key == 0:
        return decoded.acks == 0
    if key == 1:
        return decoded.max_wait.total_seconds() >= 1
    return key in LONG_WAIT_KEYS


def make_case(index: int, advertised: list[tuple[int, int]]) -> Case:
    rng = random.Random(f"{SEED}-{index}")
    cid = 1_000_000 + index
    r = rng.random()
    if r < 0.55:  # a mutated valid request
        key, version = rng.choice(advertised)
        payload = encode_payload(template_request(key, version, rng), key, version, cid)
        header_size = len(
            request_header(
                key, version, cid, "fuzzer", messages.is_flexible(key, version)
            )
        )
        mutated, ops = mutate(payload, rng, header_size)
        may_wait = _may_stay_silent(mutated)
        expect = cid if mutated[4:8] == payload[4:8] and len(mutated) >= 8 else None
        return Case(
            index,
            f"mutated key={key} v{version}",
            frame(mutated),
            False,
            may_wait,
            expect,
            ops,
        )
    if r < 0.62:  # a Produce whose batch is mutated and then given a valid CRC again
        versions = [v for k, v in advertised if k == 0 and v >= 3]
        version = rng.choice(versions)
        batch = bytearray(_records())
        changes: list[str] = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            # anything but baseOffset, which the broker rewrites
            pos = rng.randrange(8, len(batch))
            if CRC_OFFSET <= pos < ATTRIBUTES_OFFSET:
                continue
            chunk = (
                rng.choice(_EXTREMES)
                if rng.random() < 0.5
                else bytes([rng.randrange(256)])
            )
            batch[pos : pos + len(chunk)] = chunk
            changes.append(f"{chunk.hex()}@{pos}")
        struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
        request = produce_request(bytes(batch))
        payload = encode_payload(request, 0, version, cid)
        return Case(
            index,
            f"crc-valid batch v{version}",
            frame(payload),
            False,
            False,
            cid,
            ",".join(changes),
            True,
        )
    if r < 0.65:  # random bytes in a correctly sized frame
        body = rng.randbytes(rng.randint(0, 300))
        return Case(index, "random frame", frame(body), False, detail=body[:8].hex())
    if r < 0.72:  # a raw random stream, no framing at all
        data = rng.randbytes(rng.randint(1, 64))
        return Case(index, "random stream", data, True)
    if r < 0.80:  # truncated: announces more than it sends
        key, version = rng.choice(advertised)
        payload = encode_payload(template_request(key, version, rng), key, version, cid)
        cut = rng.randint(0, len(payload) - 1)
        return Case(
            index,
            f"truncated key={key} v{version}",
            struct.pack(">i", len(payload)) + payload[:cut],
            True,
        )
    if (
        r < 0.86
    ):  # wrong size: shorter than the payload (the rest becomes the next "frame")
        key, version = rng.choice(advertised)
        payload = encode_payload(template_request(key, version, rng), key, version, cid)
        size = rng.randint(0, len(payload) - 1)
        return Case(
            index,
            f"short size key={key} v{version}",
            struct.pack(">i", size) + payload,
            True,
        )
    if r < 0.91:  # negative or oversized size prefix
        size = rng.choice(
            (
                -1,
                -(2**31),
                rng.randint(-(2**31), -1),
                SOCKET_REQUEST_MAX_BYTES + 1,
                2**31 - 1,
            )
        )
        return Case(
            index,
            f"bad size {size}",
            struct.pack(">i", size) + rng.randbytes(16),
            False,
        )
    if r < 0.95:  # unknown key or version
        key = rng.choice((rng.randint(100, 32767), rng.randint(-32768, -1), 3))
        version = rng.randint(-5, 200) if key != 3 else rng.choice((13, 99, -1, 32767))
        payload = request_header(key, version, cid, "fuzzer", False) + rng.randbytes(
            rng.randint(0, 20)
        )
        return Case(index, f"unknown key={key} v{version}", frame(payload), False)
    # bad frame pipelined between good ones: the good one before must be answered
    good = encode_payload(messages.request_class(18, 0)(), 18, 0, cid)
    key, version = rng.choice(advertised)
    payload = encode_payload(template_request(key, version, rng), key, version, cid + 1)
    header_size = len(
        request_header(
            key, version, cid + 1, "fuzzer", messages.is_flexible(key, version)
        )
    )
    bad, ops = mutate(payload, rng, header_size)
    return Case(
        index,
        f"pipelined key={key} v{version}",
        frame(good) + frame(bad) + frame(good),
        True,
        _may_stay_silent(bad),
        cid,
        ops,
    )


def run_case(port: int, case: Case) -> Outcome:
    sock = socket.create_connection(("127.0.0.1", port), timeout=CASE_TIMEOUT)
    responses = 0
    deadline = time.monotonic() + CASE_TIMEOUT
    try:
        try:
            sock.sendall(case.data)
            if case.half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            return Outcome(case, "closed")
        buf = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return Outcome(case, "hung", responses)
            sock.settimeout(left)
            try:
                chunk = sock.recv(1 << 16)
            except TimeoutError:
                return Outcome(case, "hung", responses)
            except ConnectionResetError:
                return Outcome(case, "closed", responses)
            if not chunk:
                return Outcome(case, "closed", responses)
            buf += chunk
            while len(buf) >= 4:
                (size,) = struct.unpack_from(">i", buf, 0)
                if size < 4 or size > 64 << 20:
                    return Outcome(
                        case, "answered", responses, f"bad response frame size {size}"
                    )
                if len(buf) < 4 + size:
                    break
                (cid,) = struct.unpack_from(">i", buf, 4)
                if (
                    responses == 0
                    and case.expect_cid is not None
                    and cid != case.expect_cid
                ):
                    return Outcome(
                        case,
                        "answered",
                        responses,
                        f"correlation id {cid} != {case.expect_cid}",
                    )
                buf = buf[4 + size :]
                responses += 1
            if responses and not case.half_close:
                return Outcome(case, "answered", responses)
    finally:
        sock.close()


# -- the well-behaved client ---------------------------------------------------------------------


@dataclass
class GoodClient:
    bootstrap: str
    acked: list[bytes] = field(default_factory=list)
    consumed: list[bytes] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop_producing: threading.Event = field(default_factory=threading.Event)
    stop_consuming: threading.Event = field(default_factory=threading.Event)

    def produce(self) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            retries=0,
            linger_ms=5,
            request_timeout_ms=15000,
        )
        try:
            i = 0
            while not self.stop_producing.is_set():
                futures = []
                for _ in range(20):
                    value = f"good-{i:08d}".encode()
                    futures.append(
                        (
                            value,
                            producer.send(GOOD_TOPIC, key=str(i).encode(), value=value),
                        )
                    )
                    i += 1
                for value, fut in futures:
                    fut.get(timeout=15)
                    self.acked.append(value)
                time.sleep(0.01)
        except Exception as e:  # noqa: BLE001 - the test fails on any error of the good client
            self.errors.append(f"producer: {e!r}")
        finally:
            producer.close(timeout=10)

    def consume(self) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=200,
        )
        try:
            tp = KafkaTopicPartition(GOOD_TOPIC, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            while not self.stop_consuming.is_set():
                for records in consumer.poll(timeout_ms=200).values():
                    self.consumed.extend(r.value for r in records)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(f"consumer: {e!r}")
        finally:
            consumer.close()


def read_all(bootstrap: str, expected: int, timeout: float = 30.0) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False
    )
    try:
        tp = KafkaTopicPartition(GOOD_TOPIC, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


# -- the test ------------------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SamsaProcess]:
    b = SamsaProcess(
        tmp_path / "data", {"socket.request.max.bytes": str(SOCKET_REQUEST_MAX_BYTES)}
    ).start()
    yield b
    b.close()


def _advertised(port: int) -> list[tuple[int, int]]:
    with RawClient(port) as c:
        resp = c.request(messages.request_class(18, 0)())
        return [
            (int(k.api_key), v)
            for k in resp.api_keys
            for v in range(k.min_version, k.max_version + 1)
        ]


def _create_topics(port: int, topics: list[str]) -> None:
    from kio.schema.metadata.v12 import request as md

    with RawClient(port) as c:
        deadline = time.monotonic() + 10
        while True:
            resp = c.request(
                md.MetadataRequest(
                    topics=tuple(
                        md.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=t)
                        for t in topics
                    ),
                    allow_auto_topic_creation=True,
                    include_topic_authorized_operations=False,
                )
            )
            if all(t.error_code == 0 and t.partitions for t in resp.topics):
                return
            assert time.monotonic() < deadline, resp
            time.sleep(0.05)


def test_fuzz_malformed_frames_while_a_client_works(broker: SamsaProcess) -> None:
    started = time.monotonic()
    advertised = _advertised(broker.port)
    assert len({k for k, _ in advertised}) >= 5
    _create_topics(broker.port, [GOOD_TOPIC, FUZZ_TOPIC])

    good = GoodClient(broker.bootstrap_servers)
    producer = threading.Thread(target=good.produce, name="good-producer")
    consumer = threading.Thread(target=good.consume, name="good-consumer")
    producer.start()
    consumer.start()
    try:
        cases = [make_case(i, advertised) for i in range(FUZZ_CASES)]
        def run(c: Case) -> Outcome:
            return run_case(broker.port, c)
        with ThreadPoolExecutor(WORKERS) as pool:
            outcomes = list(pool.map(run, cases))
    finally:
        good.stop_producing.set()
        producer.join(30)
    fuzz_seconds = time.monotonic() - started

    # every acknowledged record reaches the running consumer, then a fresh one from the start
    deadline = time.monotonic() + 30
    while len(set(good.consumed)) < len(good.acked) and time.monotonic() < deadline:
        time.sleep(0.1)
    good.stop_consuming.set()
    consumer.join(30)

    assert broker.running, f"broker died; log tail:\n{broker.read_log()[-5000:]}"
    assert not producer.is_alive() and not consumer.is_alive()
    assert good.errors == [], good.errors
    assert len(good.acked) >= 100, f"the good producer only got {len(good.acked)} acks"
    assert set(good.acked) <= set(good.consumed), (
        "the running consumer missed acknowledged records"
    )
    readable = read_all(broker.bootstrap_servers, len(good.acked))
    assert readable[: len(good.acked)] == good.acked, (
        "acknowledged records are not all readable, in order"
    )

    hung = [o for o in outcomes if o.result == "hung" and not o.case.may_wait]
    assert not hung, "connections neither answered nor closed:\n" + "\n".join(
        f"case {o.case.index} {o.case.kind} {o.case.detail} responses={o.responses} data={o.case.data[:64].hex()}"
        for o in hung[:20]
    )
    unanswered = [o for o in outcomes if o.case.must_answer and o.result != "answered"]
    assert not unanswered, "well-formed requests not answered:\n" + "\n".join(
        f"case {o.case.index} {o.case.kind} {o.case.detail}: {o.result}"
        for o in unanswered[:20]
    )
    bad_answers = [o for o in outcomes if o.error]
    assert not bad_answers, "\n".join(
        f"case {o.case.index} {o.case.kind}: {o.error}" for o in bad_answers[:20]
    )
    pipelined = [o for o in outcomes if o.case.kind.startswith("pipelined")]
    assert all(o.responses >= 1 for o in pipelined), (
        "a good request before a bad one went unanswered"
    )

    log = broker.read_log()
    assert "Traceback" not in log, (
        "the broker logged a traceback for bad input:\n" + _first_traceback(log)
    )
    closed = sum(o.result == "closed" for o in outcomes)
    answered = sum(o.result == "answered" for o in outcomes)
    assert closed > FUZZ_CASES // 4 and answered > FUZZ_CASES // 20, (closed, answered)
    assert log.count("connection closed reason=") >= closed // 2
    assert fuzz_seconds < 120, f"fuzzing took {fuzz_seconds:.0f}s"
    print(
        f"fuzz seed={SEED} cases={FUZZ_CASES} closed={closed} answered={answered} "
        f"acked={len(good.acked)} seconds={fuzz_seconds:.1f}"
    )


def _first_traceback(log: str) -> str:
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("Traceback"):
            return "\n".join(lines[max(0, i - 2) : i + 40])
    return ""
