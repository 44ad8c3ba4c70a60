# IncrementalAlterConfigs (key 44), versions 0-1.
# Operations SET (0), DELETE (1), APPEND (2) and SUBTRACT (3), applied in order to the resource's
# current dynamic configs. APPEND/SUBTRACT only for LIST configs (cleanup.policy): they start from
# the current override, else the broker's default, add the values not there yet / remove the
# given ones.
# TOPIC (2): the result becomes the topic's overrides after Kafka's validation (INVALID_CONFIG with
# Kafka's message, e.g. "Can't APPEND to key x because its type is not LIST."); an unknown topic ->
# UNKNOWN_TOPIC_OR_PARTITION; the replica manager applies the new LogConfig to the live logs.
# BROKER (4): the ops apply to the dynamic broker configs of this broker (its id) or of the
# cluster default (""), checked as for AlterConfigs (api_33_alter_configs.py) on the resulting set
# and applied by every broker at once (broker/config/dynamic.py). APPEND/SUBTRACT only for LIST
# configs ("Config value append is not allowed for config key: x").
# GROUP (32): the ops apply to the group's configs (KIP-848/KIP-932 group configs, whether or not
# the group exists), then checked as Kafka's controller checks them (api_33_alter_configs.py, GROUP):
# APPEND/SUBTRACT -> INVALID_CONFIG "Can't APPEND to key x because its type is not LIST." (no group
# config is a LIST); stored by the controller, seen by every broker.
# BROKER_LOGGER (8): SET a logger's level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF) or DELETE
# it (inherit from root), as Kafka does for log4j; unknown loggers, the root's DELETE, APPEND and
# SUBTRACT are refused with Kafka's messages. A resource named twice, duplicate keys, null values
# for SET/APPEND/SUBTRACT and unknown operations -> INVALID_REQUEST. validate_only changes nothing.
# Authorization (before anything else): ALTER_CONFIGS on the topic, the group or else the cluster
# (TOPIC_, GROUP_, CLUSTER_AUTHORIZATION_FAILED), checked in _admin.alter_resources.
from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence

from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.incremental_alter_configs.v1.response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)

from broker.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigDef, ConfigType
from broker.config.group import GROUP_CONFIGS
from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import (
    LOG4J_TO_PYTHON,
    ROOT_LOGGER,
    VALID_LOG_LEVELS,
    ResourceType,
    alter_broker_configs,
    alter_group_configs,
    alter_resources,
    alter_topic_configs,
    broker_id_of,
    check_config_keys,
    logger_levels,
    python_logger,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE

API_KEY = 44
log = logging.getLogger("samsa.admin")


class OpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _op(config: AlterableConfig) -> OpType:
    try:
        return OpType(config.config_operation)
    except ValueError:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unknown operations type {config.config_operation}",
        ) from None


def _parts(value: str | None) -> list[str]:
    return [p for p in (value or "").split(",") if p]


def apply_topic_ops(
    current: Mapping[str, str],
    ops: Sequence[AlterableConfig],
    defaults: Mapping[str, str | None],
    table: Mapping[str, ConfigDef] = TOPIC_CONFIGS,
) -> dict[str, str]:
    """The topic's (or with GROUP_CONFIGS, a group's) overrides after `ops` (Kafka's
    ConfigurationControlManager semantics)."""
    configs = dict(current)
    for config in ops:
        op = _op(config)
        if op == OpType.SET:
            configs[config.name] = config.value or ""
        elif op == OpType.DELETE:
            configs.pop(config.name, None)
        else:
            definition = table.get(config.name)
            if definition is None or definition.type != ConfigType.LIST:
                raise KafkaError(
                    ErrorCode.invalid_config,
                    f"Can't {op.name} to key {config.name} because its type is not LIST.",
                )
            values = _parts(configs.get(config.name, defaults.get(config.name)))
            for v in (config.value or "").split(","):
                if op == OpType.APPEND and v not in values:
                    values.append(v)
                elif op == OpType.SUBTRACT and v in values:
                    values.remove(v)
            configs[config.name] = ",".join(values)
    return configs


def apply_broker_ops(current: Mapping[str, str], ops: Sequence[AlterableConfig]) -> dict[str, str]:
    """The dynamic broker configs after `ops` (Kafka's ConfigAdminManager.prepareIncrementalConfigs)."""
    props = dict(current)
    for config in ops:
        op = _op(config)
        if op == OpType.SET:
            props[config.name] = config.value or ""
        elif op == OpType.DELETE:
            props.pop(config.name, None)
        else:
            definition = BROKER_CONFIGS.get(config.name)
            if definition is None:
                raise KafkaError(
                    ErrorCode.invalid_config, f"Unknown config name: {config.name}"
                )
            if definition.type != ConfigType.LIST:
                verb = "append" if op == OpType.APPEND else "subtract"
                raise KafkaError(
                    ErrorCode.invalid_config,
                    f"Config value {verb} is not allowed for config key: {config.name}",
                )
            values = _parts(props.get(config.name, definition.default_string))
            for v in (config.value or "").split(","):
                if op == OpType.APPEND and v not in values:
                    values.append(v)
                elif op == OpType.SUBTRACT and v in values:
                    values.remove(v)
            props[config.name] = ",".join(values)
    return props


def alter_loggers(
    ctx: RequestContext, resource: AlterConfigsResource, validate_only: bool
) -> None:
    name = resource.resource_name
    if broker_id_of(name, what="Node id") != ctx.services.broker_id:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unexpected node id. Expected {ctx.services.broker_id}, but received {name}",
        )
    known = logger_levels()
    for config in resource.configs:
        op = int(config.config_operation)
        if op in (OpType.SET, OpType.DELETE) and config.name not in known:
            raise KafkaError(
                ErrorCode.invalid_config, f"Logger {config.name} does not exist!"
            )
        if op == OpType.SET and config.value not in LOG4J_TO_PYTHON:
            raise KafkaError(
                ErrorCode.invalid_config,
                f"Cannot set the log level of {config.name} to {config.value} as it is not a "
                f"supported log level. Valid log levels are {VALID_LOG_LEVELS}",
            )
        if op == OpType.DELETE and config.name == ROOT_LOGGER:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Removing the log level of the {ROOT_LOGGER} logger is not allowed",
            )
        if op in (OpType.APPEND, OpType.SUBTRACT):
            raise KafkaError(
                ErrorCode.invalid_request,
                f"{OpType(op).name} operation is not allowed for the BROKER_LOGGER resource",
            )
        if op not in (OpType.SET, OpType.DELETE):
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource",
            )
    if validate_only:
        return
    for config in resource.configs:
        logger = python_logger(config.name)
        if int(config.config_operation) == OpType.SET:
            logger.setLevel(LOG4J_TO_PYTHON[config.value or ""])
            log.warning(
                "log level updated logger=%s level=%s", config.name, config.value
            )
        else:
            logger.setLevel(logging.NOTSET)
            log.warning("log level unset logger=%s", config.name)


async def _alter(
    ctx: RequestContext, resource: AlterConfigsResource, validate_only: bool
) -> None:
    check_config_keys([c.name for c in resource.configs])
    nulls = [
        c.name
        for c in resource.configs
        if c.value is None and int(c.config_operation) != OpType.DELETE
    ]
    if nulls:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Null value not supported for : {', '.join(nulls)}",
        )
    kind = int(resource.resource_type)
    if kind == ResourceType.TOPIC:
        services = ctx.services
        topic = services.controller.image.topics.get(resource.resource_name)
        current = dict(topic.configs) if topic is not None else {}
        defaults = {
            name: TOPIC_CONFIGS[name].default_string
            if value is None
            else _render(name, value)
            for name, value in services.config.topic_defaults().items()
        }
        configs = apply_topic_ops(current, resource.configs, defaults)
        await alter_topic_configs(ctx, resource.resource_name, configs, validate_only)
    elif kind == ResourceType.BROKER:
        existing = ctx.services.controller.image.broker_configs.get(resource.resource_name, {})
        configs = apply_broker_ops(existing, resource.configs)
        await alter_broker_configs(ctx, resource.resource_name, configs, validate_only)
    elif kind == ResourceType.GROUP:
        existing = ctx.services.controller.image.group_configs.get(resource.resource_name, {})
        configs = apply_topic_ops(existing, resource.configs, {}, GROUP_CONFIGS)
        await alter_group_configs(ctx, resource.resource_name, configs, validate_only)
    elif kind == ResourceType.BROKER_LOGGER:
        alter_loggers(ctx, resource, validate_only)
    else:
        raise KafkaError(ErrorCode.invalid_request, f"Unknown resource type {kind}")


def _render(name: str, value: object) -> str | None:
    from broker.config import render_value

    return render_value(TOPIC_CONFIGS[name].type, value)


def _describe_ops(
    resource: AlterConfigsResource,
) -> list[tuple[object, str, str | None]]:
    return [
        (
            OpType(c.config_operation).name
            if c.config_operation in OpType._value2member_map_
            else c.config_operation,
            c.name,
            c.value,
        )
        for c in resource.configs
    ]


@registry.api(API_KEY)
async def handle(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    responses = await alter_resources(
        ctx,
        "incremental_alter_configs",
        request.resources,
        lambda resource: _alter(ctx, resource, request.validate_only),
        AlterConfigsResourceResponse,
        _describe_ops,
        request.validate_only,
    )
    return IncrementalAlterConfigsResponse(
        throttle_time=NO_THROTTLE, responses=tuple(responses)
    )
