"""The classic group protocol flows: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, timeouts.

Every state change happens synchronously in one call (no await in between); a member that has to
wait for the rest of the group (a JoinGroup during PreparingRebalance, a SyncGroup before the
leader's assignment is stored) gets an asyncio future that a later state change completes.
Timers are `loop.call_later` handles:

* session: each member has a heartbeat deadline (moved by Heartbeat, JoinGroup, SyncGroup and
  OffsetCommit); when it passes, the member is removed and the group rebalances. A member waiting
  for its JoinGroup or SyncGroup answer is kept alive (a new member of a new group at most
  NEW_MEMBER_JOIN_TIMEOUT_MS), as Kafka does.
* join: PreparingRebalance completes when every member has rejoined, or when the rebalance timeout
  (the largest of the members') passes; members that did not rejoin are then removed (dynamic
  members only). A new (Empty) group first waits group.initial.rebalance.delay.ms, extended by
  the same delay while new members keep arriving, up to the rebalance timeout.
* sync: members that have not sent SyncGroup within the rebalance timeout after the join phase
  are removed and the group rebalances again.
* pending (KIP-394): a member id handed out with MEMBER_ID_REQUIRED expires after the session
  timeout if the member does not join with it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

from broker import clock
from broker.coordinator.group import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    ClassicGroup,
    GroupState,
    JoinedMember,
    Member,
)
from protocol.errors import ErrorCode

log = logging.getLogger("samsa.coordinator")

PersistFn = Callable[[ClassicGroup, "dict[str, bytes] | None"], Awaitable[ErrorCode]]
"""Append the group's metadata record (with these assignments) to __consumer_offsets."""


@dataclass(frozen=True, slots=True)
class MembershipConfig:
    initial_rebalance_delay_ms: int
    max_size: int


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool
    reason: str | None = None
    correlation_id: int = -1


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None
    reason: str | None = None



def _finish(fut: asyncio.Future[object] | None, result: object) -> None:
    if fut is not None and not fut.done():
        fut.set_result(result)


class GroupMembership:
    """Runs the classic protocol on groups handed to it (the coordinator finds or creates them)."""

    def __init__(self, config: MembershipConfig, persist: PersistFn) -> None:
        self.config = config
        self._persist = persist
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # == JoinGroup ================================================================================

    def can_accept(self, group: ClassicGroup, member_id: str) -> bool:
        """group.max.size: may this member (new or known) join now?"""
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            known = group.members.get(member_id)
            return (known is not None and known.awaiting_join is not None) or (
                group.awaiting_join_count() < self.config.max_size
            )
        return member_id in group.members or group.size < self.config.max_size

    async def join(self, group: ClassicGroup, req: JoinRequest) -> JoinResult:
        outcome = self._join(group, req)
        if isinstance(outcome, JoinResult):
            return outcome
        return cast(JoinResult, await outcome)

    def _join(self, group: ClassicGroup, req: JoinRequest) -> JoinResult | asyncio.Future[object]:
        if not self.can_accept(group, req.member_id):
            log.info(
                "join rejected group=%s client_id=%s correlation_id=%d error=GROUP_MAX_SIZE_REACHED max=%d",
                group.group_id, req.client_id, req.correlation_id, self.config.max_size,
            )  # fmt: skip
            return JoinResult(ErrorCode.group_max_size_reached, req.member_id)
        if not req.member_id:
            return self._join_new_member(group, req)
        return self._join_known_member(group, req)

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest) -> JoinResult | asyncio.Future[object]:
        if group.is_in(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, "")
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return JoinResult(ErrorCode.inconsistent_group_protocol, "")
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is not None:
                return self._replace_static_member(group, req, old_id, new_id)
            return self._add_member_and_rebalance(group, req, new_id)
        if req.require_known_member_id:
            # KIP-394: hand out the member id; the member joins again with it.
            self._add_pending_member(group, new_id, req.session_timeout_ms)
            log.info(
                "member id required group=%s member=%s client_id=%s correlation_id=%d",
                group.group_id, new_id, req.client_id, req.correlation_id,
            )  # fmt: skip
            return JoinResult(ErrorCode.member_id_required, new_id)
        return self._add_member_and_rebalance(group, req, new_id)

    def _join_known_member(self, group: ClassicGroup, req: JoinRequest) -> JoinResult | asyncio.Future[object]:
        member_id = req.member_id
        if group.is_in(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, member_id)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        if member_id in group.pending_members:
            self._remove_pending_member(group, member_id)
            return self._add_member_and_rebalance(group, req, member_id)
        if group.is_static_member_fenced(member_id, req.group_instance_id):
            return JoinResult(ErrorCode.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is None:
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, req, "member rejoined")
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # The member missed its JoinGroup answer: give it again.
                self._touch(group, member)
                return self._join_result(group, member)
            return self._update_member_and_rebalance(group, member, req, "member rejoined with new metadata")
        if group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                return self._update_member_and_rebalance(
                    group, member, req, "leader or member with new metadata rejoined"
                )
            self._touch(group, member)
            return self._join_result(group, member)
        return JoinResult(ErrorCode.unknown_member_id, member_id)  # Empty

    def _join_result(self, group: ClassicGroup, member: Member, *, skip: bool = False) -> JoinResult:
        leader = group.is_leader(member.member_id)
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            skip_assignment=skip,
            members=group.joined_members() if leader else (),
        )

    def _add_member_and_rebalance(
        self, group: ClassicGroup, req: JoinRequest, member_id: str
    ) -> asyncio.Future[object]:
        member = Member(
            member_id, req.group_instance_id, req.client_id, req.client_host,
            req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, req.protocols,
        )  # fmt: skip
        member.is_new = True
        member.joined_at = self._loop.time()
        fut: asyncio.Future[object] = self._loop.create_future()
        member.awaiting_join = fut
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        self._schedule_heartbeat(group, member)
        log.info(
            "member joined group=%s member=%s instance=%s client_id=%s client_host=%s correlation_id=%d",
            group.group_id, member_id, req.group_instance_id, req.client_id, req.client_host,
            req.correlation_id,
        )  # fmt: skip
        self.maybe_prepare_rebalance(group, f"adding member {member_id}")
        self._try_complete_join(group)
        return fut

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, req: JoinRequest, reason: str
    ) -> asyncio.Future[object]:
        member.protocols = req.protocols
        member.protocol_type = req.protocol_type
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id
        member.joined_at = self._loop.time()
        fut = member.awaiting_join
        if fut is None or fut.done():
            # (a member that sends JoinGroup again while waiting shares the pending answer)
            fut = self._loop.create_future()
            member.awaiting_join = fut
        self._touch(group, member)
        self.maybe_prepare_rebalance(group, f"{reason} ({member.member_id})")
        self._try_complete_join(group)
        return fut

    def _replace_static_member(
        self, group: ClassicGroup, req: JoinRequest, old_id: str, new_id: str
    ) -> JoinResult | asyncio.Future[object]:
        """A static member came back with a new member id: it takes over the old member's place
        (and assignment); the old id is fenced from now on."""
        member = group.members[old_id]
        _finish(member.awaiting_join, JoinResult(ErrorCode.fenced_instance_id, old_id))
        _finish(member.awaiting_sync, SyncResult(ErrorCode.fenced_instance_id))
        member.awaiting_join = member.awaiting_sync = None
        old_protocols = member.protocols
        group.replace_static_member(cast(str, req.group_instance_id), old_id, new_id)
        log.info(
            "static member replaced group=%s instance=%s old_member=%s member=%s client_id=%s correlation_id=%d",
            group.group_id, req.group_instance_id, old_id, new_id, req.client_id, req.correlation_id,
        )  # fmt: skip
        if group.is_in(GroupState.STABLE) and req.protocols == old_protocols:
            # Same subscription: no rebalance; store the new member id, answer with the
            # current generation (the member syncs to get its old assignment).
            member.client_id, member.client_host = req.client_id, req.client_host
            member.session_timeout_ms = req.session_timeout_ms
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
            self._touch(group, member)
            fut: asyncio.Future[object] = self._loop.create_future()
            self._spawn(self._store_static_replacement(group, member, old_id, fut))
            return fut
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, req, "static member rejoined")
        return self._update_member_and_rebalance(group, member, req, "static member joined")

    async def _store_static_replacement(
        self, group: ClassicGroup, member: Member, old_id: str, fut: asyncio.Future[object]
    ) -> None:
        generation = group.generation
        error = await self._persist(group, None)
        if fut.done():
            return
        if error != ErrorCode.none:
            if member.member_id in group.members and member.group_instance_id is not None:
                group.replace_static_member(member.group_instance_id, member.member_id, old_id)
            fut.set_result(JoinResult(error, ""))
            return
        if group.generation != generation or member.member_id not in group.members:
            fut.set_result(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
            return
        fut.set_result(self._join_result(group, member, skip=group.is_leader(member.member_id)))

    # -- pending members (KIP-394) -------------------------------------------------------------

    def _add_pending_member(self, group: ClassicGroup, member_id: str, session_timeout_ms: int) -> None:
        handle = self._loop.call_later(
            session_timeout_ms / 1000, self._expire_pending_member, group, member_id
        )
        group.pending_members[member_id] = handle

    def _remove_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        handle = group.pending_members.pop(member_id, None)
        if handle is not None:
            handle.cancel()

    def _expire_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        if group.pending_members.pop(member_id, "absent") == "absent":
            return
        log.info("pending member expired group=%s member=%s", group.group_id, member_id)
        self._try_complete_join(group)

    # -- rebalance -----------------------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self._cancel_sync_timer(group)
        was_empty = group.is_in(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, clock.now_ms())
        self._cancel_join_timer(group)
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.initial_delay = True
            group.join_timer = self._loop.call_later(
                delay / 1000, self._on_initial_delay, group, delay, remaining
            )
        else:
            group.initial_delay = False
            group.join_timer = self._loop.call_later(
                group.rebalance_timeout_ms() / 1000, self._on_join_timeout, group
            )
        log.info(
            "preparing rebalance group=%s generation=%d members=%d reason=%s",
            group.group_id, group.generation, group.size, reason,
        )  # fmt: skip

    def _on_initial_delay(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        group.join_timer = None
        if not group.is_in(GroupState.PREPARING_REBALANCE) or not group.initial_delay:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            next_delay = min(delay, remaining)
            group.join_timer = self._loop.call_later(
                next_delay / 1000, self._on_initial_delay, group, delay, max(remaining - next_delay, 0)
            )
            return
        group.initial_delay = False
        self._complete_join(group)

    def _on_join_timeout(self, group: ClassicGroup) -> None:
        group.join_timer = None
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._complete_join(group)

    def _try_complete_join(self, group: ClassicGroup) -> None:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.initial_delay
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self._cancel_join_timer(group)
        if group.is_in(GroupState.DEAD):
            return
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info(
                    "member removed group=%s member=%s reason=did_not_rejoin", group.group_id, member.member_id
                )
                group.remove(member.member_id)
        if group.members and not group.maybe_elect_new_joined_leader():
            log.warning(
                "rebalance postponed group=%s reason=no_member_rejoined members=%d", group.group_id, group.size
            )
            group.join_timer = self._loop.call_later(
                group.rebalance_timeout_ms() / 1000, self._on_join_timeout, group
            )
            return
        group.init_next_generation(clock.now_ms())
        log.info(
            "rebalance complete group=%s generation=%d protocol=%s leader=%s members=%d state=%s",
            group.group_id, group.generation, group.protocol_name, group.leader_id, group.size,
            group.state.value,
        )  # fmt: skip
        if group.is_in(GroupState.EMPTY):
            self._spawn(self._store_empty(group))
            return
        for member in group.members.values():
            if member.awaiting_join is not None:
                result = self._join_result(group, member)
                _finish(member.awaiting_join, result)
                member.awaiting_join = None
            member.is_new = False
            self._touch(group, member)
        generation = group.generation
        group.sync_timer = self._loop.call_later(
            group.rebalance_timeout_ms() / 1000, self._on_sync_timeout, group, generation
        )

    async def _store_empty(self, group: ClassicGroup) -> None:
        error = await self._persist(group, None)
        if error != ErrorCode.none:
            log.warning("storing empty group failed group=%s error=%s", group.group_id, error.name)

    def _on_sync_timeout(self, group: ClassicGroup, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation or not group.pending_sync:
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        for member_id in list(group.pending_sync):
            log.info("member removed group=%s member=%s reason=sync_timeout", group.group_id, member_id)
            group.remove(member_id)
        group.pending_sync.clear()
        self.prepare_rebalance(group, "members did not sync in time")
        self._try_complete_join(group)

    def _cancel_join_timer(self, group: ClassicGroup) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None

    def _cancel_sync_timer(self, group: ClassicGroup) -> None:
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            _finish(member.awaiting_sync, SyncResult(error))
            member.awaiting_sync = None

    # == SyncGroup ================================================================================

    def validate_member(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, generation: int | None
    ) -> ErrorCode:
        """Kafka's validateCurrentMember: fencing, membership, generation."""
        if group.is_static_member_fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation is not None and generation != group.generation:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    async def sync(
        self,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        outcome = self._sync(group, member_id, instance_id, generation, protocol_type, protocol_name, assignments)
        if isinstance(outcome, SyncResult):
            return outcome
        return cast(SyncResult, await outcome)

    def _sync(
        self,
        group: ClassicGroup,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult | asyncio.Future[object]:
        if group.is_in(GroupState.DEAD):
            return SyncResult(ErrorCode.coordinator_not_available)
        error = self.validate_member(group, member_id, instance_id, generation)
        if error != ErrorCode.none:
            return SyncResult(error)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.is_in(GroupState.EMPTY):
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.rebalance_in_progress)
        member = group.members[member_id]
        group.pending_sync.discard(member_id)
        self._touch(group, member)
        if group.is_in(GroupState.STABLE):
            return SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance
        _finish(member.awaiting_sync, SyncResult(ErrorCode.rebalance_in_progress))
        fut: asyncio.Future[object] = self._loop.create_future()
        member.awaiting_sync = fut
        if group.is_leader(member_id):
            full = {m: assignments.get(m, b"") for m in group.members}
            missing = [m for m in group.members if m not in assignments]
            log.info(
                "leader assignment received group=%s generation=%d leader=%s members=%d missing=%d",
                group.group_id, group.generation, member_id, group.size, len(missing),
            )  # fmt: skip
            self._spawn(self._store_assignment(group, group.generation, full))
        return fut

    async def _store_assignment(self, group: ClassicGroup, generation: int, assignments: dict[str, bytes]) -> None:
        error = await self._persist(group, assignments)
        # Apply only if nothing moved on while the record was written.
        if not group.is_in(GroupState.COMPLETING_REBALANCE) or group.generation != generation:
            return
        if error != ErrorCode.none:
            log.warning(
                "storing assignment failed group=%s generation=%d error=%s", group.group_id, generation, error.name
            )
            self._reset_and_propagate_assignment_error(group, error)
            self.prepare_rebalance(group, f"error storing assignment: {error.name}")
            return
        for member_id, member in group.members.items():
            member.assignment = assignments.get(member_id, b"")
            if member.awaiting_sync is not None:
                _finish(
                    member.awaiting_sync,
                    SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name),
                )
                member.awaiting_sync = None
                self._touch(group, member)
        group.transition(GroupState.STABLE, clock.now_ms())
        log.info("group stable group=%s generation=%d members=%d", group.group_id, generation, group.size)

    # == Heartbeat ================================================================================

    def heartbeat(self, group: ClassicGroup, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = self.validate_member(group, member_id, instance_id, generation)
        if error != ErrorCode.none:
            return error
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        self._touch(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def touch(self, group: ClassicGroup, member_id: str) -> None:
        """An OffsetCommit from a member counts as a heartbeat."""
        member = group.members.get(member_id)
        if member is not None:
            self._touch(group, member)

    def _touch(self, group: ClassicGroup, member: Member) -> None:
        member.heartbeat_deadline = self._loop.time() + member.session_timeout_ms / 1000
        if member.heartbeat_timer is None:
            self._schedule_heartbeat(group, member)

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member) -> None:
        now = self._loop.time()
        if member.heartbeat_deadline <= now:
            member.heartbeat_deadline = now + member.session_timeout_ms / 1000
        member.cancel_timer()
        member.heartbeat_timer = self._loop.call_at(
            member.heartbeat_deadline, self._on_heartbeat_deadline, group, member
        )

    def start_session(self, group: ClassicGroup, member: Member) -> None:
        """Start the session timer of a member loaded from the log."""
        member.heartbeat_deadline = self._loop.time() + member.session_timeout_ms / 1000
        self._schedule_heartbeat(group, member)

    def _on_heartbeat_deadline(self, group: ClassicGroup, member: Member) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member or group.is_in(GroupState.DEAD):
            return
        now = self._loop.time()
        if now < member.heartbeat_deadline:
            self._schedule_heartbeat(group, member)
            return
        keep_alive = member.awaiting_sync is not None or (
            member.awaiting_join is not None
            and (not member.is_new or now < member.joined_at + NEW_MEMBER_JOIN_TIMEOUT_MS / 1000)
        )
        if keep_alive:
            member.heartbeat_deadline = now + member.session_timeout_ms / 1000
            self._schedule_heartbeat(group, member)
            return
        log.info(
            "member session expired group=%s member=%s client_id=%s session_timeout_ms=%d",
            group.group_id, member.member_id, member.client_id, member.session_timeout_ms,
        )  # fmt: skip
        self.remove_member_and_update_group(group, member, "session timeout")

    # == LeaveGroup ===============================================================================

    def leave(self, group: ClassicGroup, leaving: LeavingMember) -> ErrorCode:
        member_id = leaving.member_id
        if not member_id and leaving.group_instance_id is not None:
            found = group.static_member_id(leaving.group_instance_id)
            if found is None:
                return ErrorCode.unknown_member_id
            member_id = found
        if group.is_static_member_fenced(member_id, leaving.group_instance_id):
            return ErrorCode.fenced_instance_id
        if member_id in group.pending_members:
            self._remove_pending_member(group, member_id)
            self._try_complete_join(group)
            log.info("pending member left group=%s member=%s", group.group_id, member_id)
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        log.info(
            "member left group=%s member=%s instance=%s reason=%s",
            group.group_id, member_id, leaving.group_instance_id, leaving.reason,
        )  # fmt: skip
        self.remove_member_and_update_group(group, member, "member left")
        return ErrorCode.none

    def remove_member_and_update_group(self, group: ClassicGroup, member: Member, reason: str) -> None:
        _finish(member.awaiting_join, JoinResult(ErrorCode.unknown_member_id, member.member_id))
        member.awaiting_join = None
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"{reason} ({member.member_id})")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # == unload / delete ==========================================================================

    def shut_down_group(self, group: ClassicGroup, error: ErrorCode) -> None:
        """The group goes Dead (unloaded, deleted or expired): answer everyone waiting."""
        self._stop(group, error)
        if not group.is_in(GroupState.DEAD):
            group.transition(GroupState.DEAD, clock.now_ms())

    def hand_over(self, group: ClassicGroup) -> None:
        """The group becomes a consumer group (group_conversion.upgrade): members waiting for their
        JoinGroup or SyncGroup answer get REBALANCE_IN_PROGRESS, and its timers stop."""
        self._stop(group, ErrorCode.rebalance_in_progress)

    def resume(self, group: ClassicGroup) -> None:
        """Its conversion could not be written (group_reverts.py): the sessions
        restart, and the rebalance phase the group is in waits its rebalance timeout again."""
        for member in group.members.values():
            self.start_session(group, member)
        timeout = group.rebalance_timeout_ms() / 1000
        if group.is_in(GroupState.PREPARING_REBALANCE):
            group.initial_delay = False
            group.join_timer = self._loop.call_later(timeout, self._on_join_timeout, group)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            group.sync_timer = self._loop.call_later(timeout, self._on_sync_timeout, group, group.generation)

    def _stop(self, group: ClassicGroup, error: ErrorCode) -> None:
        self._cancel_join_timer(group)
        self._cancel_sync_timer(group)
        for handle in group.pending_members.values():
            if handle is not None:
                handle.cancel()
        group.pending_members.clear()
        for member in group.members.values():
            member.cancel_timer()
            _finish(member.awaiting_join, JoinResult(error, member.member_id))
            _finish(member.awaiting_sync, SyncResult(error))
            member.awaiting_join = member.awaiting_sync = None

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
