"""Rebuilding a coordinator's state from its internal topic partition.

`replay_partition` reads a partition this broker leads from its log start to the log end offset
it had when loading began, in chunks decoded off the event loop; the group coordinator
(`__consumer_offsets`) and the transaction coordinator (`__transaction_state`) both load with it.

For `__consumer_offsets`, `decode_chunk` turns a stretch of log bytes into parsed records (pure)
and `LoadState` folds them in log order: the last record of each key wins and a tombstone removes
the key, exactly what compaction keeps. Offsets committed inside a transaction (TxnOffsetCommit,
transactional batches) are held per producer until its marker: a COMMIT applies them, an ABORT
drops them, and those still open when the load ends stay pending (Kafka's
GroupMetadataManager.doLoadGroupsAndOffsets). A KIP-848 group's records (consumer_records.py) are
folded the same way, per record type and member, for `ConsumerGroups.restore`, and so are a share
group's (broker/share/group_records.py) for `ShareGroups.load`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from broker.coordinator import consumer_records
from broker.coordinator.consumer_records import ConsumerGroupKey, ConsumerGroupValue
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
from broker.share import group_records as share_records
from broker.share.share_group_log import RecordsByKey
from broker.share.share_group_log import replay as replay_share_record
from protocol.control import read_end_txn_marker
from protocol.errors import CorruptRecordError
from protocol.records import HEADER_SIZE, BatchHeader, decode_records
from protocol.topic_partition import TopicPartition
from protocol.types import Offset

if TYPE_CHECKING:
    from broker.log.info import FileRecords
    from broker.replication.partition import Partition

log = logging.getLogger("samsa.coordinator")

LOAD_BUFFER_BYTES = 5 * 1024 * 1024
LOAD_PROGRESS_INTERVAL_S = 5.0


class Chunk(Protocol):
    @property
    def next_offset(self) -> int: ...


ChunkT = TypeVar("ChunkT", bound=Chunk)


async def replay_partition(
    partition: Partition,
    decode: Callable[[bytes, int], ChunkT],
    apply: Callable[[ChunkT], None],
    still_current: Callable[[], bool],
    *,
    label: str,
) -> int | None:
    """Read `partition` from its log start to its log end offset as it is now, decoding each
    chunk in a worker thread and applying it on the loop; progress logged every 5 s. Returns the
    end offset, or None if `still_current()` turned false meanwhile (unloaded)."""
    from broker.replication.partition import FetchIsolation

    position = int(partition.log_start_offset)
    end = int(partition.log_end_offset)
    last_progress = time.monotonic()
    while position < end:
        info = partition.read_records(
            Offset(position), LOAD_BUFFER_BYTES, FetchIsolation.LOG_END,
            fetch_only_from_leader=False, max_offset=Offset(end),
        ).info  # fmt: skip
        if info is None or info.records is None:
            break
        chunk = await asyncio.to_thread(_read_and_decode, info.records, position, decode)
        if not still_current():
            return None
        if chunk.next_offset <= position:
            log.error("loading stuck %s offset=%d", label, position)
            break
        apply(chunk)
        position = chunk.next_offset
        if time.monotonic() - last_progress >= LOAD_PROGRESS_INTERVAL_S:
            last_progress = time.monotonic()
            log.info("loading %s offset=%d end=%d", label, position, end)
    return end


def _read_and_decode(records: FileRecords, position: int, decode: Callable[[bytes, int], ChunkT]) -> ChunkT:
    return decode(records.read_bytes(), position)


ParsedRecord = (
    tuple[RecordKey, "OffsetAndMetadata | GroupMetadataValue | None", int]
    | tuple[ConsumerGroupKey, "ConsumerGroupValue | None", int]
    | tuple[share_records.ShareGroupKey, "share_records.ShareGroupValue | None", int]
)
"""(key, value, producer id of a transactional record or -1)."""


@dataclass(frozen=True, slots=True)
class TxnMarkerEvent:
    """A COMMIT or ABORT marker of `producer_id` at this point of the log."""

    producer_id: int
    commit: bool


@dataclass(frozen=True, slots=True)
class DecodedChunk:
    records: tuple[ParsedRecord | TxnMarkerEvent, ...]
    next_offset: int
    """Offset after the last whole batch decoded (where the next read starts)."""
    skipped: int
    """Records whose key version Samsa does not use (or that could not be parsed)."""


def decode_chunk(data: bytes, start_offset: int) -> DecodedChunk:
    """Parse the whole batches in `data` (a trailing partial batch is left for the next read)."""
    records: list[ParsedRecord | TxnMarkerEvent] = []
    skipped = 0
    pos = 0
    next_offset = start_offset
    while len(data) - pos >= HEADER_SIZE:
        header = BatchHeader.parse(data, pos)
        if pos + header.size > len(data):
            break
        if header.is_control:
            if header.last_offset >= start_offset:
                try:
                    marker = read_end_txn_marker(data, pos, header)
                except CorruptRecordError:
                    marker = None
                if marker is not None:
                    records.append(TxnMarkerEvent(header.producer_id, not marker.is_abort))
        else:
            txn_pid = header.producer_id if header.is_transactional else -1
            for record in decode_records(data, pos, header):
                if record.offset < start_offset:
                    continue
                try:
                    key = read_key(record.key)
                    if key is None and record.key is not None:
                        consumer_key = consumer_records.read_key(record.key)
                        if consumer_key is not None:
                            value = consumer_records.read_value(consumer_key.type, record.value)
                            records.append((consumer_key, value, txn_pid))
                            continue
                        share_key = share_records.read_key(record.key)
                        if share_key is not None:
                            share_value = share_records.read_value(share_key.type, record.value)
                            records.append((share_key, share_value, txn_pid))
                            continue
                    if key is None:
                        skipped += 1
                        continue
                    if isinstance(key, OffsetCommitKey):
                        records.append((key, read_offset_value(record.value), txn_pid))
                    else:
                        records.append((key, read_group_value(record.value), txn_pid))
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
    pending_txn_offsets: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = field(default_factory=dict)
    """Producer id -> group -> offsets committed in its transaction, awaiting its marker."""
    consumer_groups: dict[str, dict[tuple[int, str | None], ConsumerGroupValue]] = field(default_factory=dict)
    """KIP-848 group -> (record type, member id) -> its latest value (consumer_records.py)."""
    share_groups: dict[str, RecordsByKey] = field(default_factory=dict)
    """Share group -> (record type, member id) -> its latest value (broker/share/group_records.py)."""
    records: int = 0

    def apply(self, chunk: DecodedChunk) -> None:
        for item in chunk.records:
            if isinstance(item, TxnMarkerEvent):
                pending = self.pending_txn_offsets.pop(item.producer_id, {})
                if item.commit:
                    for group, offsets in pending.items():
                        self.offsets.setdefault(group, {}).update(offsets)
                continue
            key, value, txn_pid = item
            self.records += 1
            if isinstance(key, share_records.ShareGroupKey):
                replay_share_record(self.share_groups, key, cast("share_records.ShareGroupValue | None", value))
            elif isinstance(key, ConsumerGroupKey):
                records = self.consumer_groups.setdefault(key.group, {})
                if value is None:
                    records.pop((key.type, key.member_id), None)
                else:
                    records[(key.type, key.member_id)] = cast("ConsumerGroupValue", value)
            elif isinstance(key, OffsetCommitKey):
                tp = TopicPartition(key.topic, key.partition)
                if txn_pid >= 0 and value is not None:
                    assert isinstance(value, OffsetAndMetadata)
                    self.pending_txn_offsets.setdefault(txn_pid, {}).setdefault(key.group, {})[tp] = value
                elif value is None:
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
        pending = {g for by_group in self.pending_txn_offsets.values() for g in by_group}
        consumer = {g for g, records in self.consumer_groups.items() if (consumer_records.GROUP_METADATA, None) in records}
        return set(self.groups) | {g for g, offsets in self.offsets.items() if offsets} | pending | consumer
