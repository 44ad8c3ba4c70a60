"""The share coordinator (KIP-932; Kafka 4.3.1's ShareCoordinatorService and the CoordinatorRuntime
under it): the share-group state of every share partition, kept in the `__share_group_state`
partitions this broker leads.

The state of share partition (group, topic id, partition) lives in partition
`abs(javaHashCode("group:topicId:partition")) % share.coordinator.state.topic.num.partitions`
(the topic id in Kafka's base64 form) of `__share_group_state`, created on the first
initialization as Kafka creates it (cleanup.policy=delete, retention.ms=-1, compression.type=producer,
`share.coordinator.state.topic.*`). It follows leadership as the group and transaction coordinators
do (PartitionedCoordinator): on becoming leader of a partition it replays the partition's records
into a ShareStateStore; on losing leadership it drops it.

Every request is answered by share_coordinator_shard.py's rules against the partition's store; the
records they return are appended with acks=all (`share.coordinator.write.timeout.ms`), replayed into
the store once written, and only then is the request answered (Kafka's CoordinatorRuntime). One
request at a time per partition (a lock), so that the records of each are built from the state the
previous one left.

This broker's persister (persister.py) calls it for the state partitions led here; other brokers'
persisters reach it through the state RPC handlers (broker/handlers/api_83..87, served but not
advertised); FindCoordinator v6 key type 2 names the leader of a key's state partition
(`find_coordinator_partition`). Not done yet: pruning the topic below the records still needed
(`share.coordinator.state.topic.prune.interval.ms`) and cold-partition snapshots.

States of a state partition: those of broker/coordinator/partitions.py (LOADING -> ACTIVE -> gone).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker import clock
from broker.coordinator.partitions import CoordinatorPartition, PartitionedCoordinator, Replay
from broker.coordinator.partitions import append_error as _append_error
from broker.share import share_coordinator_shard as shard
from broker.share import state_records
from broker.share.in_flight import PersisterStateBatch
from broker.share.share_coordinator_shard import ReadAnswer, StateAnswer, SummaryAnswer
from broker.share.share_state import (
    SharePartitionKey,
    ShareStateRecord,
    ShareStateStore,
)
from protocol.errors import CorruptRecordError, ErrorCode
from protocol.records import HEADER_SIZE, BatchHeader, NewRecord, build_batch, decode_records
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.replication.replica_manager import ReplicaManager
    from controller.interface import Controller

log = logging.getLogger("samsa.share_coordinator")

SHARE_GROUP_STATE_TOPIC = "__share_group_state"


def coordinator_key(key: SharePartitionKey) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: `group:topicId:partition`, the topic id as
    Kafka's Uuid.toString prints it (URL-safe base64, no padding)."""
    topic_id = base64.urlsafe_b64encode(key.topic_id.bytes).decode().rstrip("=")
    return f"{key.group_id}:{topic_id}:{key.partition}"


_PARTITION = re.compile(r"[+-]?[0-9]+")
_INT32 = range(-(2**31), 2**31)


def parse_coordinator_key(text: str) -> SharePartitionKey | None:
    """A coordinator key `group:topicId:partition` read as Kafka reads it, from the right (a group
    id may hold colons): None unless the group is not empty, the topic id is a Kafka Uuid string
    (22 characters of URL-safe base64) and the partition a 32-bit integer."""
    rest, _, partition = text.rpartition(":")
    group, _, topic_id = rest.rpartition(":")
    if not group or _PARTITION.fullmatch(partition) is None or int(partition) not in _INT32:
        return None
    if len(topic_id) != 22 or "+" in topic_id or "/" in topic_id:
        return None
    try:
        raw = base64.b64decode(topic_id + "==", altchars=b"-_", validate=True)
    except ValueError:
        return None
    if len(raw) != 16:
        return None
    return SharePartitionKey(group, uuid.UUID(bytes=raw), int(partition))


@dataclass(eq=False)
class StatePartition(CoordinatorPartition):
    """One `__share_group_state` partition this broker leads and the share partitions it holds."""

    leader_epoch: int = field(kw_only=True)
    store: ShareStateStore = field(kw_only=True)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True, slots=True)
class _Chunk:
    records: tuple[ShareStateRecord, ...]
    next_offset: int


def _decode(data: bytes, start_offset: int) -> _Chunk:
    """The state records of the whole batches in `data` (worker thread)."""
    out: list[ShareStateRecord] = []
    pos = 0
    next_offset = start_offset
    while len(data) - pos >= HEADER_SIZE:
        header = BatchHeader.parse(data, pos)
        if pos + header.size > len(data):
            break
        if not header.is_control:
            for record in decode_records(data, pos, header):
                if record.offset < start_offset or record.key is None:
                    continue
                try:
                    key = state_records.read_key(record.key)
                    value = None if record.value is None else state_records.read_value(key.type, record.value)
                    out.append((key, value))
                except CorruptRecordError as exc:
                    log.warning(
                        "unreadable __share_group_state record offset=%d error=%s", record.offset, exc
                    )
        next_offset = header.next_offset
        pos += header.size
    return _Chunk(tuple(out), next_offset)


def _to_record(item: ShareStateRecord) -> NewRecord:
    key, value = item
    return NewRecord(
        state_records.key_bytes(key), None if value is None else state_records.value_bytes(value)
    )


class ShareCoordinator(PartitionedCoordinator[StatePartition]):
    _load_label = "share state"

    def __init__(self, config: BrokerConfig, controller: Controller, replica_manager: ReplicaManager) -> None:
        super().__init__(SHARE_GROUP_STATE_TOPIC, controller, replica_manager, log)
        self.config = config

    # == lifecycle ================================================================================

    def start(self) -> None:
        self._active = True

    async def shutdown(self) -> None:
        self._active = False
        self._unload_all()

    # == partitions ===============================================================================

    def _configured_partitions(self) -> int:
        return self.config.share_coordinator_state_topic_num_partitions

    def _new_partition(self, tp: TopicPartition) -> StatePartition | None:
        partition = self._replica_manager.partitions.get(tp)
        if partition is None:
            return None
        store = ShareStateStore(self.config.share_coordinator_snapshot_update_records_per_snapshot)
        return StatePartition(tp.partition, leader_epoch=int(partition.leader_epoch), store=store)

    def _release(self, part: StatePartition) -> None:
        if part.store.states:
            log.info(
                "share state unloaded partition=%d share_partitions=%d", part.index, len(part.store.states)
            )

    def _topic_settings(self, live_brokers: int) -> tuple[int, dict[str, str]]:
        """Kafka's ShareCoordinatorService.shareGroupStateTopicConfigs."""
        replication = max(1, min(self.config.share_coordinator_state_topic_replication_factor, live_brokers))
        return replication, {
            "cleanup.policy": "delete",
            "compression.type": "producer",
            "segment.bytes": str(self.config.share_coordinator_state_topic_segment_bytes),
            "min.insync.replicas": str(min(self.config.share_coordinator_state_topic_min_isr, replication)),
            "retention.ms": "-1",
        }

    def _replay(self, part: StatePartition) -> Replay[Any]:
        store = part.store

        def apply(chunk: _Chunk) -> None:
            for record in chunk.records:
                store.replay(record)

        def install(end: int, elapsed_ms: float) -> None:
            log.info("share state loaded partition=%d leader_epoch=%d share_partitions=%d end_offset=%d ms=%.0f",
                     part.index, part.leader_epoch, len(store.states), end, elapsed_ms)  # fmt: skip

        return Replay(_decode, apply, install)

    def is_local(self, key: SharePartitionKey) -> bool:
        """Whether this broker leads the state partition of `key` and has loaded it."""
        _, part = self._checked_partition(coordinator_key(key))
        return part is not None

    async def find_coordinator_partition(self, key: SharePartitionKey) -> tuple[ErrorCode, int]:
        """(error, partition of `__share_group_state`) for FindCoordinator key type SHARE;
        creates the topic if missing."""
        if SHARE_GROUP_STATE_TOPIC not in self._controller.image.topics:
            await self._create_topic()
        if SHARE_GROUP_STATE_TOPIC not in self._controller.image.topics:
            return ErrorCode.coordinator_not_available, -1
        return ErrorCode.none, self.partition_for(coordinator_key(key))

    async def ensure_topic(self, key: SharePartitionKey) -> ErrorCode:
        """Create `__share_group_state` if missing (Kafka: the persister's FindCoordinator with
        key type SHARE) and wait up to a second for `key`'s partition to be loaded here, if this
        broker is to lead it (right after the topic's creation its leadership is still on its
        way: without the wait the group would retry only after
        `group.share.initialize.retry.interval.ms`)."""
        if SHARE_GROUP_STATE_TOPIC not in self._controller.image.topics:
            await self._create_topic()
        if SHARE_GROUP_STATE_TOPIC not in self._controller.image.topics:
            return ErrorCode.coordinator_not_available
        index = self.partition_for(coordinator_key(key))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 1.0
        while index not in self._partitions and self._active and loop.time() < deadline:
            registration = self._controller.image.partition(SHARE_GROUP_STATE_TOPIC, index)
            if registration is None or registration.leader != self.config.broker_id:
                break
            await asyncio.sleep(0.01)
        await self._wait_loaded(index)
        return ErrorCode.none

    # == writing ==================================================================================

    async def _append(self, part: StatePartition, records: list[ShareStateRecord]) -> ErrorCode:
        """Append the records (acks=all) and replay them into the store once written."""
        if not records:
            return ErrorCode.none
        tp = TopicPartition(SHARE_GROUP_STATE_TOPIC, part.index)
        batch = build_batch([_to_record(r) for r in records])
        results = await self._replica_manager.append_records(
            [(tp, batch)], -1, self.config.share_coordinator_write_timeout_ms
        )
        result = results.get(tp)
        error = _append_error(ErrorCode.unknown_server_error if result is None else result.error)
        if error == ErrorCode.none and (
            not self._is_current(part) or part.leader_epoch != self._leader_epoch(part)
        ):
            error = ErrorCode.not_coordinator
        if error != ErrorCode.none:
            log.info(
                "writing share state failed partition=%d records=%d error=%s",
                part.index,
                len(records),
                error.name,
            )
            return error
        for record in records:
            part.store.replay(record)
        return ErrorCode.none

    def _leader_epoch(self, part: StatePartition) -> int:
        partition = self._replica_manager.partitions.get(TopicPartition(SHARE_GROUP_STATE_TOPIC, part.index))
        return -1 if partition is None or not partition.is_leader else int(partition.leader_epoch)

    def _partition_count(self, topic_id: uuid.UUID) -> int | None:
        for topic in self._controller.image.topics.values():
            if topic.topic_id == topic_id:
                return len(topic.partitions)
        return None

    # == the state RPCs (one share partition each) ================================================

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> StateAnswer:
        """InitializeShareGroupState."""
        error, part = self._checked_partition(coordinator_key(key))
        if part is None:
            return StateAnswer(error, error.name)
        async with part.lock:
            answer, records = shard.initialize(
                part.store, self._partition_count, key, state_epoch, start_offset, clock.now_ms()
            )
            return self._answer(answer, await self._append(part, records))

    async def write(
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
        delivery_complete_count: int, batches: Iterable[PersisterStateBatch],
    ) -> StateAnswer:  # fmt: skip
        """WriteShareGroupState."""
        error, part = self._checked_partition(coordinator_key(key))
        if part is None:
            return StateAnswer(error, error.name)
        async with part.lock:
            answer, records = shard.write(
                part.store, self._partition_count, key, state_epoch, leader_epoch, start_offset,
                delivery_complete_count, batches, clock.now_ms(),
            )  # fmt: skip
            return self._answer(answer, await self._append(part, records))

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadAnswer:
        """ReadShareGroupState (a newer leader epoch is recorded before answering)."""
        error, part = self._checked_partition(coordinator_key(key))
        if part is None:
            return ReadAnswer(error, error.name)
        async with part.lock:
            answer, records = shard.read(part.store, self._partition_count, key, leader_epoch, clock.now_ms())
            error = await self._append(part, records)
            return answer if error == ErrorCode.none else ReadAnswer(error, error.name)

    def read_summary(self, key: SharePartitionKey) -> SummaryAnswer:
        """ReadShareGroupStateSummary."""
        error, part = self._checked_partition(coordinator_key(key))
        if part is None:
            return SummaryAnswer(error, error.name)
        return shard.read_summary(part.store, self._partition_count, key)

    async def delete(self, key: SharePartitionKey) -> StateAnswer:
        """DeleteShareGroupState."""
        error, part = self._checked_partition(coordinator_key(key))
        if part is None:
            return StateAnswer(error, error.name)
        async with part.lock:
            answer, records = shard.delete(part.store, self._partition_count, key)
            return self._answer(answer, await self._append(part, records))

    @staticmethod
    def _answer(answer: StateAnswer, written: ErrorCode) -> StateAnswer:
        return answer if written == ErrorCode.none else StateAnswer(written, written.name)
