# OffsetForLeaderEpoch (key 23), versions 2-4.
# For each partition: the end offset of the requested leader epoch on this broker's log, from the
# leader-epoch cache (Kafka's LeaderEpochFileCache.endOffsetFor): the largest epoch <= the one asked
# for and the start offset of the next epoch, or the log end offset for the latest epoch;
# (-1, -1) for an epoch below the first one known. Consumers validate their position with it after
# a leader change (KIP-320, v3+ in Java, v2 in librdkafka); followers truncate with it.
# A current leader epoch other than ours is fenced; replica_id -2 (v0-2 default) may be answered by
# any replica, others only by the leader, or by a follower to its successor in a chain-replicated
# topic once it has truncated for the current leader epoch itself (broker/replication/chain.py): its
# log is then a prefix of the leader's, so its answer never cuts a successor above the leader's.
# Not supported: v0-1 (removed in Kafka 4; no listed client needs them).
# Authorization: CLUSTER_ACTION on the cluster (brokers), else DESCRIBE on each topic
# (TOPIC_AUTHORIZATION_FAILED).
from __future__ import annotations

from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest
from kio.schema.offset_for_leader_epoch.v4.response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kio.static.primitive import i32, i64

from broker.context import RequestContext
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, BrokerId

API_KEY = 23
DEBUGGING_REPLICA_ID = -2


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    replica_manager = ctx.services.replica_manager
    only_leader = request.replica_id != DEBUGGING_REPLICA_ID
    topics = []
    for topic in request.topics:
        results = []
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            try:
                if not (ctx.authorized(AclOperation.CLUSTER_ACTION)
                        or ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)):
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                partition = replica_manager.get_partition(tp)
                chain = request.replica_id >= 0 and not partition.is_leader
                if chain:  # a chain successor truncating against this follower
                    partition.check_serves_chain(BrokerId(request.replica_id), p.current_leader_epoch)
                epoch, end_offset = partition.last_offset_for_leader_epoch(
                    p.current_leader_epoch, p.leader_epoch, fetch_only_from_leader=only_leader and not chain
                )
                results.append(
                    EpochEndOffset(
                        error_code=ErrorCode.none,
                        partition=i32(p.partition),
                        leader_epoch=i32(epoch),
                        end_offset=i64(end_offset),
                    )
                )
            except KafkaError as e:
                results.append(EpochEndOffset(error_code=e.code, partition=i32(p.partition)))
        topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=tuple(results)))
    return OffsetForLeaderEpochResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))
