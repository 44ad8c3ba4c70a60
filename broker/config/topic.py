"""Topic configs: `LogConfig`, the per-topic settings the storage layer obeys, declared here with
Apache Kafka's names, types, defaults and documentation; CreateTopics/AlterConfigs validation;
a topic's effective config from the broker defaults and its own overrides.

Each field is a topic config with dots as underscores (`retention.ms` -> `retention_ms`). A
LogConfig is frozen: a topic's config changes by building a new one (`topic_log_config`) and
assigning it to the log. Defaults apply as in Kafka: a topic's own setting, else the broker config
it falls back to (`retention.ms` <- `log.retention.ms`, `.minutes`, `.hours`), else Kafka's default.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from broker.config.settings import (
    BOOLEAN,
    BOTH,
    CLEANUP,
    COMPRESSION,
    DOUBLE,
    HOUR_MS,
    INT,
    LIST,
    LONG,
    MINUTE_MS,
    NO_DOWNCONVERSION,
    NO_LEVELS,
    NO_MESSAGE_FORMAT,
    NO_PREALLOCATE,
    NO_TIERED_STORAGE,
    NO_TIMESTAMP_DIFFERENCE,
    STRING,
    TIMESTAMP_TYPE,
    ConfigDef,
    Range,
    at_least,
    definitions,
    syn,
    topic_setting,
)
from broker.config.values import LONG_MAX, ConfigError, GzipLevel, ThrottledReplicas
from protocol.compression import CompressionType
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("samsa.config")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Topic-level log settings (the topic configs), with Apache Kafka 4.x's defaults."""

    # ---- broker configs that are also topic configs under the same name ----------------------
    compression_type: str = topic_setting(STRING, "producer",
        "The codec batches are stored in: `producer` keeps each batch as the producer compressed "
        "it (byte for byte); `uncompressed`, `gzip`, `snappy`, `lz4` or `zstd` makes the leader "
        "rewrite a produced batch in another codec with that one (same records, producer id, epoch "
        "and sequence); a batch already in it is stored as produced.", COMPRESSION, scope=BOTH)
    min_insync_replicas: int = topic_setting(INT, 1,
        "Minimum ISR size for acks=all produce requests.", at_least(1), scope=BOTH)
    unclean_leader_election_enable: bool = topic_setting(BOOLEAN, False,
        "Allow replicas outside the ISR to become leader (may lose acknowledged data).", scope=BOTH)
    # ---- topic configs, with the broker configs they default to ---------------------------------
    cleanup_policy: str = topic_setting(LIST, ("delete",),
        "delete, compact, or both.", CLEANUP, synonyms=syn("log.cleanup.policy"))
    segment_bytes: int = topic_setting(INT, 1_073_741_824,
        "Segment file size.", at_least(14), synonyms=syn("log.segment.bytes"))
    segment_ms: int = topic_setting(LONG, 604_800_000,
        "Roll a segment after this long even if not full.",
        at_least(1), synonyms=syn("log.roll.ms", ("log.roll.hours", HOUR_MS)))
    segment_jitter_ms: int = topic_setting(LONG, 0,
        "Maximum random jitter subtracted from segment.ms.",
        at_least(0), synonyms=syn("log.roll.jitter.ms", ("log.roll.jitter.hours", HOUR_MS)))
    segment_index_bytes: int = topic_setting(INT, 10_485_760,
        "Size of the offset and time index files.",
        at_least(4), synonyms=syn("log.index.size.max.bytes"))
    index_interval_bytes: int = topic_setting(INT, 4096,
        "Bytes between offset index entries.",
        at_least(0), synonyms=syn("log.index.interval.bytes"))
    retention_ms: int = topic_setting(LONG, 604_800_000,
        "Keep segments this long; -1 means forever.",
        at_least(-1), synonyms=syn("log.retention.ms", ("log.retention.minutes", MINUTE_MS), ("log.retention.hours", HOUR_MS)))
    retention_bytes: int = topic_setting(LONG, -1,
        "Largest partition size before old segments are deleted; -1 means no limit.",
        synonyms=syn("log.retention.bytes"))
    max_message_bytes: int = topic_setting(INT, 1_048_588,
        "Largest record batch accepted.", at_least(0), synonyms=syn("message.max.bytes"))
    flush_messages: int = topic_setting(LONG, LONG_MAX,
        "fsync after this many messages.",
        at_least(1), synonyms=syn("log.flush.interval.messages"))
    flush_ms: int = topic_setting(LONG, LONG_MAX,
        "fsync when unflushed data is this old.",
        at_least(0), synonyms=syn("log.flush.interval.ms", "log.flush.scheduler.interval.ms"))
    file_delete_delay_ms: int = topic_setting(LONG, 60_000,
        "Delay before deleted segment files are removed.",
        at_least(0), synonyms=syn("log.segment.delete.delay.ms"))
    delete_retention_ms: int = topic_setting(LONG, 86_400_000,
        "How long tombstones are kept on compacted topics.",
        at_least(0), synonyms=syn("log.cleaner.delete.retention.ms"))
    min_compaction_lag_ms: int = topic_setting(LONG, 0,
        "Minimum age before a message may be compacted.",
        at_least(0), synonyms=syn("log.cleaner.min.compaction.lag.ms"))
    max_compaction_lag_ms: int = topic_setting(LONG, LONG_MAX,
        "Maximum time a message stays ineligible for compaction.",
        at_least(1), synonyms=syn("log.cleaner.max.compaction.lag.ms"))
    min_cleanable_dirty_ratio: float = topic_setting(DOUBLE, 0.5,
        "Dirty ratio at which the log is compacted.",
        Range(0, 1), synonyms=syn("log.cleaner.min.cleanable.ratio"))
    message_timestamp_type: str = topic_setting(STRING, "CreateTime",
        "CreateTime or LogAppendTime.",
        TIMESTAMP_TYPE, synonyms=syn("log.message.timestamp.type"))
    message_timestamp_before_max_ms: int = topic_setting(LONG, LONG_MAX,
        "How far in the past a record timestamp may be.",
        at_least(0), synonyms=syn("log.message.timestamp.before.max.ms"))
    message_timestamp_after_max_ms: int = topic_setting(LONG, 3_600_000,
        "How far in the future a record timestamp may be.",
        at_least(0), synonyms=syn("log.message.timestamp.after.max.ms"))
    message_downconversion_enable: bool = topic_setting(BOOLEAN, True,
        NO_DOWNCONVERSION, synonyms=syn("log.message.downconversion.enable"))
    preallocate: bool = topic_setting(BOOLEAN, False,
        NO_PREALLOCATE, synonyms=syn("log.preallocate"))
    # ---- accepted as Kafka 3.9 and 4.x accept them (compat/test_config_names.py) ---------------
    message_format_version: str = topic_setting(STRING, "3.0-IV1",
        NO_MESSAGE_FORMAT, synonyms=syn("log.message.format.version"))
    message_timestamp_difference_max_ms: int = topic_setting(LONG, LONG_MAX,
        NO_TIMESTAMP_DIFFERENCE, at_least(0), synonyms=syn("log.message.timestamp.difference.max.ms"))
    compression_gzip_level: int = topic_setting(INT, -1,
        NO_LEVELS + "(Kafka: the gzip level, -1 for zlib's default, or 1-9).", GzipLevel(), scope=BOTH)
    compression_lz4_level: int = topic_setting(INT, 9,
        NO_LEVELS + "(Kafka: the lz4 level, 1-17).", Range(1, 17), scope=BOTH)
    compression_zstd_level: int = topic_setting(INT, 3,
        NO_LEVELS + "(Kafka: the zstd level, -131072-22).", Range(-131_072, 22), scope=BOTH)
    leader_replication_throttled_replicas: str = topic_setting(LIST, (),
        "The replicas ([partitionId]:[brokerId],... or *) whose replication traffic is throttled "
        "on the leader side: a broker leading a partition named for it sends followers outside the "
        "ISR no more than leader.replication.throttled.rate.", ThrottledReplicas())
    follower_replication_throttled_replicas: str = topic_setting(LIST, (),
        "The replicas ([partitionId]:[brokerId],... or *) whose replication traffic is throttled "
        "on the follower side: a broker following a partition named for it, outside the ISR, "
        "fetches no more than follower.replication.throttled.rate.", ThrottledReplicas())
    remote_storage_enable: bool = topic_setting(BOOLEAN, False,
        NO_TIERED_STORAGE + "(Kafka: keep the topic's older segments in remote storage). Setting "
        "it true is refused, as Kafka refuses it on a broker without tiered storage.")
    remote_log_copy_disable: bool = topic_setting(BOOLEAN, False,
        NO_TIERED_STORAGE + "(Kafka: stop copying segments to remote storage).")
    remote_log_delete_on_disable: bool = topic_setting(BOOLEAN, False,
        NO_TIERED_STORAGE + "(Kafka: delete the remote segments when tiered storage is turned off).")
    local_retention_ms: int = topic_setting(LONG, -2,
        NO_TIERED_STORAGE + "(Kafka: how long segments stay local once copied to remote storage; "
        "-2 means retention.ms).", at_least(-2), synonyms=syn("log.local.retention.ms"))
    local_retention_bytes: int = topic_setting(LONG, -2,
        NO_TIERED_STORAGE + "(Kafka: the local size bound once segments are in remote storage; "
        "-2 means retention.bytes).", at_least(-2), synonyms=syn("log.local.retention.bytes"))
    internal_segment_bytes: int | None = topic_setting(INT, None,
        "Kafka 4.x's internal segment size for tests (below segment.bytes' 1 MiB floor): when set, "
        "it is the segment size instead of segment.bytes.", at_least(14))
    # ---- Samsa's own (Kafka rejects it as an unknown config: compat/differences.py) -------------
    replication_pipeline_enable: bool = topic_setting(BOOLEAN, False,
        "Samsa's pipelined (chain) replication: with three or more replicas, the followers fetch "
        "in a chain in replica-list order (the first from the leader, each next from the one "
        "before it), so the leader sends each byte once instead of once per follower; the high "
        "watermark, ISR and truncation rules stay Kafka's, and a broken chain falls back to "
        "fetching from the leader at once (broker/replication/chain.py).")

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


def _finish(d: ConfigDef) -> ConfigDef:
    """A topic config without broker synonyms (compression.type) is its own synonym."""
    return d if d.synonyms else dataclasses.replace(d, synonyms=syn(d.name))


TOPIC_CONFIGS: Mapping[str, ConfigDef] = MappingProxyType(
    {d.name: d for d in map(_finish, definitions(LogConfig))})
"""Configs a topic may override (CreateTopics, AlterConfigs), by name."""


def build_log_config(base: LogConfig, typed: Mapping[str, object]) -> LogConfig:
    """`base` with the topic configs in `typed` (name -> typed value) replaced; a LIST value
    becomes its comma-joined string, as LogConfig holds it (cleanup_policy)."""
    changes = {
        name.replace(".", "_"): ",".join(value) if isinstance(value, tuple) else value
        for name, value in typed.items()
    }
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def parse_topic_configs(configs: Mapping[str, str | None], *,
                         allow_null: bool) -> dict[str, object]:
    """Parse topic overrides (None values skipped); raise KafkaError(invalid_config)."""
    unknown = [k for k in configs if k not in TOPIC_CONFIGS]
    if unknown:
        raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {unknown[0]}")
    nulls = [k for k, v in configs.items() if v is None]
    if nulls and not allow_null:
        raise KafkaError(ErrorCode.invalid_config,
                         f"Null value not supported for topic configs: {','.join(nulls)}")
    typed: dict[str, object] = {}
    for key, raw in configs.items():
        if raw is None:
            continue
        try:
            typed[key] = TOPIC_CONFIGS[key].parse(raw)
        except ConfigError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from None
    return typed


def _check_compaction_lag(min_lag: object, max_lag: object) -> None:
    assert isinstance(min_lag, int) and isinstance(max_lag, int)
    if min_lag > max_lag:
        raise KafkaError(ErrorCode.invalid_config,
                         f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
                         f"max.compaction.lag.ms ({max_lag})")


INTERNAL_TOPIC_CONFIGS = frozenset({"internal.segment.bytes"})
"""Kafka's internal topic configs (defineInternal): accepted, described only where set."""

DEPRECATED_TOPIC_CONFIGS: Mapping[str, str] = MappingProxyType({
    "message.format.version": "ignored because the inter-broker protocol version is greater or equal "
    "than 3.0; this configuration is deprecated and it will be removed in Apache Kafka 4.0",
    "message.timestamp.difference.max.ms": "deprecated in Kafka 3.6 and removed in 4.0; "
    "message.timestamp.before.max.ms and message.timestamp.after.max.ms decide",
})
"""Topic configs Kafka 3.9 accepts with a deprecation warning (removed in 4.0): accepted, no effect,
with Kafka's warning (its LogConfig.MessageFormatVersion.topicWarningMessage)."""
DEPRECATED_BROKER_CONFIGS: Mapping[str, str] = MappingProxyType(
    {TOPIC_CONFIGS[name].synonyms[0].name: reason for name, reason in DEPRECATED_TOPIC_CONFIGS.items()})
"""Their broker defaults (log.message.format.version, ...), accepted the same way."""


def validate_topic_configs(
    configs: Mapping[str, str | None], *, allow_null: bool = True, topic: str = ""
) -> None:
    """Check topic config overrides from CreateTopics / AlterConfigs.

    Raises `KafkaError(ErrorCode.invalid_config, msg)` with Kafka's wording for an unknown name
    (`Unknown topic config name: x`), a value of the wrong type or out of range
    (`Invalid value -2 for configuration retention.ms: Value must be at least -1`),
    min.compaction.lag.ms above max.compaction.lag.ms, or remote.storage.enable true (no tiered
    storage). A None value means "remove the override" and passes unless `allow_null` is False
    (CreateTopics rejects nulls). A deprecated config is accepted with one warning line, as
    Kafka 3.9 accepts it.
    """
    typed = parse_topic_configs(configs, allow_null=allow_null)
    _check_compaction_lag(
        typed.get("min.compaction.lag.ms", TOPIC_CONFIGS["min.compaction.lag.ms"].default),
        typed.get("max.compaction.lag.ms", TOPIC_CONFIGS["max.compaction.lag.ms"].default))
    if typed.get("remote.storage.enable") is True:
        raise KafkaError(ErrorCode.invalid_config, "Tiered Storage functionality is disabled in the broker. "
                         "Topic cannot be configured with remote log storage.")
    for name in sorted(typed.keys() & DEPRECATED_TOPIC_CONFIGS.keys()):
        if configs[name] is not None:
            log.warning("deprecated topic config accepted with no effect topic=%s config=%s value=%s reason=%r",
                        topic, name, configs[name], DEPRECATED_TOPIC_CONFIGS[name])


def topic_log_config(defaults: LogConfig, overrides: Mapping[str, str | None]) -> LogConfig:
    """`defaults` (usually `BrokerConfig.log_config()`) with a topic's overrides applied.

    Raises KafkaError(invalid_config) like `validate_topic_configs`; None values are ignored.
    """
    config = build_log_config(defaults, parse_topic_configs(overrides, allow_null=True))
    _check_compaction_lag(config.min_compaction_lag_ms, config.max_compaction_lag_ms)
    if config.internal_segment_bytes is not None:
        config = dataclasses.replace(config, segment_bytes=config.internal_segment_bytes)
    return config
