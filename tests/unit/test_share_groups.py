"""The share group coordinator driver (broker/share/share_groups.py) on an in-memory coordinator
partition: ShareGroupHeartbeat with Kafka's errors, records written before the answer (and the
change reverted when they are not), session expiry, share-state initialization, and the groups
rebuilt from the record bytes by a coordinator that loads the partition."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Mapping

from broker.coordinator.loader import LoadState, decode_chunk
from broker.coordinator.records import OffsetAndMetadata, offset_commit_key, offset_commit_value
from broker.share import group_records as rec
from broker.share.share_group import ShareGroupSettings, ShareGroupState, ShareHeartbeat, TopicInfo
from broker.share.share_group_log import RecordsByKey
from broker.share.share_groups import ShareGroups
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from protocol.topic_partition import TopicPartition
from protocol.types import LeaderEpoch, Offset

FOO = TopicInfo(uuid.UUID(int=1), 2)
SETTINGS = ShareGroupSettings(assignment_interval_ms=0, session_timeout_ms=10_000)


class Partition:
    """One __consumer_offsets partition led here, its records, and the share coordinator's answer."""

    def __init__(self) -> None:
        self.records: list[NewRecord] = []
        self.led = True
        self.append_error = ErrorCode.none
        self.other_groups: set[str] = set()
        self.initialize_ok = True
        self.initialize_calls: list[tuple[str, dict[uuid.UUID, frozenset[int]]]] = []
        self.delete_error = ErrorCode.none
        self.delete_calls: list[tuple[str, dict[uuid.UUID, frozenset[int]], int]] = []
        """(group, partitions, how many records were written before the call)"""

    def lookup(self, group_id: str) -> tuple[ErrorCode, int | None]:
        return (ErrorCode.none, 0) if self.led else (ErrorCode.not_coordinator, None)

    async def append(
        self, group_id: str, records: list[NewRecord], appended: Callable[[], None] | None = None
    ) -> ErrorCode:
        await asyncio.sleep(0)
        if self.append_error == ErrorCode.none:
            self.records += records
            if appended is not None:
                appended()
        return self.append_error

    async def initialize(
        self, group_id: str, state_epoch: int, todo: Mapping[uuid.UUID, frozenset[int]]
    ) -> Mapping[uuid.UUID, frozenset[int]]:
        self.initialize_calls.append((group_id, dict(todo)))
        return todo if self.initialize_ok else {}

    async def delete_state(self, group_id: str, partitions: Mapping[uuid.UUID, frozenset[int]]) -> ErrorCode:
        await asyncio.sleep(0)
        self.delete_calls.append((group_id, dict(partitions), len(self.records)))
        return self.delete_error

    def driver(self, settings: ShareGroupSettings = SETTINGS) -> ShareGroups:
        return ShareGroups(lambda _: settings, lambda: {"foo": FOO}, self.lookup, self.other_groups.__contains__,
                           self.append, self.initialize, self.delete_state)  # fmt: skip

    def latest(self) -> dict[str, RecordsByKey]:
        """What the group coordinator's loader folds from the partition's bytes (beside an offset
        commit, which stays the classic state's)."""
        committed = OffsetAndMetadata(Offset(5), LeaderEpoch(-1), "", 1)
        commit = NewRecord(offset_commit_key("g", "foo", 0), offset_commit_value(committed))
        chunk = decode_chunk(build_batch([commit, *self.records]), 0)
        assert chunk.skipped == 0
        state = LoadState()
        state.apply(chunk)
        assert state.offsets["g"] == {TopicPartition("foo", 0): committed} and state.consumer_groups == {}
        return state.share_groups


def _hb(
    member_id: str, epoch: int, topics: tuple[str, ...] | None = None, group: str = "g"
) -> ShareHeartbeat:
    return ShareHeartbeat(group, member_id, epoch, subscribed_topic_names=topics)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_join_initializes_share_state_then_assigns_and_survives_a_coordinator_move() -> None:
    async def go() -> None:
        part = Partition()
        groups = part.driver()
        first = await groups.heartbeat(_hb("m1", 0, ("foo",)), "client", "/127.0.0.1")
        assert first.error == ErrorCode.none and first.answer is not None
        assert first.answer.member_epoch == 2 and first.answer.assignment == {}
        await _settle()
        assert part.initialize_calls == [("g", {FOO.topic_id: frozenset({0, 1})})]
        # initialized: the next heartbeat bumps the group epoch and assigns both partitions
        second = await groups.heartbeat(_hb("m1", 2), "client", "/127.0.0.1")
        assert second.answer is not None and second.answer.member_epoch == 3
        assert second.answer.assignment == {FOO.topic_id: frozenset({0, 1})}
        assert part.initialize_calls == [("g", {FOO.topic_id: frozenset({0, 1})})]  # not asked again
        groups.close()

        moved = part.driver()  # a new coordinator loads the partition
        moved.load(0, part.latest())
        error, _, group = moved.describe("g")
        assert error == ErrorCode.none and group is not None
        assert (group.group_epoch, group.assignment_epoch) == (3, 3)
        assert group.members["m1"].assigned == {FOO.topic_id: frozenset({0, 1})}
        again = await moved.heartbeat(_hb("m1", 3), "client", "/127.0.0.1")
        assert again.error == ErrorCode.none and again.answer is not None
        assert again.answer.member_epoch == 3 and again.answer.assignment is None  # unchanged
        assert len(part.initialize_calls) == 1
        moved.unload(0)
        assert moved.describe("g")[0] == ErrorCode.group_id_not_found
        moved.close()

    run(go)


def test_kafka_errors() -> None:
    async def go() -> None:
        part = Partition()
        groups = part.driver()
        part.other_groups.add("classic")
        cases = [
            (
                _hb("m", 0, ("foo",), group="classic"),
                ErrorCode.group_id_not_found,
                "Group classic is not a share group.",
            ),
            (_hb("m", 1), ErrorCode.group_id_not_found, "Share group g not found."),
            (_hb("m", -1), ErrorCode.group_id_not_found, "Group g not found."),
            (_hb("m", 0), ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."),
            (_hb("", 0, ("foo",)), ErrorCode.invalid_request, "MemberId can't be empty."),
            (_hb("m", -2), ErrorCode.invalid_request, "MemberEpoch is invalid."),
        ]
        for req, error, message in cases:
            result = await groups.heartbeat(req, "c", "h")
            assert (result.error, result.message) == (error, message), req
        assert groups.groups() == []  # refused joins create no group
        assert (await groups.heartbeat(_hb("m", 0, ("foo",)), "c", "h")).error == ErrorCode.none
        fenced = await groups.heartbeat(_hb("m", 5), "c", "h")
        assert fenced.error == ErrorCode.fenced_member_epoch
        unknown = await groups.heartbeat(_hb("x", 1), "c", "h")
        assert unknown.error == ErrorCode.unknown_member_id
        assert (await groups.heartbeat(_hb("x", -1), "c", "h")).error == ErrorCode.unknown_member_id
        part.led = False
        assert (await groups.heartbeat(_hb("m", 1), "c", "h")).error == ErrorCode.not_coordinator
        assert groups.describe("g")[0] == ErrorCode.not_coordinator
        part.led = True
        assert groups.describe("classic")[:2] == (
            ErrorCode.group_id_not_found,
            "Group classic is not a share group.",
        )
        assert groups.describe("none")[:2] == (ErrorCode.group_id_not_found, "Group none not found.")
        groups.close()

    run(go)


def test_unwritten_change_is_reverted() -> None:
    async def go() -> None:
        part = Partition()
        groups = part.driver()
        part.append_error = ErrorCode.not_enough_replicas
        failed = await groups.heartbeat(_hb("m1", 0, ("foo",)), "c", "h")
        assert failed.error == ErrorCode.not_enough_replicas
        assert groups.describe("g")[0] == ErrorCode.group_id_not_found and part.initialize_calls == []
        part.append_error = ErrorCode.none
        assert (await groups.heartbeat(_hb("m1", 0, ("foo",)), "c", "h")).error == ErrorCode.none
        written = len(part.records)
        part.append_error = ErrorCode.not_enough_replicas
        assert (
            await groups.heartbeat(_hb("m2", 0, ("foo",)), "c", "h")
        ).error == ErrorCode.not_enough_replicas
        _, _, group = groups.describe("g")
        assert group is not None and set(group.members) == {"m1"} and group.group_epoch == 2
        assert len(part.records) == written
        groups.close()

    run(go)


def test_leave_and_session_expiry_fence_members_and_write_tombstones() -> None:
    async def go() -> None:
        part = Partition()
        groups = part.driver(dataclasses.replace(SETTINGS, session_timeout_ms=100))
        for member_id in ("m1", "m2"):
            assert (await groups.heartbeat(_hb(member_id, 0, ("foo",)), "c", "h")).error == ErrorCode.none
        left = await groups.heartbeat(_hb("m1", -1), "c", "h")
        assert left.error == ErrorCode.none and left.answer is not None and left.answer.member_epoch == -1
        await asyncio.sleep(0.3)  # m2 sends nothing: its session expires
        _, _, group = groups.describe("g")
        assert group is not None and group.members == {} and group.state is ShareGroupState.EMPTY
        assert group.group_epoch == 5  # a new group (1), two joins, a leave, a fence
        latest = part.latest()["g"]
        assert not any(member is not None for (_type, member) in latest)  # every member record tombstoned
        assert latest[(rec.GROUP_METADATA, None)] == rec.GroupMetadataValue(5)
        reloaded = part.driver()
        reloaded.load(0, part.latest())
        _, _, group = reloaded.describe("g")
        assert group is not None and group.state is ShareGroupState.EMPTY and group.group_epoch == 5
        reloaded.close()
        groups.close()

    run(go)


def test_failed_initialization_is_retried_after_the_interval() -> None:
    async def go() -> None:
        part = Partition()
        part.initialize_ok = False
        groups = part.driver(dataclasses.replace(SETTINGS, initialize_retry_interval_ms=200))
        assert (await groups.heartbeat(_hb("m1", 0, ("foo",)), "c", "h")).error == ErrorCode.none
        await _settle()
        assert (await groups.heartbeat(_hb("m1", 2), "c", "h")).error == ErrorCode.none
        await _settle()
        assert len(part.initialize_calls) == 1  # still initializing: not asked again yet
        part.initialize_ok = True
        await asyncio.sleep(0.25)
        third = await groups.heartbeat(_hb("m1", 2), "c", "h")
        await _settle()
        assert (
            len(part.initialize_calls) == 2 and third.answer is not None and third.answer.assignment is None
        )
        fourth = await groups.heartbeat(_hb("m1", 2), "c", "h")
        assert fourth.answer is not None and fourth.answer.assignment == {FOO.topic_id: frozenset({0, 1})}
        groups.close()

    run(go)


def test_delete_an_empty_group_deletes_its_state_then_writes_its_tombstones() -> None:
    """Kafka 4.3.1's order: the initialized partitions become deleting (a state partition metadata
    record), their share-group state is deleted through the persister, then the tombstones; a
    failed state deletion answers its error and keeps the group, whose next deletion tries the
    deleting topics again."""

    async def go() -> None:
        part = Partition()
        groups = part.driver()
        assert await groups.delete("g") == ErrorCode.group_id_not_found
        assert (await groups.heartbeat(_hb("m1", 0, ("foo",)), "c", "h")).error == ErrorCode.none
        await _settle()
        assert await groups.delete("g") == ErrorCode.non_empty_group
        assert part.delete_calls == []
        assert (await groups.heartbeat(_hb("m1", -1), "c", "h")).error == ErrorCode.none
        part.delete_error = ErrorCode.coordinator_not_available
        before = len(part.records)
        assert await groups.delete("g") == ErrorCode.coordinator_not_available
        assert part.delete_calls == [("g", {FOO.topic_id: frozenset({0, 1})}, before + 1)]
        deleting = part.records[before]
        assert deleting.value is not None and len(part.records) == before + 1
        assert groups.describe("g")[0] == ErrorCode.none  # still there
        part.delete_error = ErrorCode.none
        before = len(part.records)
        assert await groups.delete("g") == ErrorCode.none
        assert part.delete_calls[1][1] == {FOO.topic_id: frozenset({0, 1})}  # the deleting topic again
        tombstones = part.records[part.delete_calls[1][2]:]
        assert tombstones and all(r.value is None for r in tombstones)
        assert groups.describe("g")[0] == ErrorCode.group_id_not_found
        assert part.latest()["g"] == {}  # a loading coordinator finds nothing of it
        reloaded = part.driver()
        reloaded.load(0, part.latest())
        assert reloaded.groups() == []
        groups.close()

    run(go)


def test_a_fence_is_written_before_a_heartbeat_handled_after_it() -> None:
    """A session expiry's records keep their place before those of a heartbeat handled before the
    expiry's write could start: a coordinator loading the partition rebuilds the latest epoch."""

    async def go() -> None:
        part = Partition()
        groups = part.driver()
        for member_id in ("m1", "m2"):
            assert (await groups.heartbeat(_hb(member_id, 0, ("foo",)), "c", "h")).error == ErrorCode.none
        await _settle()
        groups._expire("g", "m1")  # the session timer fires; m3 joins on the same loop turn
        assert (await groups.heartbeat(_hb("m3", 0, ("foo",)), "c", "h")).error == ErrorCode.none
        await _settle()
        error, _, group = groups.describe("g")
        assert error == ErrorCode.none and group is not None
        reloaded = part.driver()
        reloaded.load(0, part.latest())
        restored = reloaded.describe("g")[2]
        assert restored is not None and restored.group_epoch == group.group_epoch
        assert set(restored.members) == {"m2", "m3"}
        groups.close()
        reloaded.close()

    run(go)
