# EndTxn (key 26), versions 0-5.
# Commits or aborts the producer's transaction (Kafka's handleEndTransaction): from Ongoing the
# coordinator writes PrepareCommit/PrepareAbort to __transaction_state and answers; the COMMIT or
# ABORT markers then go to every partition of the transaction (retried until written) and
# CompleteCommit/CompleteAbort is written (broker/txn/coordinator.py). v0-4 (transactions v1): a
# repeated EndTxn of an ended transaction answers NONE, one of a completing transaction
# CONCURRENT_TRANSACTIONS, an EndTxn with no transaction (Empty) or of the other result
# INVALID_TXN_STATE, a wrong producer id INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED
# (v0-1: INVALID_PRODUCER_EPOCH). v5 (transactions v2, KIP-890): every end bumps the producer
# epoch, answered with the producer id and epoch to go on with (a new producer id with epoch 0
# when the epoch is exhausted); a retry is the request at the epoch just bumped from (NONE once
# complete, CONCURRENT_TRANSACTIONS while completing), an abort with no transaction is allowed,
# and any other epoch is PRODUCER_FENCED.
# Authorization: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
from __future__ import annotations

from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.end_txn.v5.response import EndTxnResponse
from kio.static.primitive import i16

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers.api_24_add_partitions_to_txn import fenced_for
from broker.txn.coordinator import EndTxnResult
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE, ProducerId

API_KEY = 26
FIRST_V2_VERSION = 5
"""Kafka's transactionVersionForEndTxn: v5+ are transactions v2."""


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        result = EndTxnResult(ErrorCode.transactional_id_authorization_failed)
    else:
        result = await ctx.services.txn_coordinator.end_transaction(
            request.transactional_id, int(request.producer_id), int(request.producer_epoch), request.committed,
            2 if ctx.api_version >= FIRST_V2_VERSION else 0,
        )  # fmt: skip
    return EndTxnResponse(
        throttle_time=NO_THROTTLE,
        error_code=fenced_for(ctx.api_version, result.error, 2),
        producer_id=ProducerId(result.producer_id),
        producer_epoch=i16(result.producer_epoch),
    )
