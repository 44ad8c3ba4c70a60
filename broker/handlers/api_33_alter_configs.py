# AlterConfigs (key 33), versions 0-2: the legacy API that replaces a resource's whole set of
# dynamic configs.
# TOPIC (2): the given configs become the topic's overrides (those not named return to the broker
# defaults), validated as Kafka does (INVALID_CONFIG with Kafka's message); an unknown topic ->
# UNKNOWN_TOPIC_OR_PARTITION; the replica manager applies the new LogConfig to the live logs.
# BROKER (4): the given configs become the dynamic broker configs of this broker (its id) or of
# the cluster default (""), applied by every broker at once (broker/config/dynamic.py); a config
# that cannot change at runtime -> INVALID_REQUEST "Cannot update these configs dynamically:
# [...]", a bad value -> INVALID_REQUEST with the parse error (Kafka's KAFKA-13609 answers),
# min.insync.replicas per broker, or removed from the default -> INVALID_CONFIG (Kafka 4.x's ELR
# rules). Another broker id -> INVALID_REQUEST.
# GROUP (32): the given configs become the group's configs (KIP-848/KIP-932; the group need not
# exist, and its configs outlive DeleteGroups, as in Kafka 4.3.1), checked as Kafka's controller
# checks them (broker/config/group.py): the empty name -> INVALID_REQUEST "Default group resources
# are not allowed."; an unknown name, a bad value, a value outside the broker's group.*.min/max
# bounds, a session timeout not above the heartbeat interval -> INVALID_CONFIG with Kafka's message.
# The controller stores them (/config/groups/<group>, the metadata file) for every broker; the
# consumer-protocol coordinator reads consumer.* at once (broker/coordinator/group_configs.py).
# BROKER_LOGGER and other types -> INVALID_REQUEST "Unknown resource type N" (as Kafka: loggers
# are altered through IncrementalAlterConfigs only). A resource named twice,
# duplicate keys or null values -> INVALID_REQUEST. validate_only checks and changes nothing.
# Authorization (before anything else): ALTER_CONFIGS on the topic, the group or else the cluster
# (TOPIC_, GROUP_, CLUSTER_AUTHORIZATION_FAILED), checked in _admin.alter_resources.
from __future__ import annotations

from kio.schema.alter_configs.v2.request import (
    AlterConfigsRequest,
    AlterConfigsResource,
)
from kio.schema.alter_configs.v2.response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import (
    ResourceType,
    alter_broker_configs,
    alter_group_configs,
    alter_resources,
    alter_topic_configs,
    check_config_keys,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE

API_KEY = 33


async def _alter(
    ctx: RequestContext, resource: AlterConfigsResource, validate_only: bool
) -> None:
    check_config_keys([c.name for c in resource.configs])
    nulls = [c.name for c in resource.configs if c.value is None]
    if nulls:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Null value not supported for : {', '.join(nulls)}",
        )
    configs = {c.name: c.value for c in resource.configs if c.value is not None}
    if int(resource.resource_type) == ResourceType.TOPIC:
        await alter_topic_configs(ctx, resource.resource_name, configs, validate_only)
    elif int(resource.resource_type) == ResourceType.BROKER:
        await alter_broker_configs(ctx, resource.resource_name, configs, validate_only)
    elif int(resource.resource_type) == ResourceType.GROUP:
        await alter_group_configs(ctx, resource.resource_name, configs, validate_only)
    else:
        raise KafkaError(
            ErrorCode.invalid_request, f"Unknown resource type {resource.resource_type}"
        )


@registry.api(API_KEY)
async def handle(
    ctx: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    responses = await alter_resources(
        ctx,
        "alter_configs",
        request.resources,
        lambda resource: _alter(ctx, resource, request.validate_only),
        AlterConfigsResourceResponse,
        lambda resource: {c.name: c.value for c in resource.configs},
        request.validate_only,
    )
    return AlterConfigsResponse(
        throttle_time=NO_THROTTLE, responses=tuple(responses)
    )
