# ListOffsets (key 2), versions 1-11.
# Per partition, on its leader: EARLIEST (-2) is the log start offset, LATEST (-1) the high
# watermark (read_committed: the last stable offset), MAX_TIMESTAMP (-3, v7+) the record with the
# largest timestamp, EARLIEST_LOCAL (-4, v8+) the log start offset, LATEST_TIERED (-5, v9+) and
# EARLIEST_PENDING_UPLOAD (-6, v11+) offset -1 (no tiered storage); any other negative timestamp,
# or a sentinel older than its version, is UNSUPPORTED_VERSION for that partition (Kafka's
# ReplicaManager.isListOffsetsTimestampUnsupported). v10's timeout bounds lookups in remote
# storage, which Samsa has none of: every answer is immediate. A timestamp gives the first offset whose timestamp is at or after it, or
# offset -1 and timestamp -1 when there is none below the HW (KIP-79). Each answer carries the
# leader epoch of its offset. A current leader epoch other than ours is fenced (KIP-320);
# followers (replica_id >= 0) may read up to the log end offset. A partition named more than once
# gets one INVALID_REQUEST answer, after the others (as Kafka 4.x answers). Authorization: DESCRIBE
# on each topic (TOPIC_AUTHORIZATION_FAILED).
# Not supported: v0 (old-style offset lists; no listed client needs it).
from __future__ import annotations

from collections import Counter

from kio.schema.list_offsets.v11.request import ListOffsetsRequest
from kio.schema.list_offsets.v11.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from broker.context import RequestContext
from broker.handlers import registry
from broker.replication.partition import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    FetchIsolation,
)
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, NO_THROTTLE

API_KEY = 2
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
READ_COMMITTED = 1
SENTINEL_MIN_VERSION = {
    EARLIEST_TIMESTAMP: 1, LATEST_TIMESTAMP: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9, EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}  # fmt: skip
"""The first version that may ask each negative timestamp (Kafka's timestampMinSupportedVersion)."""


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    replica_manager = ctx.services.replica_manager
    if request.replica_id >= 0:
        isolation = FetchIsolation.LOG_END
    elif request.isolation_level == READ_COMMITTED:
        isolation = FetchIsolation.TXN_COMMITTED
    else:
        isolation = FetchIsolation.HIGH_WATERMARK
    counts = Counter(TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions)
    duplicates = {tp for tp, n in counts.items() if n > 1}
    by_topic: dict[TopicName, list[ListOffsetsPartitionResponse]] = {}
    for topic in request.topics:
        partitions = by_topic.setdefault(topic.name, [])
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if tp in duplicates:
                continue
            response = ListOffsetsPartitionResponse(
                partition_index=i32(p.partition_index), error_code=ErrorCode.none
            )
            if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
                partitions.append(ListOffsetsPartitionResponse(
                    partition_index=i32(p.partition_index), error_code=ErrorCode.topic_authorization_failed))
                continue
            if p.timestamp < 0 and ctx.api_version < SENTINEL_MIN_VERSION.get(p.timestamp, 1 << 15):
                partitions.append(ListOffsetsPartitionResponse(
                    partition_index=i32(p.partition_index), error_code=ErrorCode.unsupported_version))
                continue
            try:
                found = replica_manager.get_partition(tp).fetch_offset_for_timestamp(
                    p.timestamp,
                    isolation,
                    current_leader_epoch=p.current_leader_epoch,
                    fetch_only_from_leader=request.replica_id != DEBUGGING_REPLICA_ID,
                )
                if found is not None:
                    response = ListOffsetsPartitionResponse(
                        partition_index=i32(p.partition_index),
                        error_code=ErrorCode.none,
                        timestamp=i64(found.timestamp),
                        offset=i64(found.offset),
                        leader_epoch=i32(found.leader_epoch),
                    )
            except KafkaError as e:
                response = ListOffsetsPartitionResponse(partition_index=i32(p.partition_index), error_code=e.code)
            partitions.append(response)
    for tp in counts:  # each duplicated partition once, after the others, as Kafka answers it
        if tp in duplicates:
            by_topic[TopicName(tp.topic)].append(
                ListOffsetsPartitionResponse(partition_index=i32(tp.partition), error_code=ErrorCode.invalid_request)
            )
    topics = [ListOffsetsTopicResponse(name=name, partitions=tuple(parts)) for name, parts in by_topic.items()]
    return ListOffsetsResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))
