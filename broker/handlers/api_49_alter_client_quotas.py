# AlterClientQuotas (key 49), versions 0-1.
# Sets and removes user and client-id quotas (producer_byte_rate, consumer_byte_rate,
# request_percentage; kafka-configs --entity-type users/clients) under Kafka 4.3's rules
# (controller/quotas.py `alter`), one result per entry, the entity echoed (a type named twice:
# its last name, as Kafka's map keeps it; types in Kafka's order, client-id first); validate_only
# changes nothing. Stored in the cluster metadata (ZooKeeper /config/users, /config/clients in a
# cluster) and enforced by every broker (broker/quotas.py, the network layer throttles).
# Not supported: ip entities (connection_creation_rate) and controller_mutation_rate, refused
# with INVALID_REQUEST as Samsa enforces neither; throttle_time is the network layer's.
from __future__ import annotations

from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest
from kio.schema.alter_client_quotas.v1.response import (
    AlterClientQuotasResponse,
    EntityData,
    EntryData,
)

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import audit
from controller.quotas import entity_of
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE

API_KEY = 49


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    # the entity is a map, as in Kafka: a type named twice keeps its last name
    entities = [dict((e.entity_type, e.entity_name) for e in entry.entity) for entry in request.entries]
    alterations = [
        (entity_of(list(entity.items())), [(op.key, None if op.remove else float(op.value)) for op in entry.ops])
        for entity, entry in zip(entities, request.entries, strict=True)
    ]
    results = await ctx.services.controller.alter_client_quotas(alterations, validate_only=request.validate_only)
    for (entity, ops), error in zip(alterations, results, strict=True):
        audit(ctx, "alter_client_quotas", entity=list(entity), ops=ops, validate_only=request.validate_only,
              result="NONE" if error is None else error.code.name)  # fmt: skip
    return AlterClientQuotasResponse(
        throttle_time=NO_THROTTLE,
        entries=tuple(
            EntryData(
                error_code=ErrorCode.none if error is None else error.code,
                error_message=None if error is None else error.message,
                entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity),
            )
            for (entity, _), error in zip(alterations, results, strict=True)
        ),
    )
