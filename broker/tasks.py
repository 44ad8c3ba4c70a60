"""Small asyncio helpers shared by the broker's background services."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel background tasks and wait until each has ended."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except asyncio.CancelledError:
            pass
