"""The share group state machine (broker/share/share_group.py): joins, epochs, the target
assignment of initialized share partitions, fencing, and Kafka's error codes."""

from __future__ import annotations

import uuid

import pytest

from broker.share.share_group import (
    HeartbeatAnswer,
    ShareGroup,
    ShareGroupSettings,
    ShareGroupState,
    ShareHeartbeat,
    TopicInfo,
    fence,
    heartbeat,
    initialized,
    leave,
    partitions_to_initialize,
    validate,
)
from protocol.errors import ErrorCode, KafkaError

FOO = TopicInfo(uuid.UUID(int=1), 2)
BAR = TopicInfo(uuid.UUID(int=2), 1)
TOPICS = {"foo": FOO, "bar": BAR}
SETTINGS = ShareGroupSettings(assignment_interval_ms=0)


def beat(
    group: ShareGroup, member: str, epoch: int, topics: tuple[str, ...] | None = None, now: int = 1
) -> HeartbeatAnswer:
    req = ShareHeartbeat(group.group_id, member, epoch, subscribed_topic_names=topics)
    validate(req)
    return heartbeat(group, req, "client", "/127.0.0.1", TOPICS, SETTINGS, now)


def error_of(call: object) -> ErrorCode:
    assert callable(call)
    with pytest.raises(KafkaError) as e:
        call()
    return e.value.code


def init_all(group: ShareGroup, now: int = 1) -> None:
    """The share coordinator initializes every partition the group asks for."""
    for topic_id, partitions in partitions_to_initialize(group, TOPICS, now, 30_000).items():
        initialized(group, topic_id, partitions)


def test_a_member_joins_then_gets_the_initialized_partitions() -> None:
    g = ShareGroup("g")
    assert g.group_epoch == 1  # a new group's epoch (Kafka 4.3.1's ModernGroup)
    first = beat(g, "m1", 0, ("foo",))
    # Nothing is initialized yet: the member is in, with an empty assignment.
    assert first == HeartbeatAnswer("m1", 2, 5_000, {})
    assert g.state is ShareGroupState.STABLE and g.group_epoch == 2
    assert partitions_to_initialize(g, TOPICS, 1, 30_000) == {FOO.topic_id: frozenset({0, 1})}
    assert partitions_to_initialize(g, TOPICS, 2, 30_000) == {}  # already initializing
    initialized(g, FOO.topic_id, frozenset({0, 1}))
    second = beat(g, "m1", 2)
    assert second.member_epoch == 3 and second.assignment == {FOO.topic_id: frozenset({0, 1})}
    # Nothing changed: no assignment in the answer.
    assert beat(g, "m1", 3).assignment is None


def test_members_share_a_partition_and_the_group_epoch_follows_membership() -> None:
    g = ShareGroup("g")
    beat(g, "m1", 0, ("bar",))
    init_all(g)
    assert beat(g, "m1", 2).assignment == {BAR.topic_id: frozenset({0})}
    answer = beat(g, "m2", 0, ("bar",))
    assert answer.assignment == {BAR.topic_id: frozenset({0})}  # a share partition has many readers
    assert g.group_epoch == 4 and answer.member_epoch == 4
    assert leave(g, "m2") == HeartbeatAnswer("m2", -1, 0, None)
    assert g.group_epoch == 5 and list(g.members) == ["m1"]
    fence(g, "m1")
    assert g.state is ShareGroupState.EMPTY and g.group_epoch == 6


def test_a_stale_epoch_is_fenced_but_the_previous_one_is_accepted() -> None:
    g = ShareGroup("g")
    beat(g, "m1", 0, ("foo",))
    init_all(g)
    assert beat(g, "m1", 2).member_epoch == 3
    # The answer with epoch 3 was lost: the member heartbeats with 2 again.
    assert beat(g, "m1", 2).member_epoch == 3
    assert error_of(lambda: beat(g, "m1", 4)) is ErrorCode.fenced_member_epoch
    beat(g, "m2", 0, ("foo",))  # bumps to 4; m1 is now at 3, previous 2... until it heartbeats
    assert beat(g, "m1", 3).member_epoch == 4
    assert error_of(lambda: beat(g, "m1", 2)) is ErrorCode.fenced_member_epoch
    # Epoch 0 rejoins whatever the member's epoch.
    assert beat(g, "m1", 0, ("foo",)).member_epoch == 4


def test_unknown_members_and_full_groups() -> None:
    g = ShareGroup("g")
    assert error_of(lambda: beat(g, "ghost", 4)) is ErrorCode.unknown_member_id
    assert error_of(lambda: leave(g, "ghost")) is ErrorCode.unknown_member_id
    small = ShareGroupSettings(max_size=1)
    heartbeat(g, ShareHeartbeat("g", "m1", 0, subscribed_topic_names=("foo",)), "c", "h", TOPICS, small, 1)
    late = ShareHeartbeat("g", "m2", 0, subscribed_topic_names=("foo",))
    assert (
        error_of(lambda: heartbeat(g, late, "c", "h", TOPICS, small, 1)) is ErrorCode.group_max_size_reached
    )


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (ShareHeartbeat("g", "", 0, subscribed_topic_names=("foo",)), "MemberId can't be empty."),
        (ShareHeartbeat("", "m", 0, subscribed_topic_names=("foo",)), "GroupId can't be empty."),
        (ShareHeartbeat("g", "m", 0, rack_id="", subscribed_topic_names=("foo",)), "RackId can't be empty."),
        (ShareHeartbeat("g", "m", 0), "SubscribedTopicNames must be set in first request."),
        (ShareHeartbeat("g", "m", -2), "MemberEpoch is invalid."),
    ],
)
def test_invalid_heartbeats(req: ShareHeartbeat, message: str) -> None:
    with pytest.raises(KafkaError) as e:
        validate(req)
    assert (e.value.code, e.value.message) == (ErrorCode.invalid_request, message)


def test_a_subscription_change_reassigns_at_once() -> None:
    g = ShareGroup("g")
    beat(g, "m1", 0, ("foo",))
    init_all(g)
    beat(g, "m1", 2)
    answer = beat(g, "m1", 3, ("bar",))
    assert answer.member_epoch == 4 and answer.assignment == {}  # bar is not initialized yet
    init_all(g)
    assert beat(g, "m1", 4).assignment == {BAR.topic_id: frozenset({0})}


def test_the_assignment_interval_delays_a_new_target() -> None:
    g = ShareGroup("g")
    slow = ShareGroupSettings(assignment_interval_ms=1_000)
    heartbeat(g, ShareHeartbeat("g", "m1", 0, subscribed_topic_names=("foo",)), "c", "h", TOPICS, slow, 10)
    init_all(g)
    # Epoch 3 is due, but the last target was computed at 10: m1 stays at epoch 2 until 1010.
    a = heartbeat(g, ShareHeartbeat("g", "m1", 2), "c", "h", TOPICS, slow, 500)
    assert (a.member_epoch, g.group_epoch, g.assignment_epoch) == (2, 3, 2)
    b = heartbeat(g, ShareHeartbeat("g", "m1", 2), "c", "h", TOPICS, slow, 1_010)
    assert b.member_epoch == 3 and b.assignment == {FOO.topic_id: frozenset({0, 1})}


def test_initialization_is_asked_again_after_the_retry_interval() -> None:
    g = ShareGroup("g")
    beat(g, "m1", 0, ("foo",))
    assert partitions_to_initialize(g, TOPICS, 100, 30_000) == {FOO.topic_id: frozenset({0, 1})}
    assert partitions_to_initialize(g, TOPICS, 30_099, 30_000) == {}
    assert partitions_to_initialize(g, TOPICS, 30_100, 30_000) == {FOO.topic_id: frozenset({0, 1})}
    initialized(g, FOO.topic_id, frozenset({0}))
    assert partitions_to_initialize(g, TOPICS, 30_101, 30_000) == {}  # 1 still initializing
    assert g.initializing == {FOO.topic_id: (frozenset({1}), 30_100)}


def test_a_topic_gaining_partitions_bumps_the_epoch_and_initializes_them() -> None:
    g = ShareGroup("g")
    beat(g, "m1", 0, ("foo",))
    init_all(g)
    beat(g, "m1", 2)
    grown = {"foo": TopicInfo(FOO.topic_id, 3), "bar": BAR}
    a = heartbeat(g, ShareHeartbeat("g", "m1", 3), "c", "h", grown, SETTINGS, 5)
    assert a.member_epoch == 4 and a.assignment is None  # still partitions 0-1 only
    assert partitions_to_initialize(g, grown, 5, 30_000) == {FOO.topic_id: frozenset({2})}
    initialized(g, FOO.topic_id, frozenset({2}))
    b = heartbeat(g, ShareHeartbeat("g", "m1", 4), "c", "h", grown, SETTINGS, 6)
    assert b.member_epoch == 5 and b.assignment == {FOO.topic_id: frozenset({0, 1, 2})}
