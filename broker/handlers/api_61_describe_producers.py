# DescribeProducers (key 61), version 0.
# kafka-transactions.sh describe-producers and find-hanging: the producers a partition leader's
# log tracks (Kafka's activeProducerState): producer id and epoch, last sequence and timestamp,
# the coordinator epoch of its last marker, and the first offset of its open transaction (-1 when
# none). Per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER.
# Authorization: READ on the topic (TOPIC_AUTHORIZATION_FAILED per partition).
# Not supported: nothing of v0 is left out.
from __future__ import annotations

from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_producers.v0.response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from kio.static.primitive import i32, i64

from broker.context import RequestContext
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, ProducerId, TopicName

API_KEY = 61


def _partition(ctx: RequestContext, tp: TopicPartition) -> PartitionResponse:
    try:
        if not ctx.authorized(AclOperation.READ, ResourceType.TOPIC, tp.topic):
            raise KafkaError(ErrorCode.topic_authorization_failed)
        partition = ctx.services.replica_manager.leader_partition(tp)
    except KafkaError as exc:
        return PartitionResponse(
            partition_index=i32(tp.partition), error_code=exc.code, error_message=exc.message, active_producers=()
        )
    open_txns = partition.ongoing_transaction_first_offsets()
    return PartitionResponse(
        partition_index=i32(tp.partition),
        error_code=ErrorCode.none,
        active_producers=tuple(
            ProducerState(
                producer_id=ProducerId(e.producer_id),
                producer_epoch=i32(e.producer_epoch),
                last_sequence=i32(e.last_seq),
                last_timestamp=i64(e.last_timestamp),
                coordinator_epoch=i32(e.coordinator_epoch),
                current_txn_start_offset=i64(open_txns.get(e.producer_id, -1)),
            )
            for e in partition.active_producers()
        ),
    )


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    return DescribeProducersResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            TopicResponse(
                name=TopicName(t.name),
                partitions=tuple(_partition(ctx, TopicPartition(str(t.name), int(p))) for p in t.partition_indexes),
            )
            for t in request.topics
        ),
    )
