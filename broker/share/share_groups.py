"""The share groups (KIP-932) of the `__consumer_offsets` partitions this coordinator leads: the
ShareGroupHeartbeat flow, ShareGroupDescribe's lookup, the members' session timers, and the groups
rebuilt when a coordinator loads a partition (the loader folds their records with
share_group_log.replay), as Kafka 4.3.1's GroupMetadataManager.shareGroupHeartbeat,
shareGroupLeave, shareGroupDescribe and its replay serve them.

The group coordinator builds one (`for_coordinator`), loads each partition's share groups into it
and unloads them with the partition; ListGroups, DeleteGroups, JoinGroup and
ConsumerGroupHeartbeat consult it; ShareGroupHeartbeat drives it. Each
group's settings are read on each use from its group configs (`settings`). The partitions' state
is initialized through the share-group state persister (persister.py), wherever their `__share_group_state` partitions are led.

A heartbeat:

1. is validated (INVALID_REQUEST with Kafka's messages); the group's partition must be led and
   loaded here (the coordinator's error otherwise); a classic or consumer group of that id gets
   GROUP_ID_NOT_FOUND "Group X is not a share group.", a missing share group with member epoch
   other than 0 "Share group X not found." (a leave: "Group X not found.");
2. is applied to a copy-on-write snapshot of the group by the pure rules (share_group.py), which
   also mark the subscribed partitions whose share-group state must be initialized;
3. has its records (share_group_log.changes) appended to the group's partition before it is
   answered; if they cannot be written the group goes back to its snapshot (Kafka reverts the
   change) and the member gets the coordinator's error;
4. restarts the member's session (`group.share.session.timeout.ms`): when it expires the member is
   fenced (removed, the group epoch bumped) and the records written with no request waiting;
   every write of a group takes its place when its change is made (ordered_writes.py), so a
   timer's records are never overtaken by a heartbeat handled before its task runs;
5. asks the share coordinator to initialize the marked partitions (InitializeShareGroupState, the
   `initialize` callable); once it answers, the partitions are recorded as initialized (the
   state partition metadata record) and the next heartbeat assigns them. A failed
   initialization leaves them initializing: they are asked for again after
   `group.share.initialize.retry.interval.ms`.

Member states: absent -> member (epoch 0 heartbeat) -> absent (epoch -1, or session expired).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from broker import clock
from broker.coordinator.group import GroupState
from broker.coordinator.ordered_writes import GroupAppend, OrderedWrites
from broker.share import group_records as rec
from broker.share import share_group as sg
from broker.share.share_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    HeartbeatAnswer,
    ShareGroup,
    ShareGroupSettings,
    ShareHeartbeat,
    TopicInfo,
)
from broker.share.share_group_log import RecordsByKey, ShareGroupRecord, changes, deletion, restore, snapshot
from protocol.errors import ErrorCode, KafkaError
from protocol.records import NewRecord

if TYPE_CHECKING:
    from broker.coordinator.group import ClassicGroup
    from broker.coordinator.partitions import CoordinatorPartition
    from controller.model import ClusterImage

log = logging.getLogger("samsa.coordinator")

ShareLookup = Callable[[str], tuple[ErrorCode, int | None]]
"""The index of the `__consumer_offsets` partition of a group this coordinator leads and has
loaded, else (the coordinator's error, None)."""
OtherGroup = Callable[[str], bool]
"""Whether a classic or consumer group holds this group id."""
StateDeleter = Callable[[str, Mapping[uuid.UUID, frozenset[int]]], Awaitable[ErrorCode]]
"""Delete the share-group state of these partitions of a group with the share coordinator
(DeleteShareGroupState through the persister): the first partition's error, else NONE."""
Initializer = Callable[[str, int, Mapping[uuid.UUID, frozenset[int]]], Awaitable[Mapping[uuid.UUID, frozenset[int]]]]
"""Initialize the share-group state of these partitions of a group, with the group epoch as the
state epoch, with the share coordinator: the partitions it initialized."""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error: ErrorCode
    message: str | None = None
    answer: HeartbeatAnswer | None = None


def _to_record(item: ShareGroupRecord) -> NewRecord:
    key, value = item
    return NewRecord(rec.key_bytes(key), None if value is None else rec.value_bytes(value))


class ShareGroups:
    """The share groups of the partitions this coordinator leads, and their session timers."""

    def __init__(
        self,
        settings: Callable[[str], ShareGroupSettings],
        topics: Callable[[], Mapping[str, TopicInfo]],
        lookup: ShareLookup,
        other_group: OtherGroup,
        append: GroupAppend,
        initialize: Initializer,
        delete_state: StateDeleter | None = None,
    ) -> None:
        """`delete_state` None: DeleteGroups has no share-group state to delete."""
        self._settings = settings
        """Group id -> its settings now (the group configs, read on each use)."""
        self._topics = topics
        self._lookup = lookup
        self._other_group = other_group
        self._writes = OrderedWrites(append)
        self._initialize = initialize
        self._delete_state = delete_state
        self._groups: dict[int, dict[str, ShareGroup]] = {}
        """Partition index -> group id -> group."""
        self._sessions: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # == ShareGroupHeartbeat =======================================================================

    async def heartbeat(self, req: ShareHeartbeat, client_id: str, client_host: str) -> ShareHeartbeatResult:
        """Apply the heartbeat, write its records, then answer (Kafka's error code on failure)."""
        try:
            sg.validate(req)
            index, groups, group = self._find(req.group_id, create=req.member_epoch == 0,
                                              leaving=req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH)  # fmt: skip
        except KafkaError as e:
            return ShareHeartbeatResult(e.code, e.message)
        is_new = req.group_id not in groups
        groups[req.group_id] = group  # concurrent first joins share one group
        before = snapshot(group)
        topics = self._topics()
        now = clock.now_ms()
        try:
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                answer = sg.leave(group, req.member_id)
                todo: Mapping[uuid.UUID, frozenset[int]] = {}
            else:
                settings = self._settings(req.group_id)
                answer = sg.heartbeat(group, req, client_id, client_host, topics, settings, now)
                todo = sg.partitions_to_initialize(group, topics, now, settings.initialize_retry_interval_ms)
        except KafkaError as e:  # raised before any change
            if is_new:
                del groups[req.group_id]
            return ShareHeartbeatResult(e.code, e.message)
        error = await self._write(req.group_id, changes(before, group, _names(topics)))
        if self._groups.get(index) is not groups:  # unloaded while writing: nothing more here
            return ShareHeartbeatResult(ErrorCode.not_coordinator, ErrorCode.not_coordinator.name)
        if error != ErrorCode.none:
            self._revert(groups, group, before, is_new)
            return ShareHeartbeatResult(error, error.name)
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            self._cancel_session(req.group_id, req.member_id)
            log.info("share group member left group=%s member_id=%s epoch=%d members=%d",
                     req.group_id, req.member_id, group.group_epoch, len(group.members))  # fmt: skip
        else:
            self._start_session(req.group_id, req.member_id)
        if todo:
            self._spawn(self._initialize_state(req.group_id, group, todo))
        return ShareHeartbeatResult(ErrorCode.none, answer=answer)

    def _find(self, group_id: str, create: bool, leaving: bool) -> tuple[int, dict[str, ShareGroup], ShareGroup]:
        error, index = self._lookup(group_id)
        if index is None:
            raise KafkaError(error, error.name)
        if self._other_group(group_id):
            raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
        groups = self._groups.setdefault(index, {})
        group = groups.get(group_id)
        if group is None:
            if leaving:
                raise KafkaError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
            if not create:
                raise KafkaError(ErrorCode.group_id_not_found, f"Share group {group_id} not found.")
            group = ShareGroup(group_id)
        return index, groups, group

    @staticmethod
    def _revert(groups: dict[str, ShareGroup], group: ShareGroup, before: ShareGroup, is_new: bool) -> None:
        """Undo a change whose records were not written (Kafka's snapshot revert)."""
        if groups.get(group.group_id) is not group:
            return
        if is_new:
            del groups[group.group_id]
        else:
            groups[group.group_id] = before

    async def _write(self, group_id: str, records: list[ShareGroupRecord]) -> ErrorCode:
        """Write a change's records after the group's earlier changes' (call it, without awaiting
        anything first, right after the change is made)."""
        if not records:
            return ErrorCode.none
        error = await asyncio.shield(self.write_in_order(group_id, [_to_record(r) for r in records]))
        if error != ErrorCode.none:
            log.warning("share group records not written group=%s records=%d error=%s",
                        group_id, len(records), error.name)  # fmt: skip
        return error

    async def _initialize_state(
        self, group_id: str, group: ShareGroup, todo: Mapping[uuid.UUID, frozenset[int]]
    ) -> None:
        """Kafka's GroupCoordinatorService.persisterInitialize then initializeShareGroupState."""
        done = await self._initialize(group_id, group.group_epoch, todo)
        missing = sum(len(ps - done.get(t, frozenset())) for t, ps in todo.items())
        if missing:
            log.warning("share group state not initialized group=%s partitions=%d", group_id, missing)
        if not done or self._current(group_id) is not group:
            return  # nothing initialized, or unloaded or deleted meanwhile
        before = snapshot(group)
        for topic_id, partitions in done.items():
            sg.initialized(group, topic_id, partitions)
        await self._write(group_id, changes(before, group, _names(self._topics())))

    # == sessions ==================================================================================

    def _start_session(self, group_id: str, member_id: str) -> None:
        self._cancel_session(group_id, member_id)
        self._sessions[(group_id, member_id)] = asyncio.get_running_loop().call_later(
            self._settings(group_id).session_timeout_ms / 1000, self._expire, group_id, member_id
        )

    def _cancel_session(self, group_id: str, member_id: str) -> None:
        handle = self._sessions.pop((group_id, member_id), None)
        if handle is not None:
            handle.cancel()

    def _expire(self, group_id: str, member_id: str) -> None:
        """Kafka's shareGroupSessionTimeoutMemberFencing."""
        self._sessions.pop((group_id, member_id), None)
        group = self._current(group_id)
        if group is None or member_id not in group.members:
            return
        before = snapshot(group)
        sg.fence(group, member_id)
        log.info("share group member fenced group=%s member_id=%s reason=session_expired epoch=%d members=%d",
                 group_id, member_id, group.group_epoch, len(group.members))  # fmt: skip
        records = changes(before, group, _names(self._topics()))
        if records:
            self.write_in_order(group_id, [_to_record(r) for r in records], background=True)

    def write_in_order(
        self, group_id: str, records: list[NewRecord], *, background: bool = False
    ) -> asyncio.Task[ErrorCode]:
        """Write a group's records after those of its changes made before (ordered_writes.py)."""
        return self._writes.write(group_id, records, background=background)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # == lookups (ShareGroupDescribe, ListGroups, DescribeGroups) ==================================

    def _current(self, group_id: str) -> ShareGroup | None:
        _, index = self._lookup(group_id)
        return None if index is None else self._groups.get(index, {}).get(group_id)

    def describe(self, group_id: str) -> tuple[ErrorCode, str | None, ShareGroup | None]:
        """The group ShareGroupDescribe describes, or Kafka's error and message."""
        error, index = self._lookup(group_id)
        if index is None:
            return error, None, None
        group = self._groups.get(index, {}).get(group_id)
        if group is None:
            if self._other_group(group_id):
                return ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.", None
            return ErrorCode.group_id_not_found, f"Group {group_id} not found.", None
        return ErrorCode.none, None, group

    def _empty_group(self, group_id: str) -> tuple[ErrorCode, dict[str, ShareGroup], ShareGroup | None]:
        """The group DeleteGroups may delete (Kafka's ShareGroup.validateDeleteGroup), with the
        groups of its partition; GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP otherwise."""
        _, index = self._lookup(group_id)
        groups = self._groups.get(index, {}) if index is not None else {}
        group = groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, groups, None
        if group.members:
            return ErrorCode.non_empty_group, groups, None
        return ErrorCode.none, groups, group

    async def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups on a share group, in Kafka 4.3.1's order (GroupCoordinatorService.
        deleteGroups: deleteShareGroups, then the group deletion): an Empty group's initialized,
        initializing and deleting topics become deleting (its state partition metadata record
        written, Kafka's shareGroupBuildPartitionDeleteRequest), their partitions' state is
        deleted through the persister, and only then is the group removed and its tombstones
        written (after its writes under way). GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP before
        anything (checked again after the state deletion); a state deletion's error answers the
        group, which stays with those topics deleting, tried again by the next DeleteGroups."""
        error, groups, group = self._empty_group(group_id)
        if group is None:
            return error
        topics = self._topics()
        partitions = {info.topic_id: info.partitions for info in topics.values()}
        todo: dict[uuid.UUID, set[int]] = {}
        for topic_id, ps in group.initialized.items():
            todo.setdefault(topic_id, set()).update(ps)
        for topic_id, (ps, _since) in group.initializing.items():
            todo.setdefault(topic_id, set()).update(ps)
        for topic_id in group.deleting:
            todo.setdefault(topic_id, set()).update(range(partitions.get(topic_id, 0)))
        todo = {t: ps for t, ps in todo.items() if t in partitions}  # a deleted topic has no state left to delete
        if todo and self._delete_state is not None:
            before = snapshot(group)
            group.initialized, group.initializing = {}, {}
            group.deleting = frozenset(todo)
            error = await self._write(group_id, changes(before, group, _names(topics)))
            if error != ErrorCode.none:
                self._revert(groups, group, before, is_new=False)
                return error
            error = await self._delete_state(group_id, {t: frozenset(ps) for t, ps in todo.items()})
            if error != ErrorCode.none:
                log.info("share group state not deleted group=%s error=%s", group_id, error.name)
                return error
            error, groups, group = self._empty_group(group_id)  # a member may have joined meanwhile
            if group is None:
                return error
        del groups[group_id]
        log.info("share group deleted group=%s topics=%d", group_id, len(todo))
        return await asyncio.shield(self.write_in_order(group_id, [_to_record(r) for r in deletion(group)]))

    def holds(self, group_id: str) -> bool:
        """Whether a share group has this id (a classic or consumer group may not)."""
        return self._current(group_id) is not None

    def groups(self) -> list[ShareGroup]:
        """Every share group of the loaded partitions (ListGroups with type "share")."""
        return [g for groups in self._groups.values() for g in groups.values()]

    # == coordinator load and unload ===============================================================

    def load(self, index: int, latest: Mapping[str, RecordsByKey]) -> None:
        """Rebuild the share groups of a partition this coordinator now leads from its records
        (`replay` folded them); every member gets a full session."""
        self.unload(index)
        topics = self._topics()
        now = clock.now_ms()
        groups = self._groups.setdefault(index, {})
        for group_id, records in latest.items():
            if (rec.GROUP_METADATA, None) not in records:
                continue  # deleted (tombstoned)
            group = restore(group_id, records, topics, now)
            groups[group_id] = group
            for member_id in group.members:
                self._start_session(group_id, member_id)
        if groups:
            log.info("share groups loaded partition=%d groups=%d", index, len(groups))

    def unload(self, index: int) -> None:
        """The partition is no longer led here: its groups and their timers go."""
        for group in self._groups.pop(index, {}).values():
            for member_id in group.members:
                self._cancel_session(group.group_id, member_id)

    def close(self) -> None:
        self._writes.close()
        for task in self._tasks:
            task.cancel()
        for handle in self._sessions.values():
            handle.cancel()
        self._sessions.clear()


def _names(topics: Mapping[str, TopicInfo]) -> dict[uuid.UUID, str]:
    return {info.topic_id: name for name, info in topics.items()}


def cluster_topics(image: ClusterImage) -> dict[str, TopicInfo]:
    """The topics a share group may subscribe to (internal ones are not)."""
    return {name: TopicInfo(t.topic_id, len(t.partitions)) for name, t in image.topics.items() if not t.internal}


class GroupsCoordinator(Protocol):
    """What the share groups ask the group coordinator (its classic and consumer groups)."""

    def group_status(self, group_id: str | None) -> tuple[ErrorCode, CoordinatorPartition | None]: ...

    def get_group(self, group_id: str | None) -> tuple[ErrorCode, ClassicGroup | None]: ...


def for_coordinator(
    coordinator: GroupsCoordinator, image: Callable[[], ClusterImage], append: GroupAppend,
    settings: Callable[[str], ShareGroupSettings], initialize: Initializer | None = None,
    delete_state: StateDeleter | None = None,
) -> ShareGroups:
    """The share groups of a group coordinator's `__consumer_offsets` partitions; `settings` gives
    a group's settings now (its group configs); `initialize` is the share coordinator's (None: no
    share partition gets initialized)."""

    def lookup(group_id: str) -> tuple[ErrorCode, int | None]:
        error, part = coordinator.group_status(group_id)
        return error, None if part is None else part.index

    def other_group(group_id: str) -> bool:
        _, group = coordinator.get_group(group_id)
        return group is not None and not group.is_in(GroupState.DEAD)

    async def no_share_coordinator(
        group_id: str, state_epoch: int, todo: Mapping[uuid.UUID, frozenset[int]]
    ) -> Mapping[uuid.UUID, frozenset[int]]:
        return {}  # the partitions stay initializing

    return ShareGroups(settings, lambda: cluster_topics(image()), lookup, other_group, append,
                       initialize or no_share_coordinator, delete_state)  # fmt: skip
