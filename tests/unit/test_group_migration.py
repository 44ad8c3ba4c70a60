"""broker/coordinator/migration.py and classic_members.py: the checks and conversions of KIP-848
online migration and the answers to classic members of a consumer group, as Kafka 4.3.1's
GroupMetadataManager, ConsumerGroup.fromClassicGroup and ClassicGroup.fromConsumerGroup make them
(messages are Kafka's)."""

from __future__ import annotations

import dataclasses
import struct
import uuid

import pytest

from broker.coordinator.classic_members import (
    ClassicMemberError,
    LeaveAnswer,
    classic_member,
    heartbeat_error,
    join_error,
    joined_member,
    leave,
    supports_classic_protocols,
    sync_assignment,
    waiting_on_unreleased_partition,
)
from broker.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinator.consumer_offset_checks import validate_offset_commit, validate_offset_fetch
from broker.coordinator.group import ClassicGroup, GroupState, Member
from broker.coordinator.migration import (
    MigrationError,
    MigrationPolicy,
    can_downgrade,
    classic_group_from_consumer,
    classic_join_refusal,
    consumer_group_from_classic,
    upgrade_refusal,
)
from protocol.consumer_protocol import Assignment, read_assignment, write_assignment
from protocol.errors import ErrorCode

A = uuid.UUID(int=1)


def _subscription(version: int, rack: str | None = None) -> bytes:
    """ConsumerProtocolSubscription of topic "a" (v3 with a rack id)."""
    out = struct.pack(">hih", version, 1, 1) + b"a" + struct.pack(">i", -1)
    if version >= 1:
        out += struct.pack(">i", 0)  # no owned partitions
    if version >= 2:
        out += struct.pack(">i", 4)
    if version >= 3:
        out += struct.pack(">h", -1) if rack is None else struct.pack(">h", len(rack)) + rack.encode()
    return out


def _classic(*members: tuple[str, bytes], generation: int = 4, protocol_type: str = "consumer") -> ClassicGroup:
    group = ClassicGroup("g", state=GroupState.STABLE, generation=generation)
    for member_id, assignment in members:
        group.add(Member(member_id, None, "cid", "/h", 60_000, 45_000, protocol_type,
                         (("range", _subscription(3, "r1")), ("cooperative-sticky", _subscription(1)))))  # fmt: skip
        group.members[member_id].assignment = assignment
    group.protocol_name = "range"
    return group


def test_upgrade_checks() -> None:
    group = _classic(("m1", b""), ("m2", b""))
    assert upgrade_refusal(MigrationPolicy.BIDIRECTIONAL, group, 2) is None
    assert upgrade_refusal(MigrationPolicy.DOWNGRADE, group, 2) == (
        "Cannot upgrade classic group g to consumer group because online upgrade is disabled.")
    assert "group size exceeds the consumer group maximum size" in str(upgrade_refusal(MigrationPolicy.UPGRADE, group, 1))
    connect = _classic(("m1", b""), protocol_type="connect")
    assert "does not use the consumer embedded protocol" in str(upgrade_refusal(MigrationPolicy.UPGRADE, connect, 2))
    assert classic_join_refusal(MigrationPolicy.UPGRADE, "g") is None
    assert classic_join_refusal(MigrationPolicy.DISABLED, "g") == (
        "Cannot join the consumer group g with the classic protocol because the group migration is disabled.")


def test_classic_group_becomes_a_consumer_group() -> None:
    group = _classic(("m1", write_assignment(3, (("a", (0, 1)), ("gone", (0,))))), ("m2", b""))
    converted = consumer_group_from_classic(group, {"a": A})
    assert (converted.group_epoch, converted.assignment_epoch) == (4, 4)
    m1 = converted.members["m1"]
    assert (m1.member_epoch, m1.previous_member_epoch, m1.state) == (4, 4, MemberState.STABLE)
    assert (m1.rack_id, m1.subscribed_topic_names, m1.rebalance_timeout_ms) == ("r1", ("a",), 60_000)
    assert m1.assigned == {A: frozenset({0, 1})} == converted.target["m1"]  # an unknown topic is dropped
    assert m1.classic == ClassicMemberMetadata(45_000, group.members["m1"].protocols)
    assert converted.members["m2"].assigned == {}  # joined, never synced


def test_custom_assignor_user_data_or_malformed_metadata_refuse_the_upgrade() -> None:
    with pytest.raises(MigrationError, match="an unsupported custom assignor is in use"):
        consumer_group_from_classic(_classic(("m1", write_assignment(0, (), user_data=b"x"))), {"a": A})
    group = _classic(("m1", b""))
    group.members["m1"].protocols = (("range", b"\x00"),)
    with pytest.raises(MigrationError, match="the embedded consumer protocol is malformed"):
        consumer_group_from_classic(group, {"a": A})


def test_consumer_group_becomes_classic_when_its_last_consumer_member_leaves() -> None:
    converted = consumer_group_from_classic(_classic(("m1", b""), ("m2", b"")), {"a": A})
    converted.update_member(ConsumerGroupMember("c1", member_epoch=4))  # a consumer-protocol member
    converted.target = {"m1": {A: frozenset({0})}, "m2": {A: frozenset({1})}, "c1": {}}
    assert not can_downgrade(MigrationPolicy.BIDIRECTIONAL, converted, set(), 10)
    assert can_downgrade(MigrationPolicy.BIDIRECTIONAL, converted, {"c1"}, 10)
    assert not can_downgrade(MigrationPolicy.UPGRADE, converted, {"c1"}, 10)
    assert not can_downgrade(MigrationPolicy.BIDIRECTIONAL, converted, {"c1"}, 1)
    assert not can_downgrade(MigrationPolicy.BIDIRECTIONAL, converted, {"c1", "m1", "m2"}, 10)
    converted.group_epoch = 6
    classic = classic_group_from_consumer(converted, {"c1"}, {A: "a"}, now_ms=1)
    assert (classic.generation, classic.state, classic.protocol_type, classic.protocol_name) == (
        6, GroupState.STABLE, "consumer", "range")
    assert sorted(classic.members) == ["m1", "m2"] and classic.leader_id == "m1"
    assert classic.members["m1"].session_timeout_ms == 45_000
    assignment = read_assignment(classic.members["m2"].assignment)
    assert (assignment.version, assignment.partitions) == (3, (("a", (1,)),))  # the range subscription's version


# -- classic members of a consumer group (classic_members.py) ----------------------------------------


def _mixed() -> ConsumerGroup:
    """Upgraded from a classic group at generation 4 (m1 owns a-0, m2 a-1), then a consumer-protocol
    member joined: target epoch 5 gives m1 a-0, m2 nothing more, c1 a-1."""
    group = consumer_group_from_classic(
        _classic(("m1", write_assignment(3, (("a", (0,)),))), ("m2", write_assignment(3, (("a", (1,)),)))), {"a": A}
    )
    group.update_member(ConsumerGroupMember("c1", member_epoch=5, state=MemberState.UNRELEASED_PARTITIONS))
    group.group_epoch = group.assignment_epoch = 5
    group.target = {"m1": {A: frozenset({0})}, "m2": {}, "c1": {A: frozenset({1})}}
    return group


def test_classic_member_checks() -> None:
    group = _mixed()
    assert classic_member(group, "m1", None, 4).member_id == "m1"
    cases = [
        (("x", None, 4), ErrorCode.unknown_member_id, "Member x is not a member of group g."),
        (("c1", None, 5), ErrorCode.unknown_member_id, "Member c1 does not use the classic protocol."),
        (("m1", None, 3), ErrorCode.illegal_generation,
         "The request generation id 3 is not equal to the member epoch 4 of member m1."),
        (("m1", "i9", 4), ErrorCode.unknown_member_id, "Member with instance id i9 is not a member of group g."),
    ]
    for args, error, message in cases:
        with pytest.raises(ClassicMemberError) as e:
            classic_member(group, *args)
        assert (e.value.error, e.value.message) == (error, message)


def test_classic_heartbeat_asks_to_rejoin_when_behind_or_revoking() -> None:
    group = _mixed()
    # both classic members are behind the target epoch: rejoin
    assert heartbeat_error(group, group.members["m1"]) == ErrorCode.rebalance_in_progress
    m1 = dataclasses.replace(group.members["m1"], member_epoch=5)
    group.update_member(m1)
    assert heartbeat_error(group, m1) == ErrorCode.none
    group.update_member(dataclasses.replace(m1, state=MemberState.UNREVOKED_PARTITIONS))
    assert heartbeat_error(group, group.members["m1"]) == ErrorCode.rebalance_in_progress
    # c1 waits for a-1, which m2 still owns; once m2 lets it go, a classic member in c1's place would rejoin
    assert waiting_on_unreleased_partition(group, group.members["c1"])
    group.update_member(dataclasses.replace(group.members["m2"], assigned={}))
    assert not waiting_on_unreleased_partition(group, group.members["c1"])


def test_classic_sync_hands_over_the_assignment_in_the_members_version() -> None:
    group = _mixed()
    with pytest.raises(ClassicMemberError) as e:
        sync_assignment(group, group.members["m1"], "consumer", "range", {A: "a"})
    assert (e.value.error, e.value.message) == (
        ErrorCode.rebalance_in_progress, "A new rebalance is triggered in group g and member m1 should rejoin to catch up.")
    group.update_member(dataclasses.replace(group.members["m1"], member_epoch=5))
    data = sync_assignment(group, group.members["m1"], "consumer", "range", {A: "a"})
    assert read_assignment(data) == Assignment(3, (("a", (0,)),))
    with pytest.raises(ClassicMemberError) as e:
        sync_assignment(group, group.members["m1"], "consumer", "cooperative-sticky", {A: "a"})
    assert e.value.error == ErrorCode.inconsistent_group_protocol
    assert e.value.message.endswith("is not equal to the protocol name range returned in the join response.")


def test_offset_commit_and_fetch_of_classic_and_consumer_members() -> None:
    """consumer_offset_checks.py: a classic member (m1, generation 4) commits with any OffsetCommit
    version and a wrong generation is ILLEGAL_GENERATION; a consumer-protocol member (c1, epoch 5)
    needs v9+ and a wrong epoch is STALE_MEMBER_EPOCH (ILLEGAL_GENERATION in a TxnOffsetCommit); a
    TxnOffsetCommit without member information is accepted, one with an unknown member is not."""
    group = _mixed()
    commit = [
        (("m1", None, 4, 2, False), ErrorCode.none),
        (("m1", None, 3, 8, False), ErrorCode.illegal_generation),
        (("m1", None, 4, 3, True), ErrorCode.none),
        (("c1", None, 5, 8, False), ErrorCode.unsupported_version),
        (("c1", None, 5, 9, False), ErrorCode.none),
        (("c1", None, 4, 9, False), ErrorCode.stale_member_epoch),
        (("c1", None, 4, 3, True), ErrorCode.illegal_generation),
        (("x", None, 5, 9, False), ErrorCode.unknown_member_id),
        (("", None, -1, 9, False), ErrorCode.unknown_member_id),
        (("", None, -1, 3, True), ErrorCode.none),
        (("", "i1", -1, 3, True), ErrorCode.unknown_member_id),
    ]
    for (member_id, instance_id, epoch, version, transactional), error in commit:
        # a-1: neither m1's nor (its partition still unreleased) c1's, so an older epoch cannot commit it
        got = validate_offset_commit(group, member_id, instance_id, epoch, version, transactional, [("a", A, 1)])
        assert got == error, (member_id, epoch, version, transactional)
    assert validate_offset_commit(ConsumerGroup("e"), "", None, -1, 2, False) == ErrorCode.none
    fetch = [
        ((None, -1), ErrorCode.none),
        (("m1", 4), ErrorCode.none),
        (("m1", 5), ErrorCode.illegal_generation),
        (("c1", 5), ErrorCode.none),
        (("c1", 4), ErrorCode.stale_member_epoch),
        (("x", 1), ErrorCode.unknown_member_id),
    ]
    for (member_id, epoch), error in fetch:
        assert validate_offset_fetch(group, member_id, epoch) == error, (member_id, epoch)


def test_classic_join_checks_and_the_member_it_makes() -> None:
    """A classic JoinGroup on a consumer group: refused when the group is full (a new member) or
    when no protocol is supported by every classic member (Kafka's messages); the member keeps
    its epochs and assignment and takes its subscription and rack from the first protocol."""
    group = _mixed()  # m1 and m2 support range and cooperative-sticky, c1 is a consumer member
    assert supports_classic_protocols(group, "consumer", ["cooperative-sticky"])
    assert not supports_classic_protocols(group, "consumer", ["roundrobin"])
    assert not supports_classic_protocols(group, "connect", ["range"])
    assert supports_classic_protocols(ConsumerGroup("e"), "consumer", ["roundrobin"])
    assert not supports_classic_protocols(ConsumerGroup("e"), "consumer", [])
    assert join_error(group, "m1", "consumer", ["range"], 3) is None
    full = join_error(group, "new", "consumer", ["range"], 3)
    assert full is not None and (full.error, full.message) == (
        ErrorCode.group_max_size_reached, "The consumer group has reached its maximum capacity of 3 members.")
    assert join_error(group, "m1", "consumer", ["range"], 3) is None  # a member already in
    unsupported = join_error(group, "new", "consumer", ["roundrobin"], 10)
    assert unsupported is not None and (unsupported.error, unsupported.message) == (
        ErrorCode.inconsistent_group_protocol, "Member new's protocols are not supported.")

    m1 = group.members["m1"]
    protocols = (("range", _subscription(3, "r7")), ("cooperative-sticky", _subscription(1)))
    rejoined = joined_member(dataclasses.replace(m1, subscribed_topic_regex="a.*"), None, -1, 10_000, protocols,
                             "cid2", "/h2")  # fmt: skip
    assert rejoined.subscribed_topic_regex is None
    assert (rejoined.member_epoch, rejoined.assigned, rejoined.state) == (m1.member_epoch, m1.assigned, m1.state)
    assert (rejoined.rack_id, rejoined.rebalance_timeout_ms, rejoined.subscribed_topic_names) == ("r7", 60_000, ("a",))
    assert (rejoined.client_id, rejoined.client_host) == ("cid2", "/h2")
    assert rejoined.classic == ClassicMemberMetadata(10_000, protocols)
    new = joined_member(ConsumerGroupMember("n1"), "i1", 30_000, 45_000, (("range", _subscription(1)),), "c", "/h")
    assert (new.member_epoch, new.instance_id, new.rack_id, new.rebalance_timeout_ms) == (0, "i1", None, 30_000)


def test_classic_leave_answers_each_identity_and_lists_who_leaves() -> None:
    """LeaveGroup on a consumer group (Kafka 4.3.1): dynamic and static identities, an
    administrative removal by instance id, unknown and fenced ones; a consumer-protocol member
    may be removed too."""
    group = _mixed()
    group.update_member(dataclasses.replace(group.members["m2"], instance_id="i2"))
    answers, leaving = leave(group, [("m1", None), ("x", None), ("", "i2"), ("m9", "i2"), ("m1", "i9"), ("c1", None)])
    assert answers == [
        LeaveAnswer("m1", None),
        LeaveAnswer("x", None, ErrorCode.unknown_member_id),
        LeaveAnswer("", "i2"),
        LeaveAnswer("m9", "i2", ErrorCode.fenced_instance_id),
        LeaveAnswer("m1", "i9", ErrorCode.unknown_member_id),
        LeaveAnswer("c1", None),
    ]
    assert [m.member_id for m in leaving] == ["m1", "m2", "c1"]
