# AddPartitionsToTxn (key 24), versions 0-5.
# A transactional producer adds partitions to its transaction before it writes to them (KIP-98):
# the transaction coordinator (broker/txn/coordinator.py, Kafka's handleAddPartitionsToTransaction)
# checks the producer id (INVALID_PRODUCER_ID_MAPPING) and epoch (PRODUCER_FENCED; v0-1 get
# INVALID_PRODUCER_EPOCH, as Kafka answers clients that predate PRODUCER_FENCED), answers
# CONCURRENT_TRANSACTIONS while the previous transaction is completing, and writes the new
# partition set to __transaction_state (acks=all) before answering. Every partition gets the same
# error. v0-3 (clients) carry one transaction; v4-5 (KIP-890 part 1, between brokers: a partition
# leader asks the coordinator before a transactional append) a batch of transactions, each
# answered on its own, with `verify_only` to check without adding (Kafka's
# handleVerifyPartitionsInTransaction: NONE for a partition in the transaction,
# TRANSACTION_ABORTABLE for the others, INVALID_PRODUCER_ID_MAPPING / PRODUCER_FENCED /
# CONCURRENT_TRANSACTIONS for all). v5 only says TRANSACTION_ABORTABLE is understood.
# Authorization (Kafka's KafkaApis): v0-3 WRITE on the transactional id
# (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition) and on each topic
# (TOPIC_AUTHORIZATION_FAILED; internal topics always); v4-5 CLUSTER_ACTION on the cluster (brokers
# only; the top-level error CLUSTER_AUTHORIZATION_FAILED). A partition refused so, or of an unknown
# topic (UNKNOWN_TOPIC_OR_PARTITION), fails its transaction: the others get OPERATION_NOT_ATTEMPTED.
# Coordinator errors as FindCoordinator.
from __future__ import annotations

from typing import Any

from kio.schema.add_partitions_to_txn.v3.response import (
    AddPartitionsToTxnPartitionResult as PartitionResultV3,
)
from kio.schema.add_partitions_to_txn.v3.response import (
    AddPartitionsToTxnResponse as AddPartitionsToTxnResponseV3,
)
from kio.schema.add_partitions_to_txn.v3.response import (
    AddPartitionsToTxnTopicResult as TopicResultV3,
)
from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kio.schema.add_partitions_to_txn.v5.response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from kio.schema.types import TransactionalId
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from controller.model import INTERNAL_TOPICS
from controller.security_model import AclOperation, ResourceType
from protocol import messages
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, TopicName

API_KEY = 24
FIRST_BROKER_VERSION = 4


def fenced_for(api_version: int, error: ErrorCode, first_fenced_version: int) -> ErrorCode:
    """PRODUCER_FENCED as the versions before it knew it (Kafka: INVALID_PRODUCER_EPOCH)."""
    if error == ErrorCode.producer_fenced and api_version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return error


def _upgrade(api_version: int, request: Any) -> AddPartitionsToTxnRequest:
    """v0-3: the one transaction of a client (Kafka's normalizeRequest); v4 as it is."""
    if api_version >= FIRST_BROKER_VERSION:
        return messages.convert(request, AddPartitionsToTxnRequest)
    return AddPartitionsToTxnRequest(
        transactions=(
            AddPartitionsToTxnTransaction(
                transactional_id=request.v3_and_below_transactional_id,
                producer_id=request.v3_and_below_producer_id,
                producer_epoch=request.v3_and_below_producer_epoch,
                verify_only=False,
                topics=tuple(
                    AddPartitionsToTxnTopic(name=t.name, partitions=t.partitions)
                    for t in request.v3_and_below_topics
                ),
            ),
        )
    )


async def _transaction(
    ctx: RequestContext, txn: AddPartitionsToTxnTransaction
) -> dict[TopicPartition, ErrorCode]:
    """Kafka's handling of one transaction of the request: an error for each of its partitions."""
    partitions = [TopicPartition(str(t.name), int(p)) for t in txn.topics for p in t.partitions]
    client = ctx.api_version < FIRST_BROKER_VERSION
    if client and not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn.transactional_id):
        return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
    image = ctx.services.controller.image
    failed: dict[TopicPartition, ErrorCode] = {}
    for tp in partitions:
        if client and (tp.topic in INTERNAL_TOPICS or not ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, tp.topic)):
            failed[tp] = ErrorCode.topic_authorization_failed
        elif image.partition(tp.topic, tp.partition) is None:
            failed[tp] = ErrorCode.unknown_topic_or_partition
    if failed:  # any failed partition fails the transaction; the others were not attempted
        return {tp: failed.get(tp, ErrorCode.operation_not_attempted) for tp in partitions}
    coordinator = ctx.services.txn_coordinator
    pid, epoch = int(txn.producer_id), int(txn.producer_epoch)
    if txn.verify_only:
        return coordinator.verify_partitions(txn.transactional_id, pid, epoch, partitions)
    tv = 2 if not client else 0  # Kafka's transactionVersionForAddPartitionsToTxn
    error = await coordinator.add_partitions(txn.transactional_id, pid, epoch, set(partitions), tv)
    return dict.fromkeys(partitions, fenced_for(ctx.api_version, error, 2))


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> dict[str, list[tuple[int, ErrorCode]]]:
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, code))
    return by_topic


def _v3(errors: dict[TopicPartition, ErrorCode]) -> AddPartitionsToTxnResponseV3:
    return AddPartitionsToTxnResponseV3(
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            TopicResultV3(
                name=TopicName(topic),
                results_by_partition=tuple(
                    PartitionResultV3(partition_index=i32(p), partition_error_code=code) for p, code in parts
                ),
            )
            for topic, parts in _topic_results(errors).items()
        ),
    )


def _error_response(ctx: RequestContext, request: AddPartitionsToTxnRequest, error: Exception) -> Any:
    code = getattr(error, "code", ErrorCode.unknown_server_error)
    if ctx.api_version < FIRST_BROKER_VERSION:
        return _v3({
            TopicPartition(str(t.name), int(p)): code
            for txn in request.transactions for t in txn.topics for p in t.partitions
        })  # fmt: skip
    return AddPartitionsToTxnResponse(throttle_time=NO_THROTTLE, error_code=code, results_by_transaction=())


@registry.api(API_KEY, error_response=_error_response, upgrade=_upgrade)
async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> Any:
    if ctx.api_version < FIRST_BROKER_VERSION:
        return _v3(await _transaction(ctx, request.transactions[0]))
    if not ctx.authorized(AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=()
        )
    results = []
    for txn in request.transactions:
        errors = await _transaction(ctx, txn)
        results.append(
            AddPartitionsToTxnResult(
                transactional_id=TransactionalId(txn.transactional_id),
                topic_results=tuple(
                    AddPartitionsToTxnTopicResult(
                        name=TopicName(topic),
                        results_by_partition=tuple(
                            AddPartitionsToTxnPartitionResult(partition_index=i32(p), partition_error_code=code)
                            for p, code in parts
                        ),
                    )
                    for topic, parts in _topic_results(errors).items()
                ),
            )
        )
    return AddPartitionsToTxnResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results_by_transaction=tuple(results)
    )
