"""Share groups over raw requests, differential against Apache Kafka 4.3.1. ShareFetch and
ShareAcknowledge's whole-request errors: a null group id, member ids empty and over 36
characters, a session epoch with no session, an initial fetch carrying acknowledgements,
IsRenewAck with non-zero limits (v2), a ShareAcknowledge at epoch 0 and with no session. And a
share group's flow: a member joins (ShareGroupHeartbeat) and is assigned the partition once its
share-group state is initialized and described (ShareGroupDescribe), its first fetch starts the share partition at the end of the
log, produced records are acquired by it and not by another session (whose acknowledgement is
INVALID_RECORD_STATE), an accept and a release, the released records redelivered with their
delivery count raised, the final fetch's acknowledgement, the member leaving."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from kio.schema.share_acknowledge.v1 import request as ack_v1
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_fetch.v2 import request as fetch_v2
from kio.schema.share_group_describe.v1 import request as describe_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch, decode_records, iter_batch_headers
from tests.support import fidelity, wire
from tests.support.raw_client import RawClient

GROUP = "share-errors"
FLOW_GROUP = "share-flow"
FLOW_TOPIC = "share-flow"
_COORDINATOR_MOVING = (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                       ErrorCode.coordinator_load_in_progress)  # fmt: skip


def _fetch(member: str | None, epoch: int, *, group: str | None = GROUP, acks: bool = False) -> Any:
    topic = fetch_v1.FetchTopic(topic_id=uuid.UUID(int=7), partitions=(fetch_v1.FetchPartition(
        partition_index=i32(0), acknowledgement_batches=(fetch_v1.AcknowledgementBatch(
            first_offset=i64(0), last_offset=i64(0), acknowledge_types=(i8(1),)),) if acks else ()),))  # fmt: skip
    return fetch_v1.ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=i32(epoch), max_wait=datetime.timedelta(0),
        min_bytes=i32(1), max_bytes=i32(1 << 20), max_records=i32(10), batch_size=i32(10), topics=(topic,),
        forgotten_topics_data=(),
    )  # fmt: skip


def _acknowledge(epoch: int) -> Any:
    return ack_v1.ShareAcknowledgeRequest(group_id=GROUP, member_id=uuid.uuid4().hex[:22],
                                          share_session_epoch=i32(epoch), topics=())  # fmt: skip


def _errors(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    member = uuid.uuid4().hex[:22]
    renew = fetch_v2.ShareFetchRequest(
        group_id=GROUP, member_id=member, share_session_epoch=i32(0), max_wait=datetime.timedelta(milliseconds=5),
        min_bytes=i32(1), max_bytes=i32(0), max_records=i32(5), batch_size=i32(5), is_renew_ack=True, topics=(),
        forgotten_topics_data=(),
    )  # fmt: skip
    steps = [
        ("null-group", _fetch(member, 0, group=None)),
        ("empty-member", _fetch("", 0)),
        ("long-member", _fetch("m" * 37, 0)),
        ("no-session", _fetch(member, 3)),
        ("final-no-session", _fetch(member, -1)),
        ("initial-with-acks", _fetch(member, 0, acks=True)),
        ("renew-with-limits", renew),
        ("acknowledge-initial-epoch", _acknowledge(0)),
        ("acknowledge-no-session", _acknowledge(4)),
    ]
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        for step, request in steps:
            answer = client.request(request)
            obs.append({"step": step, "error": ErrorCode(answer.error_code).name, "message": answer.error_message})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="KIP-932 ShareFetch/ShareAcknowledge whole-request errors")
def test_share_fetch_whole_request_errors(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-share-fetch-errors", _errors)}
    assert obs["null-group"] == {"step": "null-group", "error": "invalid_request", "message": None}
    assert obs["no-session"]["error"] == "share_session_not_found"
    assert obs["acknowledge-initial-epoch"]["error"] == "invalid_share_session_epoch"


def _heartbeat(client: RawClient, member: str, epoch: int, topics: tuple[str, ...] | None) -> Any:
    return client.request(hb_v1.ShareGroupHeartbeatRequest(
        group_id=GroupId(FLOW_GROUP), member_id=member, member_epoch=i32(epoch),
        subscribed_topic_names=None if topics is None else tuple(TopicName(t) for t in topics),
    ))  # fmt: skip


def _flow_fetch(client: RawClient, member: str, epoch: int, topic_id: uuid.UUID | None, *, wait_ms: int = 0,
                acks: tuple[tuple[int, int, int], ...] = ()) -> Any:  # fmt: skip
    topics = () if topic_id is None else (fetch_v1.FetchTopic(topic_id=topic_id, partitions=(fetch_v1.FetchPartition(
        partition_index=i32(0), acknowledgement_batches=tuple(fetch_v1.AcknowledgementBatch(
            first_offset=i64(f), last_offset=i64(last), acknowledge_types=(i8(t),)) for f, last, t in acks)),)),)
    return client.request(fetch_v1.ShareFetchRequest(
        group_id=FLOW_GROUP, member_id=member, share_session_epoch=i32(epoch),
        max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=i32(1), max_bytes=i32(1 << 20),
        max_records=i32(100), batch_size=i32(100), topics=topics, forgotten_topics_data=(),
    ))  # fmt: skip


def _fetched(answer: Any) -> dict[str, Any]:
    """What a ShareFetch answered: its error, and per partition its error, acknowledgement error,
    acquired ranges and the values of the records answered."""
    parts = []
    for t in answer.responses:
        for p in t.partitions:
            data = bytes(p.records) if p.records is not None else b""
            values = [r.value.decode() for pos, h in iter_batch_headers(data) for r in decode_records(data, pos, h)
                      if r.value is not None]  # fmt: skip
            parts.append({"error": ErrorCode(p.error_code).name, "ack": ErrorCode(p.acknowledge_error_code).name,
                          "acquired": [[int(a.first_offset), int(a.last_offset), int(a.delivery_count)]
                                       for a in p.acquired_records], "values": values})  # fmt: skip
    return {"error": ErrorCode(answer.error_code).name, "partitions": parts}


def _ack(client: RawClient, member: str, epoch: int, topic_id: uuid.UUID, acks: tuple[tuple[int, int, int], ...]) -> list[str]:
    answer = client.request(ack_v1.ShareAcknowledgeRequest(
        group_id=FLOW_GROUP, member_id=member, share_session_epoch=i32(epoch),
        topics=(ack_v1.AcknowledgeTopic(topic_id=topic_id, partitions=(ack_v1.AcknowledgePartition(
            partition_index=i32(0), acknowledgement_batches=tuple(ack_v1.AcknowledgementBatch(
                first_offset=i64(f), last_offset=i64(last), acknowledge_types=(i8(t),)) for f, last, t in acks)),)),),
    ))  # fmt: skip
    return [ErrorCode(answer.error_code).name] + [ErrorCode(p.error_code).name for t in answer.responses
                                                  for p in t.partitions]  # fmt: skip


def _describe(client: RawClient, group: str) -> dict[str, Any]:
    """ShareGroupDescribe of one group, without the epochs (see `_flow`)."""
    (g,) = client.request(describe_v1.ShareGroupDescribeRequest(
        group_ids=(GroupId(group),), include_authorized_operations=False)).groups  # fmt: skip
    return {"error": ErrorCode(g.error_code).name, "message": g.error_message, "state": g.group_state,
            "assignor": g.assignor_name, "operations": int(g.authorized_operations), "members": [
                {"client_id": m.client_id, "client_host": m.client_host, "rack": m.rack_id,
                 "topics": [str(t) for t in m.subscribed_topic_names],
                 "assignment": [[str(t.topic_name), [int(p) for p in t.partitions]]
                                for t in m.assignment.topic_partitions]}
                for m in g.members]}  # fmt: skip


def _flow(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    a, b = uuid.uuid4().hex[:22], uuid.uuid4().hex[:22]
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client, RawClient(port, timeout=30) as other:
        fidelity.create_topic(client, FLOW_TOPIC)
        topic_id = fidelity.topic_id(client, FLOW_TOPIC)
        deadline = time.monotonic() + 60
        fidelity.await_coordinator(client, FLOW_GROUP)
        while (joined := _heartbeat(client, a, 0, (FLOW_TOPIC,))).error_code in _COORDINATOR_MOVING:
            assert time.monotonic() < deadline, joined  # the group's coordinator is still loading
            time.sleep(0.2)
        # (not the epoch: a join Kafka answered NOT_COORDINATOR right after its start may have
        # been applied all the same, and the retry bumps the group epoch again)
        obs.append({"step": "join", "error": ErrorCode(joined.error_code).name, "joined": joined.member_epoch > 0})
        epoch = int(joined.member_epoch)
        while True:  # the partition is assigned once its share-group state is initialized
            beat = _heartbeat(client, a, epoch, None)
            assert beat.error_code == 0 and time.monotonic() < deadline, beat
            epoch = int(beat.member_epoch)
            if beat.assignment is not None and beat.assignment.topic_partitions:
                obs.append({"step": "assigned", "partitions": [
                    int(p) for t in beat.assignment.topic_partitions for p in t.partitions]})  # fmt: skip
                break
            time.sleep(0.2)
        obs.append({"step": "described", **_describe(client, FLOW_GROUP)})
        obs.append({"step": "described-unknown", **_describe(client, "no-such-share-group")})
        # (a wait: Kafka loads the share partition in the background and leaves out of an answer
        # the partitions it could not look at yet)
        obs.append({"step": "first-fetch", **_fetched(_flow_fetch(client, a, 0, topic_id, wait_ms=500))})
        produced = wire.produce(client, FLOW_TOPIC, 0, build_batch([NewRecord(None, f"r{i}".encode()) for i in range(3)]))
        assert produced.error == 0, produced
        obs.append({"step": "acquire", **_fetched(_flow_fetch(client, a, 1, None, wait_ms=5_000))})
        obs.append({"step": "other-member-fetch", **_fetched(_flow_fetch(other, b, 0, topic_id))})
        obs.append({"step": "other-member-ack", "errors": _ack(other, b, 1, topic_id, ((0, 0, 1),))})
        obs.append({"step": "accept-release", "errors": _ack(client, a, 2, topic_id, ((0, 0, 1), (1, 2, 2)))})
        obs.append({"step": "redelivered", **_fetched(_flow_fetch(client, a, 3, None, wait_ms=5_000))})
        # the final fetch accepts 1 and closes the session: 2 is released, and another member's
        # waiting fetch gets it, delivered a third time
        obs.append({"step": "final", **_fetched(_flow_fetch(client, a, -1, topic_id, acks=((1, 1, 1),)))})
        obs.append({"step": "released-on-close", **_fetched(_flow_fetch(other, b, 2, None, wait_ms=5_000))})
        left = _heartbeat(client, a, -1, None)
        obs.append({"step": "leave", "error": ErrorCode(left.error_code).name, "epoch": int(left.member_epoch)})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="KIP-932 share group: join, acquire, acknowledge, release, redeliver")
def test_share_group_flow(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-share-group-flow", _flow)}
    assert obs["assigned"]["partitions"] == [0]
    assert obs["described"]["state"] == "Stable" and obs["described"]["members"][0]["assignment"] == [[FLOW_TOPIC, [0]]]
    assert obs["described-unknown"]["error"] == "group_id_not_found"
    assert obs["acquire"]["partitions"][0]["acquired"] == [[0, 2, 1]]
    assert obs["other-member-ack"]["errors"] == ["none", "invalid_record_state"]
    assert obs["redelivered"]["partitions"][0]["acquired"] == [[1, 2, 2]]
    assert obs["released-on-close"]["partitions"][0]["acquired"] == [[2, 2, 3]]
