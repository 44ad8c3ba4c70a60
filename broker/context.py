"""What a handler knows about the request it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.server import Broker


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_address: str
    listener: str
    broker: Broker


class CloseConnection(Exception):
    """Raised by a handler when Kafka closes the connection instead of answering (acks=0 errors)."""
