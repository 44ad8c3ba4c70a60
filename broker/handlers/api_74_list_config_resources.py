# ListConfigResources (key 74), version 1 (KIP-1142).
# The config resources of the types asked for (none named: every type v1 supports, TOPIC, BROKER,
# BROKER_LOGGER, CLIENT_METRICS and GROUP), as Kafka 4.3.1's KafkaApis lists them: the groups with
# group configs, the client metrics subscriptions (Samsa has none: it serves no CLIENT_METRICS
# configs), every live broker's id as a BROKER_LOGGER and as a BROKER resource, every topic
# (internal ones too); each type's names sorted. A type v1 does not support -> UNSUPPORTED_VERSION
# for the whole answer; without DESCRIBE_CONFIGS on the cluster -> CLUSTER_AUTHORIZATION_FAILED.
# Not supported: v0 (ListClientMetricsResources, CLIENT_METRICS only; no client in the suite sends
# it).
from __future__ import annotations

from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest
from kio.schema.list_config_resources.v1.response import ConfigResource, ListConfigResourcesResponse
from kio.static.primitive import i8

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import ResourceType, audit
from controller.security_model import AclOperation
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE

API_KEY = 74
SUPPORTED = (ResourceType.TOPIC, ResourceType.BROKER, ResourceType.BROKER_LOGGER, ResourceType.CLIENT_METRICS,
             ResourceType.GROUP)
"""Kafka's ListConfigResourcesRequest.supportedResourceTypes for v1."""


def _names(ctx: RequestContext, kind: ResourceType) -> list[str]:
    image = ctx.services.controller.image
    if kind == ResourceType.GROUP:
        return sorted(image.group_configs)
    if kind in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        return [str(b.broker_id) for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
                if b.endpoint(ctx.listener) is not None]
    if kind == ResourceType.TOPIC:
        return sorted(image.topics)
    return []  # CLIENT_METRICS: no subscriptions can exist


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    asked = [int(t) for t in request.resource_types] or [int(t) for t in SUPPORTED]
    if not ctx.authorized(AclOperation.DESCRIBE_CONFIGS):
        code = ErrorCode.cluster_authorization_failed
    elif any(t not in SUPPORTED for t in asked):
        code = ErrorCode.unsupported_version
    else:
        code = ErrorCode.none
    resources: list[ConfigResource] = []
    if code == ErrorCode.none:
        for kind in (ResourceType.GROUP, ResourceType.CLIENT_METRICS, ResourceType.BROKER_LOGGER,
                     ResourceType.BROKER, ResourceType.TOPIC):  # Kafka's order
            if kind in asked:
                resources += [ConfigResource(resource_name=n, resource_type=i8(kind)) for n in _names(ctx, kind)]
    audit(ctx, "list_config_resources", resource_types=asked, resources=len(resources), result=code.name)
    return ListConfigResourcesResponse(throttle_time=NO_THROTTLE, error_code=code, config_resources=tuple(resources))
