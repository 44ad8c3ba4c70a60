"""Group coordinator configs that contradict each other stop a broker before it starts, as they
stop Kafka (its GroupCoordinatorConfig and ShareGroupConfig checks; every rule is compared with
Kafka's own in compat/test_group_coordinator_configs.py): `samsa serve` exits 2 with one line
naming the config, and the in-process broker raises the ConfigError."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from broker.config import ConfigError
from broker.testing.inprocess import SamsaInProcess

MESSAGE = ("group.consumer.session.timeout.ms must be greater than or equal to "
           "group.consumer.min.session.timeout.ms")


def test_samsa_serve_refuses_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'data'}", "--override", "group.consumer.session.timeout.ms=6000"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"samsa: {MESSAGE}"]
    assert proc.stdout == ""
    assert not (tmp_path / "data").exists()  # refused before anything was written


def test_the_in_process_broker_refuses(tmp_path: Path) -> None:
    broker = SamsaInProcess(tmp_path / "data", {"group.share.heartbeat.interval.ms": "45000"})
    with pytest.raises(ConfigError) as refused:
        broker.start()
    assert refused.value.key == "group.share.heartbeat.interval.ms"
    assert str(refused.value) == ("group.share.heartbeat.interval.ms must be less than or equal to "
                                  "group.share.max.heartbeat.interval.ms")
    assert not broker.running
