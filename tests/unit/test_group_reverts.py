"""broker/coordinator/group_reverts.py through ConsumerGroups: a consumer-protocol group change
whose append fails before its records reach the log is reverted, with the group's later changes
not yet written (Kafka's CoordinatorRuntime.failCurrentBatch), so that the group in memory is the
one a coordinator loading the partition rebuilds, and its timers follow. The fault is in our own
append callable; the classic side is a real GroupMembership."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Callable

from broker.config import BrokerConfig
from broker.coordinator.classic_join import join_consumer_group
from broker.coordinator.consumer_group import MemberState
from broker.coordinator.consumer_groups import ConsumerGroups, HeartbeatRequest, HeartbeatResult
from broker.coordinator.consumer_records import GROUP_METADATA
from broker.coordinator.group import ClassicGroup, GroupState
from broker.coordinator.loader import LoadState, decode_chunk
from broker.coordinator.membership import GroupMembership, MembershipConfig
from broker.coordinator.migration import MigrationPolicy
from broker.coordinator.records import OffsetAndMetadata, offset_commit_key
from controller.model import ClusterImage, PartitionRegistration, TopicRegistration
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from protocol.topic_partition import TopicPartition
from protocol.types import LeaderEpoch, Offset
from tests.unit.test_classic_join import _join as _classic_join
from tests.unit.test_group_conversion import _Coordinator as _ClassicCoordinator
from tests.unit.test_group_conversion import _join as _conversion_join

T, U = uuid.UUID(int=1), uuid.UUID(int=2)


def _image() -> ClusterImage:
    def regs(n: int) -> dict[int, PartitionRegistration]:
        return {p: PartitionRegistration.from_json({"replicas": [1], "isr": [1], "leader": 1, "leader_epoch": 0})
                for p in range(n)}  # fmt: skip

    return ClusterImage(cluster_id="c", controller_id=1, controller_epoch=1, brokers={},  # type: ignore[arg-type]
                        topics={"t": TopicRegistration("t", T, regs(3)), "u": TopicRegistration("u", U, regs(2))})  # fmt: skip


class _Coordinator:
    """A coordinator partition in memory whose appends fail as `faults` says, in order: "before"
    (nothing reaches the log), "after" (in the log, then the wait for the replicas fails)."""

    def __init__(self) -> None:
        config, _ = BrokerConfig.from_properties({"group.consumer.assignment.interval.ms": "0"})
        self.groups: dict[str, ClassicGroup] = {}
        self.written: list[NewRecord] = []
        self.faults: list[str | None] = []

        async def persist(group: ClassicGroup, assignments: dict[str, bytes] | None) -> ErrorCode:
            return ErrorCode.none

        async def append(group_id: str, records: list[NewRecord], appended: Callable[[], None] | None = None) -> ErrorCode:
            await asyncio.sleep(0.001)
            fault = self.faults.pop(0) if self.faults else None
            if fault == "before":
                return ErrorCode.not_coordinator
            self.written.extend(records)
            if appended is not None:
                appended()
            return ErrorCode.unknown_server_error if fault == "after" else ErrorCode.none

        self.membership = GroupMembership(MembershipConfig(0, 1000), persist)
        self.consumer = ConsumerGroups(config, _image, lambda _: (ErrorCode.none, self), append, self.membership)
        self.reloader = ConsumerGroups(config, _image, lambda _: (ErrorCode.none, self), append, self.membership)

    def heartbeat(self, member_id: str, epoch: int, topics: tuple[str, ...] | None = ("t",),
                  owned: dict[uuid.UUID, tuple[int, ...]] | None = None) -> asyncio.Task[HeartbeatResult]:  # fmt: skip
        req = HeartbeatRequest("g", member_id, epoch, rebalance_timeout_ms=30_000 if epoch == 0 else -1,
                               subscribed_topic_names=topics, owned={} if epoch == 0 else owned)  # fmt: skip
        return asyncio.create_task(self.consumer.heartbeat(req, "c", "/h"))

    def sessions(self) -> set[str]:
        return {m for (g, m) in self.consumer._session_timers if g == "g"}

    def assert_as_reloaded(self) -> None:
        """The group in memory is the one a coordinator loading the partition rebuilds."""
        state = LoadState()
        state.apply(decode_chunk(build_batch(self.written), 0))
        holder = self.groups.get("g")
        records = state.consumer_groups.get("g", {})
        if holder is None or holder.consumer is None:
            assert (GROUP_METADATA, None) not in records
        else:
            group, loaded = holder.consumer, self.reloader.restore("g", records)
            assert group.members == loaded.members and group.target == loaded.target
            assert group.static_members == loaded.static_members
            assert (group.group_epoch, group.assignment_epoch) == (loaded.group_epoch, loaded.assignment_epoch)
        if holder is not None and holder.members:
            classic = ClassicGroup.from_record("g", state.groups["g"], 0)
            assert set(classic.members) == set(holder.members) and classic.generation == holder.generation
        else:
            assert "g" not in state.groups or not state.groups["g"].members

    async def assert_as_reloaded_once_written(self, timeout_s: float = 5.0) -> None:
        """assert_as_reloaded once the write in flight has landed: a timer's fencing changes the
        group in memory at once and writes its records after (as Kafka's runtime replays a change
        into memory before its records are committed)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.assert_as_reloaded()
                return
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.02)

    async def close(self) -> None:
        self.consumer.close()
        self.reloader.close()
        await self.membership.close()


def test_a_join_that_creates_the_group_is_reverted() -> None:
    async def run() -> None:
        coord = _Coordinator()
        coord.faults = ["before"]
        result = await coord.heartbeat("c1", 0)
        assert result.error == ErrorCode.not_coordinator
        assert "g" not in coord.groups and coord.sessions() == set()
        coord.assert_as_reloaded()
        assert (await coord.heartbeat("c1", 0)).member_epoch == 2  # as if it had never happened: epochs 1, 2
        await coord.close()

    asyncio.run(run())


def test_a_join_is_reverted_and_the_members_before_keep_theirs() -> None:
    async def run() -> None:
        coord = _Coordinator()
        assert (await coord.heartbeat("c1", 0)).member_epoch == 2
        coord.faults = ["before"]
        assert (await coord.heartbeat("c2", 0)).error == ErrorCode.not_coordinator
        group = coord.groups["g"].consumer
        assert group is not None and set(group.members) == {"c1"} and group.group_epoch == 2
        assert coord.sessions() == {"c1"}
        coord.assert_as_reloaded()
        await coord.close()

    asyncio.run(run())


def test_a_new_subscription_is_reverted() -> None:
    async def run() -> None:
        coord = _Coordinator()
        for member_id in ("c1", "c2"):
            assert (await coord.heartbeat(member_id, 0)).error == ErrorCode.none
        c1 = await coord.heartbeat("c1", 1, ("t",), {T: (0, 1)})  # c2's join moved the group to epoch 2
        group = coord.groups["g"].consumer
        assert group is not None
        before = (group.group_epoch, dict(group.members), dict(group.target))
        coord.faults = ["before"]
        changed = await coord.heartbeat("c1", c1.member_epoch, ("t", "u"), {T: (0,)})
        assert changed.error == ErrorCode.not_coordinator
        group = coord.groups["g"].consumer
        assert group is not None and (group.group_epoch, group.members, group.target) == before
        assert group.members["c1"].subscribed_topic_names == ("t",)
        coord.assert_as_reloaded()
        await coord.close()

    asyncio.run(run())


def test_a_leave_is_reverted_and_the_member_session_restarts() -> None:
    async def run() -> None:
        coord = _Coordinator()
        for member_id in ("c1", "c2"):
            assert (await coord.heartbeat(member_id, 0)).error == ErrorCode.none
        coord.faults = ["before"]
        assert (await coord.heartbeat("c2", -1, None)).error == ErrorCode.not_coordinator
        group = coord.groups["g"].consumer
        assert group is not None and set(group.members) == {"c1", "c2"} and group.group_epoch == 3
        assert coord.sessions() == {"c1", "c2"}
        coord.assert_as_reloaded()
        assert (await coord.heartbeat("c2", -1, None)).error == ErrorCode.none  # it can leave again
        coord.assert_as_reloaded()
        await coord.close()

    asyncio.run(run())


def test_a_leave_group_fencing_is_reverted() -> None:
    async def run() -> None:
        coord = _Coordinator()
        for member_id in ("c1", "c2"):
            assert (await coord.heartbeat(member_id, 0)).error == ErrorCode.none
        coord.faults = ["before"]
        assert await coord.consumer.fence_members("g", ["c2"], "left") == ErrorCode.not_coordinator
        group = coord.groups["g"].consumer
        assert group is not None and set(group.members) == {"c1", "c2"} and coord.sessions() == {"c1", "c2"}
        coord.assert_as_reloaded()
        await coord.close()

    asyncio.run(run())


def test_a_revocation_timer_comes_back_with_the_member_revoking() -> None:
    async def run() -> None:
        coord = _Coordinator()
        c1 = await coord.heartbeat("c1", 0)
        assert (await coord.heartbeat("c1", c1.member_epoch, ("t",), {T: (0, 1, 2)})).error == ErrorCode.none
        assert (await coord.heartbeat("c2", 0)).error == ErrorCode.none
        c1 = await coord.heartbeat("c1", c1.member_epoch, ("t",), {T: (0, 1, 2)})  # must revoke some
        group = coord.groups["g"].consumer
        assert group is not None and group.members["c1"].state is MemberState.UNREVOKED_PARTITIONS
        coord.faults = ["before"]
        assert (await coord.heartbeat("c1", -1, None)).error == ErrorCode.not_coordinator
        group = coord.groups["g"].consumer
        assert group is not None and group.members["c1"].state is MemberState.UNREVOKED_PARTITIONS
        assert ("g", "c1") in coord.consumer._rebalance_timers
        coord.assert_as_reloaded()
        await coord.close()

    asyncio.run(run())


def test_later_changes_not_yet_written_are_dropped_with_the_failed_one() -> None:
    async def run() -> None:
        coord = _Coordinator()
        assert (await coord.heartbeat("c1", 0)).error == ErrorCode.none
        written = len(coord.written)
        coord.faults = ["before"]
        first, second = coord.heartbeat("c2", 0), coord.heartbeat("c3", 0)  # c3's write waits for c2's
        results = await asyncio.gather(first, second)
        assert [r.error for r in results] == [ErrorCode.not_coordinator] * 2
        assert len(coord.written) == written and coord.faults == []  # c3's records were never appended
        group = coord.groups["g"].consumer
        assert group is not None and set(group.members) == {"c1"} and coord.sessions() == {"c1"}
        coord.assert_as_reloaded()
        assert (await coord.heartbeat("c3", 0)).error == ErrorCode.none  # a change made after the revert
        coord.assert_as_reloaded()
        await coord.close()

    asyncio.run(run())


def test_records_in_the_log_keep_the_change_when_the_replicas_wait_fails() -> None:
    async def run() -> None:
        coord = _Coordinator()
        coord.faults = ["after"]
        assert (await coord.heartbeat("c1", 0)).error == ErrorCode.unknown_server_error
        group = coord.groups["g"].consumer
        assert group is not None and set(group.members) == {"c1"}
        coord.assert_as_reloaded()
        await coord.close()

    asyncio.run(run())


def test_a_downgrade_is_reverted_to_the_consumer_group() -> None:
    async def run() -> None:
        coord = _ClassicCoordinator("bidirectional")
        holder = await coord.stable_classic_group()
        assert (await coord.join_consumer()).error == ErrorCode.none
        group = holder.consumer
        assert group is not None
        members, epoch = dict(group.members), group.group_epoch
        coord.fail_writes = True
        left = await coord.consumer.heartbeat(HeartbeatRequest("g", "c1", -1), "c", "/h")
        assert left.error == ErrorCode.not_coordinator
        assert holder.consumer is not None and holder.consumer.members == members
        assert holder.consumer.group_epoch == epoch and holder.members == {}
        sessions = {m for (g, m) in coord.consumer._session_timers if g == "g"}
        assert sessions == {coord.m1, coord.m2, "c1"}
        state = coord.load()
        loaded = coord.consumer.restore("g", state.consumer_groups["g"])
        assert loaded.members == holder.consumer.members and loaded.group_epoch == epoch
        assert "g" not in state.groups  # the classic group's tombstone of the upgrade stands
        coord.fail_writes = False  # c1 leaves for real: the downgrade happens
        assert (await coord.consumer.heartbeat(HeartbeatRequest("g", "c1", -1), "c", "/h")).error == ErrorCode.none
        assert holder.consumer is None and set(holder.members) == {coord.m1, coord.m2}
        coord.consumer.close()
        await coord.membership.close()

    asyncio.run(run())


def test_an_empty_consumer_group_converted_to_classic_is_reverted() -> None:
    async def run() -> None:
        coord = _Coordinator()
        c1 = await coord.heartbeat("c1", 0)
        assert (await coord.heartbeat("c1", -1, None)).error == ErrorCode.none
        holder = coord.groups["g"]
        empty = holder.consumer
        assert empty is not None and empty.is_empty()
        coord.faults = ["before"]
        assert (
            await coord.consumer.convert_to_classic(holder) == ErrorCode.not_coordinator
        )  # a classic member joins
        assert holder.consumer is not None and holder.consumer.group_epoch == empty.group_epoch
        assert holder.members == {} and c1.error == ErrorCode.none
        coord.assert_as_reloaded()
        assert await coord.consumer.convert_to_classic(holder) == ErrorCode.none  # written this time
        assert (await coord.membership.join(holder, _conversion_join(""))).error == ErrorCode.none
        assert holder.consumer is None and len(holder.members) == 1
        assert (GROUP_METADATA, None) not in _reloaded(coord).consumer_groups.get("g", {})
        await coord.close()

    asyncio.run(run())


async def _classic_member(coord: _Coordinator, rebalance_timeout_ms: int) -> str:
    """c1 (consumer protocol) then a static classic member joined, its sync timeout running."""
    assert (await coord.heartbeat("c1", 0)).error == ErrorCode.none
    holder = coord.groups["g"]
    assert holder.consumer is not None
    req = dataclasses.replace(_classic_join(instance_id="i1"), rebalance_timeout_ms=rebalance_timeout_ms)
    joined = await join_consumer_group(coord.consumer, holder, holder.consumer, req, MigrationPolicy.BIDIRECTIONAL,
                                       10, 10)  # fmt: skip
    assert (
        joined.error == ErrorCode.none and ("g", joined.member_id) in coord.consumer._classic_timers["sync"]
    )
    return joined.member_id


def test_a_revert_keeps_the_classic_members_sync_timeout() -> None:
    async def run() -> None:
        coord = _Coordinator()
        m = await _classic_member(coord, 60_000)
        deadline = coord.consumer._classic_timers["sync"][("g", m)].when()
        coord.faults = ["before"]
        assert (await coord.heartbeat("c2", 0)).error == ErrorCode.not_coordinator  # reverted
        assert abs(coord.consumer._classic_timers["sync"][("g", m)].when() - deadline) < 0.002  # ms rounded
        coord.assert_as_reloaded()
        await coord.close()

    asyncio.run(run())


def test_a_reverted_fencing_restarts_the_classic_members_sync_timeout() -> None:
    async def run() -> None:
        coord = _Coordinator()
        m = await _classic_member(coord, 100)
        coord.faults = ["before"]
        assert await coord.consumer.fence_members("g", [m], "left") == ErrorCode.not_coordinator
        group = coord.groups["g"].consumer
        assert group is not None and m in group.members and ("g", m) in coord.consumer._classic_timers["sync"]
        waited = 0.0
        while m in group.members:  # it never syncs: fenced at its sync timeout, as before the fencing
            assert waited < 5.0, "the restarted sync timeout never fenced the member"
            await asyncio.sleep(0.02)
            waited += 0.02
        assert set(group.members) == {"c1"}
        await coord.assert_as_reloaded_once_written()
        await coord.close()

    asyncio.run(run())


def _reloaded(coord: _Coordinator) -> LoadState:
    state = LoadState()
    state.apply(decode_chunk(build_batch(coord.written), 0))
    return state


def test_a_deletion_that_cannot_be_written_keeps_the_group_and_its_offsets() -> None:
    async def run() -> None:
        coord = _Coordinator()
        assert (await coord.heartbeat("c1", 0)).error == ErrorCode.none
        assert (await coord.heartbeat("c1", -1, None)).error == ErrorCode.none
        holder = coord.groups["g"]
        tp = TopicPartition("t", 0)
        expired = {tp: OffsetAndMetadata(Offset(5), LeaderEpoch(0), "", 0)}
        tombstones = [NewRecord(offset_commit_key("g", "t", 0), None)]
        written = len(coord.written)
        coord.faults = ["before"]  # expiry deleted the offsets, then the group
        deletion = coord.consumer.delete_group(coord.groups, holder, tombstones, lambda: holder.offsets.update(expired))
        coord.membership.shut_down_group(holder, ErrorCode.coordinator_not_available)
        assert "g" not in coord.groups
        assert await deletion == ErrorCode.not_coordinator
        assert coord.groups["g"] is holder and holder.offsets == expired and holder.is_in(GroupState.EMPTY)
        assert holder.consumer is not None and holder.consumer.group_epoch == 3 and len(coord.written) == written
        coord.assert_as_reloaded()
        assert await coord.consumer.delete_group(coord.groups, holder, tombstones) == ErrorCode.none
        assert "g" not in coord.groups and (GROUP_METADATA, None) not in _reloaded(coord).consumer_groups.get("g", {})
        await coord.close()

    asyncio.run(run())


def test_a_change_dropped_by_a_revert_undoes_what_it_did_outside_the_snapshot() -> None:
    async def run() -> None:
        coord = _Coordinator()
        assert (await coord.heartbeat("c1", 0)).error == ErrorCode.none
        assert (await coord.heartbeat("c1", -1, None)).error == ErrorCode.none
        holder = coord.groups["g"]
        expired = {TopicPartition("t", 0): OffsetAndMetadata(Offset(5), LeaderEpoch(0), "", 0)}
        coord.faults = ["before"]
        joining = coord.heartbeat("c2", 0)  # fails: the deletion queued after it is dropped
        await asyncio.sleep(0)
        deletion = coord.consumer.delete_group(coord.groups, holder, [], lambda: holder.offsets.update(expired))
        assert [(await joining).error, await deletion] == [ErrorCode.not_coordinator] * 2
        assert coord.groups["g"] is holder and holder.offsets == expired and holder.consumer is not None
        coord.assert_as_reloaded()
        await coord.close()

    asyncio.run(run())


def test_the_snapshot_is_copy_on_write() -> None:
    async def run() -> None:
        coord = _Coordinator()
        c1 = await coord.heartbeat("c1", 0)
        c1 = await coord.heartbeat("c1", c1.member_epoch, ("t",), {T: (0, 1, 2)})
        group = coord.groups["g"].consumer
        assert group is not None
        members = group.members
        assert (await coord.heartbeat("c1", c1.member_epoch, ("t",), {T: (0, 1, 2)})).error == ErrorCode.none
        assert group.members is members and group.shared  # a steady heartbeat copies nothing
        snapshot = group.snapshot()
        assert (await coord.heartbeat("c2", 0)).error == ErrorCode.none
        assert group.members is not members and set(group.members) == {"c1", "c2"}
        assert snapshot.members is members and set(members) == {"c1"}  # the snapshot's dicts never change
        await coord.close()

    asyncio.run(run())
