"""A Samsa broker in a child process, on a free loopback port, for tests.

The broker is started with `python -m broker serve` and `listeners=PLAINTEXT://127.0.0.1:0`; the
port is read from the "samsa listening on" line it prints. `stop()` sends SIGTERM (clean shutdown),
`kill()` sends SIGKILL (a crash), `restart()` starts it again on the same data directory and port.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from broker.testing.base import TestBroker

_LISTENING = re.compile(r"samsa listening on (\w+)://([^:]+):(\d+)")


def terminate(proc: subprocess.Popen[Any], timeout: float) -> int:
    """SIGTERM, wait up to `timeout`, then SIGKILL; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


class SamsaProcess(TestBroker):
    def __init__(
        self,
        data_dir: str | Path | None = None,
        overrides: Mapping[str, str] | None = None,
        *,
        port: int = 0,
        log_level: str = "INFO",
        startup_timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(data_dir, overrides, port)
        self.log_level = log_level
        self.startup_timeout = startup_timeout
        self.env = dict(env or {})
        """added to this process's environment (the cluster harness's slow disk, for one)"""
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.broker.log"
        self._log_file: TextIO | None = None
        self._reader: threading.Thread | None = None

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "broker", "serve", "--log-level", self.log_level]
        for k, v in self.properties().items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def start(self) -> SamsaProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
            cwd=str(Path(__file__).resolve().parents[2]),
            env={**os.environ, **self.env} if self.env else None,
        )
        deadline = time.monotonic() + self.startup_timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"samsa exited with {self.proc.returncode} during start-up; log:\n{self.read_log()[-4000:]}"
                    )
                continue
            m = _LISTENING.search(line)
            if m:
                self.host, self.port = m.group(2), int(m.group(3))
                # keep draining stdout so the child never blocks on a full pipe
                self._reader = threading.Thread(target=self._drain, daemon=True)
                self._reader.start()
                return self
        self.kill()
        raise TimeoutError(f"samsa did not start within {self.startup_timeout}s; log:\n{self.read_log()[-4000:]}")

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

    def read_log(self) -> str:
        try:
            return self.log_path.read_text()
        except FileNotFoundError:
            return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> int | None:
        """Clean shutdown (SIGTERM); returns the exit code."""
        if self.proc is None:
            return None
        terminate(self.proc, timeout)
        return self._finish()

    def kill(self) -> None:
        """Crash the broker (SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._finish()

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def _finish(self) -> int | None:
        code = self.proc.returncode if self.proc is not None else None
        if self._reader is not None:
            self._reader.join(timeout=5)
            self._reader = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return code

    def _halt(self) -> None:
        self.kill()
