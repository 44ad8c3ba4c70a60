# FindCoordinator (key 10), versions 0-4.
# Key type 0 (group): creates __consumer_offsets on first use (offsets.topic.num.partitions
# partitions, replication min(offsets.topic.replication.factor, live brokers), compacted) and
# answers with the leader of partition abs(hash(group)) % partitions, on the listener the request
# came in on; COORDINATOR_NOT_AVAILABLE while that partition has no leader. v0-3 carry one key, v4
# a batch (coordinator_keys), each answered on its own. Key type 1 (transaction): creates
# __transaction_state on first use (transaction.state.log.num.partitions, replication
# min(transaction.state.log.replication.factor, live brokers)) and answers the leader of partition
# abs(hash(transactional id)) % partitions. Other key types INVALID_REQUEST.
# Authorization: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or on the transactional id
# (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key.
# Not supported: v5-6 (KIP-890 TRANSACTION_ABORTABLE and share groups).
from __future__ import annotations

import logging
from typing import Any

from kio.schema.find_coordinator.v3.response import (
    FindCoordinatorResponse as FindCoordinatorResponseV3,
)
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import Coordinator, FindCoordinatorResponse
from kio.schema.types import BrokerId
from kio.static.primitive import i8, i32

from broker.context import RequestContext
from broker.coordinator.coordinator import CoordinatorNode
from broker.coordinator.wire import NO_THROTTLE, coordinator
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 10
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
log = logging.getLogger("samsa.coordinator")


def _upgrade(api_version: int, request: Any) -> FindCoordinatorRequest:
    return FindCoordinatorRequest(key_type=i8(getattr(request, "key_type", 0)), coordinator_keys=(request.key,))


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
    if error != ErrorCode.none:
        return CoordinatorNode(error)
    image = ctx.services.controller.image
    reg = image.partition("__transaction_state", index)
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
    return FindCoordinatorResponse(
        throttle_time=NO_THROTTLE,
        coordinators=tuple(
            Coordinator(key=k, node_id=BrokerId(-1), host="", port=i32(-1), error_code=code, error_message=_message(code))
            for k in request.coordinator_keys
        ),
    )


@registry.api(API_KEY, error_response=_error_response, upgrade=_upgrade)
async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> Any:
    if ctx.api_version < 4:
        return _v3(await _find(ctx, request.key_type, request.coordinator_keys[0]))
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
                error_message=_message(node.error),
            )
        )
    return FindCoordinatorResponse(throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))
