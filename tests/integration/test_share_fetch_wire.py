"""ShareFetch (78) and ShareAcknowledge (79) over the wire, against a broker whose share-group
state is initialized in-process (no ShareGroupHeartbeat): Kafka 4.3.1's whole-request errors,
records produced by a real client acquired by one member's share session and not another's,
acknowledgements in a ShareFetch and in a ShareAcknowledge with their per-partition errors, the
records of a member whose connection closes released and delivered again with the delivery count
raised, an incremental fetch answering only partitions with something to say, and the final
fetch closing the session."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kio.schema.read_share_group_state.v0 import request as read_v0
from kio.schema.share_acknowledge.v1 import request as ack_v1
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_fetch.v2 import request as fetch_v2
from kio.schema.write_share_group_state.v1 import request as write_v1
from kio.static.primitive import i8, i16, i32, i64

from broker.handlers import registry
from broker.share.share_state import SharePartitionKey
from broker.testing.inprocess import SamsaInProcess
from protocol.errors import ErrorCode
from protocol.records import decode_records, iter_batch_headers
from tests.support.raw_client import RawClient

GROUP = "queue"
ACCEPT, RELEASE = 1, 2


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[SamsaInProcess, uuid.UUID]]:
    samsa = SamsaInProcess(tmp_path / "data", {"share.coordinator.state.topic.num.partitions": "1"}).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap_servers)
        admin.create_topics([NewTopic("jobs", 1, 1)])
        admin.close()
        topic_id: uuid.UUID = samsa.broker.controller.image.topics["jobs"].topic_id
        persister = samsa.broker.share_persister
        assert persister is not None
        assert samsa.run(persister.initialize_partitions(GROUP, 1, {topic_id: frozenset({0})})) == {
            topic_id: frozenset({0})}  # fmt: skip
        yield samsa, topic_id
    finally:
        samsa.close()


def _fetch(
    topic_id: uuid.UUID | None, epoch: int, *, member: str | None = "member-a", group: str | None = GROUP,
    acks: Sequence[tuple[int, int, int]] = (), max_wait_ms: int = 50, partitions: Sequence[int] = (0,),
) -> Any:  # fmt: skip
    return fetch_v1.ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=i32(epoch),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=i32(1), max_bytes=i32(1 << 20),
        max_records=i32(500), batch_size=i32(500),
        topics=() if topic_id is None else (fetch_v1.FetchTopic(topic_id=topic_id, partitions=tuple(
            fetch_v1.FetchPartition(partition_index=i32(p), acknowledgement_batches=tuple(
                fetch_v1.AcknowledgementBatch(first_offset=i64(f), last_offset=i64(last), acknowledge_types=(i8(t),))
                for f, last, t in acks)) for p in partitions)),),
        forgotten_topics_data=(),
    )  # fmt: skip


def _acknowledge(
    topic_id: uuid.UUID, epoch: int, batches: Sequence[tuple[int, int, int]], member: str = "member-a"
) -> Any:
    return ack_v1.ShareAcknowledgeRequest(
        group_id=GROUP, member_id=member, share_session_epoch=i32(epoch),
        topics=(ack_v1.AcknowledgeTopic(topic_id=topic_id, partitions=(ack_v1.AcknowledgePartition(
            partition_index=i32(0), acknowledgement_batches=tuple(
                ack_v1.AcknowledgementBatch(first_offset=i64(f), last_offset=i64(last), acknowledge_types=(i8(t),))
                for f, last, t in batches)),)),),
    )  # fmt: skip


def _partitions(response: Any) -> dict[tuple[uuid.UUID, int], Any]:
    assert response.error_code == ErrorCode.none, response
    return {(t.topic_id, int(p.partition_index)): p for t in response.responses for p in t.partitions}


def _acquired(part: Any) -> list[tuple[int, int, int]]:
    return [(int(a.first_offset), int(a.last_offset), int(a.delivery_count)) for a in part.acquired_records]


def _values(part: Any) -> list[bytes | None]:
    data = bytes(part.records)
    return [r.value for pos, header in iter_batch_headers(data) for r in decode_records(data, pos, header)]


def test_share_group_apis_and_the_state_rpcs_are_advertised() -> None:
    declared = registry.declared()
    assert {76, 77, 78, 79, 90, 91, 92} <= set(declared)
    assert {k: (declared[k].min_version, declared[k].max_version) for k in (83, 84, 85, 86, 87)} == {
        83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1)}  # Kafka 4.3.1's
    assert not set(registry.unadvertised())


def test_whole_request_errors(broker: tuple[SamsaInProcess, uuid.UUID]) -> None:
    samsa, topic_id = broker
    with RawClient(samsa.port) as client:
        null_group = client.request(_fetch(topic_id, 0, group=None))
        assert (null_group.error_code, null_group.error_message) == (ErrorCode.invalid_request, None)  # as Kafka
        for member in ("", "m" * 37):
            bad = client.request(_fetch(topic_id, 0, member=member))
            assert bad.error_code == ErrorCode.invalid_request
        assert client.request(_fetch(topic_id, 3)).error_code == ErrorCode.share_session_not_found
        with_acks = client.request(_fetch(topic_id, 0, acks=[(0, 0, ACCEPT)]))
        assert with_acks.error_code == ErrorCode.invalid_request
        renew = fetch_v2.ShareFetchRequest(
            group_id=GROUP, member_id="member-a", share_session_epoch=i32(0),
            max_wait=datetime.timedelta(milliseconds=10), min_bytes=i32(1), max_bytes=i32(0), max_records=i32(5),
            batch_size=i32(5), is_renew_ack=True, topics=(), forgotten_topics_data=(),
        )  # fmt: skip
        assert client.request(renew).error_code == ErrorCode.invalid_request
        ack = client.request(_acknowledge(topic_id, 0, [(0, 0, ACCEPT)]))
        assert ack.error_code == ErrorCode.invalid_share_session_epoch


def test_share_fetch_acquire_acknowledge_and_release_on_disconnect(broker: tuple[SamsaInProcess, uuid.UUID]) -> None:
    samsa, topic_id = broker
    tip = (topic_id, 0)
    a = RawClient(samsa.port)
    b = RawClient(samsa.port)
    producer = KafkaProducer(bootstrap_servers=samsa.bootstrap_servers, acks="all", linger_ms=50)
    try:
        first = _partitions(a.request(_fetch(topic_id, 0)))  # the share partition starts at the end
        assert list(first) == [tip] and first[tip].error_code == ErrorCode.none and _acquired(first[tip]) == []
        assert a.request(_fetch(topic_id, 0)).acquisition_lock_timeout == datetime.timedelta(seconds=30)
        for i in range(4):
            producer.send("jobs", f"r{i}".encode())
        producer.flush()
        epoch = 1
        got: list[tuple[int, int, int]] = []
        values: list[bytes | None] = []
        while not got or got[-1][1] < 3:
            part = _partitions(a.request(_fetch(topic_id, epoch, max_wait_ms=2_000)))[tip]
            epoch += 1
            got += _acquired(part)
            values += _values(part)
        assert got[0][0] == 0 and got[-1][1] == 3 and {c for _f, _l, c in got} == {1}
        assert values[:4] == [b"r0", b"r1", b"r2", b"r3"]

        # another member's session gets nothing while a holds them; an incremental fetch with
        # nothing to say answers no partition
        assert _acquired(_partitions(b.request(_fetch(topic_id, 0, member="member-b")))[tip]) == []
        assert _partitions(b.request(_fetch(None, 1, member="member-b"))) == {}

        # a ShareAcknowledge: malformed batches are INVALID_REQUEST, an unknown topic id
        # UNKNOWN_TOPIC_ID, records not acquired by a INVALID_RECORD_STATE, then accepted
        malformed = _partitions(a.request(_acknowledge(topic_id, epoch, [(1, 0, ACCEPT)])))
        assert malformed[tip].error_code == ErrorCode.invalid_request
        epoch += 1
        unknown = uuid.uuid4()
        ghost = _partitions(a.request(_acknowledge(unknown, epoch, [(0, 0, ACCEPT)])))
        assert ghost[(unknown, 0)].error_code == ErrorCode.unknown_topic_id
        epoch += 1
        accepted = _partitions(a.request(_acknowledge(topic_id, epoch, [(0, 0, ACCEPT)])))
        assert accepted[tip].error_code == ErrorCode.none
        epoch += 1
        not_held = _partitions(b.request(_acknowledge(topic_id, 2, [(1, 1, ACCEPT)], member="member-b")))
        assert not_held[tip].error_code == ErrorCode.invalid_record_state
        # released with the next fetch's acknowledgements (AcknowledgeErrorCode), then a's
        # connection closes holding 2-3: everything comes back to b, delivered a second time
        fetched = _partitions(a.request(_fetch(topic_id, epoch, acks=[(1, 1, RELEASE)])))
        assert fetched[tip].acknowledge_error_code == ErrorCode.none
        assert _acquired(fetched[tip]) == [(1, 1, 2)]  # released, and a takes it back at once
        a.close()
        redelivered: list[tuple[int, int, int]] = []
        b_epoch = 3
        while sum(last - first + 1 for first, last, _c in redelivered) < 3:
            part = _partitions(b.request(_fetch(None, b_epoch, member="member-b", max_wait_ms=2_000))).get(tip)
            b_epoch += 1
            redelivered += _acquired(part) if part is not None else []
        assert sorted(redelivered) == [(1, 1, 3), (2, 3, 2)]  # 1: a's twice, then b's
        final = b.request(_fetch(None, -1, member="member-b"))
        assert final.error_code == ErrorCode.none and _partitions(final) == {}
        assert b.request(_fetch(None, -1, member="member-b")).error_code == ErrorCode.share_session_not_found
    finally:
        producer.close()
        a.close()
        b.close()


def test_authorization(tmp_path: Path) -> None:
    """With the authorizer on and no ACL, an anonymous client gets GROUP_AUTHORIZATION_FAILED for
    a share fetch and acknowledgement, and CLUSTER_AUTHORIZATION_FAILED for every partition of a
    state RPC (brokers only: CLUSTER_ACTION)."""
    config = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
    with SamsaInProcess(tmp_path / "data", config) as samsa, RawClient(samsa.port) as client:
        topic_id = uuid.uuid4()
        assert client.request(_fetch(topic_id, 0)).error_code == ErrorCode.group_authorization_failed
        assert client.request(_acknowledge(topic_id, 1, [])).error_code == ErrorCode.group_authorization_failed
        read = client.request(read_v0.ReadShareGroupStateRequest(group_id=GROUP, topics=(read_v0.ReadStateData(
            topic_id=topic_id, partitions=tuple(read_v0.PartitionData(partition=i32(p), leader_epoch=i32(0))
                                                for p in (0, 1))),)))  # fmt: skip
        assert [(int(p.partition), p.error_code, p.error_message) for p in read.results[0].partitions] == [
            (p, ErrorCode.cluster_authorization_failed, "Cluster authorization failed.") for p in (0, 1)]  # fmt: skip


def test_a_write_with_an_unknown_delivery_state_is_refused(broker: tuple[SamsaInProcess, uuid.UUID]) -> None:
    """WriteShareGroupState with a state batch in no record state Samsa knows: that partition is
    INVALID_REQUEST (Kafka stores the byte as it comes), the state stays as it was and the
    broker keeps answering on the same connection (the fuzzer once found a traceback here)."""
    samsa, topic_id = broker
    coordinator = samsa.broker.share_coordinator
    assert coordinator is not None
    key = SharePartitionKey(GROUP, topic_id, 0)
    before = samsa.run(coordinator.read(key, 0))
    with RawClient(samsa.port) as client:
        for state in (-1, 9):
            answer = client.request(write_v1.WriteShareGroupStateRequest(group_id=GROUP, topics=(
                write_v1.WriteStateData(topic_id=topic_id, partitions=(write_v1.PartitionData(
                    partition=i32(0), state_epoch=i32(1), leader_epoch=i32(0), start_offset=i64(0),
                    delivery_complete_count=i32(0), state_batches=(write_v1.StateBatch(
                        first_offset=i64(0), last_offset=i64(2), delivery_state=i8(state), delivery_count=i16(1)),)),)),)))  # fmt: skip
            (p,) = answer.results[0].partitions
            assert (p.error_code, p.error_message) == (
                ErrorCode.invalid_request, f"Unknown delivery state {state} in a state batch.")
    assert samsa.run(coordinator.read(key, 0)) == before
