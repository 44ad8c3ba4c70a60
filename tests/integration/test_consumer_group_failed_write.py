"""A KIP-848 group change whose records cannot be written is reverted (group_reverts.py), over real
TCP against a real broker: __consumer_offsets' min.insync.replicas raised above its ISR makes the
coordinator's appends fail before the log (NOT_ENOUGH_REPLICAS, answered COORDINATOR_NOT_AVAILABLE
as Kafka does); the group then describes as its log has it, before and after a restart."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest


@pytest.mark.timeout(90)
def test_a_join_that_cannot_be_written_is_not_kept(tmp_path: Path) -> None:
    from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
    from kio.schema.types import GroupId, TopicName
    from kio.static.primitive import i32, i32Timedelta

    from broker.testing import SamsaProcess
    from protocol.errors import ErrorCode
    from tests.support import fidelity
    from tests.support.consumer_protocol import describe, join
    from tests.support.raw_client import RawClient

    group, topic = "raw-kip848-group", "raw-kip848"

    def min_isr(client: RawClient, value: str) -> None:
        assert fidelity.incremental_alter_configs(client, 2, "__consumer_offsets",
                                                  [("min.insync.replicas", 0, value)]) == (0, None)  # fmt: skip

    broker = SamsaProcess(tmp_path / "data", {"group.consumer.assignment.interval.ms": "0"}).start()
    try:
        with RawClient(broker.port, timeout=30) as client:
            fidelity.create_topic(client, topic, partitions=2)
            fidelity.await_coordinator(client, group, timeout_s=30)
            assert join(client, "member-a-0123456789abcd", topics=(topic,)).error_code == 0
            before = describe(client, group)
            min_isr(client, "2")
            once = client.request(ConsumerGroupHeartbeatRequest(
                group_id=GroupId(group), member_id="member-b-0123456789abcd", member_epoch=i32(0), instance_id=None,
                rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
                subscribed_topic_names=(TopicName(topic),), subscribed_topic_regex=None, server_assignor=None,
                topic_partitions=(),
            ), api_version=1)  # fmt: skip
            assert once.error_code == ErrorCode.coordinator_not_available
            assert describe(client, group) == before  # member b is not in the group
            min_isr(client, "1")
        broker.kill()
        broker.start()
        with RawClient(broker.port, timeout=30) as client:
            fidelity.await_coordinator(client, group, timeout_s=30)
            assert describe(client, group) == before
            joined = join(client, "member-b-0123456789abcd", topics=(topic,))
            assert joined.error_code == 0 and joined.member_epoch == before["epoch"] + 1
    finally:
        broker.close()


@pytest.mark.timeout(90)
def test_a_deletion_that_cannot_be_written_keeps_the_group(tmp_path: Path) -> None:
    """Kafka's DeleteGroups removes the group by replaying its tombstones, reverted when their batch
    fails: every group of the partition's batch is answered the error and the group stays."""
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
    from kio.schema.types import GroupId

    from broker.testing import SamsaProcess
    from protocol.errors import ErrorCode
    from tests.support import fidelity
    from tests.support.consumer_protocol import describe, heartbeat, join
    from tests.support.raw_client import RawClient

    group, topic = "raw-kip848-group", "raw-kip848"

    def delete(client: RawClient) -> int:
        return int(client.request(DeleteGroupsRequest(groups_names=(GroupId(group),))).results[0].error_code)

    broker = SamsaProcess(tmp_path / "data", {"group.consumer.assignment.interval.ms": "0"}).start()
    try:
        with RawClient(broker.port, timeout=30) as client:
            fidelity.create_topic(client, topic, partitions=2)
            fidelity.await_coordinator(client, group, timeout_s=30)
            joined = join(client, "member-a-0123456789abcd", topics=(topic,))
            assert joined.error_code == 0
            assert heartbeat(client, "member-a-0123456789abcd", -1).error_code == 0  # the group is empty
            before = describe(client, group)
            assert before["state"] == "Empty" and before["members"] == []
            assert fidelity.incremental_alter_configs(client, 2, "__consumer_offsets",
                                                      [("min.insync.replicas", 0, "2")]) == (0, None)  # fmt: skip
            assert delete(client) == ErrorCode.coordinator_not_available
            assert describe(client, group) == before  # the group is still there
            assert fidelity.incremental_alter_configs(client, 2, "__consumer_offsets",
                                                      [("min.insync.replicas", 0, "1")]) == (0, None)  # fmt: skip
            assert delete(client) == ErrorCode.none
            assert describe(client, group)["error"] == "group_id_not_found"
    finally:
        broker.close()
