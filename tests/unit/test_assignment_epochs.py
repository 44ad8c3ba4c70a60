"""KIP-1251 per-partition assignment epochs of a KIP-848 consumer group member: reconciliation
keeps them, the current assignment record carries them as Kafka 4.3.1 writes them, and
OffsetCommit with an older member epoch is checked against them (consumer_offset_checks.py)."""

from __future__ import annotations

import uuid

from broker.coordinator import consumer_records as rec
from broker.coordinator.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    reconcile,
)
from broker.coordinator.consumer_offset_checks import committed_partitions, validate_offset_commit
from controller.model import TopicRegistration
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)


def test_reconciliation_keeps_the_epoch_each_partition_was_assigned_at() -> None:
    """Kafka's CurrentAssignmentBuilder: kept partitions keep their epoch, new ones take the
    target's, revoked ones keep theirs while pending revocation."""
    m = ConsumerGroupMember("m", member_epoch=0)
    m = reconcile(m, 3, {A: frozenset({0, 1})}, {}, {})
    assert (m.member_epoch, m.assignment_epoch(A, 0), m.assignment_epoch(A, 1)) == (3, 3, 3)
    # epoch 5 adds b-0 and keeps a-0, a-1
    m = reconcile(m, 5, {A: frozenset({0, 1}), B: frozenset({0})}, {}, {A: [0, 1]})
    assert (m.member_epoch, m.state) == (5, MemberState.STABLE)
    assert (m.assignment_epoch(A, 0), m.assignment_epoch(B, 0), m.assignment_epoch(B, 1)) == (3, 5, None)
    # epoch 7 takes a-1 away: pending revocation at the old epoch, still at its epoch 3
    m = reconcile(m, 7, {A: frozenset({0}), B: frozenset({0})}, {}, {A: [0, 1], B: [0]})
    assert (m.member_epoch, m.state, m.pending_revocation) == (5, MemberState.UNREVOKED_PARTITIONS, {A: {1}})
    assert (m.assignment_epoch(A, 1), m.assignment_epoch(B, 0)) == (3, 5)
    m = reconcile(m, 7, {A: frozenset({0}), B: frozenset({0})}, {}, {A: [0], B: [0]})
    assert (m.member_epoch, m.state, m.assignment_epoch(A, 1)) == (7, MemberState.STABLE, None)
    assert dict(m.partition_epochs) == {(A, 0): 3, (B, 0): 5}


def test_the_current_assignment_record_carries_the_epochs() -> None:
    """Each topic of the assigned and pending revocation arrays holds its partitions' epochs in tag 0
    (a compact int32 array, in the order of the partitions); a record without them (written by
    an older Kafka) gives every partition the member epoch."""
    value = rec.CurrentAssignmentValue(
        7, 5, MemberState.UNREVOKED_PARTITIONS, {A: frozenset({0, 2})}, {B: frozenset({1})},
        {(A, 0): 3, (A, 2): 7, (B, 1): 2},
    )  # fmt: skip
    data = rec.current_assignment_value(value)
    topic_a = A.bytes + b"\x03" + bytes.fromhex("00000000 00000002") + b"\x01\x00\x09\x03" + bytes.fromhex(
        "00000003 00000007"
    )
    assert topic_a in data
    assert rec.read_value(rec.CURRENT_ASSIGNMENT, data) == value
    without = rec.current_assignment_value(rec.CurrentAssignmentValue(4, 3, MemberState.STABLE, {A: frozenset({0})}, {}))
    read = rec.read_value(rec.CURRENT_ASSIGNMENT, without)
    assert isinstance(read, rec.CurrentAssignmentValue) and dict(read.partition_epochs) == {(A, 0): 4}
    older = bytearray(without)
    older[older.index(b"\x01\x00\x05\x02"):] = b"\x00\x01\x00"  # no tag 0, empty pending array, no tags
    read = rec.read_value(rec.CURRENT_ASSIGNMENT, bytes(older))
    assert isinstance(read, rec.CurrentAssignmentValue) and dict(read.partition_epochs) == {(A, 0): 4}
    assert ConsumerGroupMember("m", member_epoch=4, assigned={A: frozenset({0})}).assignment_epoch(A, 0) == 4


def _group(classic: bool = False) -> ConsumerGroup:
    group = ConsumerGroup("g", group_epoch=5, assignment_epoch=5)
    group.update_member(ConsumerGroupMember(
        "m", member_epoch=5, previous_member_epoch=3, state=MemberState.UNREVOKED_PARTITIONS,
        assigned={A: frozenset({0, 1})}, pending_revocation={B: frozenset({0})},
        partition_epochs={(A, 0): 3, (A, 1): 5, (B, 0): 2},
        classic=ClassicMemberMetadata(45000, ()) if classic else None,
    ))  # fmt: skip
    return group


def test_an_older_epoch_commits_the_partitions_assigned_at_or_before_it() -> None:
    """Kafka's ConsumerGroup.validateOffsetCommit and createAssignmentEpochValidator."""
    group = _group()
    cases = [
        (5, [("a", A, 0), ("a", A, 1)], ErrorCode.none),  # the current epoch: anything
        (6, [], ErrorCode.stale_member_epoch),  # newer than the member's
        (4, [], ErrorCode.none),  # older, nothing to check
        (4, [("a", A, 0)], ErrorCode.none),  # a-0 assigned at 3
        (3, [("a", A, 0), ("b", B, 0)], ErrorCode.none),  # b-0 pending revocation, assigned at 2
        (4, [("a", A, 0), ("a", A, 1)], ErrorCode.stale_member_epoch),  # a-1 assigned at 5
        (2, [("a", A, 0)], ErrorCode.stale_member_epoch),  # a-0 assigned at 3
        (4, [("a", A, 2)], ErrorCode.stale_member_epoch),  # not the member's
    ]
    for epoch, partitions, error in cases:
        assert validate_offset_commit(group, "m", None, epoch, 9, False, partitions) == error, (epoch, partitions)
        txn = ErrorCode.illegal_generation if error == ErrorCode.stale_member_epoch else error
        assert validate_offset_commit(group, "m", None, epoch, 9, True, partitions) == txn, (epoch, partitions)
    classic = _group(classic=True)
    assert validate_offset_commit(classic, "m", None, 4, 2, False, [("a", A, 0)]) == ErrorCode.none
    assert validate_offset_commit(classic, "m", None, 4, 2, False, [("a", A, 1)]) == ErrorCode.illegal_generation


def test_a_topic_that_does_not_exist() -> None:
    """OffsetCommit answers it per partition (not the validator's to refuse); TxnOffsetCommit with an
    older epoch is ILLEGAL_GENERATION for it (Kafka's commitTransactionalOffset)."""
    topics = {"a": TopicRegistration("a", A, {})}
    committed = committed_partitions(topics, [TopicPartition("a", 0), TopicPartition("gone", 0)])
    assert committed == [("a", A, 0), ("gone", None, 0)]
    group = _group()
    assert validate_offset_commit(group, "m", None, 4, 9, False, committed) == ErrorCode.none
    assert validate_offset_commit(group, "m", None, 4, 9, True, committed) == ErrorCode.illegal_generation
    assert validate_offset_commit(group, "m", None, 5, 9, True, committed) == ErrorCode.none
