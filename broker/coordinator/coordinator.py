"""The group coordinator: which groups this broker serves, their offsets, and `__consumer_offsets`.

The coordinator of a group is the leader of partition `partition_for(group)` of the compacted,
replicated `__consumer_offsets` topic (created on the first FindCoordinator). When this broker
becomes leader of such a partition it loads the partition's groups and offsets by reading it from
the log start to the log end (a task that yields to the loop; the decoding runs in a thread;
requests for its groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile); when it loses leadership it
unloads them (waiting members get NOT_COORDINATOR). Offset commits and group metadata (after
every rebalance and whenever a group empties) are appended with acks=-1 and applied in memory only
once written; deletions write tombstones. A periodic task expires offsets (Kafka's rules, KIP-211):
those of an Empty group offsets.retention.minutes after it emptied, and those a Stable consumer
group holds for topics none of its members subscribes to that long after their commit (an
explicit expire timestamp from OffsetCommit v2-4 retention_time wins in both); it removes groups
left with neither members nor offsets.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker import clock
from broker.coordinator import consumer_offset_checks as checks
from broker.coordinator.consumer_groups import ConsumerGroups
from broker.coordinator.consumer_records import GROUP_METADATA
from broker.coordinator.group import ClassicGroup, GroupState
from broker.coordinator.group_configs import GroupConfigs
from broker.coordinator.loader import LoadState, decode_chunk
from broker.coordinator.membership import GroupMembership, MembershipConfig
from broker.coordinator.partitions import (
    CoordinatorPartition,
    LoadStatus,
    PartitionedCoordinator,
    Replay,
    append_error,
)
from broker.coordinator.records import (
    OffsetAndMetadata,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    partition_for,
)
from broker.log.info import AppendOrigin
from broker.share.share_groups import Initializer as ShareInitializer
from broker.share.share_groups import StateDeleter as ShareStateDeleter
from broker.share.share_groups import for_coordinator as share_groups_for
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.replication.replica_manager import ReplicaManager
    from controller.interface import Controller

log = logging.getLogger("samsa.coordinator")

OFFSETS_TOPIC = "__consumer_offsets"
MAX_GROUP_ID_BYTES = 0x7FFF
"""A group id must fit the int16-length string of a __consumer_offsets key."""


@dataclass(eq=False)
class OffsetsPartition(CoordinatorPartition):
    """One `__consumer_offsets` partition this broker leads, and the groups it holds."""

    groups: dict[str, ClassicGroup] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CoordinatorNode:
    error: ErrorCode
    node_id: int = -1
    host: str = ""
    port: int = -1


@dataclass(frozen=True, slots=True)
class OffsetCommitEntry:
    tp: TopicPartition
    offset: int
    leader_epoch: int
    metadata: str | None



def group_id_error(group_id: str | None) -> ErrorCode:
    """INVALID_GROUP_ID for a missing, empty or too long group id (as Kafka 4's coordinator)."""
    if not group_id:
        return ErrorCode.invalid_group_id
    if len(group_id.encode("utf-8", "surrogatepass")) > MAX_GROUP_ID_BYTES:
        return ErrorCode.invalid_group_id
    return ErrorCode.none


def _append_error_for_group(error: ErrorCode) -> ErrorCode:
    """`append_error`, where every error it leaves as it is becomes UNKNOWN_SERVER_ERROR."""
    mapped = append_error(error)
    if mapped in (ErrorCode.none, ErrorCode.coordinator_not_available, ErrorCode.not_coordinator):
        return mapped
    return ErrorCode.unknown_server_error


def _append_error_for_offsets(error: ErrorCode) -> ErrorCode:
    if error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return ErrorCode.invalid_commit_offset_size
    return _append_error_for_group(error)


class GroupCoordinator(PartitionedCoordinator[OffsetsPartition]):
    _load_label = "groups"

    def __init__(
        self, config: BrokerConfig, controller: Controller, replica_manager: ReplicaManager,
        share_initializer: ShareInitializer | None = None, share_state_deleter: ShareStateDeleter | None = None,
    ) -> None:
        super().__init__(OFFSETS_TOPIC, controller, replica_manager, log)
        self.config = config
        self.membership = GroupMembership(
            MembershipConfig(config.group_initial_rebalance_delay_ms, config.group_max_size),
            self._persist_group,
        )
        self.consumer_groups = ConsumerGroups(
            config, lambda: controller.image, self.group_status, self._append_for, self.membership
        )
        self.share_groups = share_groups_for(
            self, lambda: controller.image, self._append_for,
            GroupConfigs(config, lambda: controller.image).share_group_settings, share_initializer,
            share_state_deleter,
        )  # fmt: skip
        self._expiry_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # == lifecycle ================================================================================

    def start(self) -> None:
        self._active = True
        self._expiry_task = asyncio.get_running_loop().create_task(self._expiry_loop())

    async def shutdown(self) -> None:
        self._active = False
        self._unload_all()
        tasks = [t for t in (self._expiry_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.membership.close()
        self.consumer_groups.close()
        self.share_groups.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # == partitions ===============================================================================

    def _configured_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    def _new_partition(self, tp: TopicPartition) -> OffsetsPartition:
        return OffsetsPartition(tp.partition)

    def _release(self, part: OffsetsPartition) -> None:
        for group in part.groups.values():
            self.membership.shut_down_group(group, ErrorCode.not_coordinator)
            if group.consumer is not None:
                self.consumer_groups.unload(group.consumer)
        if part.groups:
            log.info("groups unloaded partition=%d groups=%d", part.index, len(part.groups))
        part.groups.clear()
        self.share_groups.unload(part.index)

    def _topic_settings(self, live_brokers: int) -> tuple[int, dict[str, str]]:
        replication = max(1, min(self.config.offsets_topic_replication_factor, live_brokers))
        return replication, {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.config.offsets_topic_segment_bytes),
            "compression.type": "producer",
        }

    def _replay(self, part: OffsetsPartition) -> Replay[Any]:
        state = LoadState()

        def install(end: int, elapsed_ms: float) -> None:
            self._install(part, state)
            if state.records or elapsed_ms > 1000:
                log.info(
                    "groups loaded partition=%d groups=%d records=%d end_offset=%d ms=%.0f",
                    part.index, len(part.groups), state.records, end, elapsed_ms,
                )  # fmt: skip

        return Replay(decode_chunk, state.apply, install)

    def _install(self, part: OffsetsPartition, state: LoadState) -> None:
        now = clock.now_ms()
        for group_id in state.group_ids():
            value = state.groups.get(group_id)
            group = ClassicGroup.from_record(group_id, value, now) if value else ClassicGroup(group_id)
            if value is None:
                group.state_timestamp_ms = now
            group.offsets = dict(state.offsets.get(group_id, {}))
            for pid, by_group in state.pending_txn_offsets.items():
                if group_id in by_group:
                    group.pending_txn_offsets[pid] = dict(by_group[group_id])
            part.groups[group_id] = group
            consumer_records = state.consumer_groups.get(group_id, {})
            if (GROUP_METADATA, None) in consumer_records:
                group.consumer = self.consumer_groups.restore(group_id, consumer_records)
            for member in group.members.values():
                self.membership.start_session(group, member)
        self.share_groups.load(part.index, state.share_groups)

    def loaded_groups(self) -> list[ClassicGroup]:
        """Every group of the __consumer_offsets partitions this broker leads and has loaded
        (the metrics' group counts and lag)."""
        return [
            group
            for part in list(self._partitions.values())
            if part.status is LoadStatus.ACTIVE
            for group in list(part.groups.values())
        ]

    def group_status(self, group_id: str | None) -> tuple[ErrorCode, OffsetsPartition | None]:
        error = group_id_error(group_id)
        if error != ErrorCode.none:
            return error, None
        assert group_id is not None
        return self._checked_partition(group_id)

    def get_group(self, group_id: str | None) -> tuple[ErrorCode, ClassicGroup | None]:
        """(error, group): the group if this broker coordinates it and it exists (else None)."""
        error, part = self.group_status(group_id)
        if part is None:
            return error, None
        return ErrorCode.none, part.groups.get(group_id or "")

    def get_or_create_group(self, group_id: str) -> tuple[ErrorCode, ClassicGroup | None]:
        error, part = self.group_status(group_id)
        if part is None:
            return error, None
        group = part.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            group = ClassicGroup(group_id, state_timestamp_ms=clock.now_ms())
            part.groups[group_id] = group
        return ErrorCode.none, group

    def _group_is_current(self, group: ClassicGroup) -> OffsetsPartition | None:
        part = self._partitions.get(self.partition_for(group.group_id))
        if part is None or part.groups.get(group.group_id) is not group:
            return None
        return part

    def all_groups(self) -> tuple[bool, list[ClassicGroup]]:
        """(any partition still loading, every group of the loaded partitions)."""
        loading = any(p.status is LoadStatus.LOADING for p in self._partitions.values())
        groups = [g for p in self._partitions.values() for g in p.groups.values()]
        return loading, groups

    # == FindCoordinator ==========================================================================

    async def find_coordinator(self, key: str, listener: str) -> CoordinatorNode:
        image = self._controller.image
        if OFFSETS_TOPIC not in image.topics:
            await self._create_topic()
            image = self._controller.image
        topic = image.topics.get(OFFSETS_TOPIC)
        if topic is None:
            return CoordinatorNode(ErrorCode.coordinator_not_available)
        index = partition_for(key, len(topic.partitions))
        reg = topic.partitions.get(index)
        if reg is None or not reg.online:
            return CoordinatorNode(ErrorCode.coordinator_not_available)
        broker = image.brokers.get(reg.leader)
        endpoint = broker.endpoint(listener) if broker is not None else None
        if endpoint is None:
            return CoordinatorNode(ErrorCode.coordinator_not_available)
        await self._wait_loaded(index)
        return CoordinatorNode(ErrorCode.none, int(reg.leader), endpoint.host, endpoint.port)

    # == persistence ==============================================================================

    async def _append(self, index: int, records: list[NewRecord], appended: Callable[[], None] | None = None) -> ErrorCode:
        return await self._append_batch(index, build_batch(records), appended)

    async def _append_for(
        self, group_id: str, records: list[NewRecord], appended: Callable[[], None] | None = None
    ) -> ErrorCode:
        """Write a group's records to its partition, if this broker still coordinates it
        (`appended`: called once they are in the log, when the wait for the replicas begins)."""
        part = self._partitions.get(self.partition_for(group_id))
        if part is None or part.status is not LoadStatus.ACTIVE:
            return ErrorCode.not_coordinator
        return _append_error_for_group(await self._append(part.index, records, appended))

    async def _append_batch(self, index: int, batch: bytes, appended: Callable[[], None] | None = None) -> ErrorCode:
        tp = TopicPartition(OFFSETS_TOPIC, index)
        results = await self._replica_manager.append_records(
            [(tp, batch)], -1, self.config.offsets_commit_timeout_ms, AppendOrigin.COORDINATOR, appended
        )
        result = results.get(tp)
        return ErrorCode.unknown_server_error if result is None else result.error

    async def _persist_group(self, group: ClassicGroup, assignments: dict[str, bytes] | None) -> ErrorCode:
        part = self._group_is_current(group)
        if part is None:
            return ErrorCode.not_coordinator
        value = group_metadata_value(group.to_record(assignments))
        error = await self._append(part.index, [NewRecord(group_metadata_key(group.group_id), value)])
        return _append_error_for_group(error)

    # == offsets ==================================================================================

    def _validate_offset_commit(
        self,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        generation: int,
        *,
        transactional: bool = False,
    ) -> ErrorCode:
        """Kafka's classic-group offset commit rules (ClassicGroup.validateOffsetCommit): a
        transactional commit without member id or generation is accepted in any state."""
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return ErrorCode.none  # admin client or a consumer without group management
        if generation >= 0 or member_id or instance_id is not None:
            error = self.membership.validate_member(group, member_id, instance_id, generation)
            if error != ErrorCode.none:
                return error
        elif not transactional and not group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    async def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        entries: list[OffsetCommitEntry],
        *,
        api_version: int,
        expire_timestamp: int = -1,
        client_id: str | None = None,
        correlation_id: int = -1,
    ) -> dict[TopicPartition, ErrorCode]:
        error, part = self.group_status(group_id)
        if part is None:
            return {e.tp: error for e in entries}
        group = part.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            if self.share_groups.holds(group_id):  # Kafka's ShareGroup.validateOffsetCommit
                return {e.tp: ErrorCode.group_id_not_found for e in entries}
            if generation >= 0:
                code = ErrorCode.group_id_not_found if api_version >= 9 else ErrorCode.illegal_generation
                return {e.tp: code for e in entries}
            group = ClassicGroup(group_id, state_timestamp_ms=clock.now_ms())
            part.groups[group_id] = group
        if group.consumer is not None:
            error = checks.validate_offset_commit(
                group.consumer, member_id, instance_id, generation, api_version, transactional=False,
                partitions=checks.committed_partitions(self._controller.image.topics, [e.tp for e in entries]),
            )
        else:
            error = self._validate_offset_commit(group, member_id, instance_id, generation)
        if error != ErrorCode.none:
            return {e.tp: error for e in entries}
        if member_id and group.consumer is None:
            self.membership.touch(group, member_id)

        image = self._controller.image
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        now = clock.now_ms()
        for e in entries:
            metadata = e.metadata or ""
            if image.partition(e.tp.topic, e.tp.partition) is None:
                results[e.tp] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[e.tp] = ErrorCode.offset_metadata_too_large
            else:
                accepted[e.tp] = OffsetAndMetadata(e.offset, e.leader_epoch, metadata, now, expire_timestamp)  # type: ignore[arg-type]
        if accepted:
            records = [
                NewRecord(offset_commit_key(group_id, tp.topic, tp.partition), offset_commit_value(v), timestamp=now)
                for tp, v in accepted.items()
            ]
            for tp in accepted:
                group.pending_offset_commits[tp] += 1
            try:
                error = _append_error_for_offsets(await self._append(part.index, records))
            finally:
                for tp in accepted:
                    group.pending_offset_commits[tp] -= 1
                    if group.pending_offset_commits[tp] <= 0:
                        del group.pending_offset_commits[tp]
            if error == ErrorCode.none and self._group_is_current(group) is not None:
                group.offsets.update(accepted)
            for tp in accepted:
                results[tp] = error
            if error != ErrorCode.none:
                log.warning(
                    "offset commit failed group=%s client_id=%s correlation_id=%d partitions=%d error=%s",
                    group_id, client_id, correlation_id, len(accepted), error.name,
                )  # fmt: skip
        return results

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None where there is none); all of them when partitions is None.
        The member id and epoch (OffsetFetch v9) are checked for consumer-protocol groups."""
        error, group = self.get_group(group_id)
        if error != ErrorCode.none:
            return error, {}
        if group is not None and group.consumer is not None:
            error = checks.validate_offset_fetch(group.consumer, member_id, member_epoch)
            if error != ErrorCode.none:
                return error, {}
        offsets = group.offsets if group is not None and not group.is_in(GroupState.DEAD) else {}
        if partitions is None:
            return ErrorCode.none, dict(sorted(offsets.items()))
        return ErrorCode.none, {tp: offsets.get(tp) for tp in partitions}

    def unstable_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions with an offset commit still pending: a transaction's not yet ended, or a
        plain commit being written (OffsetFetch require_stable answers them
        UNSTABLE_OFFSET_COMMIT)."""
        _, group = self.get_group(group_id)
        if group is None:
            return set()
        pending = {tp for offsets in group.pending_txn_offsets.values() for tp in offsets}
        return pending | set(group.pending_offset_commits)

    # == transactional offsets (TxnOffsetCommit, KIP-98/447) =======================================

    async def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        instance_id: str | None,
        generation: int,
        entries: list[OffsetCommitEntry],
    ) -> dict[TopicPartition, ErrorCode]:
        """Write the offsets in a transactional batch of the producer into the group's
        partition; they join the group's offsets when the transaction's COMMIT marker is written
        there (`complete_transaction`)."""
        error, part = self.group_status(group_id)
        if part is None:
            return {e.tp: error for e in entries}
        group = part.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            if self.share_groups.holds(group_id):  # Kafka's ShareGroup.validateOffsetCommit
                return {e.tp: ErrorCode.group_id_not_found for e in entries}
            if generation >= 0:
                return {e.tp: ErrorCode.illegal_generation for e in entries}
            group = ClassicGroup(group_id, state_timestamp_ms=clock.now_ms())
            part.groups[group_id] = group
        if group.consumer is not None:
            error = checks.validate_offset_commit(
                group.consumer, member_id, instance_id, generation, 9, transactional=True,
                partitions=checks.committed_partitions(self._controller.image.topics, [e.tp for e in entries]),
            )
        else:
            error = self._validate_offset_commit(group, member_id, instance_id, generation, transactional=True)
        if error != ErrorCode.none:
            return {e.tp: error for e in entries}
        image = self._controller.image
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        now = clock.now_ms()
        for e in entries:
            metadata = e.metadata or ""
            if image.partition(e.tp.topic, e.tp.partition) is None:
                results[e.tp] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[e.tp] = ErrorCode.offset_metadata_too_large
            else:
                accepted[e.tp] = OffsetAndMetadata(e.offset, e.leader_epoch, metadata, now)  # type: ignore[arg-type]
        if accepted:
            records = [
                NewRecord(offset_commit_key(group_id, tp.topic, tp.partition), offset_commit_value(v), timestamp=now)
                for tp, v in accepted.items()
            ]
            batch = build_batch(
                records, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0, is_transactional=True
            )
            error = _append_error_for_offsets(await self._append_batch(part.index, batch))
            if error == ErrorCode.none and self._group_is_current(group) is not None:
                group.pending_txn_offsets.setdefault(producer_id, {}).update(accepted)
            for tp in accepted:
                results[tp] = error
        return results

    def complete_transaction(self, producer_id: int, partitions: Iterable[int], commit: bool) -> None:
        """A COMMIT (ABORT) marker of `producer_id` was written to these partitions of
        __consumer_offsets: its pending offsets become the groups' (are dropped)."""
        for index in partitions:
            part = self._partitions.get(index)
            if part is None:
                continue
            for group in part.groups.values():
                pending = group.pending_txn_offsets.pop(producer_id, None)
                if pending and commit:
                    group.offsets.update(pending)

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: (group error, per-partition errors)."""
        error, group = self.get_group(group_id)
        if error != ErrorCode.none:
            return error, {}
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        subscribed: set[str] | None = set()
        if not group.is_in(GroupState.EMPTY):
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return ErrorCode.non_empty_group, {}
        image = self._controller.image
        results: dict[TopicPartition, ErrorCode] = {}
        to_delete: list[TopicPartition] = []
        for tp in partitions:
            if image.partition(tp.topic, tp.partition) is None:
                results[tp] = ErrorCode.unknown_topic_or_partition
            elif subscribed is not None and tp.topic in subscribed:
                results[tp] = ErrorCode.group_subscribed_to_topic
            else:
                results[tp] = ErrorCode.none
                if tp in group.offsets:
                    to_delete.append(tp)
        if to_delete:
            part = self._group_is_current(group)
            if part is None:
                return ErrorCode.not_coordinator, {}
            for tp in to_delete:
                group.offsets.pop(tp, None)
            error = _append_error_for_group(await self._append(part.index, self._offset_tombstones(group_id, to_delete)))
            if error != ErrorCode.none:
                return error, {}
        return ErrorCode.none, results

    @staticmethod
    def _offset_tombstones(group_id: str, tps: Iterable[TopicPartition]) -> list[NewRecord]:
        return [NewRecord(offset_commit_key(group_id, tp.topic, tp.partition), None) for tp in tps]

    # == groups ===================================================================================

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        by_partition: dict[int, list[NewRecord]] = {}
        deleted: dict[int, list[tuple[OffsetsPartition, ClassicGroup, GroupState, int]]] = {}  # classic, state before
        ordered_writes: dict[str, asyncio.Task[ErrorCode]] = {}
        for group_id in group_ids:
            error, part = self.group_status(group_id)
            if part is None:
                results[group_id] = error
                continue
            group = part.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                results[group_id] = await self.share_groups.delete(group_id)
            elif not group.is_in(GroupState.EMPTY) or (group.consumer is not None and not group.consumer.is_empty()):
                results[group_id] = ErrorCode.non_empty_group
            else:
                if group.consumer is not None:  # one write after the group's own under way, reverted if it fails
                    tombstones = self._offset_tombstones(group_id, group.offsets)
                    ordered_writes[group_id] = self.consumer_groups.delete_group(part.groups, group, tombstones)
                else:
                    del part.groups[group_id]
                    deleted.setdefault(part.index, []).append((part, group, group.state, group.state_timestamp_ms))
                    records = by_partition.setdefault(part.index, [])
                    records += self._offset_tombstones(group_id, group.offsets)
                    records.append(NewRecord(group_metadata_key(group_id), None))
                self.membership.shut_down_group(group, ErrorCode.coordinator_not_available)
                results[group_id] = ErrorCode.none
                log.info("group deleted group=%s offsets=%d", group_id, len(group.offsets))
        for index, records in by_partition.items():
            if not records:
                continue
            in_log = asyncio.Event()
            error = _append_error_for_group(await self._append(index, records, in_log.set))
            if error != ErrorCode.none:
                for part, group, state, state_ms in deleted.get(index, []) if not in_log.is_set() else []:
                    if group.group_id not in part.groups:  # as Kafka reverts a failed batch (not a transition)
                        group.state, group.state_timestamp_ms = state, state_ms
                        part.groups[group.group_id] = group
                        log.warning("group deletion reverted group=%s reason=records_not_written", group.group_id)
                for group_id in group_ids:  # Kafka: every group of the partition's batch gets the error
                    if self.partition_for(group_id) == index and group_id not in ordered_writes:
                        results[group_id] = error
        for group_id, task in ordered_writes.items():
            error = await asyncio.shield(task)  # already the coordinator's error (_append_for)
            if error != ErrorCode.none and results.get(group_id) == ErrorCode.none:
                results[group_id] = error
        return results

    # == offset retention =========================================================================

    async def _expiry_loop(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets(clock.now_ms())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("offset expiration failed")

    def _expired(self, group: ClassicGroup, offset: OffsetAndMetadata, now_ms: int) -> bool:
        if offset.expire_timestamp >= 0:
            return now_ms >= offset.expire_timestamp
        base = offset.commit_timestamp
        if group.is_in(GroupState.EMPTY) and group.protocol_type and group.state_timestamp_ms >= 0:
            base = group.state_timestamp_ms  # retention runs from when the group emptied
        return now_ms - base >= self.config.offsets_retention_ms

    async def expire_offsets(self, now_ms: int) -> int:
        """Expire offsets past retention (Empty groups: all; Stable consumer groups: those of
        topics no member subscribes to); drop Empty groups left with nothing."""
        total = 0
        for part in list(self._partitions.values()):
            if part.status is not LoadStatus.ACTIVE:
                continue
            records: list[NewRecord] = []
            for group in list(part.groups.values()):
                if group.consumer is not None and not group.consumer.is_empty():
                    kept_topics: set[str] = set(group.consumer.subscription_metadata)
                elif group.is_in(GroupState.EMPTY):
                    kept_topics = set()
                elif group.is_in(GroupState.STABLE) and (subscribed := group.subscribed_topics()) is not None:
                    kept_topics = subscribed
                else:
                    continue
                expired = [
                    tp
                    for tp, offset in group.offsets.items()
                    if tp.topic not in kept_topics
                    and tp not in group.pending_offset_commits
                    and self._expired(group, offset, now_ms)
                ]
                gone = {tp: group.offsets.pop(tp) for tp in expired}
                tombstones = self._offset_tombstones(group.group_id, expired)
                total += len(expired)
                if expired:
                    log.info(
                        "offsets expired group=%s state=%s partitions=%d",
                        group.group_id, group.state.value, len(expired),
                    )  # fmt: skip
                if (
                    group.is_in(GroupState.EMPTY)
                    and (group.consumer is None or group.consumer.is_empty())
                    and not group.offsets
                    and not group.pending_offset_commits
                    and not group.pending_members
                ):
                    if group.consumer is not None:  # one write after the group's own under way, reverted if it fails
                        undo = functools.partial(group.offsets.update, gone)  # its offsets back then
                        self.consumer_groups.delete_group(part.groups, group, tombstones, undo, background=True)
                        tombstones = []
                    else:
                        del part.groups[group.group_id]
                        tombstones.append(NewRecord(group_metadata_key(group.group_id), None))
                    self.membership.shut_down_group(group, ErrorCode.coordinator_not_available)
                    log.info("group removed group=%s reason=empty_without_offsets", group.group_id)
                records += tombstones
            if records:
                error = await self._append(part.index, records)
                if error != ErrorCode.none:
                    log.warning("writing expiration tombstones failed partition=%d error=%s", part.index, error.name)
        return total


def offsets_by_topic(
    items: Mapping[TopicPartition, object],
) -> dict[str, list[tuple[int, object]]]:
    """Group per-partition results by topic, keeping order (for building responses)."""
    out: dict[str, list[tuple[int, object]]] = {}
    for tp, value in items.items():
        out.setdefault(tp.topic, []).append((tp.partition, value))
    return out
