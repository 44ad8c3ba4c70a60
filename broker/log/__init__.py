"""Storage: partition logs of record batch segments, indexes, recovery, retention, producer state.

Public names: `UnifiedLog`, `LogManager`, `LogConfig`, `LogAppendInfo`,
`FetchDataInfo`, `FileRecords`, `TimestampAndOffset`, `LeaderEpochFileCache`,
`ProducerStateManager`.
"""

from __future__ import annotations

from broker.config import LogConfig
from broker.log.epoch_cache import LeaderEpochFileCache
from broker.log.info import (
    FetchDataInfo,
    FileRecords,
    LogAppendInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from broker.log.log import UnifiedLog
from broker.log.manager import LogManager
from broker.log.producer_state import ProducerStateManager

__all__ = [
    "FetchDataInfo",
    "FileRecords",
    "LeaderEpochFileCache",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "LogOffsetMetadata",
    "ProducerStateManager",
    "TimestampAndOffset",
    "UnifiedLog",
]
