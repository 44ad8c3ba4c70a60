"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) over the wire: the start offset, leader epoch and lag of a
share group's partitions from the share coordinator's state, for named topics and for all the
group's initialized partitions, as Kafka 4.3.1 answers them (unknown groups and topics are absence
of data, not errors); an Empty group's state of a topic deleted, and a start offset set by an alter that creates the
group, their records surviving a restart; GROUP_AUTHORIZATION_FAILED without DESCRIBE / DELETE /
READ on the group."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.delete_share_group_offsets.v0.request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from kio.schema.describe_share_group_offsets.v0 import request as describe_v0
from kio.schema.describe_share_group_offsets.v1 import request as describe_v1
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from broker.handlers import registry
from broker.share.share_group import ShareHeartbeat
from broker.share.share_state import SharePartitionKey
from broker.testing.inprocess import SamsaInProcess
from protocol.errors import ErrorCode
from tests.support.raw_client import RawClient

GROUP = "queue"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SamsaInProcess]:
    samsa = SamsaInProcess(tmp_path / "data", {
        "share.coordinator.state.topic.num.partitions": "1", "offsets.topic.num.partitions": "1",
    }).start()  # fmt: skip
    try:
        admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap_servers)
        admin.create_topics([NewTopic("jobs", 2, 1)])
        admin.close()
        yield samsa
    finally:
        samsa.close()


def _await_coordinator(samsa: SamsaInProcess) -> None:
    """Until the group's __consumer_offsets partition exists and is loaded here."""
    coordinator = samsa.broker.group_coordinator
    listener = samsa.broker.config.listeners[0].name
    deadline = time.monotonic() + 15
    while (error := coordinator.group_status(GROUP)[0]) != ErrorCode.none:
        assert time.monotonic() < deadline, error
        samsa.run(coordinator.find_coordinator(GROUP, listener))  # creates __consumer_offsets
        time.sleep(0.05)


def _join(samsa: SamsaInProcess) -> uuid.UUID:
    """A member subscribed to "jobs" (through the coordinator in-process), until the share
    coordinator has initialized both partitions: the topic id."""
    coordinator = samsa.broker.group_coordinator
    deadline = time.monotonic() + 15
    joined = samsa.run(coordinator.share_groups.heartbeat(
        ShareHeartbeat(GROUP, "m1", 0, subscribed_topic_names=("jobs",)), "client", "/127.0.0.1"))  # fmt: skip
    assert joined.error == ErrorCode.none
    while True:
        _, _, group = coordinator.share_groups.describe(GROUP)
        if group is not None and group.initialized:
            break
        assert time.monotonic() < deadline
        time.sleep(0.02)
    topic_id: uuid.UUID = samsa.broker.controller.image.topics["jobs"].topic_id
    assert group.initialized == {topic_id: frozenset({0, 1})}
    return topic_id


def _describe(topics: list[tuple[str, list[int]]] | None, group: str = GROUP, version: int = 1) -> Any:
    schema: Any = describe_v1 if version == 1 else describe_v0
    return schema.DescribeShareGroupOffsetsRequest(groups=(schema.DescribeShareGroupOffsetsRequestGroup(
        group_id=GroupId(group), topics=None if topics is None else tuple(
            schema.DescribeShareGroupOffsetsRequestTopic(topic_name=TopicName(t), partitions=tuple(i32(p) for p in ps))
            for t, ps in topics)),))  # fmt: skip


def _offsets(response: Any) -> dict[tuple[str, int], tuple[Any, ...]]:
    """(topic, partition) -> (topic id, start offset, leader epoch, lag or None, error) of the one
    group answered, which has no error."""
    (group,) = response.groups
    assert (group.error_code, group.error_message) == (ErrorCode.none, None)
    return {
        (str(t.topic_name), int(p.partition_index)): (
            t.topic_id, int(p.start_offset), int(p.leader_epoch), int(p.lag) if hasattr(p, "lag") else None,
            p.error_code,
        )
        for t in group.topics for p in t.partitions
    }  # fmt: skip


def test_share_group_offsets_apis_are_advertised_with_kafkas_versions() -> None:
    declared = registry.declared()
    assert {k: (declared[k].min_version, declared[k].max_version) for k in (90, 91, 92)} == {
        90: (0, 1), 91: (0, 0), 92: (0, 0)}
    assert not {90, 91, 92} & set(registry.unadvertised())


def test_describe_share_group_offsets(broker: SamsaInProcess) -> None:
    samsa = broker
    with RawClient(samsa.port) as client:
        # "All topics" reads the group's records: only on its coordinator.
        (group,) = client.request(_describe(None)).groups
        assert (group.error_code, group.error_message, group.topics) == (
            ErrorCode.not_coordinator, "This is not the correct coordinator.", ())
        _await_coordinator(samsa)
        # An unknown group: no topics for "all", absence of data (-1) for named topics.
        assert _offsets(client.request(_describe(None))) == {}
        assert _offsets(client.request(_describe([]))) == {}
        assert _offsets(client.request(_describe([("jobs", [0]), ("nosuch", [0])]))) == {
            ("jobs", 0): (samsa.broker.controller.image.topics["jobs"].topic_id, -1, 0, -1, ErrorCode.none),
            ("nosuch", 0): (None, -1, 0, -1, ErrorCode.none),  # the zero uuid decodes as None
        }

        topic_id = _join(samsa)
        uninitialized = (topic_id, -1, 0, -1, ErrorCode.none)
        assert _offsets(client.request(_describe(None))) == {("jobs", 0): uninitialized, ("jobs", 1): uninitialized}

        producer = KafkaProducer(bootstrap_servers=samsa.bootstrap_servers)
        for i in range(10):
            producer.send("jobs", b"%d" % i, partition=0)
        producer.flush()
        producer.close()
        persister = samsa.broker.share_persister
        assert persister is not None
        written = samsa.run(persister.write(SharePartitionKey(GROUP, topic_id, 0), 2, 0, 3, 1, ()))
        assert written.error == ErrorCode.none, written
        # lag = end offset 10 - start offset 3 - 1 record delivered past the start offset
        assert _offsets(client.request(_describe(None))) == {
            ("jobs", 0): (topic_id, 3, 0, 6, ErrorCode.none), ("jobs", 1): uninitialized,
        }
        assert _offsets(client.request(_describe([("jobs", [0])], version=0))) == {
            ("jobs", 0): (topic_id, 3, 0, None, ErrorCode.none),
        }


def test_delete_share_group_offsets_survives_a_restart(broker: SamsaInProcess) -> None:
    """The deleted topic leaves the group's initialized topics, through the deleting topics, in
    the group's records: a restarted broker's group has neither."""
    samsa = broker
    _await_coordinator(samsa)
    topic_id = _join(samsa)
    coordinator = samsa.broker.group_coordinator
    delete = DeleteShareGroupOffsetsRequest(group_id=GroupId(GROUP), topics=(
        DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName("jobs")),))  # fmt: skip
    with RawClient(samsa.port) as client:
        assert client.request(delete).error_code == ErrorCode.non_empty_group
        left = samsa.run(coordinator.share_groups.heartbeat(ShareHeartbeat(GROUP, "m1", -1), "client", "/127.0.0.1"))
        assert left.error == ErrorCode.none
        deleted = client.request(delete)
        assert deleted.error_code == ErrorCode.none
        assert [(t.topic_name, t.topic_id, t.error_code) for t in deleted.responses] == [
            ("jobs", topic_id, ErrorCode.none)]
    _, _, group = coordinator.share_groups.describe(GROUP)
    assert group is not None and (group.initialized, group.deleting) == ({}, frozenset())
    samsa.restart()
    _await_coordinator(samsa)
    _, _, group = samsa.broker.group_coordinator.share_groups.describe(GROUP)
    assert group is not None and (group.initialized, group.deleting) == ({}, frozenset())
    with RawClient(samsa.port) as client:
        assert _offsets(client.request(_describe(None))) == {}


def test_alter_share_group_offsets_creates_the_group_and_survives_a_restart(broker: SamsaInProcess) -> None:
    samsa = broker
    _await_coordinator(samsa)
    topic_id: uuid.UUID = samsa.broker.controller.image.topics["jobs"].topic_id
    alter = AlterShareGroupOffsetsRequest(group_id=GroupId(GROUP), topics=(AlterShareGroupOffsetsRequestTopic(
        topic_name=TopicName("jobs"), partitions=(
            AlterShareGroupOffsetsRequestPartition(partition_index=i32(1), start_offset=i64(7)),
            AlterShareGroupOffsetsRequestPartition(partition_index=i32(2), start_offset=i64(7)))),))  # fmt: skip
    with RawClient(samsa.port) as client:
        altered = client.request(alter)
        assert altered.error_code == ErrorCode.none
        assert [(t.topic_id, int(p.partition_index), p.error_code) for t in altered.responses
                for p in t.partitions] == [(topic_id, 1, ErrorCode.none), (topic_id, 2, ErrorCode.unknown_topic_or_partition)]
        # lag: end offset 0 - start offset 7 - 0 delivered, Kafka's formula (not clamped)
        assert _offsets(client.request(_describe(None))) == {("jobs", 1): (topic_id, 7, 0, -7, ErrorCode.none)}
    samsa.restart()
    _await_coordinator(samsa)
    _, _, group = samsa.broker.group_coordinator.share_groups.describe(GROUP)
    assert group is not None and (group.initialized, group.initializing) == ({topic_id: frozenset({1})}, {})


def test_share_group_offsets_need_group_acls(tmp_path: Path) -> None:
    samsa = SamsaInProcess(tmp_path / "data", {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    samsa.start()
    try:
        with RawClient(samsa.port) as client:
            (group,) = client.request(_describe([("jobs", [0])])).groups
            assert (group.group_id, group.error_code, group.topics) == (GROUP, ErrorCode.group_authorization_failed, ())
            deleted = client.request(DeleteShareGroupOffsetsRequest(group_id=GroupId(GROUP), topics=(
                DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName("jobs")),)))  # fmt: skip
            assert (deleted.error_code, deleted.error_message, deleted.responses) == (
                ErrorCode.group_authorization_failed, "Group authorization failed.", ())
            altered = client.request(AlterShareGroupOffsetsRequest(group_id=GroupId(GROUP), topics=()))
            assert (altered.error_code, altered.error_message, altered.responses) == (
                ErrorCode.group_authorization_failed, "Group authorization failed.", ())
    finally:
        samsa.close()
