"""The classic group state machine (broker/coordinator/group.py, membership.py), driven directly
on an asyncio loop with real (short) timers and an in-memory stand-in for __consumer_offsets."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from broker.coordinator.group import (
    ClassicGroup,
    GroupState,
    IllegalStateTransition,
    parse_subscription_topics,
)
from broker.coordinator.membership import (
    GroupMembership,
    JoinRequest,
    JoinResult,
    LeavingMember,
    MembershipConfig,
    SyncResult,
)
from protocol.errors import ErrorCode

RANGE = ("range", b"range-meta")
RR = ("roundrobin", b"rr-meta")


class Store:
    """Records what would be written to __consumer_offsets; can be told to fail."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, int, dict[str, bytes] | None]] = []
        self.error = ErrorCode.none

    async def persist(self, group: ClassicGroup, assignments: dict[str, bytes] | None) -> ErrorCode:
        await asyncio.sleep(0)
        self.writes.append((group.group_id, group.generation, assignments))
        return self.error


def run(test: Callable[..., Awaitable[None]], **config: int) -> None:
    async def main() -> None:
        store = Store()
        membership = GroupMembership(
            MembershipConfig(config.get("delay", 0), config.get("max_size", 100)), store.persist
        )
        try:
            await asyncio.wait_for(test(membership, store), 20)
        finally:
            await membership.close()

    asyncio.run(main())


def request(
    member_id: str = "",
    protocols: tuple[tuple[str, bytes], ...] = (RANGE,),
    *,
    instance: str | None = None,
    session_ms: int = 10_000,
    rebalance_ms: int = 2_000,
    protocol_type: str = "consumer",
    require_known: bool = False,
    client_id: str = "client",
) -> JoinRequest:
    return JoinRequest(
        group_id="g",
        member_id=member_id,
        group_instance_id=instance,
        client_id=client_id,
        client_host="/127.0.0.1",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=protocol_type,
        protocols=protocols,
        require_known_member_id=require_known,
    )


async def join_all(ms: GroupMembership, group: ClassicGroup, *reqs: JoinRequest) -> list[JoinResult]:
    return list(await asyncio.gather(*(ms.join(group, r) for r in reqs)))


async def stable_group(ms: GroupMembership, n: int, **kw: Any) -> tuple[ClassicGroup, list[JoinResult]]:
    group = ClassicGroup("g")
    results = await join_all(ms, group, *(request(client_id=f"c{i}", **kw) for i in range(n)))
    leader = next(r for r in results if r.member_id == r.leader_id)
    assignments = {r.member_id: f"assignment-{r.member_id}".encode() for r in results}
    syncs = await asyncio.gather(
        *(
            ms.sync(group, r.member_id, None, r.generation_id, None, None, assignments if r is leader else {})
            for r in results
        )
    )
    assert all(s.error == ErrorCode.none for s in syncs)
    assert group.state is GroupState.STABLE
    return group, results


# -- join ----------------------------------------------------------------------------------------


def test_first_join_with_v4_needs_a_member_id_then_completes() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group = ClassicGroup("g")
        first = await ms.join(group, request(require_known=True, client_id="app"))
        assert first.error == ErrorCode.member_id_required
        assert first.member_id.startswith("app-")
        assert group.state is GroupState.EMPTY and first.member_id in group.pending_members
        second = await ms.join(group, request(first.member_id, require_known=True))
        assert second.error == ErrorCode.none
        assert (second.member_id, second.leader_id, second.generation_id) == (first.member_id, first.member_id, 1)
        assert second.protocol_name == "range" and second.protocol_type == "consumer"
        assert [m.metadata for m in second.members] == [b"range-meta"]
        assert group.state is GroupState.COMPLETING_REBALANCE

    run(t)


def test_initial_delay_gathers_members_into_one_generation_and_only_the_leader_gets_members() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group = ClassicGroup("g")
        a = asyncio.ensure_future(ms.join(group, request(protocols=(RANGE, RR))))
        await asyncio.sleep(0.02)
        b = asyncio.ensure_future(ms.join(group, request(protocols=(RR, RANGE))))
        c = asyncio.ensure_future(ms.join(group, request(protocols=(RR, RANGE))))
        results = await asyncio.gather(a, b, c)
        assert {r.generation_id for r in results} == {1}
        assert {r.protocol_name for r in results} == {"roundrobin"}  # two votes to one
        leader = results[0]
        assert leader.leader_id == leader.member_id
        assert sorted(m.member_id for m in leader.members) == sorted(r.member_id for r in results)
        assert {m.metadata for m in leader.members} == {b"rr-meta"}
        assert results[1].members == () and results[2].members == ()

    run(t, delay=150)


def test_protocol_chosen_must_be_supported_by_every_member() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group = ClassicGroup("g")
        results = await join_all(ms, group, request(protocols=(RANGE, RR)), request(protocols=(RR,)))
        assert {r.protocol_name for r in results} == {"roundrobin"}
        bad = await ms.join(group, request(protocols=(("sticky", b""),)))
        assert bad.error == ErrorCode.inconsistent_group_protocol
        other_type = await ms.join(group, request(protocol_type="connect", protocols=(RR,)))
        assert other_type.error == ErrorCode.inconsistent_group_protocol

    run(t, delay=100)


def test_unknown_member_rejoining_gets_unknown_member_id() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group, _ = await stable_group(ms, 1)
        result = await ms.join(group, request("no-such-member"))
        assert result.error == ErrorCode.unknown_member_id

    run(t)


def test_group_max_size() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group, _ = await stable_group(ms, 2)
        result = await ms.join(group, request())
        assert result.error == ErrorCode.group_max_size_reached

    run(t, max_size=2)


# -- sync ----------------------------------------------------------------------------------------


def test_sync_hands_every_member_its_own_assignment_after_the_record_is_written() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group, results = await stable_group(ms, 3)
        assert [w[1] for w in store.writes] == [1]
        written = store.writes[0][2]
        assert written == {r.member_id: f"assignment-{r.member_id}".encode() for r in results}
        again = await ms.sync(group, results[1].member_id, None, 1, "consumer", "range", {})
        assert again == SyncResult(ErrorCode.none, f"assignment-{results[1].member_id}".encode(), "consumer", "range")
        wrong = await ms.sync(group, results[1].member_id, None, 1, "consumer", "roundrobin", {})
        assert wrong.error == ErrorCode.inconsistent_group_protocol

    run(t, delay=50)


def test_sync_errors() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group, results = await stable_group(ms, 1)
        member = results[0].member_id
        assert (await ms.sync(group, "stranger", None, 1, None, None, {})).error == ErrorCode.unknown_member_id
        assert (await ms.sync(group, member, None, 7, None, None, {})).error == ErrorCode.illegal_generation
        ms.prepare_rebalance(group, "test")
        assert (await ms.sync(group, member, None, 1, None, None, {})).error == ErrorCode.rebalance_in_progress

    run(t)


def test_failed_assignment_write_fails_the_sync_and_rebalances() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group = ClassicGroup("g")
        (result,) = await join_all(ms, group, request())
        store.error = ErrorCode.not_coordinator
        sync = await ms.sync(group, result.member_id, None, 1, None, None, {result.member_id: b"x"})
        assert sync.error == ErrorCode.not_coordinator
        assert group.state is GroupState.PREPARING_REBALANCE

    run(t)


# -- heartbeat and sessions ----------------------------------------------------------------------


def test_heartbeat_answers() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group, results = await stable_group(ms, 1)
        member = results[0].member_id
        assert ms.heartbeat(group, member, None, 1) == ErrorCode.none
        assert ms.heartbeat(group, member, None, 2) == ErrorCode.illegal_generation
        assert ms.heartbeat(group, "stranger", None, 1) == ErrorCode.unknown_member_id
        ms.prepare_rebalance(group, "test")
        assert ms.heartbeat(group, member, None, 1) == ErrorCode.rebalance_in_progress

    run(t)


def test_a_member_that_stops_heartbeating_is_removed_and_the_group_rebalances() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group, results = await stable_group(ms, 2, session_ms=300, rebalance_ms=5000)
        alive, dead = results[0].member_id, results[1].member_id
        for _ in range(8):  # 0.8 s: only `alive` heartbeats
            await asyncio.sleep(0.1)
            if ms.heartbeat(group, alive, None, group.generation) == ErrorCode.rebalance_in_progress:
                break
        assert dead not in group.members
        assert group.state is GroupState.PREPARING_REBALANCE
        rejoined = await ms.join(group, request(alive, session_ms=300, rebalance_ms=5000))
        assert rejoined.error == ErrorCode.none and rejoined.generation_id == 2
        assert [m.member_id for m in rejoined.members] == [alive]

    run(t)


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_dropped() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group, results = await stable_group(ms, 2, rebalance_ms=300)
        stays = results[0].member_id
        started = asyncio.get_running_loop().time()
        rejoined = await ms.join(group, request(stays, rebalance_ms=300))  # triggers the rebalance
        assert asyncio.get_running_loop().time() - started >= 0.25
        assert rejoined.generation_id == 2 and list(group.members) == [stays]

    run(t)


# -- leave ---------------------------------------------------------------------------------------


def test_leave_rebalances_and_the_last_leave_empties_the_group() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group, results = await stable_group(ms, 2)
        assert ms.leave(group, LeavingMember("stranger", None)) == ErrorCode.unknown_member_id
        assert ms.leave(group, LeavingMember(results[1].member_id, None)) == ErrorCode.none
        assert group.state is GroupState.PREPARING_REBALANCE
        again = await ms.join(group, request(results[0].member_id))
        assert again.generation_id == 2
        assert ms.leave(group, LeavingMember(results[0].member_id, None)) == ErrorCode.none
        await asyncio.sleep(0.05)
        assert group.state is GroupState.EMPTY and group.generation == 3
        assert store.writes[-1][1] == 3  # the empty group is written too

    run(t)


# -- static membership ---------------------------------------------------------------------------


def test_static_member_replacement_keeps_the_assignment_and_fences_the_old_id() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group = ClassicGroup("g")
        (first,) = await join_all(ms, group, request(instance="host-1"))
        assert first.member_id.startswith("host-1-")
        await ms.sync(group, first.member_id, "host-1", 1, None, None, {first.member_id: b"p0,p1"})
        assert group.state is GroupState.STABLE
        # the same instance restarts: it has no member id yet
        second = await ms.join(group, request(instance="host-1"))
        assert second.error == ErrorCode.none and second.member_id != first.member_id
        assert second.generation_id == 1  # no rebalance
        assert second.skip_assignment  # it is the leader of a stable group
        sync = await ms.sync(group, second.member_id, "host-1", 1, None, None, {})
        assert sync.assignment == b"p0,p1"
        assert ms.heartbeat(group, first.member_id, "host-1", 1) == ErrorCode.fenced_instance_id
        assert (await ms.join(group, request(first.member_id, instance="host-1"))).error == ErrorCode.fenced_instance_id
        assert ms.leave(group, LeavingMember("", "host-1")) == ErrorCode.none
        assert second.member_id not in group.members

    run(t)


# -- states --------------------------------------------------------------------------------------


def test_illegal_transitions_raise() -> None:
    group = ClassicGroup("g")
    with pytest.raises(IllegalStateTransition):
        group.transition(GroupState.STABLE, 0)
    with pytest.raises(IllegalStateTransition):
        group.transition(GroupState.COMPLETING_REBALANCE, 0)
    group.transition(GroupState.PREPARING_REBALANCE, 5)
    assert group.state_timestamp_ms == 5
    group.transition(GroupState.DEAD, 6)
    with pytest.raises(IllegalStateTransition):
        group.transition(GroupState.EMPTY, 7)


def test_shut_down_answers_waiting_members() -> None:
    async def t(ms: GroupMembership, store: Store) -> None:
        group = ClassicGroup("g")
        waiting = asyncio.ensure_future(ms.join(group, request()))
        await asyncio.sleep(0.01)
        ms.shut_down_group(group, ErrorCode.not_coordinator)
        assert (await waiting).error == ErrorCode.not_coordinator
        assert group.state is GroupState.DEAD
        assert (await ms.join(group, request())).error == ErrorCode.coordinator_not_available

    run(t, delay=5000)


def test_subscription_topics_are_parsed_from_consumer_protocol_metadata() -> None:
    data = b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x03bcd" + b"\xff\xff\xff\xff"
    assert parse_subscription_topics(data) == {"a", "bcd"}
    with pytest.raises(ValueError):
        parse_subscription_topics(b"\x00\x01\x00\x00\x00\x01\x00\x09x")
