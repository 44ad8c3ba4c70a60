"""Small helpers the group handlers share (request fields to plain values)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.context import RequestContext
    from broker.coordinator.coordinator import GroupCoordinator

from protocol.types import NO_THROTTLE

__all__ = ["NO_THROTTLE", "client_host", "coordinator", "millis"]


def millis(value: datetime.timedelta) -> int:
    return int(value.total_seconds() * 1000)


def client_host(ctx: RequestContext) -> str:
    """As Kafka shows it: "/" + the client's IP address."""
    host = ctx.client_address.rsplit(":", 1)[0]
    return "/" + host.strip("[]")


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    return ctx.services.group_coordinator
