"""Shared pieces of the ShareFetch and ShareAcknowledge handlers (keys 78, 79; KIP-932).

Not a handler: the registry only imports `api_*` modules. The whole-request checks Kafka's
KafkaApis makes before either (the group id, READ on the group, the member id), the
acknowledgement batches of each partition validated as its validateAcknowledgementBatches does
(INVALID_REQUEST for the partition), and the partitions refused by topic: UNKNOWN_TOPIC_ID for a
topic id the cluster does not know, TOPIC_AUTHORIZATION_FAILED without READ on the topic.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from kio.static.primitive import i32Timedelta

from broker.context import RequestContext
from broker.share.in_flight import AcknowledgementBatch, acknowledgement_batches_valid
from broker.share.share_session import TopicIdPartition
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE

MAX_MEMBER_ID_LENGTH = 36


log = logging.getLogger("samsa.share")
R = TypeVar("R")


def error_response(response: Callable[..., R], code: ErrorCode, message: str | None = None) -> R:
    """A ShareFetch or ShareAcknowledge whole-request error: Kafka's getErrorResponse carries no
    message (`message` is logged)."""
    if message:
        log.debug("share request refused error=%s message=%s", code.name, message)
    return response(
        throttle_time=NO_THROTTLE, error_code=code, error_message=None,
        acquisition_lock_timeout=i32Timedelta.parse(datetime.timedelta(0)), responses=(), node_endpoints=(),
    )  # fmt: skip


def check_request(
    ctx: RequestContext, group_id: str | None, member_id: str | None, unserved: bool
) -> tuple[ErrorCode, str | None] | None:
    """The whole request's error, in Kafka's order, or None."""
    if unserved:
        return ErrorCode.unsupported_version, None
    if group_id is None:
        return ErrorCode.invalid_request, "Invalid group id in the request."
    if not ctx.authorized(AclOperation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    if not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:
        return ErrorCode.invalid_request, "Invalid member id in the request."
    return None


def acknowledgements(
    partitions: Iterable[tuple[uuid.UUID | None, int, Sequence[Any]]], *, supports_renew: bool, is_renew_ack: bool,
    keep_empty: bool = False,
) -> tuple[dict[TopicIdPartition, list[AcknowledgementBatch]], dict[TopicIdPartition, ErrorCode]]:  # fmt: skip
    """The acknowledgement batches by partition (those with none left out unless `keep_empty`)
    and the partitions whose batches are malformed (INVALID_REQUEST)."""
    acks: dict[TopicIdPartition, list[AcknowledgementBatch]] = {}
    errors: dict[TopicIdPartition, ErrorCode] = {}
    for topic_id, partition, batches in partitions:
        tip = (topic_id or uuid.UUID(int=0), int(partition))
        if not batches and not keep_empty:
            continue
        converted = [
            AcknowledgementBatch(int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types))
            for b in batches
        ]
        if acknowledgement_batches_valid(converted, supports_renew, is_renew_ack):
            acks[tip] = converted
        else:
            errors[tip] = ErrorCode.invalid_request
    return acks, errors


def topic_refusals(ctx: RequestContext) -> Callable[[TopicIdPartition], ErrorCode | None]:
    """For a partition of a share fetch or acknowledgement: its topic's error, or None."""
    image = ctx.services.controller.image

    def refuse(tip: TopicIdPartition) -> ErrorCode | None:
        topic = image.topic_by_id(tip[0])
        if topic is None:
            return ErrorCode.unknown_topic_id
        if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, topic.name):
            return ErrorCode.topic_authorization_failed
        return None

    return refuse
