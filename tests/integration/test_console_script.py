"""The README's run command: the `samsa` console script starts a broker that serves clients, and
never imports Hypothesis (kio would register strategies with it at import, ~300 ms of start-up in
a .venv that also has the test extras, as the README's test command leaves it)."""

from __future__ import annotations

import os
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
