"""A Samsa broker inside the test process, on an event loop thread of its own, for tests.

It starts in milliseconds (no interpreter to start, no modules to import after the first), which
is what a suite that wants a fresh broker per test needs; the price is that a crash cannot be
simulated (no SIGKILL of one's own process) and a test sees the broker's log lines in its own.
`SamsaProcess` is the other choice. Both offer `bootstrap_servers`, `start()`, `stop()`,
`restart()` (same data directory and port), `close()` and use as a context manager; this one
also hands out the `Broker` itself and runs coroutines on its loop (`run`), for tests that look
inside.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from broker.config import BrokerConfig
from broker.server import Broker
from broker.testing.base import TestBroker
from broker.testing.loop_thread import LoopThread

T = TypeVar("T")


class SamsaInProcess(TestBroker):
    def __init__(
        self,
        data_dir: str | Path | None = None,
        overrides: Mapping[str, str] | None = None,
        *,
        port: int = 0,
    ) -> None:
        super().__init__(data_dir, overrides, port)
        self._loop: LoopThread | None = None
        self._broker: Broker | None = None

    @property
    def broker(self) -> Broker:
        if self._broker is None:
            raise RuntimeError("the broker is not running")
        return self._broker

    @property
    def running(self) -> bool:
        return self._broker is not None

    def config(self) -> BrokerConfig:
        config, unknown = BrokerConfig.from_properties(self.properties())
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(sorted(unknown))}")
        return config

    def start(self) -> SamsaInProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.config()
        self._loop = LoopThread()
        broker = Broker(config)
        try:
            self._loop.run(broker.start())
        except BaseException:
            self._loop.run(broker.stop())
            self._loop.stop()
            self._loop = None
            raise
        self._broker = broker
        self.port = broker.bound_port(config.listeners[0].name)
        return self

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run a coroutine on the broker's loop and wait for its result."""
        if self._loop is None:
            raise RuntimeError("the broker is not running")
        return self._loop.run(coro, timeout)

    def stop(self) -> None:
        """Clean shutdown, as SIGTERM gives a `samsa serve` process."""
        if self._broker is not None and self._loop is not None:
            try:
                self._loop.run(self._broker.stop())
            finally:
                self._broker = None
        if self._loop is not None:
            self._loop.stop()
            self._loop = None
