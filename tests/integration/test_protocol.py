# Over 700 lines: one raw-bytes test per wire behaviour clients depend on, next to the frame helpers they share.
"""The wire protocol as the broker speaks it, checked byte by byte with a raw socket client.

What clients break on (docs/clients.md): the
ApiVersions header, the KIP-511 fallback, advertising only what is implemented, the whole batch on a
fetch inside it, an empty partition's high watermark, offsetsForTimes without a match, fetch
sessions, long polls woken by appends. And the bad-input rules of issue 2: every malformed request
gets its Kafka error code, or that one connection is closed with a log line while the others keep
being served.
"""

from __future__ import annotations

import datetime
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kio.schema.api_versions.v0.request import (
    ApiVersionsRequest as ApiVersionsRequestV0,
)
from kio.schema.api_versions.v3.request import (
    ApiVersionsRequest as ApiVersionsRequestV3,
)
from kio.schema.api_versions.v4.request import (
    ApiVersionsRequest as ApiVersionsRequestV4,
)
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.list_offsets.v7 import request as lo_req
from kio.schema.metadata.v12 import request as md_req
from kio.schema.produce.v9 import request as produce_req
from kio.static.primitive import i8, i16, i32, i64

from broker.handlers import registry
from broker.testing import SamsaProcess
from protocol import messages
from protocol.records import (
    CURRENT_MAGIC,
    BatchHeader,
    NewRecord,
    build_batch,
    iter_batch_headers,
)
from tests.support.raw_client import RawClient, frame, request_header

# Kafka error codes (the numbers are the contract; kio's enum names are checked against them once)
NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_RECORD = 87
UNKNOWN_TOPIC_ID = 100
OMITTED = -2147483648  # authorized operations not asked for

SOCKET_REQUEST_MAX_BYTES = 262_144
MESSAGE_MAX_BYTES = 65_536


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaProcess]:
    b = SamsaProcess(
        tmp_path_factory.mktemp("protocol") / "data",
        {
            "socket.request.max.bytes": str(SOCKET_REQUEST_MAX_BYTES),
            "message.max.bytes": str(MESSAGE_MAX_BYTES),
            "num.partitions": "1",
        },
    ).start()
    yield b
    b.close()


@pytest.fixture
def client(broker: SamsaProcess) -> Iterator[RawClient]:
    with RawClient(broker.port) as c:
        yield c


# -- helpers -----------------------------------------------------------------------------------


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def metadata(c: RawClient, topics: list[str] | None, auto_create: bool = True) -> Any:
    return c.request(
        md_req.MetadataRequest(
            topics=None
            if topics is None
            else tuple(
                md_req.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=t)
                for t in topics
            ),
            allow_auto_topic_creation=auto_create,
            include_topic_authorized_operations=False,
        )
    )


def create_topic(c: RawClient, topic: str) -> None:
    """Auto-create through Metadata (the broker under test has auto creation on)."""
    deadline = time.monotonic() + 10
    while True:
        (t,) = metadata(c, [topic]).topics
        if (
            t.error_code == NONE
            and t.partitions
            and all(p.leader_id >= 0 for p in t.partitions)
        ):
            return
        assert time.monotonic() < deadline, f"topic {topic} not created: {t}"
        time.sleep(0.05)


def produce_request(
    topic: str, records: bytes | None, partition: int = 0, acks: int = 1
) -> produce_req.ProduceRequest:
    return produce_req.ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            produce_req.TopicProduceData(
                name=topic,
                partition_data=(
                    produce_req.PartitionProduceData(
                        index=i32(partition), records=records
                    ),
                ),
            ),
        ),
    )


def produce(c: RawClient, topic: str, records: bytes | None, partition: int = 0) -> Any:
    resp = c.request(produce_request(topic, records, partition))
    ((t,),) = [resp.responses]
    (p,) = t.partition_responses
    return p


def batch(values: list[bytes], timestamps: list[int] | None = None) -> bytes:
    now = int(time.time() * 1000)
    ts = timestamps or [now] * len(values)
    return build_batch(
        [
            NewRecord(key=f"k{i}".encode(), value=v, timestamp=t)
            for i, (v, t) in enumerate(zip(values, ts))
        ]
    )


def fetch_request(
    parts: list[tuple[str, int, int]],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    session_id: int = 0,
    session_epoch: int = -1,
    partition_max_bytes: int = 1 << 20,
) -> fetch_req.FetchRequest:
    topics: dict[str, list[fetch_req.FetchPartition]] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append(
            fetch_req.FetchPartition(
                partition=i32(partition),
                fetch_offset=i64(offset),
                partition_max_bytes=i32(partition_max_bytes),
            )
        )
    return fetch_req.FetchRequest(
        replica_id=i32(-1),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=i32(min_bytes),
        max_bytes=i32(1 << 24),
        isolation_level=i8(0),
        session_id=i32(session_id),
        session_epoch=i32(session_epoch),
        topics=tuple(
            fetch_req.FetchTopic(topic=t, partitions=tuple(ps))
            for t, ps in topics.items()
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def fetch_one(c: RawClient, topic: str, offset: int, partition: int = 0) -> Any:
    resp = c.request(fetch_request([(topic, partition, offset)]))
    assert resp.error_code == NONE
    ((t,),) = [resp.responses]
    (p,) = t.partitions
    return p


def list_offset(c: RawClient, topic: str, timestamp: int, partition: int = 0) -> Any:
    resp = c.request(
        lo_req.ListOffsetsRequest(
            replica_id=i32(-1),
            isolation_level=i8(0),
            topics=(
                lo_req.ListOffsetsTopic(
                    name=topic,
                    partitions=(
                        lo_req.ListOffsetsPartition(
                            partition_index=i32(partition), timestamp=i64(timestamp)
                        ),
                    ),
                ),
            ),
        )
    )
    ((t,),) = [resp.topics]
    (p,) = t.partitions
    return p


def api_versions_raw(
    c: RawClient, version: int, name: str = "samsa-tests", sw_version: str = "1.0"
) -> bytes:
    if version >= 3:
        body = messages.encode_bytes(
            ApiVersionsRequestV3(
                client_software_name=name, client_software_version=sw_version
            )
        )
    else:
        body = b""
    return c.request_raw(18, version, body)


def advertised(c: RawClient) -> dict[int, tuple[int, int]]:
    resp = c.request(ApiVersionsRequestV0())
    assert resp.error_code == NONE
    return {
        int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
    }


def api_versions_range() -> tuple[int, int]:
    handler = registry.load_handlers()[18]
    assert handler.min_version == 0 and handler.max_version >= 3
    return handler.min_version, handler.max_version


def wait_for_log(broker: SamsaProcess, needle: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = broker.read_log()
        if needle in text:
            return next(line for line in text.splitlines() if needle in line)
        assert time.monotonic() < deadline, (
            f"no log line containing {needle!r}; log tail:\n{text[-3000:]}"
        )
        time.sleep(0.05)


def assert_serving(port: int) -> None:
    with RawClient(port) as c:
        assert 18 in advertised(c)


def test_error_code_numbers_match_kio() -> None:
    from protocol.errors import ErrorCode

    assert ErrorCode.corrupt_message.value == CORRUPT_MESSAGE
    assert ErrorCode.message_too_large.value == MESSAGE_TOO_LARGE
    assert ErrorCode.invalid_topic_exception.value == INVALID_TOPIC_EXCEPTION
    assert ErrorCode.unsupported_version.value == UNSUPPORTED_VERSION
    assert ErrorCode.invalid_request.value == INVALID_REQUEST
    assert ErrorCode.fetch_session_id_not_found.value == FETCH_SESSION_ID_NOT_FOUND
    assert ErrorCode.invalid_record.value == INVALID_RECORD


# -- ApiVersions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_answers_every_version_with_header_v0(
    client: RawClient, version: int
) -> None:
    body = api_versions_raw(client, version)
    # header v0: the body starts right after the correlation id, with error_code NONE
    assert body[:2] == b"\x00\x00"
    cls = messages.response_class(18, version)
    resp, end = messages._reader(cls)(body, 0)
    assert end == len(body), "bytes left over: the response header carried extra bytes"
    assert resp.error_code == NONE
    keys = {
        int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
    }
    assert keys[18] == api_versions_range()
    if version >= 3:
        # compact array length (N+1) directly after the error code: not a tagged-field byte
        assert body[2] == len(keys) + 1
    else:
        assert struct.unpack_from(">i", body, 2)[0] == len(keys)


def test_api_versions_features(client: RawClient) -> None:
    """The feature levels a single-version cluster finalizes (KIP-584): transactions v2 (KIP-890),
    the consumer group protocol (KIP-848) and share groups (KIP-932) at level 1, not KIP-1191's 2."""
    # v4: v0-3 leave out the features whose lowest supported level is 0, as Kafka does
    resp = client.request(ApiVersionsRequestV4(client_software_name="samsa-tests", client_software_version="1.0"))
    supported = {str(f.name): (int(f.min_version), int(f.max_version)) for f in resp.supported_features}
    finalized = {str(f.name): (int(f.min_version_level), int(f.max_version_level)) for f in resp.finalized_features}
    assert supported == {"transaction.version": (0, 2), "group.version": (0, 1), "share.version": (0, 1)}
    assert finalized == {"transaction.version": (2, 2), "group.version": (1, 1), "share.version": (1, 1)}


def test_api_versions_unknown_version_gets_kip511_answer(client: RawClient) -> None:
    cid = 4242
    # a future client sends its newest ApiVersions with a flexible (v2) header and a body we cannot know
    client.send_bytes(
        frame(
            request_header(18, 127, cid, "future-client", True)
            + b"\x0cfuture\x041.0\x00"
        )
    )
    payload = client.recv_frame()
    assert struct.unpack_from(">i", payload, 0)[0] == cid
    # v0 body: error_code, [api_key, min, max] with only ApiVersions' own entry, nothing else
    assert payload[4:] == struct.pack(">hihhh", UNSUPPORTED_VERSION, 1, 18, *api_versions_range())
    # and the connection keeps working: the client retries with v4
    assert api_versions_raw(client, 4)[:2] == b"\x00\x00"


@pytest.mark.parametrize("version", [3, 4])
@pytest.mark.parametrize(
    ("name", "sw_version"),
    [("bad name!", "1.0"), ("", "1.0"), ("-leading-dash", "1.0"), ("ok", "1.0 beta")],
)
def test_api_versions_invalid_software_name_is_invalid_request(
    client: RawClient, version: int, name: str, sw_version: str
) -> None:
    body = api_versions_raw(client, version, name, sw_version)
    assert body[:2] == struct.pack(">h", INVALID_REQUEST)  # header v0: error code first
    resp, end = messages._reader(messages.response_class(18, version))(body, 0)
    assert end == len(body)
    assert resp.error_code == INVALID_REQUEST
    # and a valid name (the Java client's) is accepted on the same connection
    good = api_versions_raw(client, version, "apache-kafka-java", "3.9.0")
    assert good[:2] == b"\x00\x00"


def test_advertised_versions_are_exactly_the_registered_handlers(
    client: RawClient,
) -> None:
    handlers = registry.load_handlers()
    expected = {key: (h.min_version, h.max_version) for key, h in handlers.items()}
    assert advertised(client) == expected
    for key, (lo, hi) in expected.items():
        for version in range(lo, hi + 1):
            messages.request_class(key, version)
            messages.response_class(key, version)


def test_every_advertised_version_is_answered(client: RawClient) -> None:
    """A default-valued request for every advertised key and version gets a response (an error
    is fine) with the right correlation id: nothing is advertised that the broker cannot serve."""
    for key, (lo, hi) in advertised(client).items():
        for version in range(lo, hi + 1):
            request = messages._zero_entity(messages.request_class(key, version))
            if key == 0:  # acks=0 has no response by design
                request = messages.replace(request, acks=i16(1))
            if key == 1:
                request = messages.replace(request, max_wait=datetime.timedelta(0))
            if key == 29:  # a filter of UNKNOWN (0) types closes the connection, as in Kafka: ANY (1)
                request = messages.replace(request, resource_type_filter=i8(1), pattern_type_filter=i8(1),
                                           operation=i8(1), permission_type=i8(1))
            cid = client.send_request(request, api_version=version)
            payload = client.recv_frame()
            assert struct.unpack_from(">i", payload, 0)[0] == cid, (key, version)
            pos = 4
            if messages.is_flexible(key, version) and key != 18:
                assert payload[4] == 0, (key, version)  # empty header tagged fields
                pos = 5
            _resp, used = messages._reader(messages.response_class(key, version))(
                payload, pos
            )
            assert pos + used == len(payload), (key, version)


# -- connections closed on bad frames ------------------------------------------------------------


def test_unknown_api_key_closes_only_that_connection(
    broker: SamsaProcess, client: RawClient
) -> None:
    with RawClient(broker.port) as bad:
        bad.send_bytes(frame(request_header(32000, 0, 77, "bad", False)))
        assert bad.closed_by_peer(5)
    line = wait_for_log(broker, "reason=unknown_api_key")
    assert "api_key=32000" in line
    assert 18 in advertised(client)  # the other connection, opened before, still works


def test_unknown_version_of_known_key_closes_connection(
    broker: SamsaProcess, client: RawClient
) -> None:
    with RawClient(broker.port) as bad:
        bad.send_bytes(frame(request_header(3, 99, 78, "bad", True) + b"\x00"))
        assert bad.closed_by_peer(5)
    line = wait_for_log(broker, "reason=unsupported_version")
    assert "api_key=3" in line and "api_version=99" in line
    assert 18 in advertised(client)


def test_truncated_frame_closes_connection(
    broker: SamsaProcess, client: RawClient
) -> None:
    with RawClient(broker.port) as bad:
        full = frame(request_header(18, 0, 5, "trunc", False))
        bad.send_bytes(
            struct.pack(">i", 100) + full[4:]
        )  # announces 100 bytes, sends fewer
        bad.sock.shutdown(socket.SHUT_WR)
        assert bad.closed_by_peer(5)
    wait_for_log(broker, "reason=truncated_frame")
    assert 18 in advertised(client)


def test_frame_too_short_for_a_header_closes_connection(
    broker: SamsaProcess, client: RawClient
) -> None:
    with RawClient(broker.port) as bad:
        bad.send_bytes(frame(b"\x00\x12\x00"))
        assert bad.closed_by_peer(5)
    wait_for_log(broker, "reason=malformed_header")
    assert 18 in advertised(client)


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (0, 3, b"\xff\xff"),  # Produce: null transactional id, then nothing
        (3, 12, b"\xff\xff\xff\xff\xff\xff"),  # Metadata: a varint that never ends
        (1, 12, b"\x00" * 7),  # Fetch: truncated in the middle of its fields
        (18, 3, b"\x7f"),  # ApiVersions: a compact string longer than the frame
        # array counts that kio would reserve memory for before reading (an abort of the broker)
        (3, 9, b"\xff\xff\xff\xff\x0f\x00"),  # Metadata v9: 2^32-2 topics
        (3, 4, b"\x7f\xff\xff\xff\x00"),  # Metadata v4: 2^31-1 topics
        (
            0,
            9,
            b"\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff\x0f",
        ),  # Produce v9: 2^32-2 topics
        (1, 12, b"\x00" * 21 + b"\xff\xff\xff\xff\x0f"),  # Fetch v12: 2^32-2 topics
    ],
)
def test_garbage_body_closes_connection(
    broker: SamsaProcess, client: RawClient, api_key: int, version: int, body: bytes
) -> None:
    before = broker.read_log().count("reason=malformed_request")
    with RawClient(broker.port) as bad:
        bad.send_bytes(
            frame(
                request_header(
                    api_key,
                    version,
                    9,
                    "garbage",
                    version >= {0: 9, 1: 12, 3: 9, 18: 3}[api_key],
                )
                + body
            )
        )
        assert bad.closed_by_peer(5)
    deadline = time.monotonic() + 5
    while broker.read_log().count("reason=malformed_request") <= before:
        assert time.monotonic() < deadline, broker.read_log()[-3000:]
        time.sleep(0.05)
    assert "Traceback" not in broker.read_log()
    assert broker.running
    assert 18 in advertised(client)


@pytest.mark.parametrize("size", [-1, -16, -(2**31)])
def test_negative_frame_size_closes_connection(
    broker: SamsaProcess, client: RawClient, size: int
) -> None:
    with RawClient(broker.port) as bad:
        local_port = bad.sock.getsockname()[1]
        bad.send_bytes(struct.pack(">i", size) + b"\x00" * 16)
        assert bad.closed_by_peer(5)
    wait_for_log(broker, f"reason=frame_size client=127.0.0.1:{local_port} size={size}")
    assert 18 in advertised(client)


def test_frame_over_socket_request_max_bytes_closes_connection(
    broker: SamsaProcess, client: RawClient
) -> None:
    size = SOCKET_REQUEST_MAX_BYTES + 1
    with RawClient(broker.port) as bad:
        bad.send_bytes(struct.pack(">i", size))  # the broker must not wait for the body
        assert bad.closed_by_peer(5)
    line = wait_for_log(broker, f"size={size}")
    assert "reason=frame_size" in line and f"max={SOCKET_REQUEST_MAX_BYTES}" in line
    # a frame of exactly the maximum is read (and, being garbage, closed as malformed, not as too big)
    with RawClient(broker.port) as edge:
        payload = request_header(3, 12, 1, "edge", True)
        edge.send_bytes(
            frame(payload + b"\xff" * (SOCKET_REQUEST_MAX_BYTES - len(payload)))
        )
        assert edge.closed_by_peer(5)
    assert f"size={SOCKET_REQUEST_MAX_BYTES} " not in broker.read_log()
    assert 18 in advertised(client)


# -- produce errors ------------------------------------------------------------------------------


def test_corrupt_crc_is_corrupt_message(client: RawClient) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    good = bytearray(batch([b"a", b"b"]))
    good[-1] ^= 0xFF  # a record byte: covered by the CRC
    p = produce(client, topic, bytes(good))
    assert p.error_code == CORRUPT_MESSAGE
    # nothing was appended, and the partition still takes good data at offset 0
    assert fetch_one(client, topic, 0).high_watermark == 0
    assert produce(client, topic, batch([b"ok"])).base_offset == 0


def test_batch_over_max_message_bytes_is_message_too_large(client: RawClient) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    big = batch([b"x" * (MESSAGE_MAX_BYTES + 1000)])
    assert len(big) < SOCKET_REQUEST_MAX_BYTES
    p = produce(client, topic, big)
    assert p.error_code == MESSAGE_TOO_LARGE
    assert fetch_one(client, topic, 0).high_watermark == 0
    assert produce(client, topic, batch([b"x" * 1000])).error_code == NONE


INVALID_NAMES = ["bad topic!", "x" * 250, "..", ".", "tab\tname", "ünïcode"]


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_invalid_topic_name_in_metadata(client: RawClient, name: str) -> None:
    (t,) = metadata(client, [name]).topics
    assert t.error_code == INVALID_TOPIC_EXCEPTION
    assert t.partitions == ()


def test_metadata_topic_authorized_operations(client: RawClient) -> None:
    """As Kafka (found by the franz-go version sweep): with no authorizer every topic operation is
    reported for each topic named in the request, existing or not and even with an invalid name;
    a topic id that names nothing gets none; and nothing unless asked."""
    existing, missing = unique_topic("ops"), unique_topic("ops-missing")
    create_topic(client, existing)
    unknown_id = uuid.uuid4()
    asked = client.request(
        md_req.MetadataRequest(
            topics=tuple(md_req.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=t) for t in (existing, missing, "bad topic!"))
            + (md_req.MetadataRequestTopic(topic_id=unknown_id, name=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=True,
        )
    )
    # READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
    every = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    by_name = {(t.name, t.error_code): int(t.topic_authorized_operations) for t in asked.topics}
    assert by_name == {
        (existing, NONE): every,
        (missing, UNKNOWN_TOPIC_OR_PARTITION): every,
        ("bad topic!", INVALID_TOPIC_EXCEPTION): every,
        (None, UNKNOWN_TOPIC_ID): OMITTED,
    }
    assert {int(t.topic_authorized_operations) for t in metadata(client, [existing, missing], auto_create=False).topics} == {OMITTED}


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_invalid_topic_name_in_produce(client: RawClient, name: str) -> None:
    assert produce(client, name, batch([b"v"])).error_code == INVALID_TOPIC_EXCEPTION


def test_max_length_topic_name_is_valid(client: RawClient) -> None:
    name = "y" * 249
    create_topic(client, name)
    assert produce(client, name, batch([b"v"])).error_code == NONE


def test_unknown_topic_without_auto_creation(tmp_path: Path) -> None:
    with (
        SamsaProcess(tmp_path / "noauto", {"auto.create.topics.enable": "false"}) as b,
        RawClient(b.port) as c,
    ):
        (t,) = metadata(c, ["nothing-here"], auto_create=True).topics
        assert t.error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert (
            produce(c, "nothing-here", batch([b"v"])).error_code
            == UNKNOWN_TOPIC_OR_PARTITION
        )
        assert metadata(c, None).topics == (), (
            "a topic was created although auto.create.topics.enable=false"
        )


def test_unknown_partition_of_existing_topic(client: RawClient) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    assert (
        produce(client, topic, batch([b"v"]), partition=7).error_code
        == UNKNOWN_TOPIC_OR_PARTITION
    )


def test_produce_v3_two_batches_in_one_partition_is_invalid_record(
    broker: SamsaProcess, client: RawClient
) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    p = produce(client, topic, batch([b"a"]) + batch([b"b"]))
    assert p.error_code == INVALID_RECORD
    assert fetch_one(client, topic, 0).high_watermark == 0
    # the rejection is logged with who sent it, since the client only gets a code
    lines = [line for line in broker.read_log().splitlines() if f"topic={topic} " in line and "produce rejected" in line]
    assert len(lines) == 1, lines
    assert "error=invalid_record" in lines[0] and "client_id=" in lines[0] and "correlation_id=" in lines[0]


def test_produce_v9_legacy_magic_is_invalid_record(client: RawClient) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    b.append(0, timestamp=1000, key=b"k", value=b"v")
    assert produce(client, topic, bytes(b.build())).error_code == INVALID_RECORD


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (1, 1), (2, 1), (2, 0)])
def test_produce_v0_2_legacy_message_set_stored_as_v2(
    broker: SamsaProcess, client: RawClient, version: int, magic: int
) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    builder = LegacyRecordBatchBuilder(
        magic=magic, compression_type=0, batch_size=1 << 20
    )
    ts = 1_700_000_000_000
    for i in range(3):
        builder.append(
            i,
            timestamp=ts + i if magic else None,
            key=f"key{i}".encode(),
            value=f"value{i}".encode(),
        )
    req_cls = messages.request_class(0, version)
    request = messages.convert(produce_request(topic, bytes(builder.build())), req_cls)
    resp = client.request(request, api_version=version)
    (p,) = resp.responses[0].partition_responses
    assert p.error_code == NONE and p.base_offset == 0

    fetched = fetch_one(client, topic, 0)
    assert fetched.high_watermark == 3
    headers = [h for _, h in iter_batch_headers(fetched.records)]
    assert headers and all(h.magic == CURRENT_MAGIC for h in headers)

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap_servers,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        enable_auto_commit=False,
    )
    try:
        got = []
        for msg in consumer:
            got.append(msg)
            if len(got) == 3:
                break
    finally:
        consumer.close()
    assert [(m.offset, m.key, m.value) for m in got] == [
        (i, f"key{i}".encode(), f"value{i}".encode()) for i in range(3)
    ]
    if magic == 1:
        assert [m.timestamp for m in got] == [ts, ts + 1, ts + 2]


def test_acks_0_error_closes_connection(
    broker: SamsaProcess, client: RawClient
) -> None:
    with RawClient(broker.port) as c:
        c.send_request(produce_request("bad topic!", batch([b"v"]), acks=0))
        assert c.closed_by_peer(5)
    wait_for_log(broker, "reason=handler_closed")
    # a good acks=0 produce keeps the connection open and lands in the log
    topic = unique_topic()
    create_topic(client, topic)
    with RawClient(broker.port) as c:
        c.send_request(produce_request(topic, batch([b"fire", b"forget"]), acks=0))
        assert not c.closed_by_peer(0.5)
    deadline = time.monotonic() + 5
    while fetch_one(client, topic, 0).high_watermark != 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)


# -- fetch and list offsets ----------------------------------------------------------------------


def test_fetch_inside_a_batch_returns_the_whole_batch(client: RawClient) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    assert produce(client, topic, batch([b"0", b"1"])).base_offset == 0
    assert (
        produce(client, topic, batch([f"v{i}".encode() for i in range(5)])).base_offset
        == 2
    )
    for offset in (2, 3, 6):
        p = fetch_one(client, topic, offset)
        assert p.error_code == NONE and p.high_watermark == 7
        first = BatchHeader.parse(p.records, 0)
        assert first.base_offset == 2 and first.last_offset == 6, offset


def test_empty_partition_high_watermark_is_zero(client: RawClient) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    p = fetch_one(client, topic, 0)
    assert p.error_code == NONE
    assert (
        p.high_watermark == 0 and p.log_start_offset == 0 and p.last_stable_offset == 0
    )
    assert not p.records
    for ts in (-1, -2):
        lo = list_offset(client, topic, ts)
        assert lo.error_code == NONE and lo.offset == 0
    lo = list_offset(
        client, topic, -3
    )  # MAX_TIMESTAMP of an empty partition: no record
    assert lo.error_code == NONE and lo.offset == -1 and lo.timestamp == -1


def test_list_offsets_by_timestamp(client: RawClient) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    base = 1_700_000_000_000
    produce(client, topic, batch([b"a", b"b"], [base, base + 10]))  # offsets 0-1
    produce(
        client, topic, batch([b"c"], [base + 50])
    )  # offset 2, the largest timestamp
    produce(client, topic, batch([b"d", b"e"], [base + 20, base + 30]))  # offsets 3-4

    def at(ts: int) -> tuple[int, int]:
        lo = list_offset(client, topic, ts)
        assert lo.error_code == NONE
        return int(lo.offset), int(lo.timestamp)

    assert at(base) == (0, base)
    assert at(base + 5) == (1, base + 10)
    assert at(base + 40) == (2, base + 50)
    assert at(base + 51) == (-1, -1)  # beyond the last record: no match (KIP-79)
    assert at(base + 10_000_000) == (-1, -1)
    assert at(-3) == (2, base + 50)  # MAX_TIMESTAMP (KIP-734)
    assert at(-2)[0] == 0
    assert at(-1)[0] == 5


def test_fetch_with_session_id_is_session_not_found(client: RawClient) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    resp = client.request(
        fetch_request([(topic, 0, 0)], session_id=12345, session_epoch=1)
    )
    assert resp.error_code == FETCH_SESSION_ID_NOT_FOUND
    assert resp.responses == ()
    # a full fetch asking for a session gets session id 0: "no session", still a valid answer
    resp = client.request(fetch_request([(topic, 0, 0)], session_epoch=0))
    assert resp.error_code == NONE and resp.session_id == 0


def test_full_fetch_response_has_exactly_the_requested_partitions(
    client: RawClient,
) -> None:
    t1, t2 = unique_topic("a"), unique_topic("b")
    create_topic(client, t1)
    create_topic(client, t2)
    produce(client, t1, batch([b"x"]))
    asked = [
        (t2, 0, 0),
        (t1, 0, 0),
        ("no-such-topic-xyz", 0, 0),
        (t1, 5, 0),
        (t2, 0, 1),
    ]
    # auto-creation must not happen through Fetch
    resp = client.request(fetch_request([p for p in asked if p != (t2, 0, 1)]))
    assert resp.error_code == NONE
    got = [(t.topic, p.partition_index) for t in resp.responses for p in t.partitions]
    assert sorted(got) == sorted([(t2, 0), (t1, 0), ("no-such-topic-xyz", 0), (t1, 5)])
    errors = {
        (t.topic, p.partition_index): p.error_code
        for t in resp.responses
        for p in t.partitions
    }
    assert errors[(t1, 0)] == NONE and errors[(t2, 0)] == NONE
    assert errors[("no-such-topic-xyz", 0)] == UNKNOWN_TOPIC_OR_PARTITION
    assert errors[(t1, 5)] == UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_long_poll_is_woken_by_append(
    broker: SamsaProcess, client: RawClient
) -> None:
    topic = unique_topic()
    create_topic(client, topic)
    produce(client, topic, batch([b"before"]))

    # nothing arrives: the fetch waits for (about) max_wait
    started = time.monotonic()
    resp = client.request(fetch_request([(topic, 0, 1)], max_wait_ms=1000))
    waited = time.monotonic() - started
    assert 0.9 <= waited < 4, waited
    assert not resp.responses[0].partitions[0].records

    result: dict[str, Any] = {}

    def long_poll() -> None:
        with RawClient(broker.port) as c:
            result["response"] = c.request(
                fetch_request([(topic, 0, 1)], max_wait_ms=5000, min_bytes=1)
            )
            result["returned"] = time.monotonic()

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(0.5)  # the fetch is parked in the purgatory
    assert poller.is_alive()
    produced_at = time.monotonic()
    assert produce(client, topic, batch([b"wake up"])).base_offset == 1
    poller.join(10)
    assert not poller.is_alive()
    latency = result["returned"] - produced_at
    assert latency < 1.0, (
        f"fetch returned {latency:.2f}s after the produce (max_wait 5s)"
    )
    (p,) = result["response"].responses[0].partitions
    assert p.high_watermark == 2
    assert BatchHeader.parse(p.records, 0).base_offset == 1
