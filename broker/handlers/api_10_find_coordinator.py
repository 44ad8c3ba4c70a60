# FindCoordinator (key 10), versions 0-6.
# Key type 0 (group): creates __consumer_offsets on first use (offsets.topic.num.partitions
# partitions, replication min(offsets.topic.replication.factor, live brokers), compacted) and
# answers with the leader of partition abs(hash(group)) % partitions, on the listener the request
# came in on; COORDINATOR_NOT_AVAILABLE while that partition has no leader. v0-3 carry one key, v4
# a batch (coordinator_keys), each answered on its own. Key type 1 (transaction): creates
# __transaction_state on first use (transaction.state.log.num.partitions, replication
# min(transaction.state.log.replication.factor, live brokers)) and answers the leader of partition
# abs(hash(transactional id)) % partitions. Key type 2 (share, v6 only: INVALID_REQUEST before,
# KIP-932): the key is `group:topicId:partition`, read from the right as Kafka reads it
# (INVALID_REQUEST unless the group is not empty, the topic id a Kafka Uuid string and the partition
# an int32); creates __share_group_state on first use and answers the leader of the key's state
# partition (broker/share/share_coordinator.py). Other key types INVALID_REQUEST. v5 is v4 (it lets
# the client understand TRANSACTION_ABORTABLE, which this API never answers). v4+ per-key errors
# carry an empty message, as Kafka's.
# Authorization: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or on the transactional id
# (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), CLUSTER_ACTION for a share key (brokers only:
# CLUSTER_AUTHORIZATION_FAILED), per key.
from __future__ import annotations

import logging
from typing import Any

from kio.schema.find_coordinator.v3.response import (
    FindCoordinatorResponse as FindCoordinatorResponseV3,
)
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v6.response import Coordinator, FindCoordinatorResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i8, i32

from broker.context import RequestContext
from broker.coordinator.coordinator import CoordinatorNode
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from broker.share.share_coordinator import SHARE_GROUP_STATE_TOPIC, parse_coordinator_key
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError

API_KEY = 10
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2
SHARE_MIN_VERSION = 6
INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or the message was "
    "sent to an incompatible broker. See the broker logs for more details."
)
"""Kafka's Errors.INVALID_REQUEST.message, which a v4+ request of an unknown key type is answered with."""
log = logging.getLogger("samsa.coordinator")


def _upgrade(api_version: int, request: Any) -> FindCoordinatorRequest:
    """v0-3 (one key) and v4-5 (v6's fields) as the v6 request."""
    keys = request.coordinator_keys if api_version >= 4 else (request.key,)
    return FindCoordinatorRequest(key_type=i8(getattr(request, "key_type", 0)), coordinator_keys=keys)


def _message(error: ErrorCode) -> str | None:
    return None if error == ErrorCode.none else error.name


async def _find(ctx: RequestContext, key_type: int, key: str) -> CoordinatorNode:
    if key_type == GROUP_KEY_TYPE and not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return CoordinatorNode(ErrorCode.group_authorization_failed)
    if key_type == TRANSACTION_KEY_TYPE and not ctx.authorized(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return CoordinatorNode(ErrorCode.transactional_id_authorization_failed)
    if key_type == TRANSACTION_KEY_TYPE:
        return await _find_transaction_coordinator(ctx, key)
    if key_type == SHARE_KEY_TYPE:
        return await _find_share_coordinator(ctx, key)
    if key_type != GROUP_KEY_TYPE:
        return CoordinatorNode(ErrorCode.invalid_request)
    node = await coordinator(ctx).find_coordinator(key, ctx.listener)
    log.debug(
        "find coordinator group=%s node=%d error=%s client_id=%s correlation_id=%d",
        key, node.node_id, node.error.name, ctx.client_id, ctx.correlation_id,
    )  # fmt: skip
    return node


async def _find_transaction_coordinator(ctx: RequestContext, key: str) -> CoordinatorNode:
    if not key:
        return CoordinatorNode(ErrorCode.invalid_request)
    error, index = await ctx.services.txn_coordinator.find_coordinator_partition(key)
    return _leader_of(ctx, "__transaction_state", index, error)


async def _find_share_coordinator(ctx: RequestContext, key: str) -> CoordinatorNode:
    if ctx.api_version < SHARE_MIN_VERSION:
        return CoordinatorNode(ErrorCode.invalid_request)
    if not ctx.authorized(AclOperation.CLUSTER_ACTION):
        return CoordinatorNode(ErrorCode.cluster_authorization_failed)
    share_key = parse_coordinator_key(key)
    if share_key is None:
        return CoordinatorNode(ErrorCode.invalid_request)
    share_coordinator = ctx.services.share_coordinator
    if share_coordinator is None:
        return CoordinatorNode(ErrorCode.coordinator_not_available)
    error, index = await share_coordinator.find_coordinator_partition(share_key)
    return _leader_of(ctx, SHARE_GROUP_STATE_TOPIC, index, error)


def _leader_of(ctx: RequestContext, topic: str, index: int, error: ErrorCode) -> CoordinatorNode:
    """The leader of partition `index` of a coordinator's topic on the request's listener."""
    if error != ErrorCode.none:
        return CoordinatorNode(error)
    image = ctx.services.controller.image
    reg = image.partition(topic, index)
    if reg is None or not reg.online:
        return CoordinatorNode(ErrorCode.coordinator_not_available)
    broker = image.brokers.get(reg.leader)
    endpoint = broker.endpoint(ctx.listener) if broker is not None else None
    if endpoint is None:
        return CoordinatorNode(ErrorCode.coordinator_not_available)
    return CoordinatorNode(ErrorCode.none, int(reg.leader), endpoint.host, endpoint.port)


def _v3(node: CoordinatorNode) -> FindCoordinatorResponseV3:
    return FindCoordinatorResponseV3(
        throttle_time=NO_THROTTLE,
        error_code=node.error,
        error_message=_message(node.error),
        node_id=BrokerId(node.node_id),
        host=node.host,
        port=i32(node.port),
    )


def _error_response(ctx: RequestContext, request: FindCoordinatorRequest, error: Exception) -> Any:
    code = getattr(error, "code", ErrorCode.unknown_server_error)
    if ctx.api_version < 4:
        return _v3(CoordinatorNode(code))
    message = error.message if isinstance(error, KafkaError) else _message(code)
    return FindCoordinatorResponse(
        throttle_time=NO_THROTTLE,
        coordinators=tuple(
            Coordinator(key=k, node_id=BrokerId(-1), host="", port=i32(-1), error_code=code, error_message=message)
            for k in request.coordinator_keys
        ),
    )


@registry.api(API_KEY, error_response=_error_response, upgrade=_upgrade)
async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> Any:
    if ctx.api_version < 4:
        return _v3(await _find(ctx, request.key_type, request.coordinator_keys[0]))
    if request.key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE):
        raise KafkaError(ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE)
    coordinators = []
    for key in request.coordinator_keys:
        node = await _find(ctx, request.key_type, key)
        coordinators.append(
            Coordinator(
                key=key,
                node_id=BrokerId(node.node_id),
                host=node.host,
                port=i32(node.port),
                error_code=node.error,
                error_message="",
            )
        )
    return FindCoordinatorResponse(throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))
