# OffsetFetch (key 9), versions 1-9.
# Committed offsets of a group: offset, leader epoch (v5+) and metadata; -1 and "" for partitions
# without a commit (and for unknown groups). Null topics (v2+) means every committed partition.
# v8+ asks for several groups at once, each with its own error. Errors (coordinator, INVALID_GROUP_ID)
# go to the top level in v2-7, to every partition in v1. require_stable (v7+, KIP-447): a partition
# with an offset committed by a transaction not yet ended (TxnOffsetCommit) is answered
# UNSTABLE_OFFSET_COMMIT with offset -1, and the client asks again. Authorization: DESCRIBE on the
# group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic (a topic named is answered
# TOPIC_AUTHORIZATION_FAILED, an unauthorized one left out of "all").
# v9 member id and epoch are checked for KIP-848 groups (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH), as
# Kafka's ConsumerGroup.validateOffsetFetch; other groups ignore them.
# Not supported: v10 (topic ids).
from __future__ import annotations

from typing import Any

from kio.schema.offset_fetch.v7.response import (
    OffsetFetchResponse as OffsetFetchResponseV7,
)
from kio.schema.offset_fetch.v7.response import (
    OffsetFetchResponsePartition as PartitionV7,
)
from kio.schema.offset_fetch.v7.response import OffsetFetchResponseTopic as TopicV7
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.offset_fetch.v9.response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)
from kio.static.primitive import i32, i64

from broker.context import RequestContext
from broker.coordinator.records import OffsetAndMetadata
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import TopicName

API_KEY = 9


def _upgrade(api_version: int, request: Any) -> OffsetFetchRequest:
    if api_version >= 8:
        from protocol.messages import convert

        return convert(request, OffsetFetchRequest)
    topics = None
    if request.topics is not None:
        topics = tuple(
            OffsetFetchRequestTopics(name=t.name, partition_indexes=t.partition_indexes) for t in request.topics
        )
    group = OffsetFetchRequestGroup(group_id=request.group_id, member_id=None, member_epoch=i32(-1), topics=topics)
    return OffsetFetchRequest(groups=(group,), require_stable=getattr(request, "require_stable", False))


Row = tuple[TopicPartition, "OffsetAndMetadata | None", ErrorCode]


def _fetch(ctx: RequestContext, group: OffsetFetchRequestGroup, require_stable: bool) -> tuple[ErrorCode, list[Row]]:
    requested = None
    if group.topics is not None:
        requested = [TopicPartition(t.name, int(p)) for t in group.topics for p in t.partition_indexes]
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
        error, offsets = ErrorCode.group_authorization_failed, dict[TopicPartition, OffsetAndMetadata | None]()
    else:
        error, offsets = coordinator(ctx).fetch_offsets(
            str(group.group_id), requested, group.member_id, int(group.member_epoch)
        )
    if error != ErrorCode.none:
        return error, [(tp, None, error) for tp in requested or ()]
    allowed = {topic: ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
               for topic in {tp.topic for tp in (offsets if requested is None else requested)}}
    unstable = coordinator(ctx).unstable_partitions(str(group.group_id)) if require_stable else set()

    def row(tp: TopicPartition, value: OffsetAndMetadata | None) -> Row:
        if not allowed[tp.topic]:
            return (tp, None, ErrorCode.topic_authorization_failed)
        if tp in unstable:
            return (tp, None, ErrorCode.unstable_offset_commit)
        return (tp, value, ErrorCode.none)

    if requested is None:
        return ErrorCode.none, [row(tp, value) for tp, value in offsets.items() if allowed[tp.topic]]
    # every partition asked for, as often as it was asked (Kafka answers duplicates each time)
    return ErrorCode.none, [row(tp, offsets.get(tp)) for tp in requested]


def _by_topic(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for row in rows:
        out.setdefault(row[0].topic, []).append(row)
    return out


def _fields(value: OffsetAndMetadata | None) -> dict[str, Any]:
    if value is None:
        return {"committed_offset": i64(-1), "committed_leader_epoch": i32(-1), "metadata": ""}
    return {
        "committed_offset": i64(value.offset),
        "committed_leader_epoch": i32(value.leader_epoch),
        "metadata": value.metadata,
    }


def _v7(ctx: RequestContext, error: ErrorCode, rows: list[Row]) -> OffsetFetchResponseV7:
    if ctx.api_version < 2:
        top = ErrorCode.none  # v1 has no top-level error: the partitions carry it
    else:
        top, rows = error, ([] if error != ErrorCode.none else rows)
    return OffsetFetchResponseV7(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            TopicV7(
                name=TopicName(topic),
                partitions=tuple(
                    PartitionV7(partition_index=i32(tp.partition), error_code=code, **_fields(value))
                    for tp, value, code in items
                ),
            )
            for topic, items in _by_topic(rows).items()
        ),
        error_code=top,
    )


def _group_response(group_id: str, error: ErrorCode, rows: list[Row]) -> OffsetFetchResponseGroup:
    if error != ErrorCode.none:
        rows = []
    return OffsetFetchResponseGroup(
        group_id=group_id,  # type: ignore[arg-type]
        topics=tuple(
            OffsetFetchResponseTopics(
                name=TopicName(topic),
                partitions=tuple(
                    OffsetFetchResponsePartitions(partition_index=i32(tp.partition), error_code=code, **_fields(value))
                    for tp, value, code in items
                ),
            )
            for topic, items in _by_topic(rows).items()
        ),
        error_code=error,
    )


def _error_response(ctx: RequestContext, request: OffsetFetchRequest, error: Exception) -> Any:
    code = getattr(error, "code", ErrorCode.unknown_server_error)
    if ctx.api_version < 8:
        group = request.groups[0]
        rows: list[tuple[TopicPartition, OffsetAndMetadata | None, ErrorCode]] = [
            (TopicPartition(t.name, int(p)), None, code) for t in group.topics or () for p in t.partition_indexes
        ]
        return _v7(ctx, code, rows)
    return OffsetFetchResponse(
        throttle_time=NO_THROTTLE, groups=tuple(_group_response(g.group_id, code, []) for g in request.groups)
    )


@registry.api(API_KEY, error_response=_error_response, upgrade=_upgrade)
async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> Any:
    if ctx.api_version < 8:
        error, rows = _fetch(ctx, request.groups[0], request.require_stable)
        return _v7(ctx, error, rows)
    groups = []
    for group in request.groups:
        error, rows = _fetch(ctx, group, request.require_stable)
        groups.append(_group_response(group.group_id, error, rows))
    return OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))
