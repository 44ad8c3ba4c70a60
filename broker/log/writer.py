"""`LogWriter`: where the bytes of appends are written.

The event loop serves every connection, heartbeat and fetch of the broker, so an append's write
must not hold it: on a slow disk (a saturated volume, a dying device, a throttled cloud disk) one
write of 100 ms would stall everyone, the broker's heartbeats would thin out until its peers
suspect it, and its leaderships would move. Kafka writes on its request handler threads
(`num.io.threads`), one partition at a time under the log's lock; so does Samsa: the log prepares
an append on the loop (`PendingAppend`), `write` runs its I/O on one of `num.io.threads` threads,
and the log accounts it on the loop. `Partition` holds one append of its log in flight at a time.

A write that comes back fast costs a thread round trip for nothing, so while the disk is fast the
writes stay on the loop: a write slower than `INLINE_LIMIT_S` (inline or on a thread) during
which the writing thread blocked sends the writes to the threads until `THREADED_FOR_S` has passed
without another slow one. A write that was slow only because its thread was preempted (a machine
whose cores are busy: the clients on the same host, the benchmark's load generator) is not the
disk's doing, and threads would not help it: they would only add a round trip per write. Blocked
means a voluntary context switch during the write (`getrusage(RUSAGE_THREAD).ru_nvcsw`: the
kernel put the thread to sleep, waiting on the device, on writeback throttling or on memory
reclaim); where the platform cannot tell, every slow write counts.

States (per writer):

    inline   --a write took >= INLINE_LIMIT_S--------------->  threaded
    threaded --a write took >= INLINE_LIMIT_S--------------->  threaded (THREADED_FOR_S from now)
    threaded --THREADED_FOR_S since the last slow write----->  inline
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.log.log import PendingAppend

log = logging.getLogger("samsa.log.writer")

INLINE_LIMIT_S = 0.02
"""A write slower than this sends the writes to the threads. A page-cache write takes microseconds
to a millisecond, but under a producer's load ordinary ones reached 5 ms here now and then (the
VM's first touch of guest memory, writeback, the GIL taken back after the syscall), and at 5 ms
the hop to a thread for every small request then cost a third more broker CPU per byte
(ProducerPerformance: 625-718 ms per 100 MB in the runs it happened in, 430-469 without); at
20 ms it did not happen in four runs."""
THREADED_FOR_S = 10.0
"""How long writes stay on threads after a slow one before one is tried inline again."""


class LogWriter:
    """Runs `PendingAppend.write`: inline while the disk is fast, else on `threads` threads.
    `threads=0`: always inline (tests, tools)."""

    def __init__(self, threads: int) -> None:
        self._threads = threads
        self._executor: ThreadPoolExecutor | None = None
        self._threaded_until = 0.0

    @property
    def threaded(self) -> bool:
        return time.monotonic() < self._threaded_until

    def write_inline(self, pending: PendingAppend) -> bool:
        """Write `pending`'s bytes now, on the caller's thread, unless writes are on threads
        (False: then `write_threaded`). A failure is kept in `pending` (`complete_append` says)."""
        if self.threaded:
            return False
        self._took(*_timed_write(pending))
        return True

    async def write_threaded(self, pending: PendingAppend) -> None:
        """Write `pending`'s bytes on one of the threads."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max(1, self._threads), thread_name_prefix="samsa-log-writer")
        self._took(*await asyncio.get_running_loop().run_in_executor(self._executor, _timed_write, pending))

    def _took(self, seconds: float, blocked: bool) -> None:
        if self._threads and seconds >= INLINE_LIMIT_S and blocked:
            if not self.threaded:
                log.info(
                    "slow log write: writing on threads seconds=%.3f threads=%d for_s=%.0f",
                    seconds, self._threads, THREADED_FOR_S,
                )  # fmt: skip
            self._threaded_until = time.monotonic() + THREADED_FOR_S

    def shutdown(self) -> None:
        """Let the threads go once the writes in flight are done (none is cancelled)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


_RUSAGE_THREAD: int | None = getattr(resource, "RUSAGE_THREAD", None)  # Linux


def _voluntary_switches() -> int:
    return 0 if _RUSAGE_THREAD is None else resource.getrusage(_RUSAGE_THREAD).ru_nvcsw


def _timed_write(pending: PendingAppend) -> tuple[float, bool]:
    """Write; (seconds it took, whether the thread blocked meanwhile)."""
    switches = _voluntary_switches()
    started = time.perf_counter()
    pending.write()
    seconds = time.perf_counter() - started
    return seconds, _RUSAGE_THREAD is None or _voluntary_switches() > switches


INLINE_WRITER = LogWriter(0)
"""Writes every append inline, on the caller's thread (tests, tools; a partition without a writer)."""
