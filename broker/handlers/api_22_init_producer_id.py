# InitProducerId (key 22), versions 0-5.
# Idempotent producers (null transactional id) get a new producer id with epoch 0, from blocks the
# controller reserves and persists, so an id is never handed out twice. The broker then keeps, per
# partition, each producer's epoch and last five batches (broker/log/producer_state.py).
# Not supported: transactional ids. There is no transaction coordinator yet, so a transactional id
# is answered COORDINATOR_NOT_AVAILABLE (as FindCoordinator does for transaction keys), and a
# transaction timeout above transaction.max.timeout.ms INVALID_TRANSACTION_TIMEOUT.
# Authorization: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent
# producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679;
# CLUSTER_AUTHORIZATION_FAILED).
from __future__ import annotations

from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.init_producer_id.v5.response import InitProducerIdResponse
from kio.static.primitive import i16

from broker.context import RequestContext
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.types import NO_PRODUCER_ID, NO_THROTTLE, ProducerId

API_KEY = 22


def _response(error: ErrorCode, producer_id: int = NO_PRODUCER_ID, epoch: int = -1) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time=NO_THROTTLE,
        error_code=error,
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(epoch),
    )


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None and not ctx.authorized(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _response(ErrorCode.transactional_id_authorization_failed)
    if request.transactional_id is None and not (
            ctx.authorized(AclOperation.IDEMPOTENT_WRITE) or ctx.authorized_any(AclOperation.WRITE, ResourceType.TOPIC)):
        return _response(ErrorCode.cluster_authorization_failed)
    if request.transactional_id is not None:
        timeout_ms = request.transaction_timeout.total_seconds() * 1000
        if timeout_ms <= 0 or timeout_ms > ctx.services.config.transaction_max_timeout_ms:
            return _response(ErrorCode.invalid_transaction_timeout)
        return _response(ErrorCode.coordinator_not_available)
    producer_id = await ctx.services.producer_ids.generate()
    return _response(ErrorCode.none, producer_id, 0)
