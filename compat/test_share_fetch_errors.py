"""ShareFetch and ShareAcknowledge's whole-request errors, differential against Apache Kafka 4.3.1:
a null group id, member ids empty and over 36 characters, a session epoch with no session, an
initial fetch carrying acknowledgements, IsRenewAck with non-zero limits (v2), a ShareAcknowledge
at epoch 0 and with no session. Samsa serves both APIs without advertising them yet
(broker/handlers/versions.py UNADVERTISED); raw requests reach them on both brokers."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.share_acknowledge.v1 import request as ack_v1
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_fetch.v2 import request as fetch_v2
from kio.static.primitive import i8, i32, i64

from protocol.errors import ErrorCode
from tests.support.raw_client import RawClient

GROUP = "share-errors"


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
