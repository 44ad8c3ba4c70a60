"""What DescribeLogDirs reports of this broker's log dirs (Kafka's ReplicaManager.describeLogDirs)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.replication.replica_manager import ReplicaManager

log = logging.getLogger("samsa.replica_manager")


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One local replica's log as DescribeLogDirs reports it (Kafka's ReplicaInfo)."""

    tp: TopicPartition
    size: int
    offset_lag: int
    is_future: bool = False
    """A future log: the copy of a replica moving into this dir (AlterReplicaLogDirs)."""


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    """One log dir: its absolute path, its file system's total and usable bytes, its replicas."""

    path: str
    total_bytes: int
    usable_bytes: int
    replicas: tuple[ReplicaInfo, ...]
    error: ErrorCode = ErrorCode.none


def describe_log_dirs(
    replica_manager: ReplicaManager, partitions: Iterable[TopicPartition] | None
) -> list[LogDirInfo]:
    """Kafka's ReplicaManager.describeLogDirs: every configured log dir (once each), with the logs
    of the asked partitions it holds (all when None): size and offset lag, max(high watermark -
    log end offset, 0) for a current log and, for a future log (a replica moving into the
    dir), how far it is behind the current log (Kafka's getLogEndOffsetLag)."""
    wanted = None if partitions is None else set(partitions)
    by_dir: dict[str, list[ReplicaInfo]] = {}
    for tp, log_ in replica_manager.log_manager.all_logs().items():
        if wanted is not None and tp not in wanted:
            continue
        partition = replica_manager.partitions.get(tp)
        hw = partition.high_watermark if partition is not None else log_.log_end_offset
        by_dir.setdefault(str(log_.dir.parent.absolute()), []).append(
            ReplicaInfo(tp, log_.size, max(hw - log_.log_end_offset, 0))
        )
    for tp, future in replica_manager.log_manager.all_future_logs().items():
        current = replica_manager.log_manager.get_log(tp)
        if (wanted is not None and tp not in wanted) or current is None:
            continue
        by_dir.setdefault(str(future.dir.parent.absolute()), []).append(
            ReplicaInfo(tp, future.size, current.log_end_offset - future.log_end_offset, is_future=True)
        )
    out = []
    offline = {str(p.absolute()) for p in replica_manager.log_manager.offline_dirs}
    for d in dict.fromkeys(str(p.absolute()) for p in replica_manager.log_manager.log_dirs):
        if d in offline:  # Kafka: "Log directory ... is offline"
            out.append(LogDirInfo(d, -1, -1, (), ErrorCode.kafka_storage_error))
            continue
        try:
            usage = shutil.disk_usage(d)
        except OSError as e:  # the dir is gone or unreadable: Kafka's offline dir
            log.warning("log dir not describable path=%s error=%s", d, e)
            out.append(LogDirInfo(d, -1, -1, (), ErrorCode.kafka_storage_error))
            continue
        out.append(LogDirInfo(d, usage.total, usage.free, tuple(by_dir.get(d, ()))))
    return out
