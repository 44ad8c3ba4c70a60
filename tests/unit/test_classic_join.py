"""broker/coordinator/classic_join.py: a classic member's JoinGroup on a consumer group with
members, as Kafka 4.3.1's classicGroupJoinToConsumerGroup answers it, on an in-memory
coordinator partition (the records it writes rebuild the same group)."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import uuid

from broker.config import BrokerConfig
from broker.coordinator.classic_join import join_consumer_group
from broker.coordinator.consumer_group import ConsumerGroup
from broker.coordinator.consumer_groups import ConsumerGroups, HeartbeatRequest
from broker.coordinator.group import ClassicGroup
from broker.coordinator.loader import LoadState, decode_chunk
from broker.coordinator.membership import JoinRequest, JoinResult
from broker.coordinator.migration import MigrationPolicy
from controller.model import ClusterImage, PartitionRegistration, TopicRegistration
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch

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

        async def append(group_id: str, records: list[NewRecord]) -> ErrorCode:
            written.extend(records)
            return ErrorCode.none

        groups = ConsumerGroups(config, _image, lambda _: (ErrorCode.none, part), append)
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
            return await join_consumer_group(groups, holder, group, req, policy, max_size)

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
