# AddOffsetsToTxn (key 25), versions 0-4.
# Before TxnOffsetCommit, a transactional producer adds the group's __consumer_offsets partition
# to its transaction (KIP-98): the transaction coordinator adds partition
# abs(hash(group)) % offsets partitions like any other (broker/txn/coordinator.py), with the same
# errors as AddPartitionsToTxn (v0-1 get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED). The markers
# that end the transaction then reach that partition too, which makes the group's transactional
# offsets visible (commit) or drops them (abort).
# Authorization: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ
# on the group (GROUP_AUTHORIZATION_FAILED).
# Not supported: nothing of v0-4 is left out.
from __future__ import annotations

from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest
from kio.schema.add_offsets_to_txn.v4.response import AddOffsetsToTxnResponse

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers.api_24_add_partitions_to_txn import fenced_for
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE

API_KEY = 25


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    coordinator = ctx.services.txn_coordinator
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    elif not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        error = await coordinator.add_partitions(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            {coordinator.offsets_partition(str(request.group_id))},
        )
    return AddOffsetsToTxnResponse(throttle_time=NO_THROTTLE, error_code=fenced_for(ctx.api_version, error, 2))
