# ShareGroupDescribe (key 77), version 1.
# Each share group's state (Empty, Stable), group epoch, assignment epoch, assignor ("simple") and
# members: member epoch, rack id, client id and host, subscribed topic names, assignment (topic ids
# and names), as Kafka 4.3.1's ShareGroup.asDescribedGroup over broker/share/share_groups.py.
# GROUP_ID_NOT_FOUND for an unknown group or one of another type (Kafka's messages), coordinator
# errors per group.
# Authorization: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED, answered before the other
# groups, as Kafka orders them); authorized operations when asked, as ConsumerGroupDescribe; then,
# as Kafka's KafkaApis, a group whose members' assignments name a topic the caller may not DESCRIBE
# is answered TOPIC_AUTHORIZATION_FAILED with Kafka's message and no members (subscriptions are
# not checked, as in Kafka).
from __future__ import annotations

from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_describe.v1.response import (
    Assignment,
    DescribedGroup,
    Member,
    ShareGroupDescribeResponse,
    TopicPartitions,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from broker.acl import AUTHORIZED_OPERATIONS_OMITTED
from broker.context import RequestContext
from broker.coordinator.wire import NO_THROTTLE, TOPICS_NOT_AUTHORIZED, coordinator, undescribable
from broker.handlers import registry
from broker.share.share_group import Assignment as MemberAssignment
from broker.share.share_group import ShareGroup
from controller.model import ClusterImage
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 77
ASSIGNOR = "simple"
"""Kafka's default (and only) share group assignor, SimpleAssignor."""


def _failed(group_id: str, error: ErrorCode, message: str | None = None) -> DescribedGroup:
    return DescribedGroup(
        error_code=error, error_message=message, group_id=GroupId(group_id), group_state="", group_epoch=i32(0),
        assignment_epoch=i32(0), assignor_name="", members=(),
        authorized_operations=i32(AUTHORIZED_OPERATIONS_OMITTED),
    )  # fmt: skip


def _assignment(image: ClusterImage, assigned: MemberAssignment) -> Assignment:
    parts = []
    for topic_id, ps in assigned.items():
        topic = image.topic_by_id(topic_id)
        if topic is not None:
            parts.append(TopicPartitions(topic_id=topic_id, topic_name=TopicName(topic.name),
                                         partitions=tuple(i32(p) for p in sorted(ps))))  # fmt: skip
    return Assignment(topic_partitions=tuple(sorted(parts, key=lambda t: str(t.topic_name))))


def _described(image: ClusterImage, group: ShareGroup, operations: int) -> DescribedGroup:
    members = tuple(
        Member(
            member_id=m.member_id, rack_id=m.rack_id, member_epoch=i32(m.member_epoch), client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(TopicName(t) for t in sorted(m.subscribed_topic_names)),
            assignment=_assignment(image, m.assigned),
        )
        for m in group.members.values()
    )  # fmt: skip
    return DescribedGroup(
        error_code=ErrorCode.none, group_id=GroupId(group.group_id), group_state=group.state.value,
        group_epoch=i32(group.group_epoch), assignment_epoch=i32(group.assignment_epoch), assignor_name=ASSIGNOR,
        members=members, authorized_operations=i32(operations),
    )  # fmt: skip


def _assigned_topics(group: DescribedGroup) -> set[str]:
    return {str(tp.topic_name) for m in group.members for tp in m.assignment.topic_partitions}


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    groups = coordinator(ctx).share_groups
    image = ctx.services.controller.image
    refused: list[DescribedGroup] = []  # Kafka answers them first
    described: list[DescribedGroup] = []
    for raw_id in request.group_ids:
        group_id = str(raw_id)
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            refused.append(_failed(group_id, ErrorCode.group_authorization_failed))
            continue
        error, message, group = groups.describe(group_id)
        if group is None:
            described.append(_failed(group_id, error, message))
            continue
        operations = ctx.authorized_operations(ResourceType.GROUP, group_id) \
            if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
        described.append(_described(image, group, operations))
    denied = undescribable(ctx, (t for g in described for t in _assigned_topics(g)))
    if denied:
        described = [_failed(str(g.group_id), ErrorCode.topic_authorization_failed, TOPICS_NOT_AUTHORIZED)
                     if _assigned_topics(g) & denied else g for g in described]
    return ShareGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=(*refused, *described))
