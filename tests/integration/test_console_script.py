"""The README's run command: the `samsa` console script starts a broker that serves clients, and
never imports Hypothesis (kio would register strategies with it at import, ~300 ms of start-up in
a .venv that also has the test extras, as the README's test command leaves it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from kafka import KafkaAdminClient

from broker.testing.process import terminate


def test_samsa_serve_starts_a_broker_without_importing_hypothesis(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "samsa"
    assert script.exists(), "the project is not installed in this venv (pip install -e .)"
    proc = subprocess.Popen(
        [str(script), "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'data'}"],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},  # one stderr line per import
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("samsa listening on PLAINTEXT://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        assert admin.list_topics() == []
        admin.close()
    finally:
        terminate(proc, 20)
    assert proc.stderr is not None
    imported = [row.rsplit("|", 1)[-1].strip() for row in proc.stderr.read().splitlines() if row.startswith("import time:")]
    assert "kio" in imported and "broker.cli" in imported
    # kio's `import hypothesis.strategies` is still attempted (and listed), but fails at once
    assert "hypothesis" not in imported


def test_a_broker_that_cannot_start_says_why_in_one_line(tmp_path: Path) -> None:
    """A port already in use ends `samsa serve` with exit code 1 and one `samsa: cannot start:`
    line (plus the log line), not a traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "broker", "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dirs={tmp_path / 'data'}"],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("samsa: cannot start: ") and "address already in use" in last.lower(), last
