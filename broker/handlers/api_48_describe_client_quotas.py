# DescribeClientQuotas (key 48), versions 0-1.
# The user and client-id quotas of the cluster image that match the filter (controller/quotas.py
# `describe`, Kafka's describeClientQuotas): each component names an entity type and matches an
# exact name (0), the default (1) or any name (2); strict leaves out entities with other types.
# A malformed filter (a type named twice, an empty type, a match string with the wrong match type,
# ip with user or client-id) -> INVALID_REQUEST, an unknown type -> UNSUPPORTED_VERSION, with
# Kafka 4.3's messages and no entries; success answers error_message "" as Kafka does.
# Not supported: ip entities (Samsa stores none); throttle_time is the network layer's.
from __future__ import annotations

from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest
from kio.schema.describe_client_quotas.v1.response import (
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)
from kio.static.primitive import f64

from broker.context import RequestContext
from broker.handlers import registry
from controller.quotas import FilterComponent, describe
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE

API_KEY = 48


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    components = [FilterComponent(c.entity_type, int(c.match_type), c.match) for c in request.components]
    try:
        found = describe(ctx.services.controller.image.client_quotas, components, request.strict)
    except KafkaError as e:
        return DescribeClientQuotasResponse(
            throttle_time=NO_THROTTLE, error_code=e.code, error_message=e.message, entries=None
        )
    return DescribeClientQuotasResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message="",  # Kafka's answer (not null)
        entries=tuple(
            EntryData(
                entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity),
                values=tuple(ValueData(key=k, value=f64(v)) for k, v in sorted(values.items())),
            )
            for entity, values in found.items()
        ),
    )
