# ConsumerGroupDescribe (key 69), versions 0-1.
# Each KIP-848 group's state (Empty, Assigning, Reconciling, Stable), group epoch, target
# assignment epoch, server assignor and members: member epoch, instance and rack ids, client id
# and host, subscription (topic names, regular expression), current and target assignment (topic
# ids and names); v1 member type: 0 for a classic-protocol member (a group mid-migration), else 1.
# GROUP_ID_NOT_FOUND for an unknown group or a classic one (Kafka's messages), INVALID_GROUP_ID,
# coordinator errors per group.
# Authorization: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED, answered before the other
# groups, as Kafka orders them); authorized operations when asked, as DescribeGroups; then, as
# Kafka's KafkaApis, a group whose members' current or target assignments name a topic the caller
# may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED with Kafka's message and no members
# (subscriptions are not checked, as in Kafka).
from __future__ import annotations

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_describe.v1.response import (
    Assignment,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)
from kio.static.primitive import i8, i32

from broker.acl import AUTHORIZED_OPERATIONS_OMITTED
from broker.context import RequestContext
from broker.coordinator.consumer_group import Assignment as MemberAssignment
from broker.coordinator.consumer_group import ConsumerGroup
from broker.coordinator.coordinator import group_id_error
from broker.coordinator.wire import NO_THROTTLE, TOPICS_NOT_AUTHORIZED, coordinator, undescribable
from broker.handlers import registry
from controller.model import ClusterImage
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode

API_KEY = 69
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = i8(0), i8(1)


def _failed(group_id: str, error: ErrorCode, message: str | None = None) -> DescribedGroup:
    return DescribedGroup(
        error_code=error,
        error_message=message,
        group_id=group_id,  # type: ignore[arg-type]
        group_state="",
        group_epoch=i32(0),
        assignment_epoch=i32(0),
        assignor_name="",
        members=(),
        authorized_operations=i32(AUTHORIZED_OPERATIONS_OMITTED),
    )


def _assignment(image: ClusterImage, assigned: MemberAssignment) -> Assignment:
    parts = []
    for topic_id, ps in assigned.items():
        topic = image.topic_by_id(topic_id)
        if topic is not None:
            parts.append(TopicPartitions(
                topic_id=topic_id, topic_name=topic.name, partitions=tuple(i32(p) for p in sorted(ps)),  # type: ignore[arg-type]
            ))  # fmt: skip
    return Assignment(topic_partitions=tuple(sorted(parts, key=lambda t: t.topic_name)))


def _described(image: ClusterImage, group: ConsumerGroup, assignor: str, operations: int) -> DescribedGroup:
    members = tuple(
        Member(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=i32(m.member_epoch),
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(m.subscribed_topic_names),  # type: ignore[arg-type]
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=_assignment(image, m.assigned),
            target_assignment=_assignment(image, group.target.get(m.member_id, {})),
            member_type=CONSUMER_MEMBER_TYPE if m.classic is None else CLASSIC_MEMBER_TYPE,
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        error_code=ErrorCode.none,
        group_id=group.group_id,  # type: ignore[arg-type]
        group_state=group.state.value,
        group_epoch=i32(group.group_epoch),
        assignment_epoch=i32(group.assignment_epoch),
        assignor_name=assignor,
        members=members,
        authorized_operations=i32(operations),
    )


def _assigned_topics(group: DescribedGroup) -> set[str]:
    return {str(tp.topic_name) for m in group.members for a in (m.assignment, m.target_assignment)
            for tp in a.topic_partitions}


def _error_response(
    ctx: RequestContext, request: ConsumerGroupDescribeRequest, error: Exception
) -> ConsumerGroupDescribeResponse:
    code = getattr(error, "code", ErrorCode.unknown_server_error)
    return ConsumerGroupDescribeResponse(
        throttle_time=NO_THROTTLE, groups=tuple(_failed(str(g), code) for g in request.group_ids)
    )


@registry.api(API_KEY, error_response=_error_response)
async def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    groups = coordinator(ctx).consumer_groups
    image = ctx.services.controller.image
    refused: list[DescribedGroup] = []  # Kafka answers them first
    described: list[DescribedGroup] = []
    for raw_id in request.group_ids:
        group_id = str(raw_id)
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            refused.append(_failed(group_id, ErrorCode.group_authorization_failed))
            continue
        if group_id_error(group_id) != ErrorCode.none:
            described.append(_failed(group_id, ErrorCode.invalid_group_id))
            continue
        error, message, group = groups.describe(group_id)
        if group is None:
            described.append(_failed(group_id, error, message))
            continue
        operations = ctx.authorized_operations(ResourceType.GROUP, group_id) \
            if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
        described.append(_described(image, group, groups.assignor_of(group), operations))
    denied = undescribable(ctx, (t for g in described for t in _assigned_topics(g)))
    if denied:
        described = [_failed(str(g.group_id), ErrorCode.topic_authorization_failed, TOPICS_NOT_AUTHORIZED)
                     if _assigned_topics(g) & denied else g for g in described]
    return ConsumerGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=(*refused, *described))
