# ListTransactions (key 66), versions 0-2.
# kafka-transactions.sh list and find-hanging: the transactional ids this broker coordinates
# (Kafka's listTransactionStates), filtered by state names (unknown names are echoed in
# unknown_state_filters and match nothing), producer ids, v1 a duration (transactions started
# more than that many milliseconds ago) and v2 a regular expression the whole id must match.
# COORDINATOR_LOAD_IN_PROGRESS while a __transaction_state partition loads.
# Authorization: only the transactional ids the principal may DESCRIBE are listed.
# Not supported: nothing of v0-2 is left out.
from __future__ import annotations

from kio.schema.list_transactions.v2.request import ListTransactionsRequest
from kio.schema.list_transactions.v2.response import ListTransactionsResponse, TransactionState
from kio.schema.types import TransactionalId

from broker.context import RequestContext
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.types import NO_THROTTLE, ProducerId

API_KEY = 66


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    error, unknown, listings = ctx.services.txn_coordinator.list_transactions(
        list(request.state_filters),
        {int(p) for p in request.producer_id_filters},
        int(request.duration_filter),
        request.transactional_id_pattern,
    )
    return ListTransactionsResponse(
        throttle_time=NO_THROTTLE,
        error_code=error,
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            TransactionState(
                transactional_id=TransactionalId(t.transactional_id), producer_id=ProducerId(t.producer_id), transaction_state=t.state
            )
            for t in listings
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id)
        ),
    )
