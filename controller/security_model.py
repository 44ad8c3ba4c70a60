"""Security metadata as Kafka models it: ACL bindings and SCRAM credentials (frozen values), with
Kafka's wire codes and the formats ZooKeeper-mode Kafka stores them in.

ACLs: a binding is a resource pattern (resource type, name, pattern type LITERAL or PREFIXED; the
literal name `*` is the wildcard) and an entry (principal `User:name` or `User:*`, host or `*`,
operation, ALLOW or DENY). A filter matches bindings field by field (ANY and None match
anything; pattern type MATCH matches every pattern that applies to a literal name).

SCRAM: a credential is Kafka's ScramCredential (salt, stored key, server key, iterations), the
string `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>` in /config/users/<user>.
"""

from __future__ import annotations

import base64
import enum
import json
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


def camel(name: str) -> str:
    """Kafka's names in ZooKeeper JSON and paths: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(part.capitalize() for part in name.split("_"))


def from_camel(enum_cls: type[enum.IntEnum], text: str) -> Any:
    for member in enum_cls:
        if camel(member.name) == text or member.name == text.upper():
            return member
    raise ValueError(f"unknown {enum_cls.__name__} {text}")


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern applies to the literal resource (type, name)."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def to_json(self) -> dict[str, str]:
        return {"principal": self.principal, "permissionType": camel(self.permission_type.name),
                "operation": camel(self.operation.name), "host": self.host}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AccessControlEntry:
        return cls(str(d["principal"]), str(d["host"]), from_camel(AclOperation, d["operation"]),
                   from_camel(AclPermissionType, d["permissionType"]))


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """None or ANY matches every value of a field; pattern type MATCH matches the LITERAL name,
    the wildcard and every PREFIXED pattern the name starts with."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, binding: AclBinding) -> bool:
        p, e = binding.pattern, binding.entry
        if self.resource_type != ResourceType.ANY and p.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not (
                    p.name == self.name or (p.pattern_type == PatternType.LITERAL and p.name == WILDCARD)
                    or (p.pattern_type == PatternType.PREFIXED and self.name.startswith(p.name))):
                return False
        else:
            if self.pattern_type != PatternType.ANY and p.pattern_type != self.pattern_type:
                return False
            if self.name is not None and p.name != self.name:
                return False
        return ((self.principal is None or e.principal == self.principal)
                and (self.host is None or e.host == self.host)
                and (self.operation == AclOperation.ANY or e.operation == self.operation)
                and (self.permission_type == AclPermissionType.ANY
                     or e.permission_type == self.permission_type))


# ---- ZooKeeper layout (Kafka's AclAuthorizer) ------------------------------------------------------

ACL_ROOT = "/kafka-acl"
"""LITERAL patterns: /kafka-acl/<ResourceType>/<name>"""
ACL_EXTENDED_ROOT = "/kafka-acl-extended/prefixed"
"""PREFIXED patterns: /kafka-acl-extended/prefixed/<ResourceType>/<name>"""
ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                      ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER)


def acl_path(pattern: ResourcePattern) -> str:
    root = ACL_EXTENDED_ROOT if pattern.pattern_type == PatternType.PREFIXED else ACL_ROOT
    return f"{root}/{camel(pattern.resource_type.name)}/{pattern.name}"


def acl_change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(sequential znode prefix, data) of the change notification Kafka's brokers watch."""
    if pattern.pattern_type == PatternType.LITERAL:
        data = f"{camel(pattern.resource_type.name)}:{pattern.name}".encode()
        return f"{ACL_CHANGES}/acl_changes_", data
    doc = {"version": 1, "resourceType": camel(pattern.resource_type.name), "name": pattern.name,
           "patternType": pattern.pattern_type.name}
    return f"{ACL_EXTENDED_CHANGES}/acl_changes_", json.dumps(doc).encode()


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    return json.dumps({"version": 1, "acls": [e.to_json() for e in sorted(entries)]}).encode()


def decode_acls(data: bytes | None) -> tuple[AccessControlEntry, ...]:
    if not data:
        return ()
    return tuple(AccessControlEntry.from_json(d) for d in json.loads(data).get("acls", ()))


# ---- SCRAM credentials ------------------------------------------------------------------------

SCRAM_MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
"""Mechanism name -> Kafka's ScramMechanism type byte (DescribeUserScramCredentials)."""
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384
USERS_PATH = "/config/users"
CONFIG_CHANGES = "/config/changes/config_change_"


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_string(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in text.split(","))
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def sanitize_user(name: str) -> str:
    """Kafka's Sanitizer: a user name as a znode name (URL-encoded, `*` as %2A, space as %20)."""
    return urllib.parse.quote(name, safe="-_.!~'()")


def desanitize_user(name: str) -> str:
    return urllib.parse.unquote(name)


def encode_user_config(credentials: Mapping[str, ScramCredential], previous: bytes | None = None) -> bytes:
    """The user's config znode with `credentials` as its SCRAM entries (its other configs, client
    quotas, kept from `previous`)."""
    config = {k: v for k, v in (json.loads(previous).get("config", {}) if previous else {}).items()
              if k not in SCRAM_MECHANISMS}
    config.update({m: c.to_string() for m, c in credentials.items()})
    return json.dumps({"version": 1, "config": dict(sorted(config.items()))}).encode()


def decode_user_config(data: bytes | None) -> dict[str, ScramCredential]:
    if not data:
        return {}
    config = json.loads(data).get("config", {})
    return {m: ScramCredential.parse(v) for m, v in config.items() if m in SCRAM_MECHANISMS}


@dataclass(frozen=True, slots=True)
class SecurityImage:
    """Every ACL binding and SCRAM credential of the cluster, as last read."""

    acls: frozenset[AclBinding]
    scram: Mapping[str, Mapping[str, ScramCredential]]
    """user -> mechanism -> credential"""


EMPTY_SECURITY = SecurityImage(frozenset(), {})
