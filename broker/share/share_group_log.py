"""A share group in `__consumer_offsets`: the records a change of a `ShareGroup` writes, and the
group rebuilt from the records a coordinator loads (Kafka's GroupMetadataManager replay).

`changes(before, after)` lists the records that take the log from `before` to `after`, in the
order Kafka writes them for a heartbeat or a fence: member metadata (or, for a member that left,
tombstones of its current assignment, target and metadata), the group epoch, changed target
assignments and the target assignment metadata, current assignments, and the state partition
metadata. `replay` folds a loaded partition's records in log order into the latest value of each
key; `restore` rebuilds the group from them.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping

from broker.share import group_records as rec
from broker.share.share_group import ShareGroup, ShareGroupMember, TopicInfo

ShareGroupRecord = tuple[rec.ShareGroupKey, rec.ShareGroupValue | None]
RecordsByKey = dict[tuple[int, str | None], rec.ShareGroupValue]
"""A group's records in a loaded partition: (record type, member id) -> latest value."""


def replay(latest: dict[str, RecordsByKey], key: rec.ShareGroupKey, value: rec.ShareGroupValue | None) -> None:
    """Fold one share group record, in log order, into the latest value of each key (a tombstone
    removes its key)."""
    records = latest.setdefault(key.group, {})
    if value is None:
        records.pop((key.type, key.member_id), None)
    else:
        records[(key.type, key.member_id)] = value


def snapshot(group: ShareGroup) -> ShareGroup:
    """A copy of `group` to diff a change against (members are values; the maps are copied)."""
    return dataclasses.replace(
        group,
        members=dict(group.members),
        target=dict(group.target),
        subscription_metadata=dict(group.subscription_metadata),
        initializing=dict(group.initializing),
        initialized=dict(group.initialized),
    )


def _member_metadata(m: ShareGroupMember) -> rec.MemberMetadataValue:
    return rec.MemberMetadataValue(
        m.rack_id, m.client_id, m.client_host, tuple(sorted(m.subscribed_topic_names))
    )


def _state_metadata(group: ShareGroup, names: Mapping[uuid.UUID, str]) -> rec.StatePartitionMetadataValue:
    def info(topic_id: uuid.UUID, partitions: frozenset[int]) -> rec.TopicPartitionsInfo:
        return rec.TopicPartitionsInfo(topic_id, names.get(topic_id, ""), tuple(sorted(partitions)))

    return rec.StatePartitionMetadataValue(
        tuple(info(t, ps) for t, (ps, _since) in sorted(group.initializing.items(), key=lambda i: str(i[0]))),
        tuple(info(t, ps) for t, ps in sorted(group.initialized.items(), key=lambda i: str(i[0]))),
        tuple((t, names.get(t, "")) for t in sorted(group.deleting, key=str)),
    )


def changes(
    before: ShareGroup, after: ShareGroup, topic_names: Mapping[uuid.UUID, str]
) -> list[ShareGroupRecord]:
    """The records that take the group's log from `before` to `after`."""
    gid = after.group_id
    out: list[ShareGroupRecord] = []
    for member_id in sorted(set(before.members) - set(after.members)):
        for record_type in (rec.CURRENT_ASSIGNMENT, rec.TARGET_MEMBER, rec.MEMBER_METADATA):
            out.append((rec.ShareGroupKey(record_type, gid, member_id), None))
    for member_id, m in sorted(after.members.items()):
        old = before.members.get(member_id)
        if old is None or _member_metadata(old) != _member_metadata(m):
            out.append((rec.ShareGroupKey(rec.MEMBER_METADATA, gid, member_id), _member_metadata(m)))
    if after.group_epoch != before.group_epoch:
        out.append((rec.ShareGroupKey(rec.GROUP_METADATA, gid), rec.GroupMetadataValue(after.group_epoch)))
    for member_id, target in sorted(after.target.items()):
        if before.target.get(member_id) != target:
            out.append((rec.ShareGroupKey(rec.TARGET_MEMBER, gid, member_id), target))
    if (after.assignment_epoch, after.assignment_timestamp_ms) != (
        before.assignment_epoch,
        before.assignment_timestamp_ms,
    ):
        target_metadata = rec.TargetMetadataValue(after.assignment_epoch, after.assignment_timestamp_ms)
        out.append((rec.ShareGroupKey(rec.TARGET_METADATA, gid), target_metadata))
    for member_id, m in sorted(after.members.items()):
        old = before.members.get(member_id)
        if old is None or (old.member_epoch, old.previous_member_epoch, old.assigned) != (
            m.member_epoch,
            m.previous_member_epoch,
            m.assigned,
        ):
            current = rec.CurrentAssignmentValue(m.member_epoch, m.previous_member_epoch, m.assigned)
            out.append((rec.ShareGroupKey(rec.CURRENT_ASSIGNMENT, gid, member_id), current))
    if (before.initializing, before.initialized, before.deleting) != (
        after.initializing, after.initialized, after.deleting
    ):
        out.append(
            (rec.ShareGroupKey(rec.STATE_PARTITION_METADATA, gid), _state_metadata(after, topic_names))
        )
    return out


def deletion(group: ShareGroup) -> list[ShareGroupRecord]:
    """Tombstones for every record of the group (Kafka's ShareGroup.createGroupTombstoneRecords)."""
    gid = group.group_id
    out: list[ShareGroupRecord] = []
    for record_type in (rec.CURRENT_ASSIGNMENT, rec.TARGET_MEMBER):
        out += [(rec.ShareGroupKey(record_type, gid, m), None) for m in sorted(group.members)]
    out.append((rec.ShareGroupKey(rec.TARGET_METADATA, gid), None))
    out += [(rec.ShareGroupKey(rec.MEMBER_METADATA, gid, m), None) for m in sorted(group.members)]
    out.append((rec.ShareGroupKey(rec.STATE_PARTITION_METADATA, gid), None))
    out.append((rec.ShareGroupKey(rec.GROUP_METADATA, gid), None))
    return out


def restore(
    group_id: str,
    latest: Mapping[tuple[int, str | None], rec.ShareGroupValue],
    topics: Mapping[str, TopicInfo],
    now_ms: int,
) -> ShareGroup:
    """The group from the latest value of each of its keys (tombstoned keys absent)."""
    group = ShareGroup(group_id)
    for (record_type, member_id), value in latest.items():
        if record_type == rec.GROUP_METADATA and isinstance(value, rec.GroupMetadataValue):
            group.group_epoch = value.epoch
        elif record_type == rec.TARGET_METADATA and isinstance(value, rec.TargetMetadataValue):
            group.assignment_epoch = value.assignment_epoch
            group.assignment_timestamp_ms = value.assignment_timestamp_ms
        elif record_type == rec.STATE_PARTITION_METADATA and isinstance(
            value, rec.StatePartitionMetadataValue
        ):
            group.initializing = {t.topic_id: (frozenset(t.partitions), now_ms) for t in value.initializing}
            group.initialized = {t.topic_id: frozenset(t.partitions) for t in value.initialized}
            group.deleting = frozenset(t for t, _name in value.deleting)
        elif record_type == rec.TARGET_MEMBER and member_id is not None and isinstance(value, Mapping):
            group.target[member_id] = value
    for (record_type, member_id), value in latest.items():
        if (
            record_type == rec.MEMBER_METADATA
            and member_id is not None
            and isinstance(value, rec.MemberMetadataValue)
        ):
            member = ShareGroupMember(
                member_id,
                value.rack_id,
                value.client_id,
                value.client_host,
                frozenset(value.subscribed_topic_names),
            )
            current = latest.get((rec.CURRENT_ASSIGNMENT, member_id))
            if isinstance(current, rec.CurrentAssignmentValue):
                member = dataclasses.replace(
                    member,
                    member_epoch=current.member_epoch,
                    previous_member_epoch=current.previous_member_epoch,
                    assigned=current.assigned,
                )
            group.members[member_id] = member
    group.target = {m: a for m, a in group.target.items() if m in group.members}
    names = group.subscribed_topic_names()
    group.subscription_metadata = {n: topics[n] for n in sorted(names) if n in topics}
    return group
