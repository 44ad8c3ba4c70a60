# ShareFetch (key 78), versions 1-2.
# A share consumer's fetch (KIP-932, Kafka 4.3.1's KafkaApis.handleShareFetchRequest over
# broker/share/share_fetch.py): the share session (epoch 0 opens one, n continues it, -1 closes
# it releasing the member's records; INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND,
# SHARE_SESSION_LIMIT_REACHED and INVALID_REQUEST answer the whole request), the piggybacked
# acknowledgements (each partition's AcknowledgeErrorCode: INVALID_REQUEST for malformed batches,
# INVALID_RECORD_STATE for records the member does not hold), then records acquired for the member
# from the session's partitions led here, waiting up to MaxWaitMs for MinBytes (MaxBytes split
# evenly, MaxRecords a soft limit, BatchSize the in-flight batch size), each partition with its
# acquired ranges and delivery counts; AcquisitionLockTimeoutMs is the record lock duration. An
# initial fetch answers every partition; a later one those with records, an error or just added.
# v2: IsRenewAck (KIP-1222: RENEW acknowledgements, no fetch; the byte, record and wait limits
# must be 0).
# Errors: INVALID_REQUEST for a null group id or a member id empty or over 36 characters;
# GROUP_AUTHORIZATION_FAILED without READ on the group; per partition TOPIC_AUTHORIZATION_FAILED
# without READ on the topic, UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER (with the current leader and
# its endpoint), and the share-group state's errors.
# The group's configs apply (share.record.lock.duration.ms, .delivery.count.limit,
# .partition.max.record.locks, .isolation.level, .auto.offset.reset).
# Not supported: ShareAcquireMode record_limit (KIP-1206; INVALID_REQUEST); fetch quotas;
# re-sending a partition whose error went away.
from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping

from kio.schema.share_fetch.v2.request import ShareFetchRequest
from kio.schema.share_fetch.v2.response import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchResponse,
)
from kio.static.primitive import i16, i32, i32Timedelta, i64

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._leaders import LeaderDiscovery
from broker.handlers._share_fetch import acknowledgements, check_request, error_response, topic_refusals
from broker.share.share_fetch import PartitionFetch, ShareFetchParams
from broker.share.share_session import ContextKind, TopicIdPartition
from protocol.errors import ErrorCode
from protocol.kio_compat import as_records
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, BrokerId

API_KEY = 78
RECORD_LIMIT_MODE = 1


def _error(code: ErrorCode, message: str | None = None) -> ShareFetchResponse:
    return error_response(ShareFetchResponse, code, message)


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse:
    manager = ctx.services.share_partitions
    failed = check_request(ctx, request.group_id, request.member_id, manager is None)
    if failed is not None:
        return _error(*failed)
    assert manager is not None and request.group_id is not None and request.member_id is not None
    renew = ctx.api_version >= 2 and request.is_renew_ack
    if renew:
        limits = [(request.max_bytes, "maxBytes"), (request.min_bytes, "minBytes"),
                  (request.max_records, "maxRecords"), (request.max_wait, "maxWaitMs")]  # fmt: skip
        wrong = [f"{name} must be set to 0, " for value, name in limits if value not in (0, datetime.timedelta(0))]
        if wrong:
            return _error(ErrorCode.invalid_request, "".join(wrong) + "if isRenewAck is true.")
    if request.share_acquire_mode == RECORD_LIMIT_MODE:
        return _error(ErrorCode.invalid_request, "The record_limit share acquire mode is not supported.")
    fetch = [(t.topic_id or uuid.UUID(int=0), int(p.partition_index)) for t in request.topics for p in t.partitions]
    forget = [(t.topic_id or uuid.UUID(int=0), int(p)) for t in request.forgotten_topics_data for p in t.partitions]
    acks, ack_errors = acknowledgements(
        ((t.topic_id, p.partition_index, p.acknowledgement_batches) for t in request.topics for p in t.partitions),
        supports_renew=ctx.api_version >= 2, is_renew_ack=renew,
    )  # fmt: skip
    refuse = topic_refusals(ctx)
    for tip in acks:
        if (error := refuse(tip)) is not None:
            ack_errors[tip] = error
    acks = {tip: batches for tip, batches in acks.items() if tip not in ack_errors}
    config = ctx.services.config
    max_bytes = min(int(request.max_bytes), config.fetch_max_bytes)
    params = ShareFetchParams(
        max_wait_ms=int(request.max_wait.total_seconds() * 1000), min_bytes=min(int(request.min_bytes), max_bytes),
        max_bytes=max_bytes, max_records=int(request.max_records), batch_size=int(request.batch_size),
    )  # fmt: skip
    result = await manager.fetch(request.group_id, request.member_id, int(request.share_session_epoch), fetch,
                                 forget, acks, params, ctx.connection_id, refuse, fetch_records=not renew,
                                 acknowledgements_present=bool(acks or ack_errors))  # fmt: skip
    if result.error != ErrorCode.none:
        return _error(result.error, result.message)
    acknowledged: dict[TopicIdPartition, ErrorCode] = {**result.acknowledged, **ack_errors}
    context = result.context
    added = set(fetch)
    partitions: dict[TopicIdPartition, PartitionFetch] = {
        tip: part for tip, part in result.partitions.items()
        if context is None or context.kind is ContextKind.INITIAL or part.records or part.error != ErrorCode.none
        or tip in added
    }  # fmt: skip
    return _response(ctx, partitions, acknowledged, manager.settings(request.group_id).record_lock_duration_ms)


def _response(
    ctx: RequestContext, partitions: Mapping[TopicIdPartition, PartitionFetch],
    acknowledged: Mapping[TopicIdPartition, ErrorCode], lock_ms: int,
) -> ShareFetchResponse:  # fmt: skip
    image = ctx.services.controller.image
    leaders = LeaderDiscovery(image, ctx.listener)
    by_topic: dict[uuid.UUID, list[PartitionData]] = {}
    for tip in [*partitions, *(t for t in acknowledged if t not in partitions)]:
        part = partitions.get(tip, PartitionFetch())
        leader = (-1, -1)
        topic = image.topic_by_id(tip[0])
        if part.error in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch) and topic is not None:
            leader = leaders.current_leader(TopicPartition(topic.name, tip[1]))
        ack = acknowledged.get(tip, ErrorCode.none)
        by_topic.setdefault(tip[0], []).append(PartitionData(
            partition_index=i32(tip[1]), error_code=part.error, error_message=part.message,
            acknowledge_error_code=i16(ack), acknowledge_error_message=None,
            current_leader=LeaderIdAndEpoch(leader_id=i32(leader[0]), leader_epoch=i32(leader[1])),
            records=as_records(part.records),
            acquired_records=tuple(AcquiredRecords(first_offset=i64(a.first_offset), last_offset=i64(a.last_offset),
                                                   delivery_count=i16(a.delivery_count)) for a in part.acquired),
        ))  # fmt: skip
    return ShareFetchResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        acquisition_lock_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=lock_ms)),
        responses=tuple(ShareFetchableTopicResponse(topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        node_endpoints=tuple(NodeEndpoint(node_id=BrokerId(n.node_id), host=n.host, port=i32(n.port), rack=n.rack)
                             for n in leaders.nodes),
    )  # fmt: skip


