"""Producer id allocation for InitProducerId: blocks reserved from the controller, handed out one
at a time (Kafka's ProducerIdManager). A block is persisted by the controller before any of its ids
is used, so an id is never reused, across restarts too."""

from __future__ import annotations

import asyncio

from controller.interface import Controller
from protocol.types import BrokerId, ProducerId

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, controller: Controller, broker_id: BrokerId, block_size: int = BLOCK_SIZE) -> None:
        self._controller = controller
        self._broker_id = broker_id
        self._block_size = block_size
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def generate(self) -> ProducerId:
        async with self._lock:
            if self._next >= self._end:
                self._next = await self._controller.allocate_producer_ids(self._broker_id, self._block_size)
                self._end = self._next + self._block_size
            pid = self._next
            self._next += 1
            return ProducerId(pid)
