# EndTxn (key 26), versions 0-4.
# Commits or aborts the producer's transaction (Kafka's handleEndTransaction): from Ongoing the
# coordinator writes PrepareCommit/PrepareAbort to __transaction_state and answers; the COMMIT or
# ABORT markers then go to every partition of the transaction (retried until written) and
# CompleteCommit/CompleteAbort is written (broker/txn/coordinator.py). A repeated EndTxn of an
# ended transaction answers NONE, one of a completing transaction CONCURRENT_TRANSACTIONS, an
# EndTxn with no transaction (Empty) or of the other result INVALID_TXN_STATE, a wrong producer
# id INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED (v0-1: INVALID_PRODUCER_EPOCH).
# Authorization: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
# Not supported: v5 (KIP-890 transactions v2: the epoch bumped by every EndTxn).
from __future__ import annotations

from kio.schema.end_txn.v4.request import EndTxnRequest
from kio.schema.end_txn.v4.response import EndTxnResponse

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers.api_24_add_partitions_to_txn import fenced_for
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE

API_KEY = 26


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    else:
        error = await ctx.services.txn_coordinator.end_transaction(
            request.transactional_id, int(request.producer_id), int(request.producer_epoch), request.committed
        )
    return EndTxnResponse(throttle_time=NO_THROTTLE, error_code=fenced_for(ctx.api_version, error, 2))
