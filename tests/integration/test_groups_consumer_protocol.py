"""KIP-848 consumer groups (group.protocol=consumer) with confluent-kafka: the shared group
scenario (three members split a topic, one leaves, one is killed and its partitions move within
the broker's group.consumer.session.timeout.ms, a new member resumes at the committed offsets
after a broker restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.groups_support import run_group_scenario


@pytest.mark.timeout(240)
def test_consumer_protocol_group_split_failover_and_resume(tmp_path: Path) -> None:
    run_group_scenario("confluent-kafka-consumer-protocol", tmp_path, crash_broker=False)
