# ShareAcknowledge (key 79), versions 1-2.
# A share consumer's acknowledgements outside a fetch (KIP-932, Kafka 4.3.1's
# KafkaApis.handleShareAcknowledgeRequest over broker/share/share_fetch.py): the share session's
# epoch is checked and moved on (0: INVALID_SHARE_SESSION_EPOCH; no session:
# SHARE_SESSION_NOT_FOUND; -1 closes the session after the acknowledgements, releasing the
# member's other records), then each partition's batches are applied and written with
# WriteShareGroupState before they take effect: NONE, INVALID_REQUEST (malformed batches),
# INVALID_RECORD_STATE (records the member does not hold), UNKNOWN_TOPIC_OR_PARTITION (a share
# partition not loaded here), NOT_LEADER_OR_FOLLOWER (with the current leader and its endpoint),
# UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED (no READ on the topic). v2: IsRenewAck (RENEW
# acknowledgements, KIP-1222).
# Errors for the whole request: INVALID_REQUEST for a null group id or a member id empty or over
# 36 characters, GROUP_AUTHORIZATION_FAILED without READ on the group.
# Not supported: nothing of v1-2 is left out.
from __future__ import annotations

import datetime
import uuid

from kio.schema.share_acknowledge.v2.request import ShareAcknowledgeRequest
from kio.schema.share_acknowledge.v2.response import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from kio.static.primitive import i32, i32Timedelta

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._leaders import LeaderDiscovery
from broker.handlers._share_fetch import acknowledgements, check_request, error_response, topic_refusals
from broker.share.share_session import FINAL_EPOCH, TopicIdPartition
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, BrokerId

API_KEY = 79


def _error(code: ErrorCode, message: str | None = None) -> ShareAcknowledgeResponse:
    return error_response(ShareAcknowledgeResponse, code, message)


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    manager = ctx.services.share_partitions
    failed = check_request(ctx, request.group_id, request.member_id, manager is None)
    if failed is not None:
        return _error(*failed)
    assert manager is not None and request.group_id is not None and request.member_id is not None
    epoch = int(request.share_session_epoch)
    try:
        manager.sessions.acknowledge_session_update(request.group_id, request.member_id, epoch)
    except KafkaError as e:
        return _error(e.code, e.message)
    renew = ctx.api_version >= 2 and request.is_renew_ack
    acks, errors = acknowledgements(
        ((t.topic_id, p.partition_index, p.acknowledgement_batches) for t in request.topics for p in t.partitions),
        supports_renew=ctx.api_version >= 2, is_renew_ack=renew, keep_empty=True,
    )  # fmt: skip
    refuse = topic_refusals(ctx)
    for tip in acks:
        if (error := refuse(tip)) is not None:
            errors[tip] = error
    interested = {tip: batches for tip, batches in acks.items() if tip not in errors and batches}
    results: dict[TopicIdPartition, ErrorCode] = {tip: ErrorCode.none for tip in acks}
    results.update(await manager.acknowledge(request.group_id, request.member_id, interested))
    results.update(errors)
    if epoch == FINAL_EPOCH:
        await manager.release_session(request.group_id, request.member_id)
    image = ctx.services.controller.image
    leaders = LeaderDiscovery(image, ctx.listener)
    by_topic: dict[uuid.UUID, list[PartitionData]] = {}
    for tip, error in results.items():
        leader = (-1, -1)
        topic = image.topic_by_id(tip[0])
        if error == ErrorCode.not_leader_or_follower and topic is not None:
            leader = leaders.current_leader(TopicPartition(topic.name, tip[1]))
        by_topic.setdefault(tip[0], []).append(PartitionData(
            partition_index=i32(tip[1]), error_code=error, error_message=None,
            current_leader=LeaderIdAndEpoch(leader_id=i32(leader[0]), leader_epoch=i32(leader[1])),
        ))  # fmt: skip
    return ShareAcknowledgeResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        acquisition_lock_timeout=i32Timedelta.parse(
            datetime.timedelta(milliseconds=manager.settings(request.group_id).record_lock_duration_ms)),
        responses=tuple(ShareAcknowledgeTopicResponse(topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        node_endpoints=tuple(NodeEndpoint(node_id=BrokerId(n.node_id), host=n.host, port=i32(n.port), rack=n.rack)
                             for n in leaders.nodes),
    )  # fmt: skip
