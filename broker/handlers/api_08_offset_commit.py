# OffsetCommit (key 8), versions 2-9.
# Commits go to the group's __consumer_offsets partition (OffsetCommitKey v1 / OffsetCommitValue
# v3, acks=-1) and are visible to OffsetFetch once written. Members of a group are checked as
# Kafka does (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS
# while CompletingRebalance) and the commit counts as a heartbeat; generation -1 with an empty
# member id commits for a group without members (simple consumers, admin tools), creating it if
# needed; an unknown group with a generation >= 0 gets ILLEGAL_GENERATION (v9: GROUP_ID_NOT_FOUND).
# Per partition: UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist,
# OFFSET_METADATA_TOO_LARGE above offset.metadata.max.bytes; INVALID_GROUP_ID for empty or too long
# group ids. v2-4 retention_time: -1 (what clients send) means offsets.retention.minutes applies;
# any other value sets the offsets' expire timestamp to the commit time plus it (OffsetCommitValue
# v1), as Kafka does. Authorization: READ on the group (GROUP_AUTHORIZATION_FAILED for every
# partition), READ on each topic (TOPIC_AUTHORIZATION_FAILED, not committed).
# A KIP-848 group checks the member as Kafka's ConsumerGroup.validateOffsetCommit: generation is the
# member epoch (STALE_MEMBER_EPOCH when not current, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION below
# v9); an admin commit (epoch -1) only while it has no members.
# Not supported: v10 (topic ids).
from __future__ import annotations

import time

from kio.schema.offset_commit.v9.request import OffsetCommitRequest
from kio.schema.offset_commit.v9.response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

from broker.context import RequestContext
from broker.coordinator.coordinator import OffsetCommitEntry
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition

API_KEY = 8


def _response(request: OffsetCommitRequest, errors: dict[TopicPartition, ErrorCode]) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            OffsetCommitResponseTopic(
                name=t.name,
                partitions=tuple(
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors.get(TopicPartition(t.name, p.partition_index), ErrorCode.unknown_server_error),
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )


def _error_response(ctx: RequestContext, request: OffsetCommitRequest, error: Exception) -> OffsetCommitResponse:
    code = getattr(error, "code", ErrorCode.unknown_server_error)
    return _response(request, {TopicPartition(t.name, p.partition_index): code for t in request.topics for p in t.partitions})


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        raise KafkaError(ErrorCode.group_authorization_failed)
    denied = {t.name for t in request.topics if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, t.name)}
    entries = [
        OffsetCommitEntry(
            TopicPartition(t.name, int(p.partition_index)),
            int(p.committed_offset),
            int(p.committed_leader_epoch) if ctx.api_version >= 6 else -1,
            p.committed_metadata,
        )
        for t in request.topics if t.name not in denied
        for p in t.partitions
    ]
    expire_timestamp = -1
    if 2 <= ctx.api_version <= 4:
        retention_ms = int(ctx.request.retention_time.total_seconds() * 1000)
        if retention_ms >= 0:
            expire_timestamp = int(time.time() * 1000) + retention_ms
    errors = await coordinator(ctx).commit_offsets(
        str(request.group_id),
        int(request.generation_id_or_member_epoch),
        request.member_id,
        request.group_instance_id if ctx.api_version >= 7 else None,
        entries,
        api_version=ctx.api_version,
        expire_timestamp=expire_timestamp,
        client_id=ctx.client_id,
        correlation_id=ctx.correlation_id,
    )
    errors.update({TopicPartition(t.name, p.partition_index): ErrorCode.topic_authorization_failed
                   for t in request.topics if t.name in denied for p in t.partitions})
    return _response(request, errors)



