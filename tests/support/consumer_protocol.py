"""Raw KIP-848 requests for tests (ConsumerGroupHeartbeat v1, ConsumerGroupDescribe), with the
coordinator's retriable errors retried as clients retry them."""

from __future__ import annotations

import datetime
import time
from typing import Any

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest, TopicPartitions
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta

from protocol.errors import ErrorCode
from tests.support.raw_client import RawClient

GROUP = "raw-kip848-group"
RETRIABLE = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator}


def heartbeat(client: RawClient, member_id: str, epoch: int, *, version: int = 1, group: str = GROUP,
        instance_id: str | None = None, topics: tuple[str, ...] | None = None, regex: str | None = None,
        owned: tuple[TopicPartitions, ...] | None = None, rebalance_ms: int = -1,
        assignor: str | None = None) -> Any:  # fmt: skip
    request = ConsumerGroupHeartbeatRequest(
        group_id=GroupId(group), member_id=member_id, member_epoch=i32(epoch), instance_id=instance_id,
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=rebalance_ms)),
        subscribed_topic_names=None if topics is None else tuple(TopicName(t) for t in topics),
        subscribed_topic_regex=regex, server_assignor=assignor, topic_partitions=owned,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        answer = client.request(request, api_version=version)
        if answer.error_code not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def join(client: RawClient, member_id: str, **kw: Any) -> Any:
    return heartbeat(client, member_id, 0, rebalance_ms=30_000, owned=(), **kw)


def describe(client: RawClient, group: str) -> dict[str, Any]:
    g = client.request(ConsumerGroupDescribeRequest(group_ids=(GroupId(group),), include_authorized_operations=False)).groups[0]
    return {"error": ErrorCode(g.error_code).name, "message": g.error_message, "state": g.group_state,
            "epoch": int(g.group_epoch), "assignmentEpoch": int(g.assignment_epoch), "assignor": g.assignor_name,
            "members": sorted((m.member_id, int(m.member_epoch)) for m in g.members)}  # fmt: skip


