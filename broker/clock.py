"""The broker's wall clock in milliseconds, as Kafka's `Time.milliseconds()`: timestamps, retention,
timeouts measured against record times. Intervals use time.monotonic() instead."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)
