"""broker/coordinator/group_conversion.py through ConsumerGroups: a consumer heartbeat upgrading a
classic group with members (Kafka 4.3.1's convertToConsumerGroup), the upgrade undone when its
records cannot be written, and the downgrade when the last consumer-protocol member leaves
(convertToClassicGroup); the classic side is a real GroupMembership, the records are read back
as a coordinator loading the partition reads them."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Callable

from broker.config import BrokerConfig
from broker.coordinator.classic_join import join_consumer_group
from broker.coordinator.consumer_groups import ConsumerGroups, HeartbeatRequest, HeartbeatResult
from broker.coordinator.group import ClassicGroup, GroupState
from broker.coordinator.loader import LoadState, decode_chunk
from broker.coordinator.membership import GroupMembership, JoinRequest, JoinResult, MembershipConfig
from broker.coordinator.migration import MigrationPolicy
from broker.coordinator.records import group_metadata_key
from controller.model import ClusterImage, PartitionRegistration, TopicRegistration
from protocol.consumer_protocol import read_assignment, write_assignment
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch

T1 = uuid.UUID(int=1)


def _image() -> ClusterImage:
    regs = {p: PartitionRegistration.from_json({"replicas": [1], "isr": [1], "leader": 1, "leader_epoch": 0})
            for p in range(3)}  # fmt: skip
    return ClusterImage(cluster_id="c", controller_id=1, controller_epoch=1, brokers={},  # type: ignore[arg-type]
                        topics={"t": TopicRegistration("t", T1, regs)})  # fmt: skip


def _subscription() -> bytes:
    """ConsumerProtocolSubscription v1 of topic "t", no user data, nothing owned."""
    return struct.pack(">hih", 1, 1, 1) + b"t" + struct.pack(">ii", -1, 0)


def _join(member_id: str) -> JoinRequest:
    return JoinRequest("g", member_id, None, "cid", "/h", 45_000, 60_000, "consumer",
                       (("range", _subscription()),), require_known_member_id=False)  # fmt: skip


class _Coordinator:
    """A coordinator partition in memory: the classic protocol, the consumer protocol, the log."""

    def __init__(self, policy: str) -> None:
        config, _ = BrokerConfig.from_properties(
            {"group.consumer.assignment.interval.ms": "0", "group.consumer.migration.policy": policy}
        )
        self.groups_by_id: dict[str, ClassicGroup] = {}
        self.written: list[NewRecord] = []
        self.fail_writes = False

        async def persist(group: ClassicGroup, assignments: dict[str, bytes] | None) -> ErrorCode:
            return ErrorCode.none

        async def append(group_id: str, records: list[NewRecord], appended: Callable[[], None] | None = None) -> ErrorCode:
            await asyncio.sleep(0.001)
            if self.fail_writes:
                return ErrorCode.not_coordinator
            self.written.extend(records)
            return ErrorCode.none

        self.membership = GroupMembership(MembershipConfig(0, 1000), persist)
        self.consumer = ConsumerGroups(config, _image, lambda _: (ErrorCode.none, self), append, self.membership)

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.groups_by_id

    async def stable_classic_group(self) -> ClassicGroup:
        """Group g, classic, Stable at generation 1: m1 (the leader) owns t-0, m2 owns t-1."""
        group = self.groups_by_id.setdefault("g", ClassicGroup("g"))
        joined = await asyncio.gather(*(self.membership.join(group, _join("")) for _ in range(2)))
        assert [j.error for j in joined] == [ErrorCode.none, ErrorCode.none]
        self.m1, self.m2 = m1, m2 = joined[0].member_id, joined[1].member_id
        assert group.leader_id == m1
        assignments = {m1: write_assignment(1, (("t", (0,)),)), m2: write_assignment(1, (("t", (1,)),))}
        synced = await asyncio.gather(
            self.membership.sync(group, m1, None, 1, "consumer", "range", assignments),
            self.membership.sync(group, m2, None, 1, "consumer", "range", {}),
        )
        assert [s.error for s in synced] == [ErrorCode.none, ErrorCode.none] and group.is_in(GroupState.STABLE)
        return group

    def join_consumer(self, member_id: str = "c1") -> asyncio.Task[HeartbeatResult]:
        req = HeartbeatRequest("g", member_id, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={})
        return asyncio.create_task(self.consumer.heartbeat(req, "c", "/h"))

    def load(self) -> LoadState:
        state = LoadState()
        state.apply(decode_chunk(build_batch(self.written), 0))
        return state


def test_a_consumer_heartbeat_upgrades_a_classic_group_with_members() -> None:
    async def run() -> None:
        coord = _Coordinator("bidirectional")
        holder = await coord.stable_classic_group()
        # m1 rejoins: the group prepares a rebalance, m1 waits for its JoinGroup answer
        waiting = asyncio.ensure_future(coord.membership.join(holder, _join(coord.m1)))
        await asyncio.sleep(0)
        assert holder.is_in(GroupState.PREPARING_REBALANCE) and not waiting.done()
        result = await coord.join_consumer()
        answer = await asyncio.wait_for(waiting, 1)
        assert isinstance(answer, JoinResult) and answer.error == ErrorCode.rebalance_in_progress
        assert result.error == ErrorCode.none and result.member_epoch == 2
        group = holder.consumer
        assert group is not None and holder.members == {} and holder.join_timer is None
        assert set(group.members) == {coord.m1, coord.m2, "c1"} and group.group_epoch == 2
        m2 = group.members[coord.m2]
        assert m2.member_epoch == 1 and m2.assigned == {T1: frozenset({1})}
        assert m2.classic is not None and m2.classic.session_timeout_ms == 45_000
        # the classic group's tombstone first, then the consumer group's records
        assert (coord.written[0].key, coord.written[0].value) == (group_metadata_key("g"), None)
        state = coord.load()
        assert "g" not in state.groups
        restored = coord.consumer.restore("g", state.consumer_groups["g"])
        assert restored.members == group.members and restored.target == group.target
        assert (restored.group_epoch, restored.assignment_epoch) == (2, 2)
        coord.consumer.close()
        await coord.membership.close()

    asyncio.run(run())


def test_an_upgrade_that_cannot_be_written_leaves_the_classic_group() -> None:
    async def run() -> None:
        coord = _Coordinator("upgrade")
        holder = await coord.stable_classic_group()
        members, generation = dict(holder.members), holder.generation
        coord.fail_writes = True
        result = await coord.join_consumer()
        assert result.error == ErrorCode.not_coordinator
        assert holder.consumer is None and holder.members == members and holder.generation == generation
        assert holder.is_in(GroupState.STABLE) and holder.leader_id == coord.m1 and holder.protocol_name == "range"
        assert all(m.heartbeat_timer is not None for m in holder.members.values())  # sessions run again
        assert coord.membership.heartbeat(holder, coord.m2, None, generation) == ErrorCode.none
        coord.consumer.close()
        await coord.membership.close()

    asyncio.run(run())


def test_the_policy_may_refuse_the_upgrade() -> None:
    async def run() -> None:
        coord = _Coordinator("downgrade")
        holder = await coord.stable_classic_group()
        result = await coord.join_consumer()
        assert (result.error, result.message) == (
            ErrorCode.group_id_not_found,
            "Cannot upgrade classic group g to consumer group because online upgrade is disabled.",
        )
        assert holder.consumer is None and set(holder.members) == {coord.m1, coord.m2} and coord.written == []
        coord.consumer.close()
        await coord.membership.close()

    asyncio.run(run())


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    async def run() -> None:
        coord = _Coordinator("bidirectional")
        holder = await coord.stable_classic_group()
        await coord.join_consumer()
        group = holder.consumer
        assert group is not None
        upgraded = len(coord.written)
        left = await coord.consumer.heartbeat(HeartbeatRequest("g", "c1", -1), "c", "/h")
        assert (left.error, left.member_epoch) == (ErrorCode.none, -1)
        assert holder.consumer is None and set(holder.members) == {coord.m1, coord.m2}
        # generation = the group epoch, then the rebalance Kafka starts at once
        assert holder.generation == 2 and holder.is_in(GroupState.PREPARING_REBALANCE)
        assert holder.protocol_type == "consumer" and holder.protocol_name == "range"
        for member_id, member in holder.members.items():
            assert member.session_timeout_ms == 45_000 and member.heartbeat_timer is not None
            partitions = read_assignment(member.assignment).partitions
            assert partitions == (("t", tuple(sorted(group.target[member_id][T1]))),)
        # the consumer group's tombstones, then the classic group's record
        downgrade = coord.written[upgraded:]
        assert all(r.value is None for r in downgrade[:-1]) and downgrade[-1].key == group_metadata_key("g")
        state = coord.load()
        assert (1, None) not in state.consumer_groups["g"]  # no consumer group left to restore
        loaded = ClassicGroup.from_record("g", state.groups["g"], 0)
        assert set(loaded.members) == {coord.m1, coord.m2} and loaded.generation == 2
        # the classic members rejoin the classic group
        rejoined = await asyncio.gather(*(coord.membership.join(holder, _join(m)) for m in (coord.m1, coord.m2)))
        assert [j.generation_id for j in rejoined] == [3, 3]
        synced = await asyncio.gather(
            coord.membership.sync(holder, coord.m1, None, 3, "consumer", "range", {}),
            coord.membership.sync(holder, coord.m2, None, 3, "consumer", "range", {}),
        )
        assert [s.error for s in synced] == [ErrorCode.none, ErrorCode.none] and holder.is_in(GroupState.STABLE)
        coord.consumer.close()
        await coord.membership.close()

    asyncio.run(run())


def test_without_downgrade_the_group_stays_a_consumer_group() -> None:
    """group.consumer.migration.policy=upgrade (case insensitive, as Kafka reads it)."""

    async def run() -> None:
        coord = _Coordinator("Upgrade")
        assert coord.consumer.migration_policy is MigrationPolicy.UPGRADE
        holder = await coord.stable_classic_group()
        await coord.join_consumer()
        await coord.consumer.heartbeat(HeartbeatRequest("g", "c1", -1), "c", "/h")
        assert holder.consumer is not None and set(holder.consumer.members) == {coord.m1, coord.m2}
        assert holder.members == {}
        coord.consumer.close()
        await coord.membership.close()

    asyncio.run(run())


def test_a_static_classic_member_replacing_the_last_consumer_member_downgrades_the_group() -> None:
    """Kafka's validateOnlineDowngradeWithReplacedMember: the joining member takes the replaced
    one's place and target assignment in the classic group, which needs no rebalance when that
    target is current; the member then syncs with the classic group."""

    async def run() -> None:
        coord = _Coordinator("bidirectional")
        holder = await coord.stable_classic_group()
        c1 = HeartbeatRequest("g", "c1", 0, instance_id="i1", rebalance_timeout_ms=30_000,
                              subscribed_topic_names=("t",), owned={})  # fmt: skip
        assert (await coord.consumer.heartbeat(c1, "c", "/h")).member_epoch == 2
        group = holder.consumer
        assert group is not None
        target = dict(group.target["c1"])
        assert target == {T1: frozenset({2})}  # t-2, which no classic member had
        join = JoinRequest("g", "", "i1", "cid", "/h", 45_000, 60_000, "consumer", (("range", _subscription()),),
                           require_known_member_id=True)  # fmt: skip
        joined = await join_consumer_group(coord.consumer, holder, group, join, MigrationPolicy.BIDIRECTIONAL, 10, 10)
        assert joined.error == ErrorCode.none and joined.member_id != "c1"
        assert holder.consumer is None and set(holder.members) == {coord.m1, coord.m2, joined.member_id}
        assert holder.is_in(GroupState.STABLE) and holder.generation == joined.generation_id == 2
        assert holder.static_member_id("i1") == joined.member_id
        synced = await coord.membership.sync(holder, joined.member_id, "i1", 2, "consumer", "range", {})
        assert synced.error == ErrorCode.none
        expected = tuple(("t", tuple(sorted(ps))) for ps in target.values())
        assert read_assignment(synced.assignment).partitions == expected
        state = coord.load()
        assert (1, None) not in state.consumer_groups["g"] and joined.member_id in {
            m.member_id for m in state.groups["g"].members}  # fmt: skip
        coord.consumer.close()
        await coord.membership.close()

    asyncio.run(run())
