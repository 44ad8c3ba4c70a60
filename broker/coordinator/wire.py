"""Small helpers the group handlers share (request fields to plain values)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.context import RequestContext
    from broker.coordinator.coordinator import GroupCoordinator

from controller.security_model import AclOperation, ResourceType
from protocol.types import NO_THROTTLE

__all__ = ["NO_THROTTLE", "TOPICS_NOT_AUTHORIZED", "client_host", "coordinator", "millis", "undescribable"]

TOPICS_NOT_AUTHORIZED = "The group has described topic(s) that the client is not authorized to describe."
"""Kafka's message with TOPIC_AUTHORIZATION_FAILED for a group ConsumerGroupDescribe or
ShareGroupDescribe would show with topics the principal may not DESCRIBE (KafkaApis)."""


def millis(value: datetime.timedelta) -> int:
    return int(value.total_seconds() * 1000)


def client_host(ctx: RequestContext) -> str:
    """As Kafka shows it: "/" + the client's IP address."""
    host = ctx.client_address.rsplit(":", 1)[0]
    return "/" + host.strip("[]")


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    return ctx.services.group_coordinator


def undescribable(ctx: RequestContext, topics: Iterable[str]) -> set[str]:
    """The topics among `topics` this request's principal may not DESCRIBE (the complement of
    Kafka's filterByAuthorized; none when no authorizer is configured)."""
    return {t for t in set(topics) if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, t)}
