"""Broker configs that reach the code that obeys them, on a broker running in this process (on a
loop thread, so its objects can be inspected while raw clients talk to it)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig
from broker.server import Broker

StartBroker = Callable[..., Broker]


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[StartBroker]:
    """`start_broker(**props)` starts a broker with these server.properties (underscores in the
    keyword names become dots) on a loop thread; it is stopped at the end of the test."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    started: list[Broker] = []

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(30)

    def start(**props: str) -> Broker:
        config, unknown = BrokerConfig.from_properties({
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path / f"data{len(started)}"),
            **{k.replace("_", "."): v for k, v in props.items()},
        })
        assert unknown == []
        broker = Broker(config)
        run(broker.start())
        started.append(broker)
        return broker

    try:
        yield start
    finally:
        for broker in started:
            run(broker.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_checkpoint_intervals_reach_the_log_manager(start_broker: StartBroker) -> None:
    broker = start_broker(log_flush_offset_checkpoint_interval_ms="1234",
                          log_flush_start_offset_checkpoint_interval_ms="2345",
                          replica_high_watermark_checkpoint_interval_ms="345")
    manager = broker.log_manager
    assert manager is not None
    assert manager.checkpoint_interval_ms == 1234
    assert manager.log_start_offset_checkpoint_interval_ms == 2345
    assert manager.high_watermark_checkpoint_interval_ms == 345
