"""Authorization for handlers: `Authorizer` (in `ctx.services`), the one place that decides whether
a principal may perform an operation on a resource, as Kafka's StandardAuthorizer decides it.

Off (authorizer.class.name empty): everything is allowed, and authorized-operation bitfields
report every operation a resource type supports (what Kafka reports without an authorizer). On
(either of Kafka's authorizer class names): super.users may do everything; otherwise the ACLs whose
resource pattern applies (LITERAL name, the wildcard `*`, PREFIXED patterns the name starts with),
principal (`User:name` or `User:*`) and host (the client's address or `*`) match decide: any
DENY wins; else an ALLOW for the operation or ALL (ALLOW on READ, WRITE, DELETE or ALTER also
allows DESCRIBE; ALLOW on ALTER_CONFIGS also DESCRIBE_CONFIGS); else, when no ACL applies to the
resource at all, allow.everyone.if.no.acl.found; else denied.

Handlers check with one call on their context: `ctx.authorized(AclOperation.WRITE,
ResourceType.TOPIC, name)` (and `ctx.authorized_any` for KIP-679's "on any resource of the type",
`ctx.authorized_operations` for the bitfields), answering Kafka's *_AUTHORIZATION_FAILED codes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from controller.security_model import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    SecurityImage,
)

log = logging.getLogger("samsa.authorizer")

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
"""The value when the client did not ask for authorized operations."""

_OPS = AclOperation
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_OPS.READ, _OPS.WRITE, _OPS.CREATE, _OPS.DESCRIBE, _OPS.DELETE, _OPS.ALTER,
                         _OPS.DESCRIBE_CONFIGS, _OPS.ALTER_CONFIGS),
    # what Kafka 4.x reports for a group (groups have configs there)
    ResourceType.GROUP: (_OPS.READ, _OPS.DESCRIBE, _OPS.DELETE, _OPS.DESCRIBE_CONFIGS, _OPS.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_OPS.CREATE, _OPS.CLUSTER_ACTION, _OPS.DESCRIBE_CONFIGS, _OPS.ALTER_CONFIGS,
                           _OPS.IDEMPOTENT_WRITE, _OPS.ALTER, _OPS.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_OPS.DESCRIBE, _OPS.WRITE),
    ResourceType.DELEGATION_TOKEN: (_OPS.DESCRIBE,),
    ResourceType.USER: (_OPS.CREATE_TOKENS, _OPS.DESCRIBE_TOKENS),
}
"""Kafka's AclEntry.supportedOperations: what an authorized-operations bitfield may hold."""

_IMPLIES_DESCRIBE = frozenset({_OPS.DESCRIBE, _OPS.READ, _OPS.WRITE, _OPS.DELETE, _OPS.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({_OPS.DESCRIBE_CONFIGS, _OPS.ALTER_CONFIGS})


def bitfield(operations: tuple[AclOperation, ...]) -> int:
    return sum(1 << op for op in operations)


class Authorizer:
    """Decides every request's access (see the module docstring); follows the security store's
    image, so an ACL created through any broker applies at once."""

    def __init__(self, enabled: bool, super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.enabled = enabled
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._by_type: dict[ResourceType, tuple[AclBinding, ...]] = {}

    def on_image(self, image: SecurityImage) -> None:
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for binding in image.acls:
            by_type.setdefault(binding.pattern.resource_type, []).append(binding)
        self._by_type = {k: tuple(v) for k, v in by_type.items()}

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        """Whether `principal` (`User:alice`) from `host` may do `operation` on the resource."""
        if not self.enabled or principal in self.super_users:
            return True
        found_acl = False
        allowed = False
        for binding in self._by_type.get(resource_type, ()):
            if not binding.pattern.matches(resource_type, name):
                continue
            found_acl = True
            result = _result(binding, principal, host, operation)
            if result is AclPermissionType.DENY:
                log.debug("denied principal=%s host=%s operation=%s resource_type=%s name=%s acl=%s",
                          principal, host, operation.name, resource_type.name, name, binding)
                return False
            allowed = allowed or result is AclPermissionType.ALLOW
        return allowed or (not found_acl and self.allow_if_no_acl)

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """KIP-679 (Kafka's Authorizer.authorizeByResourceType): whether some resource of the type
        would allow the operation, counting DENY patterns that dominate the ALLOW ones."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allow = False
        for binding in self._by_type.get(resource_type, ()):
            e, p = binding.entry, binding.pattern
            if e.host not in (host, WILDCARD) or e.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if e.operation not in (operation, _OPS.ALL):
                continue
            if e.permission_type is AclPermissionType.DENY:
                if p.pattern_type is PatternType.LITERAL and p.name == WILDCARD:
                    return False
                deny[p.pattern_type].add(p.name)
            elif e.permission_type is AclPermissionType.ALLOW:
                if p.pattern_type is PatternType.LITERAL and p.name == WILDCARD:
                    wildcard_allow = True
                else:
                    allow[p.pattern_type].add(p.name)
        if wildcard_allow:
            return True
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type is PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                    return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """The bitfield of the operations the resource type supports that are allowed."""
        ops = SUPPORTED_OPERATIONS[resource_type]
        if not self.enabled:
            return bitfield(ops)
        return bitfield(tuple(op for op in ops if self.authorize(principal, host, op, resource_type, name)))


def _result(binding: AclBinding, principal: str, host: str, operation: AclOperation,
            ) -> AclPermissionType | None:
    """Kafka's StandardAuthorizerData.findResult: what one applicable ACL says, or None."""
    e = binding.entry
    if e.principal not in (principal, WILDCARD_PRINCIPAL) or e.host not in (WILDCARD, host):
        return None
    if e.operation is not _OPS.ALL:
        if e.permission_type is AclPermissionType.ALLOW:
            if operation is _OPS.DESCRIBE:
                if e.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation is _OPS.DESCRIBE_CONFIGS:
                if e.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif e.operation is not operation:
                return None
        elif e.operation is not operation:
            return None
    return e.permission_type if e.permission_type in (AclPermissionType.ALLOW, AclPermissionType.DENY) else None
