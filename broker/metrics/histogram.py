"""A histogram of whole numbers whose quantiles follow the last few minutes (Kafka's request
time histograms are Yammer histograms biased to about the last five minutes).

Values go into log-linear buckets: 0-15 exactly, above that 8 buckets per power of two (at most
12.5% apart), so an update is a bit count, two shifts and one dict increment, with no lock (the
broker counts on its one event loop thread). Buckets live in `WINDOWS` windows of `WINDOW_S`
seconds; an update past the current window's end starts a new one and drops the oldest, so a
quantile covers the last 4-5 minutes. A quantile is reported as the largest value of its bucket.
"""

from __future__ import annotations

from collections.abc import Sequence

WINDOW_S = 60.0
WINDOWS = 5


def bucket_of(value: int) -> int:
    """The bucket index of a value (negative values count as 0)."""
    if value < 16:
        return value if value > 0 else 0
    bits = value.bit_length()
    return 16 + (bits - 5) * 8 + (value >> (bits - 4)) - 8


def bucket_upper(index: int) -> int:
    """The largest value of bucket `index`."""
    if index < 16:
        return index
    bits = (index - 16) // 8 + 5
    top = (index - 16) % 8 + 8
    return ((top + 1) << (bits - 4)) - 1


class Histogram:
    """Counts of whole-number observations (milliseconds, bytes); `count` is every observation
    since start, the quantiles those of the last windows."""

    __slots__ = ("count", "_windows", "_window_end")

    def __init__(self) -> None:
        self.count = 0
        self._windows: list[dict[int, int]] = [{}]
        self._window_end = 0.0  # the first update starts the first window

    def update(self, value: int, now: float) -> None:
        if now >= self._window_end:
            self._rotate(now)
        self.count += 1
        buckets = self._windows[-1]
        index = bucket_of(value)
        buckets[index] = buckets.get(index, 0) + 1

    def _rotate(self, now: float) -> None:
        self._windows.append({})
        del self._windows[:-WINDOWS]
        self._window_end = now + WINDOW_S

    def quantiles(self, qs: Sequence[float], now: float | None = None) -> list[float]:
        """The value at each quantile (0.0 with no recent observations)."""
        if now is not None and now >= self._window_end:
            self._rotate(now)
        merged: dict[int, int] = {}
        for window in list(self._windows):
            for index, n in list(window.items()):
                merged[index] = merged.get(index, 0) + n
        total = sum(merged.values())
        if not total:
            return [0.0] * len(qs)
        ordered = sorted(merged.items())
        out = []
        for q in qs:
            rank = q * total
            seen = 0
            value = ordered[-1][0]
            for index, n in ordered:
                seen += n
                if seen >= rank:
                    value = index
                    break
            out.append(float(bucket_upper(value)))
        return out
