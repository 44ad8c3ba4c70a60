# AlterReplicaLogDirs (key 34), versions 1-2.
# Moves this broker's replicas between its log dirs (kafka-reassign-partitions.sh with `log_dirs`,
# Admin.alterReplicaLogDirs), as Kafka's ReplicaManager.alterReplicaLogDirs: per partition, a dir
# that is not one of log.dirs (the request names its absolute path) -> LOG_DIR_NOT_FOUND, an
# offline one -> KAFKA_STORAGE_ERROR; a move to another dir in progress is cancelled; the dir is
# remembered for the partition's next log here; a partition with no replica here ->
# REPLICA_NOT_AVAILABLE (UNKNOWN_TOPIC_OR_PARTITION if it does not exist). Otherwise a future log
# `<topic>-<partition>.<uuid>-future` is created in the dir and filled from the current log, the
# new appends followed, and swapped in under the partition's log lock once caught up
# (broker/replication/alter_log_dirs.py); the answer (NONE) does not wait for the copy, which
# DescribeLogDirs shows (is_future_key, offset lag), which resumes after a restart and which
# replica.alter.log.dirs.io.max.bytes.per.second throttles. A partition named under several dirs
# goes to the last one (Kafka's map). Without ALTER on the cluster every partition answers
# CLUSTER_AUTHORIZATION_FAILED.
# Not supported: v0 (Kafka 4.x serves v1+); throttle_time is always 0.
from __future__ import annotations

from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest
from kio.schema.alter_replica_log_dirs.v2.response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import audit
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE

API_KEY = 34


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    dirs = {
        TopicPartition(str(t.name), int(p)): d.path for d in request.dirs for t in d.topics for p in t.partitions
    }
    if ctx.authorized(AclOperation.ALTER, ResourceType.CLUSTER):
        results = ctx.services.replica_manager.alter_replica_log_dirs(dirs)
        audit(ctx, "alter_replica_log_dirs", moves=",".join(f"{tp}:{d}" for tp, d in dirs.items()))
    else:
        results = dict.fromkeys(dirs, ErrorCode.cluster_authorization_failed)
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
    for tp, code in results.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, code))
    return AlterReplicaLogDirsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            AlterReplicaLogDirTopicResult(
                topic_name=TopicName(topic),
                partitions=tuple(
                    AlterReplicaLogDirPartitionResult(partition_index=i32(p), error_code=code)
                    for p, code in sorted(parts)
                ),
            )
            for topic, parts in sorted(by_topic.items())
        ),
    )
