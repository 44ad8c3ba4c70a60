"""KIP-848 consumer groups (group.protocol=consumer) with confluent-kafka: the shared group
scenario (three members split a topic, one leaves, one is killed and its partitions move within
the broker's group.consumer.session.timeout.ms, a new member resumes at the committed offsets
after a broker restart), and the group's own state through a restart of its coordinator."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.groups_support import run_group_scenario


@pytest.mark.timeout(240)
def test_consumer_protocol_group_split_failover_and_resume(tmp_path: Path) -> None:
    run_group_scenario("confluent-kafka-consumer-protocol", tmp_path, crash_broker=False)


@pytest.mark.timeout(120)
def test_group_state_survives_a_restart(tmp_path: Path) -> None:
    """The group's records in __consumer_offsets bring its members back with their epochs and
    assignments after the coordinator restarts (here: the only broker, killed with SIGKILL)."""

    from broker.testing import SamsaProcess
    from tests.support import fidelity
    from tests.support.consumer_protocol import describe, heartbeat, join
    from tests.support.raw_client import RawClient

    broker = SamsaProcess(tmp_path / "data", {"group.consumer.assignment.interval.ms": "0"}).start()
    try:
        with RawClient(broker.port, timeout=30) as client:
            fidelity.create_topic(client, "raw-kip848", partitions=2)
            fidelity.await_coordinator(client, "raw-kip848-group", timeout_s=30)
            a = join(client, "member-a-0123456789abcd", topics=("raw-kip848",))
            b = join(client, "member-b-0123456789abcd", topics=("raw-kip848",), instance_id="i1")
            before = describe(client, "raw-kip848-group")
        broker.kill()
        broker.start()
        with RawClient(broker.port, timeout=30) as client:
            fidelity.await_coordinator(client, "raw-kip848-group", timeout_s=30)
            assert describe(client, "raw-kip848-group") == before
            again = heartbeat(client, "member-a-0123456789abcd", int(a.member_epoch))
            assert (again.error_code, again.member_epoch) == (0, a.member_epoch)
            static = heartbeat(client, "member-b-0123456789abcd", int(b.member_epoch), instance_id="i1")
            assert static.error_code == 0
            assert heartbeat(client, "nobody", 1, group="raw-kip848-unknown").error_code == 69  # GROUP_ID_NOT_FOUND
    finally:
        broker.close()
