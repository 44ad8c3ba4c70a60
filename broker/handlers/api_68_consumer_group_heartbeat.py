# ConsumerGroupHeartbeat (key 68), versions 0-1.
# The KIP-848 consumer group protocol (broker/coordinator/consumer_groups.py): join (member epoch
# 0), heartbeat and reconcile (> 0), leave (-1) and a static member's temporary leave (-2); the
# answer carries the member epoch, the heartbeat interval (group.consumer.heartbeat.interval.ms)
# and, on a full request or when it changed, the member's assignment. Server-side assignors
# `uniform` and `range` (group.consumer.assignors), subscription by topic names or by an RE2
# regular expression. The request is checked as Kafka does first (INVALID_REQUEST with Kafka's
# messages, UNSUPPORTED_ASSIGNOR; v1: the consumer generates its member id), then
# GROUP_ID_NOT_FOUND (an unknown group, a share group, a classic group with members that may not
# be converted: group.consumer.migration.policy, another protocol type), UNKNOWN_MEMBER_ID,
# FENCED_MEMBER_EPOCH, FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED
# (group.consumer.max.size), INVALID_REGULAR_EXPRESSION and the coordinator errors.
# Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on each subscribed
# topic name (TOPIC_AUTHORIZATION_FAILED).
# Each change is written to __consumer_offsets (Kafka's ConsumerGroup* records, acks=-1) before the
# answer; if it cannot be, the answer is the coordinator error.
# The member's rack id is kept and described; as in Kafka 4.3.1 the assignors do not read it, and
# the racks of the subscribed partitions' replicas count among what bumps the group epoch.
# A join on a classic group with members of the consumer protocol type converts it (KIP-848 online
# migration, coordinator/group_conversion.py), and the last consumer-protocol member leaving a group
# whose other members use the classic protocol converts it back.
# A regular expression is resolved off the heartbeat, as Kafka 4.3.1 resolves it
# (coordinator/regex_resolution.py: when first seen, then when topics were created or
# group.consumer.regex.refresh.interval.ms passed, at most every 10 s), keeping only the topics the
# principal of the heartbeat that started the resolution may DESCRIBE.
from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable

from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v1.response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from kio.static.primitive import i32, i32Timedelta

from broker.context import RequestContext
from broker.coordinator import consumer_groups as cg
from broker.coordinator.consumer_group import Assignment as MemberAssignment
from broker.coordinator.wire import NO_THROTTLE, client_host, coordinator, millis
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 68


def _error(error: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        member_epoch=i32(0),
        heartbeat_interval=_interval(0),
    )


def _interval(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


def _error_response(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest, error: Exception
) -> ConsumerGroupHeartbeatResponse:
    return _error(getattr(error, "code", ErrorCode.unknown_server_error))


def _assignment(assigned: MemberAssignment) -> Assignment:
    return Assignment(
        topic_partitions=tuple(
            TopicPartitions(topic_id=topic_id, partitions=tuple(i32(p) for p in sorted(ps)))
            for topic_id, ps in sorted(assigned.items(), key=lambda item: str(item[0]))
        )
    )


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(ErrorCode.group_authorization_failed)
    if request.subscribed_topic_names is not None:
        for topic in request.subscribed_topic_names:
            if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                return _error(ErrorCode.topic_authorization_failed)
    owned: dict[uuid.UUID, tuple[int, ...]] | None = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            if tp.topic_id is not None:
                owned[tp.topic_id] = owned.get(tp.topic_id, ()) + tuple(int(p) for p in tp.partitions)
    req = cg.HeartbeatRequest(
        group_id=str(request.group_id),
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=millis(request.rebalance_timeout),
        subscribed_topic_names=(
            None if request.subscribed_topic_names is None else tuple(str(t) for t in request.subscribed_topic_names)
        ),
        subscribed_topic_regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor,
        owned=owned,
    )
    groups = coordinator(ctx).consumer_groups
    try:
        groups.validate(req, ctx.api_version, topic_partitions_null=request.topic_partitions is None)
    except cg.HeartbeatError as e:
        return _error(e.error, e.message)
    if coordinator(ctx).share_groups.holds(req.group_id):
        return _error(ErrorCode.group_id_not_found, f"Group {req.group_id} is not a consumer group.")

    def may_describe(names: Iterable[str]) -> frozenset[str]:
        """What a resolution of the group's regular expressions this heartbeat starts keeps."""
        return frozenset(n for n in names if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, n))

    result = await groups.heartbeat(req, ctx.client_id or "", client_host(ctx), may_describe)
    if result.error != ErrorCode.none:
        return _error(result.error, result.message)
    return ConsumerGroupHeartbeatResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        member_id=result.member_id,
        member_epoch=i32(result.member_epoch),
        heartbeat_interval=_interval(result.heartbeat_interval_ms),
        assignment=None if result.assignment is None else _assignment(result.assignment),
    )
