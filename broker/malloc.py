"""glibc's allocator told to keep the memory of large frames between requests.

A produced request of about 1 MB (librdkafka's default) is read into a fresh buffer and its
records are copied out of it by kio's decoder: two allocations of a MiB per request. glibc serves
allocations above its mmap threshold with a fresh mmap each (its dynamic threshold rises to a MiB
after the first free), and gives the top of the heap back to the kernel past its trim threshold
(twice the mmap threshold: exceeded as soon as a request's two buffers are freed). Either way the
next request's buffers are new pages, each a page fault and a page zeroed by the kernel: 355 faults
per MB produced, nearly half of the broker's CPU under librdkafka. Fixed thresholds above a
request's buffers keep them in the heap (3 faults per MB; RSS after the load unchanged at 43 MiB).

Process-wide, so `samsa serve` sets it once; nothing happens on another C library.
"""

from __future__ import annotations

import logging
import platform

log = logging.getLogger("samsa.malloc")

MMAP_THRESHOLD = 16 << 20
"""Allocations below this come from the heap: a produce request (message.max.bytes, 1 MiB by
default) and a follower's fetch response (replica.fetch.response.max.bytes, 10 MiB)."""
TRIM_THRESHOLD = 32 << 20
"""Free memory at the top of the heap kept for the next requests rather than returned."""
_M_TRIM_THRESHOLD = -1  # glibc malloc.h
_M_MMAP_THRESHOLD = -3


def keep_large_buffers() -> None:
    """Set glibc's mmap and trim thresholds (above), and say so in one line."""
    libc, version = platform.libc_ver()
    if libc != "glibc":
        log.info("malloc thresholds unchanged libc=%s", libc or "unknown")
        return
    import ctypes  # noqa: PLC0415 - about 6 ms of import, once, after the listeners are up

    mallopt = ctypes.CDLL(None).mallopt
    done = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    log.info(
        "malloc thresholds %s libc=glibc-%s mmap_threshold=%d trim_threshold=%d",
        "set" if done else "refused", version, MMAP_THRESHOLD, TRIM_THRESHOLD,
    )
