# DescribeConfigs (key 32), versions 1-4.
# TOPIC (2): every topic config with its value, source (TOPIC_CONFIG for the topic's overrides,
# DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG / STATIC_BROKER_CONFIG / DEFAULT_CONFIG
# for what it inherits), read_only false, is_sensitive, synonyms in Kafka's order when
# include_synonyms, config_type (v3+) and documentation (v3+ when include_documentation). An
# illegal name -> INVALID_TOPIC_EXCEPTION, an unknown topic -> UNKNOWN_TOPIC_OR_PARTITION.
# BROKER (4): every broker config of this broker, read_only unless it is a dynamic broker config
# (broker/config/dynamic.py), with its source; the empty name: the cluster-wide dynamic defaults
# only; another broker id or a name that is not a number -> INVALID_REQUEST with Kafka's message.
# BROKER_LOGGER (8): this broker's loggers (root and samsa.*) with their levels, as Kafka lists its
# log4j loggers.
# GROUP (32): every group config (KIP-848/KIP-932; broker/config/group.py) for any group name, its
# value the group's own setting (source GROUP_CONFIG) else the broker synonym's (with its source) or
# Kafka's default (DEFAULT_CONFIG), read_only false, synonyms as Kafka lists them; the empty name ->
# INVALID_REQUEST "Group name must not be empty". Other resource types (CLIENT_METRICS) ->
# INVALID_REQUEST. configuration_keys
# null or empty means every config. Passwords are never shown. Authorization (Kafka's ConfigHelper),
# before anything else: DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), on the group
# (GROUP_AUTHORIZATION_FAILED), else on the cluster (CLUSTER_AUTHORIZATION_FAILED).
# Not supported: v0 (kio has no schema; every listed client uses v1+).
from __future__ import annotations

from kio.schema.describe_configs.v4.request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from kio.schema.describe_configs.v4.response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kio.static.primitive import i8

from broker.config import (
    ConfigSource,
    ConfigType,
    DescribedConfig,
    describe_broker_configs,
    describe_group_configs,
    describe_topic_configs,
)
from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import (
    ResourceType,
    audit,
    broker_id_of,
    error_message,
    logger_levels,
    require_config_access,
)
from controller.placement import topic_name_error
from controller.security_model import AclOperation
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE

API_KEY = 32
def _entries(resource: DescribeConfigsResource, ctx: RequestContext) -> list[DescribedConfig]:
    services = ctx.services
    kind = int(resource.resource_type)
    name = resource.resource_name
    if kind == ResourceType.TOPIC:
        error = topic_name_error(name)
        if error:
            raise KafkaError(ErrorCode.invalid_topic_exception, error)
        topic = services.controller.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        return describe_topic_configs(services.config, topic.configs)
    if kind == ResourceType.BROKER:
        if not name:
            return describe_broker_configs(services.config, cluster_default=True)
        if broker_id_of(name) != services.broker_id:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {services.broker_id} or empty string, but received {name}",
            )
        return describe_broker_configs(services.config)
    if kind == ResourceType.BROKER_LOGGER:
        if not name:
            raise KafkaError(ErrorCode.invalid_request, "Broker id must not be empty")
        if broker_id_of(name) != services.broker_id:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {services.broker_id} but received {name}",
            )
        return [
            DescribedConfig(logger, level, False, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, (),
                            ConfigType.UNKNOWN, "")
            for logger, level in logger_levels().items()
        ]
    if kind == ResourceType.GROUP:
        if not name:
            raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty")
        return describe_group_configs(services.config, services.controller.image.group_configs.get(name, {}))
    raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type: {ResourceType.name_of(kind)}")


def _result(
    c: DescribedConfig, include_synonyms: bool, include_documentation: bool, logger: bool
) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=c.name,
        value=c.value,
        read_only=c.read_only,
        config_source=i8(c.source),
        is_sensitive=c.is_sensitive,
        synonyms=tuple(
            DescribeConfigsSynonym(name=s.name, value=s.value, source=i8(s.source)) for s in c.synonyms
        )
        if include_synonyms
        else (),
        config_type=i8(c.config_type),
        documentation=c.documentation if include_documentation and not logger else None,
    )


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        keys = resource.configuration_keys
        try:
            require_config_access(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
            entries = _entries(resource, ctx)
            if keys:
                entries = [c for c in entries if c.name in keys]
            result = DescribeConfigsResult(
                error_code=ErrorCode.none,
                error_message="",  # Kafka's default for the nullable field, on success too
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=tuple(
                    _result(c, request.include_synonyms, request.include_documentation,
                            int(resource.resource_type) == ResourceType.BROKER_LOGGER)
                    for c in entries
                ),
            )
        except KafkaError as e:
            result = DescribeConfigsResult(
                error_code=e.code,
                error_message=error_message(e),
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=(),
            )
        results.append(result)
        audit(
            ctx,
            "describe_configs",
            resource_type=ResourceType.name_of(resource.resource_type),
            resource=repr(resource.resource_name),
            keys=None if not keys else list(keys),
            configs=len(result.configs),
            result=result.error_code.name,
            message=repr(result.error_message),
        )
    return DescribeConfigsResponse(throttle_time=NO_THROTTLE, results=tuple(results))
