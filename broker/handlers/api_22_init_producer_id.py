# InitProducerId (key 22), versions 0-5.
# Idempotent producers (null transactional id) get a new producer id with epoch 0, from blocks the
# controller reserves and persists, so an id is never handed out twice. The broker then keeps, per
# partition, each producer's epoch and last five batches (broker/log/producer_state.py).
# A transactional id goes to its transaction coordinator (broker/txn/coordinator.py, Kafka's
# handleInitProducerId): a new id gets a producer id and epoch 0; an existing one the epoch bumped
# (which fences the previous producer), or a new producer id when the epoch is exhausted; an
# ongoing transaction of the previous producer is aborted first and CONCURRENT_TRANSACTIONS
# answered so the client retries. A timeout outside (0, transaction.max.timeout.ms] is
# INVALID_TRANSACTION_TIMEOUT; v3+ producer id and epoch that match neither the current nor the
# previous producer PRODUCER_FENCED (v0-3: INVALID_PRODUCER_EPOCH).
# Authorization: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent
# producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679;
# CLUSTER_AUTHORIZATION_FAILED).
# Not supported: v6 (KIP-939 two-phase commit; Kafka 4.3.1 does not advertise it either).
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
        timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
        result = await ctx.services.txn_coordinator.init_producer_id(
            request.transactional_id, timeout_ms, int(request.producer_id), int(request.producer_epoch)
        )
        error = result.error
        if error == ErrorCode.producer_fenced and ctx.api_version < 4:
            error = ErrorCode.invalid_producer_epoch
        return _response(error, result.producer_id, result.producer_epoch)
    producer_id = await ctx.services.producer_ids.generate()
    return _response(ErrorCode.none, producer_id, 0)
