"""broker/coordinator/classic_join.py: a classic member's JoinGroup on a consumer group with
members, as Kafka 4.3.1's classicGroupJoinToConsumerGroup answers it, on an in-memory
coordinator partition (the records it writes rebuild the same group)."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import uuid
from collections.abc import Callable

from broker.config import BrokerConfig
from broker.coordinator.classic_join import heartbeat_consumer_group, join_consumer_group, sync_consumer_group
from broker.coordinator.consumer_group import ConsumerGroup
from broker.coordinator.consumer_groups import ConsumerGroups, HeartbeatRequest
from broker.coordinator.group import ClassicGroup, GroupState, Member
from broker.coordinator.loader import LoadState, decode_chunk
from broker.coordinator.membership import JoinRequest, JoinResult
from broker.coordinator.migration import MigrationPolicy, consumer_group_from_classic
from controller.model import ClusterImage, PartitionRegistration, TopicRegistration
from protocol.consumer_protocol import read_assignment, write_assignment
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from tests.unit.test_consumer_groups import membership

T1 = uuid.UUID(int=1)


class _Partition:
    def __init__(self) -> None:
        self.groups: dict[str, ClassicGroup] = {}


def _image() -> ClusterImage:
    regs = {p: PartitionRegistration.from_json({"replicas": [1], "isr": [1], "leader": 1, "leader_epoch": 0})
            for p in range(2)}  # fmt: skip
    return ClusterImage(cluster_id="c", controller_id=1, controller_epoch=1, brokers={},  # type: ignore[arg-type]
                        topics={"t": TopicRegistration("t", T1, regs)})  # fmt: skip


def _subscription() -> bytes:
    """ConsumerProtocolSubscription v1 of topic "t", no user data, nothing owned."""
    return struct.pack(">hih", 1, 1, 1) + b"t" + struct.pack(">ii", -1, 0)


def _join(
    member_id: str = "", instance_id: str | None = None, protocol_type: str = "consumer"
) -> JoinRequest:
    return JoinRequest("g", member_id, instance_id, "cid", "/h", 45_000, 60_000, protocol_type,
                       (("range", _subscription()),), require_known_member_id=True)  # fmt: skip


def test_classic_member_joins_a_consumer_group() -> None:
    async def run() -> None:
        config, _ = BrokerConfig.from_properties({"group.consumer.assignment.interval.ms": "0"})
        part = _Partition()
        written: list[NewRecord] = []

        async def append(group_id: str, records: list[NewRecord], appended: Callable[[], None] | None = None) -> ErrorCode:
            written.extend(records)
            return ErrorCode.none

        groups = ConsumerGroups(config, _image, lambda _: (ErrorCode.none, part), append, membership())
        c1 = HeartbeatRequest(
            "g", "c1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={}
        )
        assert (await groups.heartbeat(c1, "c", "/h")).member_epoch == 2
        holder = part.groups["g"]
        group = holder.consumer
        assert isinstance(group, ConsumerGroup)

        async def join(
            req: JoinRequest, policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL, max_size: int = 10
        ) -> JoinResult:
            return await join_consumer_group(groups, holder, group, req, policy, max_size, 10)

        refused = await join(_join(), MigrationPolicy.DISABLED)
        assert (refused.error, refused.member_id) == (ErrorCode.inconsistent_group_protocol, "")
        assert (await join(_join(protocol_type="connect"))).error == ErrorCode.inconsistent_group_protocol
        assert (await join(_join(), max_size=1)).error == ErrorCode.group_max_size_reached
        before = len(written)
        first = await join(_join())  # KIP-394: the member id round trip; nothing changes
        assert first.error == ErrorCode.member_id_required and len(first.member_id) == 22
        assert len(written) == before and list(group.members) == ["c1"]
        joined = await join(_join(first.member_id))
        assert (
            joined.error,
            joined.member_id,
            joined.protocol_type,
            joined.protocol_name,
            joined.leader_id,
        ) == (ErrorCode.none, first.member_id, "consumer", "range", "")
        member = group.members[first.member_id]
        assert joined.generation_id == member.member_epoch == group.group_epoch == 3
        assert member.classic is not None and member.classic.session_timeout_ms == 45_000
        assert member.subscribed_topic_names == ("t",) and member.rebalance_timeout_ms == 60_000
        # c1 owns both partitions: the new member waits for the one it is given until c1 revokes it
        assert member.assigned == {} and sum(len(p) for p in group.target[member.member_id].values()) == 1

        # a static member joins without the round trip, then a new instance of it replaces it
        static = await join(_join(instance_id="i1"))
        assert static.error == ErrorCode.none and static.member_id in group.members
        again = await join(_join(instance_id="i1"))
        assert again.error == ErrorCode.none and static.member_id not in group.members
        replaced = group.static_member("i1")
        assert replaced is not None and replaced.member_id == again.member_id
        assert (await join(_join(static.member_id, "i1"))).error == ErrorCode.fenced_instance_id
        assert (await join(_join("x", "i2"))).error == ErrorCode.unknown_member_id
        # a malformed embedded subscription changes nothing (Kafka: an IllegalStateException)
        bad = dataclasses.replace(_join(first.member_id), protocols=(("range", b"\x00"),))
        assert (await join(bad)).error == ErrorCode.unknown_server_error

        # the records written rebuild the same group (a coordinator loading the partition)
        state = LoadState()
        state.apply(decode_chunk(build_batch(written), 0))
        restored = groups.restore("g", state.consumer_groups["g"])
        assert restored.members == group.members and restored.target == group.target
        assert restored.group_epoch == group.group_epoch
        groups.close()

    asyncio.run(run())


async def _mixed_group(written: list[NewRecord]) -> tuple[ConsumerGroups, ClassicGroup, ConsumerGroup]:
    """Group g with consumer-protocol member c1 owning both partitions of t at epoch 2."""
    config, _ = BrokerConfig.from_properties({"group.consumer.assignment.interval.ms": "0"})
    part = _Partition()

    async def append(group_id: str, records: list[NewRecord], appended: Callable[[], None] | None = None) -> ErrorCode:
        written.extend(records)
        return ErrorCode.none

    groups = ConsumerGroups(config, _image, lambda _: (ErrorCode.none, part), append, membership())
    c1 = HeartbeatRequest("g", "c1", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={})
    assert (await groups.heartbeat(c1, "c", "/h")).member_epoch == 2
    holder = part.groups["g"]
    assert holder.consumer is not None
    return groups, holder, holder.consumer


def test_classic_member_syncs_heartbeats_and_rejoins_for_a_released_partition() -> None:
    async def run() -> None:
        groups, holder, group = await _mixed_group([])
        policy = MigrationPolicy.BIDIRECTIONAL
        joined = await join_consumer_group(groups, holder, group, _join(instance_id="i1"), policy, 10, 10)
        m, epoch = joined.member_id, joined.generation_id
        assert epoch == 3
        names = {T1: "t"}
        bad_generation = sync_consumer_group(groups, group, m, "i1", 2, "consumer", "range", names)
        assert bad_generation.error == ErrorCode.illegal_generation
        wrong_name = sync_consumer_group(groups, group, m, "i1", epoch, "consumer", "roundrobin", names)
        assert wrong_name.error == ErrorCode.inconsistent_group_protocol
        assert sync_consumer_group(groups, group, "x", "i1", epoch, None, None, names).error == (
            ErrorCode.fenced_instance_id
        )
        synced = sync_consumer_group(groups, group, m, "i1", epoch, "consumer", "range", names)
        assert (synced.error, synced.protocol_type, synced.protocol_name) == (
            ErrorCode.none,
            "consumer",
            "range",
        )
        assert read_assignment(synced.assignment).partitions == ()  # c1 still owns its partition
        assert heartbeat_consumer_group(groups, group, m, "i1", epoch) == ErrorCode.none  # waiting on c1
        assert heartbeat_consumer_group(groups, group, m, "i1", 9) == ErrorCode.illegal_generation
        # c1 revokes the partition it lost: the classic member must rejoin to get it
        mine = group.target["c1"][T1]
        c1 = await groups.heartbeat(HeartbeatRequest("g", "c1", 2, owned={T1: tuple(mine)}), "c", "/h")
        assert c1.member_epoch == 3
        assert heartbeat_consumer_group(groups, group, m, "i1", epoch) == ErrorCode.rebalance_in_progress
        again = await join_consumer_group(groups, holder, group, _join(m, "i1"), policy, 10, 10)
        assert (again.error, again.generation_id) == (ErrorCode.none, 3)
        synced = sync_consumer_group(groups, group, m, "i1", epoch, "consumer", "range", names)
        assert read_assignment(synced.assignment).partitions == (("t", tuple({0, 1} - mine)),)
        assert heartbeat_consumer_group(groups, group, m, "i1", epoch) == ErrorCode.none
        groups.close()

    asyncio.run(run())


def test_classic_member_is_fenced_without_sync_or_rejoin() -> None:
    async def run() -> None:
        written: list[NewRecord] = []
        groups, holder, group = await _mixed_group(written)
        quick = dataclasses.replace(_join(instance_id="i1"), rebalance_timeout_ms=50)
        joined = await join_consumer_group(groups, holder, group, quick, MigrationPolicy.BIDIRECTIONAL, 10, 10)
        assert joined.member_id in group.members
        await asyncio.sleep(0.2)  # no SyncGroup within the rebalance timeout
        assert joined.member_id not in group.members and group.group_epoch == 4
        assert [r.value is None for r in written[-4:]] == [
            True,
            True,
            True,
            False,
        ]  # tombstones, then the epoch
        # a member told to rejoin that does not is fenced after its rebalance timeout
        joined = await join_consumer_group(groups, holder, group, quick, MigrationPolicy.BIDIRECTIONAL, 10, 10)
        m = joined.member_id
        sync_consumer_group(groups, group, m, "i1", joined.generation_id, None, None, {T1: "t"})
        c1 = group.members["c1"]
        await groups.heartbeat(
            HeartbeatRequest("g", "c1", c1.member_epoch, owned={T1: tuple(group.target["c1"][T1])}), "c", "/h"
        )
        assert (
            heartbeat_consumer_group(groups, group, m, "i1", joined.generation_id)
            == ErrorCode.rebalance_in_progress
        )
        await asyncio.sleep(0.2)
        assert m not in group.members
        groups.close()

    asyncio.run(run())


def test_an_upgraded_classic_group_is_written_whole() -> None:
    """The records of a classic group converted to a consumer group (Kafka's
    createConsumerGroupRecords) rebuild it on a coordinator loading the partition."""
    classic = ClassicGroup("g", state=GroupState.STABLE, generation=5, protocol_type="consumer")
    for member_id, partitions in (("m1", (0,)), ("m2", (1,))):
        classic.add(
            Member(member_id, None, "cid", "/h", 60_000, 45_000, "consumer", (("range", _subscription()),))
        )
        classic.members[member_id].assignment = write_assignment(1, (("t", partitions),))
    classic.protocol_name = "range"
    converted = consumer_group_from_classic(classic, {"t": T1})

    async def run() -> None:
        config, _ = BrokerConfig.from_properties({})
        groups = ConsumerGroups(config, _image, lambda _: (ErrorCode.none, _Partition()), _writer_unused, membership())
        records = groups.creation_records(converted)
        assert len(records) == 2 + 1 + 2 + 1 + 2
        state = LoadState()
        state.apply(decode_chunk(build_batch(records), 0))
        restored = groups.restore("g", state.consumer_groups["g"])
        assert restored.members == converted.members and restored.target == converted.target
        assert (restored.group_epoch, restored.assignment_epoch) == (5, 5)
        assert restored.members["m2"].assigned == {T1: frozenset({1})}

        groups.close()

    asyncio.run(run())


async def _writer_unused(group_id: str, records: list[NewRecord]) -> ErrorCode:
    raise AssertionError("nothing is written")


def test_classic_member_rejoining_reconciles_with_the_partitions_its_subscription_owns() -> None:
    """Kafka passes the embedded subscription's owned partitions to the reconciliation: a member
    told to revoke a partition moves on once it rejoins without it."""

    def owning(*partitions: int) -> JoinRequest:
        owned = struct.pack(">ih", 1, 1) + b"t" + struct.pack(">i", len(partitions))
        owned += b"".join(struct.pack(">i", p) for p in partitions)
        subscription = struct.pack(">hih", 1, 1, 1) + b"t" + struct.pack(">i", -1) + owned
        return dataclasses.replace(_join("zz"), protocols=(("range", subscription),))

    async def run() -> None:
        config, _ = BrokerConfig.from_properties(
            {"group.consumer.assignment.interval.ms": "0", "group.consumer.assignors": "range"}
        )
        part = _Partition()

        async def append(group_id: str, records: list[NewRecord], appended: Callable[[], None] | None = None) -> ErrorCode:
            return ErrorCode.none

        groups = ConsumerGroups(config, _image, lambda _: (ErrorCode.none, part), append, membership())

        async def consumer(member_id: str, epoch: int, owned: tuple[int, ...] | None = None) -> int:
            req = HeartbeatRequest("g", member_id, epoch, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",),
                                   owned=None if owned is None else {T1: owned})  # fmt: skip
            return (await groups.heartbeat(req, "c", "/h")).member_epoch

        async def rejoin(req: JoinRequest) -> int:
            holder = part.groups["g"]
            assert holder.consumer is not None
            joined = await join_consumer_group(groups, holder, holder.consumer, req, MigrationPolicy.UPGRADE, 10, 10)
            assert joined.error == ErrorCode.none
            return joined.generation_id

        assert await consumer("c1", 0, ()) == 2  # c1 owns t-0 and t-1
        assert await rejoin(owning()) == 3  # range: c1 t-0, zz t-1, once c1 revokes it
        assert await consumer("c1", 2, (0, 1)) == 2 and await consumer("c1", 2, (0,)) == 3
        assert await rejoin(owning()) == 3
        group = part.groups["g"].consumer
        assert group is not None and group.members["zz"].assigned == {T1: frozenset({1})}
        assert await consumer("c2", 0, ()) == 4  # range: c1 t-0, c2 t-1, zz nothing: zz revokes t-1
        assert heartbeat_consumer_group(groups, group, "zz", None, 3) == ErrorCode.rebalance_in_progress
        assert await rejoin(owning(1)) == 3  # still owns t-1
        assert await rejoin(owning()) == 4 and group.members["zz"].assigned == {}
        groups.close()

    asyncio.run(run())
