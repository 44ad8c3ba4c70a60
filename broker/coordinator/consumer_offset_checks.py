"""Who may commit and fetch a KIP-848 consumer group's offsets: Kafka 4.3.1's
ConsumerGroup.validateOffsetCommit and validateOffsetFetch, pure.

- OffsetCommit / TxnOffsetCommit: a commit without a member epoch (admin client, unmanaged
  consumer) only while the group has no member; a TxnOffsetCommit carrying no member id, no
  generation and no instance id (a producer that sends only the group id) always; otherwise the
  member must exist (UNKNOWN_MEMBER_ID), a consumer-protocol member must use OffsetCommit v9+
  (UNSUPPORTED_VERSION) while a classic member of the group (mid-migration) may use any version,
  and the epoch sent must be the member's: STALE_MEMBER_EPOCH for a consumer-protocol member,
  ILLEGAL_GENERATION for a classic one (its generation is its member epoch) and in any
  TxnOffsetCommit (Kafka's OffsetMetadataManager turns STALE_MEMBER_EPOCH into it there).
- OffsetFetch: without a member id and epoch, always; otherwise the same member and epoch
  checks (no version rule).

Not served: Kafka 4.3.1 also accepts a commit with an older epoch for each partition assigned to
the member at or before that epoch (per-partition assignment epochs, KIP-1251); Samsa keeps no
such epochs and takes only the member's current one.
"""

from __future__ import annotations

from broker.coordinator.consumer_group import ConsumerGroup, ConsumerGroupMember
from protocol.errors import ErrorCode

UNKNOWN_GENERATION_ID = -1
UNKNOWN_MEMBER_ID = ""


def validate_offset_commit(
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    member_epoch: int,
    api_version: int,
    transactional: bool,
) -> ErrorCode:
    """Kafka's ConsumerGroup.validateOffsetCommit (`api_version` is OffsetCommit's; it does not
    matter for a transactional commit)."""
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
    error = _epoch_error(member, member_epoch)
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


def _epoch_error(member: ConsumerGroupMember, member_epoch: int) -> ErrorCode:
    """Kafka's validateMemberEpoch."""
    if member_epoch == member.member_epoch:
        return ErrorCode.none
    return ErrorCode.illegal_generation if member.classic is not None else ErrorCode.stale_member_epoch
