"""What a handler knows about the request it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.services import BrokerServices


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_address: str
    listener: str
    services: BrokerServices
    request: Any = None
    """The request as the client sent it (its own version's class), for the few fields a newer
    version dropped; handlers otherwise use the converted request they are given."""


class CloseConnection(Exception):
    """Raised by a handler when Kafka closes the connection instead of answering (acks=0 errors)."""
