"""Writes of a group's records to its __consumer_offsets partition in the order its changes were
made in memory.

A change takes its place when it is made: its write waits until the group's previous write is in
the log, then appends (the waits for the replicas overlap). A timer's records, written in the
background, are thus never overtaken by a heartbeat handled before the timer's task starts, which a
coordinator loading the partition would replay as an older group epoch or a deleted group.

A write may carry its change (`Revertible`, group_reverts.py): when the append fails before the
records reach the log the change is reverted, before the next write of the group is let go; a
write whose change a revert dropped is not appended and gets that revert's error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from protocol.errors import ErrorCode
from protocol.records import NewRecord

log = logging.getLogger("samsa.coordinator")


class GroupAppend(Protocol):
    """Append records to a group's __consumer_offsets partition (acks=-1): the coordinator's
    error; `appended` is called once they are in the log (the wait for the replicas begins)."""

    def __call__(
        self, group_id: str, records: list[NewRecord], appended: Callable[[], None] | None = None
    ) -> Awaitable[ErrorCode]: ...


class Revertible(Protocol):
    """A change whose write may fail (group_reverts.Change)."""

    def dropped(self) -> ErrorCode:
        """The error of a revert that dropped the change since it was made, else none."""
        ...

    def not_written(self, error: ErrorCode) -> None:
        """Its records did not reach the log (its append failed, or a revert dropped it): revert
        it."""
        ...


class OrderedWrites:
    def __init__(self, append: GroupAppend) -> None:
        self._append = append
        self._tasks: set[asyncio.Task[ErrorCode]] = set()
        self._last: dict[str, asyncio.Future[None]] = {}
        """Each group's last write, done once in the log (or failed): the next one waits for it."""

    def write(
        self, group_id: str, records: list[NewRecord], *, background: bool = False, change: Revertible | None = None
    ) -> asyncio.Task[ErrorCode]:
        """Write after the group's writes begun before; `background`: no one awaits it, a
        failure is logged; `change`: reverted if the records do not reach the log."""
        previous = self._last.get(group_id)
        in_log: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._last[group_id] = in_log

        def appended() -> None:
            if not in_log.done():
                in_log.set_result(None)

        async def write() -> ErrorCode:
            try:
                if previous is not None:
                    await previous
                error = ErrorCode.none if change is None else change.dropped()
                if error == ErrorCode.none:
                    error = await self._append(group_id, records, appended)
                    if error != ErrorCode.none and change is not None and not in_log.done():
                        change.not_written(error)
                elif change is not None:
                    change.not_written(error)
            finally:
                appended()
                if self._last.get(group_id) is in_log:
                    del self._last[group_id]
            if background and error != ErrorCode.none:
                log.warning("consumer group records not written group=%s records=%d error=%s",
                            group_id, len(records), error.name)  # fmt: skip
            return error

        task = asyncio.get_running_loop().create_task(write())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
