"""What a handler knows about the request it serves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.security.principal import ANONYMOUS, KafkaPrincipal
from controller.security_model import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.security.session import Session
    from broker.services import BrokerServices


def connection_id(listener: str, client_address: str) -> str:
    """A connection's id: its listener and the client's address and port, unique while it is open."""
    return f"{listener}/{client_address}"


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
    session: Session | None = None
    """The connection's authentication (principal, SASL state); None in in-process calls."""
    release: Callable[[], None] | None = None
    """For a Produce: called once its records are appended, so that its connection reads and
    handles a next Produce while this one waits for its replicas (broker/network.py); None
    where nothing waits for it."""

    @property
    def principal(self) -> KafkaPrincipal:
        return ANONYMOUS if self.session is None else self.session.principal

    @property
    def connection_id(self) -> str:
        """The connection's id among this broker's open connections (Kafka's connectionId)."""
        return connection_id(self.listener, self.client_address)

    @property
    def client_host(self) -> str:
        """The client's IP address (what an ACL's host is compared with)."""
        return self.client_address.rsplit(":", 1)[0]

    def authorized(self, operation: AclOperation, resource_type: ResourceType = ResourceType.CLUSTER,
                   name: str = CLUSTER_NAME) -> bool:
        """Whether this request's principal may do `operation` on the resource (the cluster when
        no resource is named): the check every handler makes (broker/acl.py)."""
        authorizer = self.services.authorizer
        if not authorizer.enabled:  # (before building the principal's name and host: every request)
            return True
        return authorizer.authorize(str(self.principal), self.client_host, operation, resource_type, name)

    def require(self, operation: AclOperation, resource_type: ResourceType, name: str,
                error: ErrorCode) -> None:
        """Raise KafkaError(`error`) unless `authorized`: a handler's whole-request check in one
        line (the handler's error response carries the code)."""
        if not self.authorized(operation, resource_type, name):
            raise KafkaError(error)

    def authorized_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether `operation` is allowed on some resource of the type (Kafka's
        authorizeByResourceType, KIP-679)."""
        return self.services.authorizer.authorize_any(str(self.principal), self.client_host,
                                                      operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        """The authorized-operations bitfield of a resource for this request's principal."""
        return self.services.authorizer.authorized_operations(str(self.principal), self.client_host,
                                                              resource_type, name)


class CloseConnection(Exception):
    """Raised by a handler when Kafka closes the connection instead of answering (acks=0 errors)."""
