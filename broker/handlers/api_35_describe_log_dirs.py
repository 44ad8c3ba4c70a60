# DescribeLogDirs (key 35), versions 1-5.
# Every log dir of this broker (log.dirs, each once, as an absolute path) with its file system's
# total and usable bytes (v4+) and, per topic, the size and offset lag of each local replica of
# the partitions asked for (every partition when topics is null): Kafka's
# ReplicaManager.describeLogDirs. A topic none of whose asked partitions a dir holds is left out
# of that dir. The offset lag is max(high watermark - log end offset, 0), 0 for every current
# log. A replica moving into a dir (AlterReplicaLogDirs) is listed there too with is_future_key
# true, its offset lag how far its copy is behind the current log. is_cordoned (v5) is false
# (Samsa does not cordon dirs). A dir that cannot be read answers KAFKA_STORAGE_ERROR.
# Not supported: v0 (Kafka 4.x serves v1+); authorization (no ACLs yet: issue 14).
from __future__ import annotations

from kio.schema.describe_log_dirs.v5.request import DescribeLogDirsRequest
from kio.schema.describe_log_dirs.v5.response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from broker.context import RequestContext
from broker.handlers import registry
from broker.replication.log_dirs import ReplicaInfo, describe_log_dirs
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE

API_KEY = 35


def _topics(replicas: tuple[ReplicaInfo, ...]) -> tuple[DescribeLogDirsTopic, ...]:
    by_topic: dict[str, list[ReplicaInfo]] = {}
    for r in replicas:
        by_topic.setdefault(r.tp.topic, []).append(r)
    return tuple(
        DescribeLogDirsTopic(
            name=TopicName(topic),
            partitions=tuple(
                DescribeLogDirsPartition(
                    partition_index=i32(r.tp.partition),
                    partition_size=i64(r.size),
                    offset_lag=i64(r.offset_lag),
                    is_future_key=r.is_future,
                )
                for r in sorted(rs, key=lambda r: (r.tp.partition, r.is_future))
            ),
        )
        for topic, rs in sorted(by_topic.items())
    )


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    partitions = (
        None
        if request.topics is None
        else [TopicPartition(t.topic, int(p)) for t in request.topics for p in t.partitions]
    )
    return DescribeLogDirsResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results=tuple(
            DescribeLogDirsResult(
                error_code=d.error,
                log_dir=d.path,
                topics=_topics(d.replicas),
                total_bytes=i64(d.total_bytes),
                usable_bytes=i64(d.usable_bytes),
                is_cordoned=False,
            )
            for d in describe_log_dirs(ctx.services.replica_manager, partitions)
        ),
    )
