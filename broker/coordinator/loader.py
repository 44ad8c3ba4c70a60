"""Rebuilding groups and offsets from a `__consumer_offsets` partition.

`decode_chunk` turns a stretch of log bytes into parsed records (pure; the coordinator runs it off
the event loop). `LoadState` folds records in log order: the last record of each key wins and a
tombstone removes the key, exactly what compaction keeps.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from broker.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetCommitKey,
    RecordKey,
    read_group_value,
    read_key,
    read_offset_value,
)
from protocol.errors import CorruptRecordError
from protocol.records import HEADER_SIZE, BatchHeader, decode_records
from protocol.topic_partition import TopicPartition

log = logging.getLogger("samsa.coordinator")

ParsedRecord = tuple[RecordKey, "OffsetAndMetadata | GroupMetadataValue | None"]


@dataclass(frozen=True, slots=True)
class DecodedChunk:
    records: tuple[ParsedRecord, ...]
    next_offset: int
    """Offset after the last whole batch decoded (where the next read starts)."""
    skipped: int
    """Records whose key version Samsa does not use (or that could not be parsed)."""


def decode_chunk(data: bytes, start_offset: int) -> DecodedChunk:
    """Parse the whole batches in `data` (a trailing partial batch is left for the next read)."""
    records: list[ParsedRecord] = []
    skipped = 0
    pos = 0
    next_offset = start_offset
    while len(data) - pos >= HEADER_SIZE:
        header = BatchHeader.parse(data, pos)
        if pos + header.size > len(data):
            break
        if not header.is_control:
            for record in decode_records(data, pos, header):
                if record.offset < start_offset:
                    continue
                try:
                    key = read_key(record.key)
                    if key is None:
                        skipped += 1
                        continue
                    if isinstance(key, OffsetCommitKey):
                        records.append((key, read_offset_value(record.value)))
                    else:
                        records.append((key, read_group_value(record.value)))
                except CorruptRecordError as e:
                    skipped += 1
                    log.warning("unreadable __consumer_offsets record offset=%d error=%s", record.offset, e)
        next_offset = header.next_offset
        pos += header.size
    return DecodedChunk(tuple(records), next_offset, skipped)


@dataclass(slots=True)
class LoadState:
    """What a partition holds, after folding its records in order."""

    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    removed_groups: set[str] = field(default_factory=set)
    records: int = 0

    def apply(self, chunk: DecodedChunk) -> None:
        for key, value in chunk.records:
            self.records += 1
            if isinstance(key, OffsetCommitKey):
                tp = TopicPartition(key.topic, key.partition)
                if value is None:
                    self.offsets.get(key.group, {}).pop(tp, None)
                else:
                    assert isinstance(value, OffsetAndMetadata)
                    self.offsets.setdefault(key.group, {})[tp] = value
            elif isinstance(key, GroupMetadataKey):
                if value is None:
                    self.groups.pop(key.group, None)
                    self.removed_groups.add(key.group)
                else:
                    assert isinstance(value, GroupMetadataValue)
                    self.groups[key.group] = value
                    self.removed_groups.discard(key.group)

    def group_ids(self) -> set[str]:
        return set(self.groups) | {g for g, offsets in self.offsets.items() if offsets}
