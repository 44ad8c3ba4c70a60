"""DescribeShareGroupOffsets, DeleteShareGroupOffsets and AlterShareGroupOffsets (KIP-932) over raw requests, differential against Apache Kafka 4.3.1:
an unknown group (no topics for "all topics", start offset -1 for named ones), an unknown topic,
an empty topic list, then a member joins and its partition's share-group state is initialized
(start offset and lag -1 until the share partition's first fetch), records are produced,
acquired and two accepted: the start offset and lag (v1) and v0's answer without lag. Then
DeleteShareGroupOffsets: NON_EMPTY_GROUP while the member is in, GROUP_ID_NOT_FOUND, the topic's
state deleted (and an unknown topic), nothing left to describe, nothing left to delete. Then
AlterShareGroupOffsets: NON_EMPTY_GROUP while the member is in, a start offset set (an unknown
topic and partition refused) and described, a new group created by it. franz-go's sweep of the
three keys (compat/test_go_versions.py) goes through kadm."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
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
from kio.schema.share_acknowledge.v1 import request as ack_v1
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from tests.support import fidelity, wire
from tests.support.raw_client import RawClient

GROUP = "share-offsets"
TOPIC = "share-offsets"
_COORDINATOR_MOVING = (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                       ErrorCode.coordinator_load_in_progress)  # fmt: skip


def _describe(client: RawClient, group: str, topics: list[tuple[str, list[int]]] | None, version: int = 1) -> Any:
    """DescribeShareGroupOffsets of one group: its error, message and per partition the start
    offset, leader epoch, lag (v1) and error, and whether the topic id is known."""
    schema: Any = describe_v1 if version == 1 else describe_v0
    (g,) = client.request(schema.DescribeShareGroupOffsetsRequest(groups=(schema.DescribeShareGroupOffsetsRequestGroup(
        group_id=GroupId(group), topics=None if topics is None else tuple(
            schema.DescribeShareGroupOffsetsRequestTopic(topic_name=TopicName(t), partitions=tuple(i32(p) for p in ps))
            for t, ps in topics)),))).groups  # fmt: skip
    return {"error": ErrorCode(g.error_code).name, "message": g.error_message, "topics": sorted(
        [str(t.topic_name), t.topic_id not in (None, uuid.UUID(int=0)), int(p.partition_index), int(p.start_offset),
         int(p.leader_epoch), int(p.lag) if version == 1 else None, ErrorCode(p.error_code).name, p.error_message]
        for t in g.topics for p in t.partitions)}  # fmt: skip


def _delete(client: RawClient, group: str, topics: list[str]) -> dict[str, Any]:
    """DeleteShareGroupOffsets: the error, message and per topic (name, id known, error, message)."""
    answer = client.request(DeleteShareGroupOffsetsRequest(group_id=GroupId(group), topics=tuple(
        DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName(t)) for t in topics)))  # fmt: skip
    return {"error": ErrorCode(answer.error_code).name, "message": answer.error_message, "topics": sorted(
        [str(t.topic_name), t.topic_id not in (None, uuid.UUID(int=0)), ErrorCode(t.error_code).name, t.error_message]
        for t in answer.responses)}  # fmt: skip


def _alter(client: RawClient, group: str, topics: list[tuple[str, list[tuple[int, int]]]]) -> dict[str, Any]:
    """AlterShareGroupOffsets: the error, message and per partition (topic, id known, partition,
    error, message)."""
    answer = client.request(AlterShareGroupOffsetsRequest(group_id=GroupId(group), topics=tuple(
        AlterShareGroupOffsetsRequestTopic(topic_name=TopicName(t), partitions=tuple(
            AlterShareGroupOffsetsRequestPartition(partition_index=i32(p), start_offset=i64(o)) for p, o in ps))
        for t, ps in topics)))  # fmt: skip
    return {"error": ErrorCode(answer.error_code).name, "message": answer.error_message, "partitions": sorted(
        [str(t.topic_name), t.topic_id not in (None, uuid.UUID(int=0)), int(p.partition_index),
         ErrorCode(p.error_code).name, p.error_message]
        for t in answer.responses for p in t.partitions)}  # fmt: skip


def _heartbeat(client: RawClient, member: str, epoch: int, topics: tuple[str, ...] | None) -> Any:
    return client.request(hb_v1.ShareGroupHeartbeatRequest(
        group_id=GroupId(GROUP), member_id=member, member_epoch=i32(epoch),
        subscribed_topic_names=None if topics is None else tuple(TopicName(t) for t in topics),
    ))  # fmt: skip


def _fetch(client: RawClient, member: str, epoch: int, topic_id: uuid.UUID | None, wait_ms: int) -> Any:
    topics = () if topic_id is None else (fetch_v1.FetchTopic(topic_id=topic_id, partitions=(
        fetch_v1.FetchPartition(partition_index=i32(0), acknowledgement_batches=()),)),)  # fmt: skip
    return client.request(fetch_v1.ShareFetchRequest(
        group_id=GROUP, member_id=member, share_session_epoch=i32(epoch),
        max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=i32(1), max_bytes=i32(1 << 20),
        max_records=i32(100), batch_size=i32(100), topics=topics, forgotten_topics_data=(),
    ))  # fmt: skip


def _scenario(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    member = uuid.uuid4().hex[:22]
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, TOPIC)
        topic_id = fidelity.topic_id(client, TOPIC)
        deadline = time.monotonic() + 60
        fidelity.await_coordinator(client, GROUP)
        while (all_unknown := _describe(client, GROUP, None))["error"] in {e.name for e in _COORDINATOR_MOVING}:
            assert time.monotonic() < deadline, all_unknown
            time.sleep(0.2)
        obs.append({"step": "unknown-group-all", **all_unknown})
        obs.append({"step": "unknown-group-named", **_describe(client, GROUP, [(TOPIC, [0]), ("no-such-topic", [0, 1])])})
        obs.append({"step": "no-topics", **_describe(client, GROUP, [])})
        while (joined := _heartbeat(client, member, 0, (TOPIC,))).error_code in _COORDINATOR_MOVING:
            assert time.monotonic() < deadline, joined
            time.sleep(0.2)
        assert joined.error_code == 0, joined
        epoch = int(joined.member_epoch)
        while True:  # the partition is assigned once its share-group state is initialized
            beat = _heartbeat(client, member, epoch, None)
            assert beat.error_code == 0 and time.monotonic() < deadline, beat
            epoch = int(beat.member_epoch)
            if beat.assignment is not None and beat.assignment.topic_partitions:
                break
            time.sleep(0.2)
        obs.append({"step": "initialized", **_describe(client, GROUP, None)})
        first = _fetch(client, member, 0, topic_id, 500)  # starts the share partition at the log end (0)
        assert first.error_code == 0, first
        produced = wire.produce(client, TOPIC, 0, build_batch([NewRecord(None, b"r%d" % i) for i in range(5)]))
        assert produced.error == 0, produced
        acquired = _fetch(client, member, 1, None, 5_000)
        assert [[int(a.first_offset), int(a.last_offset)] for t in acquired.responses for p in t.partitions
                for a in p.acquired_records] == [[0, 4]], acquired  # fmt: skip
        acked = client.request(ack_v1.ShareAcknowledgeRequest(
            group_id=GROUP, member_id=member, share_session_epoch=i32(2),
            topics=(ack_v1.AcknowledgeTopic(topic_id=topic_id, partitions=(ack_v1.AcknowledgePartition(
                partition_index=i32(0), acknowledgement_batches=(ack_v1.AcknowledgementBatch(
                    first_offset=i64(0), last_offset=i64(1), acknowledge_types=(i8(1),)),)),)),),
        ))  # fmt: skip
        assert acked.error_code == 0, acked
        obs.append({"step": "accepted-two", **_describe(client, GROUP, None)})
        obs.append({"step": "accepted-two-named", **_describe(client, GROUP, [(TOPIC, [0])])})
        obs.append({"step": "accepted-two-v0", **_describe(client, GROUP, [(TOPIC, [0])], version=0)})
        obs.append({"step": "delete-non-empty", **_delete(client, GROUP, [TOPIC])})
        obs.append({"step": "alter-non-empty", **_alter(client, GROUP, [(TOPIC, [(0, 1)])])})
        left = _heartbeat(client, member, -1, None)
        assert left.error_code == 0, left
        obs.append({"step": "delete-unknown-group", **_delete(client, "no-such-share-group", [TOPIC])})
        obs.append({"step": "delete", **_delete(client, GROUP, [TOPIC, "no-such-topic"])})
        obs.append({"step": "deleted-all", **_describe(client, GROUP, None)})
        obs.append({"step": "deleted-named", **_describe(client, GROUP, [(TOPIC, [0])])})
        obs.append({"step": "delete-again", **_delete(client, GROUP, [TOPIC])})
        obs.append({"step": "alter", **_alter(client, GROUP, [(TOPIC, [(0, 3), (5, 1)]), ("no-such-topic", [(0, 1)])])})
        # (named topics: Kafka records the partitions initialized after it answers the alter)
        obs.append({"step": "altered", **_describe(client, GROUP, [(TOPIC, [0])])})
        obs.append({"step": "alter-new-group", **_alter(client, GROUP + "-new", [(TOPIC, [(0, 4)])])})
        obs.append({"step": "altered-new-group", **_describe(client, GROUP + "-new", [(TOPIC, [0])])})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="KIP-932 Describe/Delete/AlterShareGroupOffsets")
def test_share_group_offsets_admin(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-share-group-offsets", _scenario)}
    assert obs["unknown-group-all"] == {"step": "unknown-group-all", "error": "none", "message": None, "topics": []}
    assert obs["initialized"]["topics"] == [[TOPIC, True, 0, -1, 0, -1, "none", None]]
    # two of five records accepted, none past the start offset yet: lag 5 - 0 - 2
    assert obs["accepted-two"]["topics"] == [[TOPIC, True, 0, 0, 0, 3, "none", None]]
    assert obs["accepted-two-v0"]["topics"] == [[TOPIC, True, 0, 0, 0, None, "none", None]]
    assert (obs["delete-non-empty"]["error"], obs["delete-unknown-group"]["error"]) == (
        "non_empty_group", "group_id_not_found")
    assert obs["delete"]["topics"][1] == [TOPIC, True, "none", None]
    assert obs["deleted-all"]["topics"] == [] and obs["deleted-named"]["topics"][0][3] == -1
    assert obs["delete-again"]["topics"][0][3] == "There is no offset information to delete."
    assert obs["alter-non-empty"]["error"] == "non_empty_group"
    assert obs["alter"]["partitions"][1] == [TOPIC, True, 0, "none", None]
    assert obs["altered"]["topics"] == [[TOPIC, True, 0, 3, 0, 2, "none", None]]  # lag 5 - 3
    assert obs["altered-new-group"]["topics"] == [[TOPIC, True, 0, 4, 0, 1, "none", None]]
