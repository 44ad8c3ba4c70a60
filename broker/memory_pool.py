"""queued.max.request.bytes: a pool of memory for request bytes being read and handled.

Kafka's SimpleMemoryPool in its non-strict mode, as Kafka's SocketServer uses it: a frame
reserves its declared size as soon as its size prefix is read, and succeeds whenever any memory
is left (so the pool can go below zero by at most one frame); when nothing is left the connection
stops reading (`Connection` pauses its transport, and TCP pushes back on the client) and waits
here. Released memory wakes the waiting connections in arrival order for as long as memory is
left. A size of 0 or less is unbounded (Kafka's default): every reservation succeeds at once.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable

from broker.logs import Throttle

log = logging.getLogger("samsa.network")


class MemoryPool:
    def __init__(self, size: int) -> None:
        self.size = size
        self.available = size
        self._waiters: collections.deque[Callable[[], None]] = collections.deque()
        self._exhausted_log = Throttle(10.0)

    @property
    def bounded(self) -> bool:
        return self.size > 0

    def try_allocate(self, n: int) -> bool:
        """Reserve `n` bytes if any memory is left (Kafka's non-strict rule)."""
        if self.size <= 0:
            return True
        if self.available <= 0:
            if self._exhausted_log.due():
                log.warning(
                    "request memory exhausted queued_max_request_bytes=%d waiting_connections=%d "
                    "suppressed=%d",
                    self.size,
                    len(self._waiters) + 1,
                    self._exhausted_log.take_suppressed(),
                )
            return False
        self.available -= n
        return True

    def wait(self, callback: Callable[[], None]) -> None:
        """Call `callback` once memory has been released (it then calls `try_allocate`)."""
        self._waiters.append(callback)

    def release(self, n: int) -> None:
        if self.size <= 0:
            return
        self.available += n
        while self._waiters and self.available > 0:
            self._waiters.popleft()()

    @property
    def waiting(self) -> int:
        return len(self._waiters)
