"""Client quota entities and the controller's rules for altering and describing them (pure).

An entity is what Kafka's ClientQuotaEntity is: a set of (entity type, name) pairs, the name None
for the type's default (`<default>` in ZooKeeper and kafka-configs). Samsa keeps the entities of
user and client-id quotas (`user`, `client-id`, both), with the keys Kafka's QuotaConfigs allows
for them. The rules are Kafka's controller's (ClientQuotaControlManager): `alter` checks one
entity's alteration and returns its new quota values; `describe` filters the stored entities.

Not supported: `ip` entities (connection_creation_rate) and `controller_mutation_rate`; Samsa
limits neither, so it refuses to store them (INVALID_REQUEST) rather than keep a quota it ignores.
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
    """The entity's quotas after `ops` ((key, value), None removes the key); raises KafkaError.

    Kafka's ClientQuotaControlManager.alterClientQuotaEntity: the entity is checked (known types,
    each once, no empty name), then each set value (a key of the entity's kind; a LONG key takes a
    whole number). A bad value is skipped and the entity still answers NONE there (the error it
    records is overwritten by the NONE that follows; kafka-configs checks values before sending).
    """
    if not entity:
        raise KafkaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    types: dict[str, str | None] = {}
    for entity_type, name in entity:
        if entity_type in types:
            raise KafkaError(
                ErrorCode.invalid_request, f"Invalid empty client quota entity, duplicate entity entry {entity_type}"
            )
        if entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {entity_type}")
        types[entity_type] = name
        if name is not None and name == "":
            raise KafkaError(ErrorCode.invalid_request, f"Empty {entity_type} not supported")
    if IP in types:
        if len(types) > 1:
            raise KafkaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
        raise KafkaError(ErrorCode.invalid_request, "ip quotas (connection_creation_rate) are not supported by Samsa")
    quotas = dict(current)
    for key, value in ops:
        if value is None:
            quotas.pop(key, None)
        elif key in UNSUPPORTED_KEYS:
            raise KafkaError(ErrorCode.invalid_request, f"{key} is not supported by Samsa")
        elif key not in QUOTA_KEYS:
            continue  # Kafka: "Invalid configuration key", then overwritten by NONE
        elif QUOTA_KEYS[key] is int and abs(float(int(value + 1e-6)) - value) > 1e-6:
            continue  # Kafka: "must be a Long value", then overwritten by NONE
        else:
            quotas[key] = float(value)
    return quotas


def check_filter(components: Sequence[FilterComponent]) -> None:
    """Kafka's verifyDescribeQuotaRequest (and the broker's match_type checks); raises KafkaError."""
    seen: set[str] = set()
    for c in components:
        if c.entity_type == "":
            raise KafkaError(ErrorCode.invalid_request, "Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.invalid_request, f"Custom entity type {c.entity_type} not supported")
        if c.entity_type in seen:
            what = {USER: "user", CLIENT_ID: "client id", IP: "IP"}[c.entity_type]
            raise KafkaError(ErrorCode.invalid_request, f"Duplicate {what} filter component entity type")
        seen.add(c.entity_type)
        if c.match_type == 0 and c.match is None:
            raise KafkaError(
                ErrorCode.invalid_request, "Request specified MATCH_TYPE_EXACT, but set match string to null"
            )
        if c.match_type in (1, 2) and c.match is not None:
            what = "MATCH_TYPE_DEFAULT" if c.match_type == 1 else "MATCH_TYPE_SPECIFIED"
            raise KafkaError(ErrorCode.invalid_request, f"Request specified {what}, but also specified a match string")
        if c.match_type not in (0, 1, 2):
            raise KafkaError(ErrorCode.invalid_request, f"Unexpected match type: {c.match_type}")
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
