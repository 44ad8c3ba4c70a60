"""A share group's records (broker/share/share_group_log.py): what each change writes, and the
group rebuilt from the record bytes as a new coordinator loads them."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from broker.share import group_records as rec
from broker.share.share_group import (
    ShareGroup,
    ShareGroupSettings,
    ShareHeartbeat,
    TopicInfo,
    fence,
    heartbeat,
    initialized,
    leave,
    partitions_to_initialize,
)
from broker.share.share_group_log import ShareGroupRecord, changes, deletion, restore, snapshot

FOO = TopicInfo(uuid.UUID(int=1), 2)
TOPICS = {"foo": FOO}
NAMES = {FOO.topic_id: "foo"}
SETTINGS = ShareGroupSettings(assignment_interval_ms=0)


class Log:
    """The group's records in __consumer_offsets, kept as bytes, latest value per key."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def apply(self, group: ShareGroup, change: Callable[[], object]) -> list[ShareGroupRecord]:
        before = snapshot(group)
        change()
        written = changes(before, group, NAMES)
        for key, value in written:
            self.records.append((rec.key_bytes(key), None if value is None else rec.value_bytes(value)))
        return written

    def latest(self) -> dict[tuple[int, str | None], rec.ShareGroupValue]:
        out: dict[tuple[int, str | None], rec.ShareGroupValue] = {}
        for raw_key, raw_value in self.records:
            key = rec.read_key(raw_key)
            assert key is not None
            value = rec.read_value(key.type, raw_value)
            if value is None:
                out.pop((key.type, key.member_id), None)
            else:
                out[(key.type, key.member_id)] = value
        return out


def beat(group: ShareGroup, member: str, epoch: int, topics: tuple[str, ...] | None = None) -> None:
    heartbeat(
        group,
        ShareHeartbeat("g", member, epoch, subscribed_topic_names=topics),
        "c",
        "/h",
        TOPICS,
        SETTINGS,
        1,
    )


def test_a_join_writes_kafkas_records_in_kafkas_order() -> None:
    g, log = ShareGroup("g"), Log()
    written = log.apply(g, lambda: beat(g, "m1", 0, ("foo",)))
    assert [(k.type, k.member_id) for k, _ in written] == [
        (rec.MEMBER_METADATA, "m1"),
        (rec.GROUP_METADATA, None),
        (rec.TARGET_MEMBER, "m1"),
        (rec.TARGET_METADATA, None),
        (rec.CURRENT_ASSIGNMENT, "m1"),
    ]
    assert written[0][1] == rec.MemberMetadataValue(None, "c", "/h", ("foo",))
    assert written[4][1] == rec.CurrentAssignmentValue(2, 0, {})
    # Initializing the share partitions writes the state partition metadata.
    written = log.apply(g, lambda: partitions_to_initialize(g, TOPICS, 5, 30_000))
    assert written == [
        (
            rec.ShareGroupKey(rec.STATE_PARTITION_METADATA, "g"),
            rec.StatePartitionMetadataValue((rec.TopicPartitionsInfo(FOO.topic_id, "foo", (0, 1)),), (), ()),
        )
    ]
    # A heartbeat that changes nothing writes nothing.
    assert log.apply(g, lambda: beat(g, "m1", 2)) == []


def test_a_leave_writes_tombstones_then_the_epoch() -> None:
    g, log = ShareGroup("g"), Log()
    log.apply(g, lambda: beat(g, "m1", 0, ("foo",)))
    written = log.apply(g, lambda: leave(g, "m1"))
    assert written == [
        (rec.ShareGroupKey(rec.CURRENT_ASSIGNMENT, "g", "m1"), None),
        (rec.ShareGroupKey(rec.TARGET_MEMBER, "g", "m1"), None),
        (rec.ShareGroupKey(rec.MEMBER_METADATA, "g", "m1"), None),
        (rec.ShareGroupKey(rec.GROUP_METADATA, "g"), rec.GroupMetadataValue(3)),
    ]
    assert [k.type for k, v in deletion(g)][-1] == rec.GROUP_METADATA


def test_a_new_coordinator_rebuilds_the_group_from_the_record_bytes() -> None:
    g, log = ShareGroup("g"), Log()
    log.apply(g, lambda: beat(g, "m1", 0, ("foo",)))
    log.apply(g, lambda: beat(g, "m2", 0, ("foo",)))

    def initialize_all() -> None:
        for topic_id, partitions in partitions_to_initialize(g, TOPICS, 5, 30_000).items():
            initialized(g, topic_id, partitions)

    log.apply(g, initialize_all)
    log.apply(g, lambda: beat(g, "m1", 2))
    log.apply(g, lambda: beat(g, "m2", 3))
    log.apply(g, lambda: beat(g, "m3", 0, ("foo",)))
    log.apply(g, lambda: fence(g, "m3"))
    restored = restore("g", log.latest(), TOPICS, now_ms=9)
    assert (restored.group_epoch, restored.assignment_epoch) == (g.group_epoch, g.assignment_epoch)
    assert restored.members == g.members
    assert restored.target == g.target
    assert restored.initialized == g.initialized and restored.subscription_metadata == g.subscription_metadata
    # The members carry on with their epochs at the new coordinator.
    answer = heartbeat(
        restored, ShareHeartbeat("g", "m1", g.members["m1"].member_epoch), "c", "/h", TOPICS, SETTINGS, 10
    )
    assert answer.member_epoch == restored.group_epoch


def test_deleting_topics_are_written_and_restored() -> None:
    """DeleteGroups moves a share group's initialized topics to deleting (ShareGroupStatePartition
    Metadata's deleting topics, with their names); a new coordinator reads them back."""
    g, log = ShareGroup("g"), Log()
    log.apply(g, lambda: beat(g, "m1", 0, ("foo",)))
    log.apply(g, lambda: [initialized(g, t, ps) for t, ps in partitions_to_initialize(g, TOPICS, 5, 30_000).items()])
    log.apply(g, lambda: leave(g, "m1"))

    def start_deleting() -> None:
        g.initialized, g.initializing, g.deleting = {}, {}, frozenset({FOO.topic_id})

    written = log.apply(g, start_deleting)
    assert [(k.type, v) for k, v in written] == [
        (rec.STATE_PARTITION_METADATA, rec.StatePartitionMetadataValue((), (), ((FOO.topic_id, "foo"),)))]
    restored = restore("g", log.latest(), TOPICS, now_ms=9)
    assert (restored.deleting, restored.initialized, restored.initializing) == (frozenset({FOO.topic_id}), {}, {})
