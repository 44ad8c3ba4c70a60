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

import tempfile
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from broker.config import BrokerConfig
from broker.server import Broker
from broker.testing.loop_thread import LoopThread

T = TypeVar("T")


class SamsaInProcess:
    def __init__(
        self,
        data_dir: str | Path | None = None,
        overrides: Mapping[str, str] | None = None,
        *,
        port: int = 0,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samsa-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.host = "127.0.0.1"
        self.port = port
        self._loop: LoopThread | None = None
        self._broker: Broker | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def broker(self) -> Broker:
        if self._broker is None:
            raise RuntimeError("the broker is not running")
        return self._broker

    @property
    def running(self) -> bool:
        return self._broker is not None

    def config(self) -> BrokerConfig:
        props = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }
        config, unknown = BrokerConfig.from_properties(props)
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

    def restart(self) -> SamsaInProcess:
        """Start again on the same data directory and port."""
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> SamsaInProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
