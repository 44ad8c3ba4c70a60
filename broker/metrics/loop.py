"""The event loop's idle time: Kafka's NetworkProcessorAvgIdlePercent, where Samsa's one event
loop does the work of Kafka's network processors and request handlers alike.

`IdleTrackingEventLoop` is asyncio's selector loop whose selector adds up the time spent waiting
in `select()` (two clock reads per loop iteration). `samsa serve` runs on it when the Prometheus
endpoint is on; `idle_fraction()` is the share of wall time spent waiting since the previous call.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from typing import Any


class IdleTrackingSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.idle_s = 0.0
        self._last_idle_s = 0.0
        self._last_read = time.monotonic()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        started = time.monotonic()
        try:
            ready: list[tuple[selectors.SelectorKey, int]] = super().select(timeout)
            return ready
        finally:
            self.idle_s += time.monotonic() - started

    def idle_fraction(self) -> float:
        """Idle share of the time since the previous call (1.0 right after start-up)."""
        now = time.monotonic()
        elapsed = now - self._last_read
        idle = self.idle_s - self._last_idle_s
        self._last_read, self._last_idle_s = now, self.idle_s
        if elapsed <= 0:
            return 1.0
        return max(0.0, min(1.0, idle / elapsed))


class IdleTrackingEventLoop(asyncio.SelectorEventLoop):
    def __init__(self, *args: Any) -> None:
        self.idle_selector = IdleTrackingSelector()
        super().__init__(self.idle_selector)


def loop_idle_fraction() -> float | None:
    """The running loop's idle fraction since the previous call; None on a loop that does not
    measure it (a test's own loop)."""
    loop = asyncio.get_running_loop()
    if isinstance(loop, IdleTrackingEventLoop):
        return loop.idle_selector.idle_fraction()
    return None
