"""What every test broker offers, whether it runs in a child process or in this one.

A data directory (a temporary one, removed on `close()`, unless one is given), the loopback host
and port (0 until the first start picks a free one; a restart keeps it), the broker properties a
test overrides, `restart()` on the same directory and port, and use as a context manager.
"""

from __future__ import annotations

import tempfile
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Self


class TestBroker(ABC):
    __test__ = False  # not a pytest test class, despite its name

    def __init__(self, data_dir: str | Path | None, overrides: Mapping[str, str] | None, port: int) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samsa-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.host = "127.0.0.1"
        self.port = port

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def properties(self) -> dict[str, str]:
        """The broker's properties: a plaintext listener on the port, the data directory, the overrides."""
        return {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }

    @property
    @abstractmethod
    def running(self) -> bool: ...

    @abstractmethod
    def start(self) -> Self: ...

    @abstractmethod
    def stop(self) -> object:
        """Clean shutdown, as SIGTERM gives a `samsa serve` process."""

    def _halt(self) -> None:
        """Stop by the quickest way there is (a child process is killed)."""
        self.stop()

    def restart(self) -> Self:
        """Start again on the same data directory and port."""
        if self.running:
            self.stop()
        return self.start()

    def close(self) -> None:
        self._halt()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
