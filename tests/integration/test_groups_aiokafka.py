"""Consumer groups with aiokafka: three members split a topic, one closes, one is killed
(SIGKILL) and its partitions move within the session timeout, and committed offsets are where a
new member resumes after a broker crash (kill -9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.groups_support import run_group_scenario


@pytest.mark.timeout(240)
def test_group_split_failover_and_resume(tmp_path: Path) -> None:
    run_group_scenario("aiokafka", tmp_path, crash_broker=True)
