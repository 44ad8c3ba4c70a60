"""KIP-848 consumer groups without a network: the reconciliation rules (revocation before
assignment), the server assignors and the heartbeat flow on an in-memory coordinator partition."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable

import pytest

from broker.config import BrokerConfig
from broker.coordinator.assignors import MemberSpec, range_assign, uniform_assign
from broker.coordinator.consumer_group import ConsumerGroupMember, MemberState, reconcile
from broker.coordinator.consumer_groups import ConsumerGroups, HeartbeatError, HeartbeatRequest
from broker.coordinator.group import ClassicGroup
from broker.coordinator.loader import LoadState, decode_chunk
from broker.coordinator.membership import GroupMembership, MembershipConfig
from controller.model import BrokerRegistration, ClusterImage, PartitionRegistration, TopicRegistration
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from protocol.types import BrokerId, ControllerEpoch

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def test_revocation_comes_before_assignment() -> None:
    # member a owns 0-1 at epoch 1; the target at epoch 2 gives it 0 only and b partition 1
    a = ConsumerGroupMember("a", member_epoch=1, assigned={T1: frozenset({0, 1})})
    b = ConsumerGroupMember("b", member_epoch=0)
    owners = {(T1, 0): 1, (T1, 1): 1}
    a2 = reconcile(a, 2, {T1: frozenset({0})}, owners, {T1: (0, 1)})
    assert a2.state is MemberState.UNREVOKED_PARTITIONS and a2.member_epoch == 1
    assert a2.assigned == {T1: frozenset({0})} and a2.pending_revocation == {T1: frozenset({1})}
    owners[(T1, 0)] = 1  # a still owns 1 (pending revocation): b may not have it yet
    b2 = reconcile(b, 2, {T1: frozenset({1})}, owners, ())
    assert b2.state is MemberState.UNRELEASED_PARTITIONS and b2.member_epoch == 2 and b2.assigned == {}
    # a stops reporting partition 1: it moves to epoch 2; then b gets partition 1
    a3 = reconcile(a2, 2, {T1: frozenset({0})}, owners, {T1: (0,)})
    assert a3.state is MemberState.STABLE and a3.member_epoch == 2 and a3.previous_member_epoch == 1
    b3 = reconcile(b2, 2, {T1: frozenset({1})}, {(T1, 0): 2}, ())
    assert b3.state is MemberState.STABLE and b3.assigned == {T1: frozenset({1})}


def test_unrevoked_member_waits_while_it_reports_the_partition() -> None:
    a = ConsumerGroupMember("a", member_epoch=1, state=MemberState.UNREVOKED_PARTITIONS,
                            assigned={}, pending_revocation={T1: frozenset({1})})  # fmt: skip
    assert reconcile(a, 2, {}, {(T1, 1): 1}, {T1: (1,)}) is a
    assert reconcile(a, 2, {}, {(T1, 1): 1}, None) is a  # not reported: still owned


def _spec(member_id: str, topics: set[uuid.UUID], instance: str | None = None, current: dict | None = None) -> MemberSpec:
    return MemberSpec(member_id, instance, frozenset(topics), current or {})


def test_range_assignor_as_kafka() -> None:
    members = [_spec("m2", {T1, T2}), _spec("m1", {T1, T2}), _spec("m3", {T1, T2}, instance="i0")]
    got = range_assign(members, {T1: 7, T2: 2})
    # static members first (by instance id), then by member id; the first 7 % 3 take one more
    assert got["m3"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0})}
    assert got["m1"] == {T1: frozenset({3, 4}), T2: frozenset({1})}
    assert got["m2"] == {T1: frozenset({5, 6})}


@pytest.mark.parametrize("partitions", [1, 5, 9, 12])
def test_uniform_assignor_is_balanced_and_sticky(partitions: int) -> None:
    members = [_spec(f"m{i}", {T1}) for i in range(3)]
    first = uniform_assign(members, {T1: partitions})
    sizes = sorted(len(a.get(T1, ())) for a in first.values())
    assert sum(sizes) == partitions and sizes[-1] - sizes[0] <= 1
    assert set().union(*(a.get(T1, frozenset()) for a in first.values())) == set(range(partitions))
    # a fourth member joins: nobody loses more than it must
    members = [dataclasses.replace(m, current=first[m.member_id]) for m in members] + [_spec("m3", {T1})]
    second = uniform_assign(members, {T1: partitions})
    for m in members[:3]:
        kept = second[m.member_id].get(T1, frozenset()) & first[m.member_id].get(T1, frozenset())
        assert len(kept) >= min(len(first[m.member_id].get(T1, ())), partitions // 4)


def test_uniform_assignor_heterogeneous_subscriptions() -> None:
    got = uniform_assign([_spec("a", {T1}), _spec("b", {T1, T2})], {T1: 2, T2: 2})
    # b alone may take t2: balance gives a both partitions of t1
    assert got == {"a": {T1: frozenset({0, 1})}, "b": {T2: frozenset({0, 1})}}


def _writer(written: list[NewRecord]) -> Callable[..., Awaitable[ErrorCode]]:
    async def append(group_id: str, records: list[NewRecord], appended: Callable[[], None] | None = None) -> ErrorCode:
        written.extend(records)
        if appended is not None:
            appended()
        await asyncio.sleep(0.001)  # the wait for the replicas
        return ErrorCode.none

    return append


def membership() -> GroupMembership:
    """The classic side a group's online migration hands members to and from."""

    async def persist(group: ClassicGroup, assignments: dict[str, bytes] | None) -> ErrorCode:
        return ErrorCode.none

    return GroupMembership(MembershipConfig(0, 1000), persist)


class _Partition:
    def __init__(self) -> None:
        self.groups: dict[str, ClassicGroup] = {}


def _image(partitions: int) -> ClusterImage:
    regs = {p: PartitionRegistration.from_json({"replicas": [1], "isr": [1], "leader": 1, "leader_epoch": 0})
            for p in range(partitions)}  # fmt: skip
    return ClusterImage(cluster_id="c", controller_id=1, controller_epoch=1, brokers={},  # type: ignore[arg-type]
                        topics={"t": TopicRegistration("t", T1, regs)})  # fmt: skip


def test_heartbeat_flow_epochs_fencing_and_leave() -> None:
    async def run() -> None:
        config, _ = BrokerConfig.from_properties({"group.consumer.assignment.interval.ms": "0"})
        part = _Partition()
        written: list[NewRecord] = []
        groups = ConsumerGroups(config, lambda: _image(2), lambda _: (ErrorCode.none, part), _writer(written), membership())
        join = HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={})
        first = await groups.heartbeat(join, "c", "/h")
        assert (first.error, first.member_epoch, first.assignment) == (ErrorCode.none, 2, {T1: frozenset({0, 1})})
        b = await groups.heartbeat(dataclasses.replace(join, member_id="b"), "c", "/h")
        assert (b.member_epoch, b.assignment) == (3, {})  # partition pending revocation from a
        a = await groups.heartbeat(HeartbeatRequest("g", "a", 2, owned={T1: (0, 1)}), "c", "/h")
        assert a.member_epoch == 2 and a.assignment is not None and len(a.assignment[T1]) == 1
        assert (await groups.heartbeat(HeartbeatRequest("g", "a", 9), "c", "/h")).error == ErrorCode.fenced_member_epoch
        assert (await groups.heartbeat(HeartbeatRequest("g", "x", 1), "c", "/h")).error == ErrorCode.unknown_member_id
        left = await groups.heartbeat(HeartbeatRequest("g", "a", -1), "c", "/h")
        assert (left.error, left.member_epoch) == (ErrorCode.none, -1)
        group = part.groups["g"].consumer
        assert group is not None and list(group.members) == ["b"] and group.group_epoch == 4
        # the records written so far rebuild the same group (a coordinator loading the partition)
        state = LoadState()
        state.apply(decode_chunk(build_batch(written), 0))
        restored = groups.restore("g", state.consumer_groups["g"])
        assert (restored.group_epoch, restored.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
        assert restored.members == group.members and restored.target == group.target
        with pytest.raises(HeartbeatError) as e:
            groups.validate(HeartbeatRequest("g", "", 0), 1, topic_partitions_null=False)
        assert e.value.message == "MemberId can't be empty."
        groups.close()

    asyncio.run(run())


def test_session_expiry_fences_the_member() -> None:
    async def run() -> None:
        config, _ = BrokerConfig.from_properties({  # a 50 ms session: its bounds and heartbeat below it
            "group.consumer.session.timeout.ms": "50", "group.consumer.min.session.timeout.ms": "50",
            "group.consumer.heartbeat.interval.ms": "10", "group.consumer.min.heartbeat.interval.ms": "10"})
        part = _Partition()
        written: list[NewRecord] = []
        groups = ConsumerGroups(config, lambda: _image(1), lambda _: (ErrorCode.none, part), _writer(written), membership())
        join = HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={})
        await groups.heartbeat(join, "c", "/h")
        await asyncio.sleep(0.2)
        group = part.groups["g"].consumer
        assert group is not None and not group.members and group.group_epoch == 3
        assert [r.value is None for r in written[-4:]] == [True, True, True, False]  # the member's tombstones, the epoch
        groups.close()

    asyncio.run(run())


def test_an_empty_group_that_becomes_classic_is_not_loaded_back() -> None:
    async def run() -> None:
        config, _ = BrokerConfig.from_properties({})
        part = _Partition()
        written: list[NewRecord] = []
        groups = ConsumerGroups(config, lambda: _image(1), lambda _: (ErrorCode.none, part), _writer(written), membership())
        join = HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={})
        await groups.heartbeat(join, "c", "/h")
        await groups.heartbeat(HeartbeatRequest("g", "a", -1), "c", "/h")
        assert await groups.convert_to_classic(part.groups["g"]) == ErrorCode.none
        assert part.groups["g"].consumer is None
        state = LoadState()
        state.apply(decode_chunk(build_batch(written), 0))
        assert "g" not in state.group_ids()
        groups.close()

    asyncio.run(run())


def test_a_refused_join_creates_no_group() -> None:
    async def run() -> None:
        config, _ = BrokerConfig.from_properties({})
        part = _Partition()
        groups = ConsumerGroups(config, lambda: _image(1), lambda _: (ErrorCode.none, part), _writer([]), membership())
        bad = HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="(", owned={})
        assert (await groups.heartbeat(bad, "c", "/h")).error == ErrorCode.invalid_regular_expression
        assert "g" not in part.groups
        groups.close()

    asyncio.run(run())


def test_a_change_of_replica_racks_bumps_the_group_epoch() -> None:
    """Kafka's topic metadata hash covers each partition's replica racks: a broker registering
    with another rack bumps the group epoch; a broker leaving the image (a Samsa broker that is
    down; a KRaft one stays registered, fenced) does not."""

    def image(brokers: dict[int, str | None]) -> ClusterImage:
        regs = {0: PartitionRegistration.from_json({"replicas": [1, 2], "isr": [1], "leader": 1, "leader_epoch": 0})}
        return ClusterImage(
            cluster_id="c", controller_id=BrokerId(1), controller_epoch=ControllerEpoch(1),
            brokers={BrokerId(b): BrokerRegistration(BrokerId(b), (), rack) for b, rack in brokers.items()},
            topics={"t": TopicRegistration("t", T1, regs)},
        )  # fmt: skip

    async def run() -> None:
        config, _ = BrokerConfig.from_properties({"group.consumer.assignment.interval.ms": "0"})
        part = _Partition()
        current = [image({1: "r1", 2: "r2"})]
        groups = ConsumerGroups(config, lambda: current[0], lambda _: (ErrorCode.none, part), _writer([]), membership())
        join = HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={})
        assert (await groups.heartbeat(join, "c", "/h")).member_epoch == 2
        again = HeartbeatRequest("g", "a", 2, owned={T1: (0,)})
        current[0] = image({1: "r1"})  # broker 2 is down: its last rack stands
        assert (await groups.heartbeat(again, "c", "/h")).member_epoch == 2
        current[0] = image({1: "r1", 2: "r3"})  # broker 2 is back in another rack
        assert (await groups.heartbeat(again, "c", "/h")).member_epoch == 3
        group = part.groups["g"].consumer
        assert group is not None and group.partition_racks == {"t": (("r1", "r3"),)}
        groups.close()

    asyncio.run(run())


def test_a_rejoin_within_the_assignment_interval_gets_the_last_target_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16's sequence (a group emptied at epoch 5, a member rejoining): within
    `group.consumer.assignment.interval.ms` of the last target assignment the new member is
    reconciled to that target (its epoch, nothing assigned), past it the next target is computed
    (Kafka's canComputeNextTargetAssignment). Samsa answered member epoch 2 where a loaded Kafka,
    slower through the same steps, answered 6: a timing difference, not an older group; the group
    epoch never goes back and the group's records rebuild the same group."""
    now = [1_000_000]
    monkeypatch.setattr("broker.clock.now_ms", lambda: now[0])

    async def run() -> None:
        config, _ = BrokerConfig.from_properties({"group.consumer.assignment.interval.ms": "1000"})
        part = _Partition()
        written: list[NewRecord] = []
        groups = ConsumerGroups(config, lambda: _image(2), lambda _: (ErrorCode.none, part), _writer(written), membership())

        def join(member_id: str) -> HeartbeatRequest:
            return HeartbeatRequest("g", member_id, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",),
                                    owned={})  # fmt: skip

        assert (await groups.heartbeat(join("a"), "c", "/h")).member_epoch == 2  # target computed at epoch 2
        now[0] += 10
        b = await groups.heartbeat(join("b"), "c", "/h")
        assert (b.member_epoch, b.assignment) == (2, {})  # group epoch 3, target still epoch 2's
        for member_id, epoch in (("a", -1), ("b", -1)):
            assert (await groups.heartbeat(HeartbeatRequest("g", member_id, epoch), "c", "/h")).error == ErrorCode.none
        group = part.groups["g"].consumer
        assert group is not None and (group.group_epoch, group.assignment_epoch, len(group.members)) == (5, 2, 0)
        now[0] += 10
        c = await groups.heartbeat(join("c"), "c", "/h")
        assert (c.error, c.member_epoch, c.assignment) == (ErrorCode.none, 2, {})
        assert (group.group_epoch, group.assignment_epoch) == (6, 2)
        now[0] += 1_000  # the interval has passed: c's next heartbeat computes epoch 6's target
        again = await groups.heartbeat(HeartbeatRequest("g", "c", 2, owned={}), "c", "/h")
        assert (again.member_epoch, again.assignment) == (6, {T1: frozenset({0, 1})})
        assert (group.group_epoch, group.assignment_epoch) == (6, 6)
        state = LoadState()
        state.apply(decode_chunk(build_batch(written), 0))
        restored = groups.restore("g", state.consumer_groups["g"])
        assert (restored.group_epoch, restored.assignment_epoch, restored.members) == (6, 6, group.members)
        groups.close()

    asyncio.run(run())


def test_records_of_a_timer_are_written_before_those_of_a_later_heartbeat() -> None:
    """A member fenced by a timer (epoch 4 in memory, its records written in the background)
    followed at once by a heartbeat that bumps the group epoch again (5, written while it is
    answered): the partition must hold them in that order, or a coordinator loading it would
    bring the group back at epoch 4, below what its members were told."""

    async def run() -> None:
        config, _ = BrokerConfig.from_properties({"group.consumer.assignment.interval.ms": "0"})
        part = _Partition()
        written: list[NewRecord] = []
        groups = ConsumerGroups(config, lambda: _image(2), lambda _: (ErrorCode.none, part), _writer(written), membership())
        join = HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), owned={})
        await groups.heartbeat(join, "c", "/h")
        b = await groups.heartbeat(dataclasses.replace(join, member_id="b"), "c", "/h")
        groups._fence("g", "a", "session expired")  # what the session timer calls
        changed = HeartbeatRequest("g", "b", b.member_epoch, subscribed_topic_names=("t", "u"), owned={})
        assert (await groups.heartbeat(changed, "c", "/h")).error == ErrorCode.none
        await asyncio.sleep(0.01)  # the background write
        group = part.groups["g"].consumer
        assert group is not None and group.group_epoch == 5
        state = LoadState()
        state.apply(decode_chunk(build_batch(written), 0))
        assert groups.restore("g", state.consumer_groups["g"]).group_epoch == 5
        # the last member's session expires and the empty group is deleted at once (the
        # coordinator's DeleteGroups or retention sweep): the tombstones come last, the group
        # does not come back
        groups._fence("g", "b", "session expired")
        groups.write_in_order("g", groups.deletion_records(group))
        await asyncio.sleep(0.01)
        state = LoadState()
        state.apply(decode_chunk(build_batch(written), 0))
        assert "g" not in state.group_ids()
        groups.close()

    asyncio.run(run())
