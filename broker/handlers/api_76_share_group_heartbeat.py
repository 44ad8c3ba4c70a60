# ShareGroupHeartbeat (key 76), version 1.
# A share group member's heartbeat (KIP-932, Kafka 4.3.1's KafkaApis.handleShareGroupHeartbeat
# over broker/share/share_groups.py): join (member epoch 0), heartbeat (> 0), leave (-1); the answer
# carries the member epoch, the heartbeat interval and, when it changed, the member's assignment
# (the simple assignor over the partitions whose share-group state is initialized; a partition may
# go to several members). Each change is written to __consumer_offsets before the answer; the
# subscribed partitions' state is initialized with the share coordinator.
# Errors: GROUP_AUTHORIZATION_FAILED without READ on the group, INVALID_REQUEST for a member id
# empty or over 36 characters (whole-request errors carry no message, as Kafka's), then
# TOPIC_AUTHORIZATION_FAILED without DESCRIBE on a subscribed topic, then share_groups.py's:
# INVALID_REQUEST with Kafka's messages, GROUP_ID_NOT_FOUND (another type of group, an unknown
# group), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED and the coordinator's.
# The group's share.heartbeat.interval.ms, share.session.timeout.ms and share.assignment.interval.ms
# apply (broker/coordinator/group_configs.py), and the broker's group.share.max.size.
from __future__ import annotations

import datetime

from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.share_group_heartbeat.v1.response import (
    Assignment,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)
from kio.static.primitive import i32, i32Timedelta

from broker.context import RequestContext
from broker.coordinator.wire import NO_THROTTLE, client_host, coordinator
from broker.handlers import registry
from broker.handlers._share_fetch import MAX_MEMBER_ID_LENGTH
from broker.share.share_group import Assignment as MemberAssignment
from broker.share.share_group import ShareHeartbeat
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 76


def _interval(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def _error(error: ErrorCode, message: str | None = None) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(
        throttle_time=NO_THROTTLE, error_code=error, error_message=message, member_epoch=i32(0),
        heartbeat_interval=_interval(0),
    )  # fmt: skip


def _assignment(assigned: MemberAssignment) -> Assignment:
    return Assignment(topic_partitions=tuple(
        TopicPartitions(topic_id=topic_id, partitions=tuple(i32(p) for p in sorted(ps)))
        for topic_id, ps in sorted(assigned.items(), key=lambda item: str(item[0]))
    ))  # fmt: skip


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(ErrorCode.group_authorization_failed)
    if not request.member_id or len(request.member_id) > MAX_MEMBER_ID_LENGTH:
        return _error(ErrorCode.invalid_request)
    names = None if request.subscribed_topic_names is None else tuple(str(t) for t in request.subscribed_topic_names)
    if names and not all(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, t) for t in names):
        return _error(ErrorCode.topic_authorization_failed)
    heartbeat = ShareHeartbeat(str(request.group_id), request.member_id, int(request.member_epoch),
                               request.rack_id, names)  # fmt: skip
    result = await coordinator(ctx).share_groups.heartbeat(heartbeat, ctx.client_id or "", client_host(ctx))
    if result.error != ErrorCode.none or result.answer is None:
        return _error(result.error, result.message)
    answer = result.answer
    return ShareGroupHeartbeatResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, member_id=answer.member_id,
        member_epoch=i32(answer.member_epoch), heartbeat_interval=_interval(answer.heartbeat_interval_ms),
        assignment=None if answer.assignment is None else _assignment(answer.assignment),
    )  # fmt: skip
