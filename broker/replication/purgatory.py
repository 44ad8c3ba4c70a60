"""Purgatory: requests that wait for a condition (acks=all for the HW, a fetch for min_bytes).

A delayed operation is a coroutine parked on a future together with a `check` callable. Whoever
changes the state a check depends on (an append moves the log end offset, a follower fetch moves
the high watermark) calls `check_and_complete(key)`, which runs the checks of the operations
watching that key and wakes those that are satisfied. Nothing polls on a timer; the only timer is
each operation's own deadline.

Kafka's purgatory gauges are read from it at scrape time: `watched` (PurgatorySize, the watchers
over every key: an operation watching three partitions counts three times) and `delayed`
(NumDelayedOperations). A wait's duration is added to the request's remote time
(broker/metrics/stats.py), which Kafka's RemoteTimeMs reports.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from broker.metrics.stats import add_remote_time

K = TypeVar("K", bound=Hashable)


class _Waiter:
    __slots__ = ("future", "check")

    def __init__(self, future: asyncio.Future[bool], check: Callable[[], bool]) -> None:
        self.future = future
        self.check = check


class Purgatory(Generic[K]):
    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[K, set[_Waiter]] = {}
        self.delayed = 0
        """Operations waiting now (Kafka's NumDelayedOperations)."""

    def __len__(self) -> int:
        return self.watched

    @property
    def watched(self) -> int:
        """Watchers over every key (Kafka's PurgatorySize)."""
        return sum(len(w) for w in list(self._watchers.values()))

    async def wait(self, keys: Iterable[K], check: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `check()` holds (True) or the timeout passes (False)."""
        if check():
            return True
        if timeout_s <= 0:
            return False
        waiter = _Waiter(asyncio.get_running_loop().create_future(), check)
        watched = list(keys)
        for key in watched:
            self._watchers.setdefault(key, set()).add(waiter)
        self.delayed += 1
        parked = time.monotonic()
        try:
            return await asyncio.wait_for(waiter.future, timeout_s)
        except TimeoutError:
            return check()
        finally:
            self.delayed -= 1
            add_remote_time(time.monotonic() - parked)
            for key in watched:
                ws = self._watchers.get(key)
                if ws is not None:
                    ws.discard(waiter)
                    if not ws:
                        del self._watchers[key]

    def check_and_complete(self, key: K) -> int:
        """Complete every operation watching `key` whose check now holds; returns how many."""
        ws = self._watchers.get(key)
        if not ws:
            return 0
        completed = 0
        for waiter in list(ws):
            if not waiter.future.done() and waiter.check():
                waiter.future.set_result(True)
                completed += 1
        return completed

    def wake_all(self) -> None:
        """Wake every waiter (shutdown, leadership change); each re-checks its own state."""
        for ws in self._watchers.values():
            for waiter in ws:
                if not waiter.future.done():
                    waiter.future.set_result(False)
