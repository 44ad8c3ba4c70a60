# DeleteRecords (key 21), versions 0-2.
# Per partition, on its leader, as Kafka's Partition.deleteRecordsOnLeader: the log start offset
# moves up to the requested offset (-1 means the high watermark); the records below it are no
# longer readable (Fetch below it -> OFFSET_OUT_OF_RANGE, ListOffsets EARLIEST -> it) and the
# segments wholly below it are deleted by the next retention pass. The answer's low_watermark is
# the new log start offset. Errors with Kafka's codes: an internal topic -> INVALID_TOPIC_EXCEPTION;
# unknown partition -> UNKNOWN_TOPIC_OR_PARTITION; not the leader -> NOT_LEADER_OR_FOLLOWER; a topic
# whose cleanup.policy lacks "delete" -> POLICY_VIOLATION; an offset below -1 or above the high
# watermark -> OFFSET_OUT_OF_RANGE. Failed partitions report low_watermark -1. A partition named
# twice is answered once, for its last entry, as Kafka does. Authorization: DELETE on the topic
# (TOPIC_AUTHORIZATION_FAILED, before its existence is looked at).
# Not supported: waiting for followers to move their log start offsets (Kafka's delayed
# DeleteRecords purgatory); the low watermark is the leader's.
from __future__ import annotations

from kio.schema.delete_records.v2.request import DeleteRecordsRequest
from kio.schema.delete_records.v2.response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import audit
from controller.model import INTERNAL_TOPICS
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, Offset

API_KEY = 21


def delete_records_on_leader(ctx: RequestContext, tp: TopicPartition, offset: int) -> int:
    """Move the partition's log start offset; returns the new low watermark. Raises KafkaError."""
    if tp.topic in INTERNAL_TOPICS:
        raise KafkaError(
            ErrorCode.invalid_topic_exception, f"Cannot delete records of internal topic {tp.topic}"
        )
    partition = ctx.services.replica_manager.get_partition(tp)
    return partition.delete_records_on_leader(Offset(offset))


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    # A partition named twice is answered once, for its last entry (Kafka keeps them in a map).
    wanted: dict[TopicPartition, int] = {}
    for topic in request.topics:
        for p in topic.partitions:
            wanted[TopicPartition(topic.name, p.partition_index)] = p.offset
    by_topic: dict[TopicName, list[DeleteRecordsPartitionResult]] = {}
    for tp, offset in wanted.items():
        message = None
        try:
            if not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, tp.topic):
                raise KafkaError(ErrorCode.topic_authorization_failed)
            low = delete_records_on_leader(ctx, tp, offset)
            error = ErrorCode.none
        except KafkaError as e:
            low, error, message = -1, e.code, e.message
        by_topic.setdefault(TopicName(tp.topic), []).append(
            DeleteRecordsPartitionResult(partition_index=i32(tp.partition), low_watermark=i64(low), error_code=error)
        )
        audit(
            ctx,
            "delete_records",
            topic=tp.topic,
            partition=tp.partition,
            offset=offset,
            low_watermark=low,
            result=error.name,
            message=repr(message),
        )
    topics = tuple(DeleteRecordsTopicResult(name=name, partitions=tuple(parts)) for name, parts in by_topic.items())
    return DeleteRecordsResponse(throttle_time=NO_THROTTLE, topics=topics)
