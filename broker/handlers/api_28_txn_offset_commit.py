# TxnOffsetCommit (key 28), versions 0-5.
# Offsets a transactional producer commits for a consumer group (sendOffsetsToTransaction,
# KIP-98/447): written by the group coordinator into the group's __consumer_offsets partition as
# a transactional batch of the producer id and epoch, held as the group's pending transactional
# offsets, and visible to OffsetFetch only once the transaction's COMMIT marker reaches that
# partition (an ABORT drops them; OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT
# meanwhile). v3+ carry member id, generation and group instance id, checked as Kafka's classic
# groups do (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID); without them any state
# is accepted. Unknown topics get UNKNOWN_TOPIC_OR_PARTITION; coordinator errors per partition.
# Authorization (Kafka's KafkaApis): WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
# READ on the group (GROUP_AUTHORIZATION_FAILED), each for every partition; READ on each topic
# (TOPIC_AUTHORIZATION_FAILED for its partitions, the others are committed).
# v5 (transactions v2, KIP-890 part 2): the client sends no AddOffsetsToTxn; the group's
# __consumer_offsets partition is first added to the transaction by this broker (the transaction
# coordinator's add, asked of another broker with AddPartitionsToTxn v5), its error for every
# partition as Kafka's group coordinator answers it (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH,
# NOT_ENOUGH_REPLICAS as COORDINATOR_NOT_AVAILABLE).
from __future__ import annotations

from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequest
from kio.schema.txn_offset_commit.v5.response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.coordinator.coordinator import OffsetCommitEntry
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, TopicName

API_KEY = 28
FIRST_V2_VERSION = 5


async def _add_offsets_partition(ctx: RequestContext, request: TxnOffsetCommitRequest) -> ErrorCode:
    """Transactions v2: the group's offsets partition joins the transaction (Kafka's
    maybeStartTransactionVerification with the addPartition operation)."""
    offsets = ctx.services.txn_coordinator.offsets_partition(str(request.group_id))
    failed = await ctx.services.txn_coordinator.verify_append(
        request.transactional_id, int(request.producer_id), int(request.producer_epoch), [offsets], add=True
    )
    error = failed.get(offsets, ErrorCode.none)
    if error in (ErrorCode.not_enough_replicas, ErrorCode.unknown_topic_or_partition, ErrorCode.request_timed_out):
        return ErrorCode.coordinator_not_available
    return error


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    entries = [
        OffsetCommitEntry(
            TopicPartition(str(t.name), int(p.partition_index)),
            int(p.committed_offset),
            int(p.committed_leader_epoch),
            p.committed_metadata,
        )
        for t in request.topics
        for p in t.partitions
    ]
    coordinator = ctx.services.group_coordinator
    if not ctx.authorized(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not ctx.authorized(AclOperation.READ, ResourceType.GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error, _ = coordinator.group_status(str(request.group_id))
    if error == ErrorCode.none and ctx.api_version >= FIRST_V2_VERSION:
        error = await _add_offsets_partition(ctx, request)
    results: dict[TopicPartition, ErrorCode]
    if error != ErrorCode.none:
        results = {e.tp: error for e in entries}
    else:
        image = ctx.services.controller.image
        results = {}
        for e in entries:
            if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, e.tp.topic):
                results[e.tp] = ErrorCode.topic_authorization_failed
            elif image.partition(e.tp.topic, e.tp.partition) is None:
                results[e.tp] = ErrorCode.unknown_topic_or_partition
        allowed = [e for e in entries if e.tp not in results]
        if allowed:
            results |= await coordinator.commit_transactional_offsets(
                str(request.group_id),
                int(request.producer_id),
                int(request.producer_epoch),
                request.member_id,
                request.group_instance_id,
                int(request.generation_id),
                allowed,
            )
    by_topic: dict[str, list[TxnOffsetCommitResponsePartition]] = {}
    for e in entries:
        by_topic.setdefault(e.tp.topic, []).append(
            TxnOffsetCommitResponsePartition(partition_index=i32(e.tp.partition), error_code=results[e.tp])
        )
    return TxnOffsetCommitResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            TxnOffsetCommitResponseTopic(name=TopicName(topic), partitions=tuple(parts))
            for topic, parts in by_topic.items()
        ),
    )
