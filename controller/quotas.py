"""Client quota entities and the controller's rules for altering and describing them (pure).

An entity is what Kafka's ClientQuotaEntity is: a set of (entity type, name) pairs, the name None
for the type's default (`<default>` in ZooKeeper and kafka-configs). Samsa keeps the entities of
user and client-id quotas (`user`, `client-id`, both), with the keys Kafka's QuotaConfigs allows
for them. The rules are Kafka's controller's (ClientQuotaControlManager): `alter` checks one
entity's alteration and returns its new quota values; `describe` filters the stored entities.
Messages and their order are Kafka 4.3.1's, as the differential suite observes them
(compat/test_admin_apis.py).

Not supported: `ip` entities (connection_creation_rate) and `controller_mutation_rate`; Samsa
limits neither, so it refuses to store them (INVALID_REQUEST) rather than keep a quota it ignores
(Kafka accepts them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"

QUOTA_KEYS: Mapping[str, type] = {PRODUCER_BYTE_RATE: int, CONSUMER_BYTE_RATE: int, REQUEST_PERCENTAGE: float}
"""The quota keys of user and client-id entities Samsa enforces, with Kafka's type (LONG, DOUBLE)."""

UNSUPPORTED_KEYS = frozenset({"controller_mutation_rate", "connection_creation_rate"})

QuotaEntity = tuple[tuple[str, str | None], ...]
"""(entity type, name or None for the default), sorted by type: (("client-id", None), ("user", "alice"))."""


def entity_of(pairs: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    return tuple(sorted(pairs))


@dataclass(frozen=True)
class FilterComponent:
    """DescribeClientQuotas' filter component: match_type 0 exact name, 1 the default, 2 any."""

    entity_type: str
    match_type: int
    match: str | None = None


def alter(
    entity: Sequence[tuple[str, str | None]],
    ops: Sequence[tuple[str, float | None]],
    current: Mapping[str, float],
) -> dict[str, float]:
    """The entity's quotas after `ops` ((key, value), None removes the key); raises KafkaError,
    and then nothing of the entity changes.

    Kafka 4.3's checks, in its order: the entity (known types, no empty name; the request's
    entity is a map, so a type named twice keeps its last name: `entity_of` callers pass it so),
    a fraction for a whole-number (LONG) key, then each key is one of the entity's kind and each
    value above 0.
    """
    if not entity:
        raise KafkaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    types = dict(entity)
    for entity_type, name in entity:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and name == "":
            raise KafkaError(ErrorCode.invalid_request, f"Empty {entity_type} not supported")
    if IP in types:
        if len(types) > 1:
            raise KafkaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
        raise KafkaError(ErrorCode.invalid_request, "ip quotas (connection_creation_rate) are not supported by Samsa")
    for key, value in ops:
        if value is not None and QUOTA_KEYS.get(key) is int and value != int(value):
            raise KafkaError(ErrorCode.invalid_request, f"{key} cannot be a fractional value.")
    quotas = dict(current)
    for key, value in ops:
        if value is None:
            quotas.pop(key, None)
            continue
        if key in UNSUPPORTED_KEYS:
            raise KafkaError(ErrorCode.invalid_request, f"{key} is not supported by Samsa")
        if key not in QUOTA_KEYS:
            raise KafkaError(ErrorCode.invalid_request, f"Invalid configuration key {key}")
        if value <= 0:
            raise KafkaError(ErrorCode.invalid_request, f"Quota {key} must be greater than 0")
        quotas[key] = float(value)
    return quotas


def check_filter(components: Sequence[FilterComponent]) -> None:
    """The checks of Kafka 4.3's broker on a DescribeClientQuotas filter; raises KafkaError."""
    seen: set[str] = set()
    for c in components:
        if c.entity_type == "":
            raise KafkaError(ErrorCode.invalid_request, "Invalid empty entity type.")
        if c.match_type == 0 and c.match is None:
            raise KafkaError(
                ErrorCode.invalid_request, "Request specified MATCH_TYPE_EXACT, but set match string to null."
            )
        if c.match_type in (1, 2) and c.match is not None:
            what = "MATCH_TYPE_DEFAULT" if c.match_type == 1 else "MATCH_TYPE_SPECIFIED"
            raise KafkaError(ErrorCode.invalid_request, f"Request specified {what}, but also specified a match string.")
        if c.match_type not in (0, 1, 2):
            raise KafkaError(ErrorCode.invalid_request, f"Unknown match type {c.match_type}")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.unsupported_version, f"Unsupported entity type {c.entity_type}")
        if c.entity_type in seen:
            raise KafkaError(
                ErrorCode.invalid_request, f"Entity type {c.entity_type} cannot appear more than once in the filter."
            )
        seen.add(c.entity_type)
    if IP in seen and len(seen) > 1:
        raise KafkaError(
            ErrorCode.invalid_request,
            "Invalid entity filter component combination, IP filter component should not be used with "
            "user or clientId filter component.",
        )


def describe(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], components: Sequence[FilterComponent], strict: bool
) -> dict[QuotaEntity, Mapping[str, float]]:
    """The stored entities the filter matches (ClientQuotaControlManager.describeClientQuotas):
    every component must match one of the entity's types; `strict` also refuses entities with
    types no component names."""
    check_filter(components)
    out: dict[QuotaEntity, Mapping[str, float]] = {}
    for entity, values in quotas.items():
        names = dict(entity)
        ok = True
        for c in components:
            if c.entity_type not in names:
                ok = False
            elif c.match_type == 0:
                ok = ok and names[c.entity_type] == c.match
            elif c.match_type == 1:
                ok = ok and names[c.entity_type] is None
        if ok and (not strict or set(names) <= {c.entity_type for c in components}) and values:
            out[entity] = values
    return out
