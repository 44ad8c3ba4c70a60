"""Who may commit and fetch a KIP-848 consumer group's offsets: Kafka 4.3.1's
ConsumerGroup.validateOffsetCommit and validateOffsetFetch, pure.

- OffsetCommit / TxnOffsetCommit: a commit without a member epoch (admin client, unmanaged
  consumer) only while the group has no member; a TxnOffsetCommit carrying no member id, no
  generation and no instance id (a producer that sends only the group id) always; otherwise the
  member must exist (UNKNOWN_MEMBER_ID), a consumer-protocol member must use OffsetCommit v9+
  (UNSUPPORTED_VERSION) while a classic member of the group (mid-migration) may use any version,
  and the epoch sent must be the member's, or older than it (KIP-1251) while every committed
  partition is assigned to (or pending revocation from) the member at that epoch or before;
  otherwise STALE_MEMBER_EPOCH for a consumer-protocol member, ILLEGAL_GENERATION for a classic
  one (its generation is its member epoch) and in any TxnOffsetCommit (Kafka's
  OffsetMetadataManager turns STALE_MEMBER_EPOCH into it there). One partition failing fails the
  whole request, as Kafka's validator throws.
- OffsetFetch: without a member id and epoch, always; otherwise the member must exist and the
  epoch must be its current one (no version rule, no per-partition epochs).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping

from broker.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember
from controller.model import TopicRegistration
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

UNKNOWN_GENERATION_ID = -1
UNKNOWN_MEMBER_ID = ""

log = logging.getLogger(__name__)


def committed_partitions(
    topics: Mapping[str, TopicRegistration], tps: Iterable[TopicPartition]
) -> list[tuple[str, uuid.UUID | None, int]]:
    """The committed (topic, topic id or None for a topic that does not exist, partition)."""
    return [(tp.topic, t.topic_id if (t := topics.get(tp.topic)) else None, tp.partition) for tp in tps]


def validate_offset_commit(
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    member_epoch: int,
    api_version: int,
    transactional: bool,
    partitions: Iterable[tuple[str, uuid.UUID | None, int]] = (),
) -> ErrorCode:
    """Kafka's ConsumerGroup.validateOffsetCommit and its per-partition validator (`api_version`
    is OffsetCommit's; it does not matter for a transactional commit); `partitions`: what
    `committed_partitions` gives."""
    if member_epoch < 0 and group.is_empty():
        return ErrorCode.none
    if (
        transactional
        and member_epoch == UNKNOWN_GENERATION_ID
        and member_id == UNKNOWN_MEMBER_ID
        and instance_id is None
    ):
        return ErrorCode.none
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if not transactional and member.classic is None and api_version < 9:
        return ErrorCode.unsupported_version
    error = _commit_epoch_error(group.group_id, member, member_epoch, partitions, transactional)
    if transactional and error == ErrorCode.stale_member_epoch:
        return ErrorCode.illegal_generation  # OffsetMetadataManager.validateTransactionalOffsetCommit
    return error


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
    """Kafka's ConsumerGroup.validateOffsetFetch."""
    if member_id is None and member_epoch < 0:
        return ErrorCode.none
    member = group.members.get(member_id or "")
    if member is None:
        return ErrorCode.unknown_member_id
    return _epoch_error(member, member_epoch)


def _commit_epoch_error(
    group_id: str,
    member: ConsumerGroupMember,
    member_epoch: int,
    partitions: Iterable[tuple[str, uuid.UUID | None, int]],
    transactional: bool,
) -> ErrorCode:
    """The member epoch check of validateOffsetCommit, then createAssignmentEpochValidator's.
    A topic that does not exist: OffsetCommit leaves it to its per-partition answer (Kafka's
    KafkaApis answers it before the coordinator), TxnOffsetCommit is ILLEGAL_GENERATION (Kafka's
    OffsetMetadataManager.commitTransactionalOffset)."""
    if member_epoch >= member.member_epoch:
        return _epoch_error(member, member_epoch)
    for topic, topic_id, partition in partitions:
        if topic_id is None:
            if transactional:
                return ErrorCode.illegal_generation
            continue
        assignment_epoch = member.assignment_epoch(topic_id, partition)
        if assignment_epoch is None:
            reason = f"Partition {topic}-{partition} is not assigned or pending revocation for member."
        elif member_epoch < assignment_epoch:
            reason = (
                f"Received member epoch {member_epoch} is older than assignment epoch {assignment_epoch} "
                f"for partition {topic}-{partition}."
            )
        else:
            continue
        log.info("offset commit refused group=%s member_id=%s reason=%s", group_id, member.member_id, reason)
        return ErrorCode.illegal_generation if member.classic is not None else ErrorCode.stale_member_epoch
    return ErrorCode.none


def _epoch_error(member: ConsumerGroupMember, member_epoch: int) -> ErrorCode:
    """Kafka's validateMemberEpoch."""
    if member_epoch == member.member_epoch:
        return ErrorCode.none
    return ErrorCode.illegal_generation if member.classic is not None else ErrorCode.stale_member_epoch
