"""Share groups (KIP-932) in a real broker's group coordinator: members joined through the
coordinator's ShareGroups (no handler serves ShareGroupHeartbeat yet) are written to
`__consumer_offsets` and come back, with their epochs, when a restarted broker loads the
partition; classic groups and share groups keep to their own ids; ListGroups, DescribeGroups and
DeleteGroups answer for a share group as Kafka does."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.join_group.v5 import request as join_v5
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_commit.v2 import request as commit_v2
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64, i64Timedelta

from broker.coordinator.coordinator import OffsetCommitEntry
from broker.share.share_group import ShareGroup, ShareHeartbeat
from broker.share.share_groups import ShareHeartbeatResult
from broker.share.share_state import SharePartitionKey
from broker.testing.inprocess import SamsaInProcess
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from tests.support import consumer_protocol
from tests.support.raw_client import RawClient


def _heartbeat(
    samsa: SamsaInProcess, member_id: str, epoch: int, topics: tuple[str, ...] | None = None
) -> ShareHeartbeatResult:
    req = ShareHeartbeat("queue", member_id, epoch, subscribed_topic_names=topics)
    return samsa.run(samsa.broker.group_coordinator.share_groups.heartbeat(req, "client", "/127.0.0.1"))


def _await_loaded(samsa: SamsaInProcess) -> None:
    """Until the group's __consumer_offsets partition exists and is loaded here."""
    coordinator = samsa.broker.group_coordinator
    listener = samsa.broker.config.listeners[0].name
    deadline = time.monotonic() + 15
    while (error := coordinator.group_status("queue")[0]) != ErrorCode.none:
        assert time.monotonic() < deadline, error
        samsa.run(coordinator.find_coordinator("queue", listener))  # creates __consumer_offsets
        time.sleep(0.05)


def _loaded_group(samsa: SamsaInProcess) -> ShareGroup:
    _await_loaded(samsa)
    error, message, group = samsa.broker.group_coordinator.share_groups.describe("queue")
    assert group is not None, (error, message)
    return group


def test_share_group_members_survive_a_broker_restart(tmp_path: Path) -> None:
    samsa = SamsaInProcess(
        tmp_path / "data", {"num.partitions": "2", "offsets.topic.num.partitions": "1"}
    ).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap_servers)
        admin.create_topics([NewTopic("jobs", 2, 1)])
        admin.close()
        _await_loaded(samsa)
        first = _heartbeat(samsa, "m1", 0, ("jobs",))
        assert first.error == ErrorCode.none and first.answer is not None and first.answer.member_epoch == 2
        assert _heartbeat(samsa, "m2", 0, ("jobs",)).error == ErrorCode.none
        jobs_id = samsa.broker.controller.image.topics["jobs"].topic_id
        deadline = time.monotonic() + 15
        while not (before := _loaded_group(samsa)).initialized:  # by the share coordinator
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert before.group_epoch == 3 and set(before.members) == {"m1", "m2"}
        assert before.initialized == {jobs_id: frozenset({0, 1})} and before.initializing == {}

        samsa.restart()
        after = _loaded_group(samsa)
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert after.members == before.members and after.target == before.target
        assert after.members["m1"].subscribed_topic_names == {"jobs"}
        assert after.initialized == before.initialized and after.initializing == {}
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
                DescribeGroupsRequest(groups=(GroupId("queue"),), include_authorized_operations=False)
            ).groups
            assert [(g.error_code, g.group_state, g.members) for g in described] == [
                (ErrorCode.none, "Dead", ())
            ]

            # a classic member or a KIP-848 consumer cannot join it
            joined = client.request(
                join_v5.JoinGroupRequest(
                    group_id=GroupId("queue"),
                    session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
                    rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
                    member_id="",
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=(join_v5.JoinGroupRequestProtocol(name="range", metadata=b""),),
                )
            )
            assert (joined.error_code, joined.member_id) == (ErrorCode.inconsistent_group_protocol, "")
            consumer = consumer_protocol.join(client, "c1", group="queue", topics=("jobs",))
            assert (consumer.error_code, consumer.error_message) == (
                ErrorCode.group_id_not_found,
                "Group queue is not a consumer group.",
            )

            # no offsets of its own: OffsetCommit is refused, OffsetFetch finds none
            commit = client.request(
                commit_v2.OffsetCommitRequest(
                    group_id=GroupId("queue"),
                    generation_id_or_member_epoch=i32(-1),
                    member_id="",
                    retention_time=i64Timedelta.parse(datetime.timedelta(milliseconds=-1)),
                    topics=(
                        commit_v2.OffsetCommitRequestTopic(
                            name=TopicName("jobs"),
                            partitions=(
                                commit_v2.OffsetCommitRequestPartition(
                                    partition_index=i32(0), committed_offset=i64(5), committed_metadata=""
                                ),
                            ),
                        ),
                    ),
                )
            )
            assert [p.error_code for t in commit.topics for p in t.partitions] == [
                ErrorCode.group_id_not_found
            ]
            entry = OffsetCommitEntry(TopicPartition("jobs", 0), 5, -1, None)
            txn = samsa.run(coordinator.commit_transactional_offsets("queue", 1, 0, "", None, -1, [entry]))
            assert txn == {entry.tp: ErrorCode.group_id_not_found}  # nor in a transaction
            assert coordinator.get_group("queue") == (ErrorCode.none, None)  # no classic group made of it

            # DeleteGroups: refused while it has members; its tombstones outlive a restart
            def delete() -> list[ErrorCode]:
                response = client.request(DeleteGroupsRequest(groups_names=(GroupId("queue"),)))
                return [r.error_code for r in response.results]

            # DeleteGroups deletes the share-group state of its partitions first (Kafka 4.3.1's
            # order), through the persister
            persister = samsa.broker.share_persister
            assert persister is not None
            keys = [SharePartitionKey("queue", jobs_id, p) for p in (0, 1)]
            assert [samsa.run(persister.read(k, -1)).error for k in keys] == [ErrorCode.none] * 2
            assert delete() == [ErrorCode.non_empty_group]
            assert _heartbeat(samsa, "m1", -1).error == ErrorCode.none
            assert delete() == [ErrorCode.none]
            assert all(samsa.run(persister.read(k, -1)).error != ErrorCode.none for k in keys)
            assert delete() == [ErrorCode.group_id_not_found]
        samsa.restart()
        _await_loaded(samsa)
        assert samsa.broker.group_coordinator.share_groups.groups() == []
    finally:
        samsa.close()
