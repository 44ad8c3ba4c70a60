"""The share-group state persister's retries (broker/share/persister.py): a write whose share
coordinator is moving is retried until the new coordinator answers, for as long as Kafka's
persister retries (a failover takes about a second here: 5 attempts 50 ms apart and doubling, 0.75
s in all, ran out before one once, in tests/cluster/test_share_failover.py), and a coordinator that
never comes back answers COORDINATOR_NOT_AVAILABLE when the retry budget is spent."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import cast

import pytest

from broker.replication.leader_client import BrokerClients
from broker.share import persister
from broker.share.persister import SharePersister
from broker.share.share_coordinator import ShareCoordinator
from broker.share.share_coordinator_shard import StateAnswer
from broker.share.share_state import SharePartitionKey
from controller.model import ClusterImage
from protocol.errors import ErrorCode

KEY = SharePartitionKey("g", uuid.uuid4(), 0)


class MovingCoordinator(SharePersister):
    """The state partition without a leader in the metadata image until `appears_after_s` (never
    if None), then led by this broker (the local coordinator answers); no state partition at all
    without `topic`."""

    def __init__(self, appears_after_s: float | None, *, topic: bool = True) -> None:
        super().__init__(
            1, cast(ShareCoordinator, None), lambda: cast(ClusterImage, None), cast(BrokerClients, None)
        )
        self.appears_at = None if appears_after_s is None else time.monotonic() + appears_after_s
        self.topic = topic
        self.lookups = 0
        self.answered = 0

    def _coordinator(self, key: SharePartitionKey) -> int | None:
        self.lookups += 1
        if not self.topic:
            return None
        return 1 if self.appears_at is not None and time.monotonic() >= self.appears_at else -1

    async def write_once(self) -> StateAnswer:
        async def local() -> StateAnswer:
            self.answered += 1
            return StateAnswer()

        async def remote(broker_id: int) -> StateAnswer:
            raise AssertionError("no other broker here")

        return await self._call(KEY, local, remote, lambda error: StateAnswer(error, error.name))


def test_write_waits_for_a_coordinator_failover() -> None:
    moving = MovingCoordinator(appears_after_s=1.2)
    started = time.monotonic()
    answer = asyncio.run(moving.write_once())
    assert answer.error == ErrorCode.none and moving.answered == 1
    assert 1.2 <= time.monotonic() - started < 2.5
    assert moving.lookups <= 8  # backoff grows: 50, 100, 200, 400, 800 ms


def test_write_gives_up_when_the_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(persister, "RETRY_BUDGET_MS", 400)
    moving = MovingCoordinator(appears_after_s=None)
    started = time.monotonic()
    answer = asyncio.run(moving.write_once())
    assert answer.error == ErrorCode.coordinator_not_available and moving.answered == 0
    assert time.monotonic() - started < 1.0
    assert moving.lookups == 4  # at 0, 50, 150 and 350 ms; the next (750 ms) would pass the budget


def test_no_state_partition_is_answered_at_once() -> None:
    moving = MovingCoordinator(appears_after_s=None, topic=False)
    assert asyncio.run(moving.write_once()).error == ErrorCode.coordinator_not_available
    assert moving.lookups == 1
