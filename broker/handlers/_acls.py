"""What the ACL handlers share: request filters and bindings as the security model's values, checked
as Kafka checks them: a filter or creation with an UNKNOWN part (code 0 or one Kafka does not know)
fails the request's parsing there (Describe/Create/DeleteAclsRequest's validation), which closes
the connection; the rest as Kafka's AclControlManager checks them (INVALID_REQUEST with its
messages)."""

from __future__ import annotations

import enum
from typing import Any

from broker.context import CloseConnection
from controller.security_model import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from protocol.errors import ErrorCode, KafkaError

NO_AUTHORIZER = "No Authorizer is configured."


def _member(enum_cls: type[enum.IntEnum], value: int) -> Any:
    try:
        return enum_cls(int(value))
    except ValueError:
        return enum_cls(0)  # UNKNOWN, as Kafka reads a code it does not know


def _close_if_unknown(what: str, *parts: enum.IntEnum) -> None:
    if any(p.name == "UNKNOWN" for p in parts):
        raise CloseConnection(f"{what} contains UNKNOWN elements")


def acl_filter(f: Any) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls filter; CloseConnection for UNKNOWN parts."""
    result = AclBindingFilter(
        _member(ResourceType, f.resource_type_filter), f.resource_name_filter,
        _member(PatternType, f.pattern_type_filter), f.principal_filter, f.host_filter,
        _member(AclOperation, f.operation), _member(AclPermissionType, f.permission_type))
    _close_if_unknown("ACL filter", result.resource_type, result.pattern_type, result.operation,
                      result.permission_type)
    return result


def close_on_unknown_creations(creations: Any) -> None:
    """CloseConnection when any CreateAcls creation has an UNKNOWN part, as Kafka's request parsing."""
    for c in creations:
        _close_if_unknown("ACL creation", _member(ResourceType, c.resource_type),
                          _member(PatternType, c.resource_pattern_type), _member(AclOperation, c.operation),
                          _member(AclPermissionType, c.permission_type))


def acl_binding(c: Any) -> AclBinding:
    """A CreateAcls creation (checked by `close_on_unknown_creations` first); KafkaError(INVALID_REQUEST)
    with Kafka's message when invalid."""
    pattern = ResourcePattern(_member(ResourceType, c.resource_type), c.resource_name,
                              _member(PatternType, c.resource_pattern_type))
    entry = AccessControlEntry(c.principal, c.host, _member(AclOperation, c.operation),
                               _member(AclPermissionType, c.permission_type))
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise KafkaError(ErrorCode.invalid_request, f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise KafkaError(ErrorCode.invalid_request, f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise KafkaError(ErrorCode.invalid_request, f"Invalid permissionType {entry.permission_type.name}")
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise KafkaError(ErrorCode.invalid_request, f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise KafkaError(ErrorCode.invalid_request, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        raise KafkaError(ErrorCode.invalid_request, "Invalid empty resource name")
    kind, sep, name = entry.principal.partition(":")
    if not sep or not kind or not name:
        raise KafkaError(ErrorCode.invalid_request, f"Could not parse principal from `{entry.principal}` "
                         "(no colon is present separating the principal type from the principal name)")
    return AclBinding(pattern, entry)
