"""`LogConfig`: the per-topic settings the storage layer obeys, with Apache Kafka's defaults.

Field names are Kafka's topic config names with dots replaced by underscores
(`retention.ms` -> `retention_ms`). The value is frozen: a topic's config changes by building a
new one with `dataclasses.replace(config, retention_ms=...)` and assigning it to `UnifiedLog.config`.
broker/config.py maps string configs (server.properties, CreateTopics, AlterConfigs) onto it.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.compression import CompressionType

LONG_MAX = (1 << 63) - 1
"""Java's Long.MAX_VALUE, Kafka's "never" for millisecond and count settings."""
INT_MAX = (1 << 31) - 1

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
"""Broker config producer.id.expiration.ms: idle producers are forgotten after a day."""


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Topic-level log settings; defaults are Apache Kafka 4.x's."""

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    max_message_bytes: int = 1_048_588
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    file_delete_delay_ms: int = 60_000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    compression_type: str = "producer"
    preallocate: bool = False
    message_downconversion_enable: bool = True

    @property
    def compact(self) -> bool:
        """True when cleanup.policy includes `compact`."""
        return "compact" in _policies(self.cleanup_policy)

    @property
    def delete(self) -> bool:
        """True when cleanup.policy includes `delete` (time and size retention apply)."""
        return "delete" in _policies(self.cleanup_policy)

    @property
    def max_segment_ms(self) -> int:
        """How long the active segment may stay open (Kafka's LogConfig.maxSegmentMs): segment.ms,
        or max.compaction.lag.ms when that is shorter on a compacted topic (KIP-354), so records
        become cleanable in time."""
        if self.compact and 0 < self.max_compaction_lag_ms < self.segment_ms:
            return self.max_compaction_lag_ms
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        """True when message.timestamp.type is LogAppendTime."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def target_compression(self) -> CompressionType | None:
        """The codec compression.type stores batches in; None for `producer` (as produced)."""
        return _TARGET_COMPRESSION.get(self.compression_type)

    @property
    def max_offset_index_entries(self) -> int:
        """How many 8-byte entries fit in segment.index.bytes."""
        return max(1, self.segment_index_bytes // 8)

    @property
    def max_time_index_entries(self) -> int:
        """How many 12-byte entries fit in segment.index.bytes."""
        return max(1, self.segment_index_bytes // 12)


_TARGET_COMPRESSION = {
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}


def _policies(value: str) -> set[str]:
    return {p.strip() for p in value.split(",") if p.strip()}
