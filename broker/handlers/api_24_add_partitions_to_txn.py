# AddPartitionsToTxn (key 24), versions 0-3.
# A transactional producer adds partitions to its transaction before it writes to them (KIP-98):
# the transaction coordinator (broker/txn/coordinator.py, Kafka's handleAddPartitionsToTransaction)
# checks the producer id (INVALID_PRODUCER_ID_MAPPING) and epoch (PRODUCER_FENCED; v0-1 get
# INVALID_PRODUCER_EPOCH, as Kafka answers clients that predate PRODUCER_FENCED), answers
# CONCURRENT_TRANSACTIONS while the previous transaction is completing, and writes the new
# partition set to __transaction_state (acks=all) before answering. Every partition gets the same
# error. Authorization (Kafka's KafkaApis): WRITE on the transactional id
# (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), WRITE on each topic
# (TOPIC_AUTHORIZATION_FAILED; internal topics always). A partition refused so, or of an unknown
# topic (UNKNOWN_TOPIC_OR_PARTITION), fails the request: the others get OPERATION_NOT_ATTEMPTED.
# Coordinator errors as FindCoordinator.
# Not supported: v4-5 (KIP-890 batched and verify-only requests between brokers).
from __future__ import annotations

from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from controller.model import INTERNAL_TOPICS
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, TopicName

API_KEY = 24


def fenced_for(api_version: int, error: ErrorCode, first_fenced_version: int) -> ErrorCode:
    """PRODUCER_FENCED as the versions before it knew it (Kafka: INVALID_PRODUCER_EPOCH)."""
    if error == ErrorCode.producer_fenced and api_version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return error


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    image = ctx.services.controller.image
    partitions = [
        TopicPartition(str(t.name), int(p)) for t in request.v3_and_below_topics for p in t.partitions
    ]
    errors: dict[TopicPartition, ErrorCode]
    failed: dict[TopicPartition, ErrorCode] = {}
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        failed = dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
    for tp in [] if failed else partitions:
        if tp.topic in INTERNAL_TOPICS or not ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, tp.topic):
            failed[tp] = ErrorCode.topic_authorization_failed
        elif image.partition(tp.topic, tp.partition) is None:
            failed[tp] = ErrorCode.unknown_topic_or_partition
    if failed:  # any failed partition fails the request; the others were not attempted
        errors = {tp: failed.get(tp, ErrorCode.operation_not_attempted) for tp in partitions}
    else:
        error = await ctx.services.txn_coordinator.add_partitions(
            request.v3_and_below_transactional_id,
            int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch),
            set(partitions),
        )
        errors = dict.fromkeys(partitions, fenced_for(ctx.api_version, error, 2))
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=i32(tp.partition), partition_error_code=code)
        )
    return AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            AddPartitionsToTxnTopicResult(name=TopicName(topic), results_by_partition=tuple(results))
            for topic, results in by_topic.items()
        ),
    )
