"""Share groups (KIP-932) in a real broker's group coordinator: members joined through the
coordinator's ShareGroups (no handler serves ShareGroupHeartbeat yet) are written to
`__consumer_offsets` and come back, with their epochs, when a restarted broker loads the
partition; the coordinator's classic groups and share groups keep to their own ids."""

from __future__ import annotations

import time
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest

from broker.share.share_group import ShareGroup, ShareHeartbeat
from broker.share.share_groups import ShareHeartbeatResult
from broker.testing.inprocess import SamsaInProcess
from protocol.errors import ErrorCode
from tests.support.raw_client import RawClient


def _heartbeat(
    samsa: SamsaInProcess, member_id: str, epoch: int, topics: tuple[str, ...] | None = None
) -> ShareHeartbeatResult:
    req = ShareHeartbeat("queue", member_id, epoch, subscribed_topic_names=topics)
    return samsa.run(samsa.broker.group_coordinator.share_groups.heartbeat(req, "client", "/127.0.0.1"))


def _loaded_group(samsa: SamsaInProcess) -> ShareGroup:
    coordinator = samsa.broker.group_coordinator
    listener = samsa.broker.config.listeners[0].name
    deadline = time.monotonic() + 15
    while True:
        samsa.run(coordinator.find_coordinator("queue", listener))  # creates __consumer_offsets
        error, message, group = coordinator.share_groups.describe("queue")
        if group is not None:
            return group
        assert time.monotonic() < deadline, (error, message)
        time.sleep(0.05)


def test_share_group_members_survive_a_broker_restart(tmp_path: Path) -> None:
    samsa = SamsaInProcess(
        tmp_path / "data", {"num.partitions": "2", "offsets.topic.num.partitions": "1"}
    ).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap_servers)
        admin.create_topics([NewTopic("jobs", 2, 1)])
        admin.close()
        listener = samsa.broker.config.listeners[0].name
        coordinator = samsa.broker.group_coordinator
        deadline = time.monotonic() + 15
        while (first := _heartbeat(samsa, "m1", 0, ("jobs",))).error != ErrorCode.none:
            assert first.error in (ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
                                   ErrorCode.not_coordinator), first  # fmt: skip
            assert time.monotonic() < deadline, first
            samsa.run(coordinator.find_coordinator("queue", listener))
            time.sleep(0.05)
        assert first.answer is not None and first.answer.member_epoch == 1
        assert _heartbeat(samsa, "m2", 0, ("jobs",)).error == ErrorCode.none
        before = _loaded_group(samsa)
        assert before.group_epoch == 2 and set(before.members) == {"m1", "m2"}
        jobs_id = samsa.broker.controller.image.topics["jobs"].topic_id
        assert before.initializing.keys() == {jobs_id}  # no share coordinator yet: still initializing

        samsa.restart()
        after = _loaded_group(samsa)
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert after.members == before.members and after.target == before.target
        assert after.members["m1"].subscribed_topic_names == {"jobs"}
        assert after.initializing.keys() == {jobs_id}
        m1_epoch = after.members["m1"].member_epoch
        again = _heartbeat(samsa, "m1", m1_epoch)  # carries on after the restart
        assert again.error == ErrorCode.none and again.answer is not None
        assert _heartbeat(samsa, "m2", 7).error == ErrorCode.fenced_member_epoch
        assert _heartbeat(samsa, "m2", -1).error == ErrorCode.none
        assert set(_loaded_group(samsa).members) == {"m1"}

        # a classic group's id is not a share group's, and a share group is not a classic group
        coordinator = samsa.broker.group_coordinator  # the restarted broker's
        error, classic = coordinator.get_or_create_group("classic")
        assert error == ErrorCode.none and classic is not None
        refused = samsa.run(
            coordinator.share_groups.heartbeat(
                ShareHeartbeat("classic", "m", 0, subscribed_topic_names=("jobs",)), "client", "/127.0.0.1"
            )
        )
        assert (refused.error, refused.message) == (
            ErrorCode.group_id_not_found,
            "Group classic is not a share group.",
        )
        assert coordinator.get_group("queue") == (ErrorCode.none, None)

        # ListGroups lists it with type and protocol type "share"; DescribeGroups (v5) reports
        # it Dead, as Kafka reports any group that is not a classic group
        with RawClient(samsa.port) as client:
            listed = client.request(ListGroupsRequest(states_filter=(), types_filter=("Share",))).groups
            assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == [
                ("queue", "share", "Stable", "share")
            ]
            everything = client.request(ListGroupsRequest(states_filter=(), types_filter=())).groups
            assert [(g.group_id, g.group_type) for g in everything] == [
                ("classic", "classic"),
                ("queue", "share"),
            ]
            described = client.request(
                DescribeGroupsRequest(groups=("queue",), include_authorized_operations=False)
            ).groups
            assert [(g.error_code, g.group_state, g.members) for g in described] == [
                (ErrorCode.none, "Dead", ())
            ]
    finally:
        samsa.close()
