"""Shared pieces of the admin API handlers (CreateTopics, DeleteTopics, the config APIs, ...).

Not a handler: the registry only imports `api_*` modules. Holds Kafka's default error messages
for the codes the admin handlers return, the config resource types, the audit log line every
admin action writes, and the validation of manual replica assignments (Kafka's wording).
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from broker.context import RequestContext
from controller.security_model import AclOperation
from controller.security_model import ResourceType as AclResource
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("samsa.admin")
_INTEGER = re.compile(r"[+-]?[0-9]+")

DEFAULT_MESSAGES: Mapping[ErrorCode, str] = {
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.unknown_topic_id: "This server does not host this topic ID.",
    ErrorCode.topic_deletion_disabled: "Topic deletion is disabled.",
    ErrorCode.election_not_needed: "Leader election not needed for topic partition.",
    ErrorCode.preferred_leader_not_available: "The preferred leader was not available.",
    ErrorCode.eligible_leaders_not_available: "Eligible topic partition leaders are not available.",
    ErrorCode.not_controller: "This is not the correct controller for this cluster.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.not_leader_or_follower: (
        "For requests intended only for the leader, this error indicates that the broker is "
        "not the current leader. For requests intended for any replica, this error indicates "
        "that the broker is not a replica of the topic partition."
    ),
}


def default_message(code: ErrorCode) -> str | None:
    """Kafka's `ApiError(error)` message: the error's default text (None for NONE)."""
    if code == ErrorCode.none:
        return None
    return DEFAULT_MESSAGES.get(code)


def error_message(e: KafkaError) -> str | None:
    """The message of a KafkaError, or the code's default when it carries none of its own."""
    if e.message and e.message != e.code.name:
        return e.message
    return default_message(e.code)


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32

    @classmethod
    def name_of(cls, value: int) -> str:
        try:
            return cls(value).name
        except ValueError:
            return "UNKNOWN"


_CONFIG_ACCESS: Mapping[int, tuple[AclResource, ErrorCode]] = {
    ResourceType.TOPIC: (AclResource.TOPIC, ErrorCode.topic_authorization_failed),
    ResourceType.GROUP: (AclResource.GROUP, ErrorCode.group_authorization_failed),
}


def require_config_access(ctx: RequestContext, operation: AclOperation, resource_type: int, name: str) -> None:
    """DESCRIBE_CONFIGS or ALTER_CONFIGS on what a config resource names, as Kafka's ConfigHelper
    checks it: the topic or group, else (brokers, loggers, client metrics) the cluster; raises
    KafkaError with TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED."""
    kind, error = _CONFIG_ACCESS.get(resource_type, (AclResource.CLUSTER, ErrorCode.cluster_authorization_failed))
    if kind is AclResource.CLUSTER:
        ctx.require(operation, kind, "kafka-cluster", error)
    else:
        ctx.require(operation, kind, name, error)


def audit(ctx: RequestContext, action: str, **fields: object) -> None:
    """One log line per admin action, with who asked (client id, address, correlation id)."""
    extra = " ".join(f"{k}={v}" for k, v in fields.items())
    log.info(
        "admin action=%s client_id=%s client=%s correlation_id=%d api_version=%d %s",
        action,
        ctx.client_id,
        ctx.client_address,
        ctx.correlation_id,
        ctx.api_version,
        extra,
    )


def java_set(names: Iterable[str]) -> str:
    """How Kafka 4.x's messages render a set of names (a Java Set): `[a, b]`."""
    return f"[{', '.join(sorted(names))}]"


def broker_id_of(name: str, *, what: str = "Broker id") -> int:
    """Parse a BROKER resource name; INVALID_REQUEST as Kafka words it when it is not a number."""
    if not _INTEGER.fullmatch(name):
        raise KafkaError(
            ErrorCode.invalid_request, f"{what} must be an integer, but it is: {name}"
        )
    return int(name)


def check_manual_assignment(
    replicas: Sequence[int], brokers: Iterable[int], replication_factor: int | None
) -> None:
    """Kafka's validation of one partition's manual replica list (INVALID_REPLICA_ASSIGNMENT)."""
    if not replicas:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    known = set(brokers)
    previous: int | None = None
    for broker_id in sorted(replicas):
        if broker_id not in known:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered.",
            )
        if broker_id == previous:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    if replication_factor is not None and len(replicas) != replication_factor:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"The manual partition assignment includes a partition with {len(replicas)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s).",
        )


# --------------------------------------------------------------------------------------------
# Config resources (AlterConfigs, IncrementalAlterConfigs)
# --------------------------------------------------------------------------------------------


def check_duplicate_resources(resources: Sequence[object]) -> dict[int, KafkaError]:
    """Resources named twice (same type and name): both fail, as in Kafka. Index -> error."""
    seen: dict[tuple[int, str], int] = {}
    errors: dict[int, KafkaError] = {}
    for i, r in enumerate(resources):
        key = (r.resource_type, r.resource_name)  # type: ignore[attr-defined]
        if key in seen:
            for j in (seen[key], i):
                errors[j] = KafkaError(
                    ErrorCode.invalid_request, "Each resource must appear at most once."
                )
        else:
            seen[key] = i
    return errors


async def alter_resources(
    ctx: RequestContext,
    action: str,
    resources: Sequence[Any],
    alter: Callable[[Any], Awaitable[None]],
    response_class: type,
    describe: Callable[[Any], object],
    validate_only: bool,
) -> list[Any]:
    """The per-resource loop of AlterConfigs and IncrementalAlterConfigs: duplicates fail, each
    resource is altered on its own, every outcome is answered and audited."""
    duplicates = check_duplicate_resources(resources)
    responses = []
    for i, resource in enumerate(resources):
        error: KafkaError | None = duplicates.get(i)
        if error is None:
            try:
                require_config_access(ctx, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
                await alter(resource)
            except KafkaError as e:
                error = e
        response = response_class(
            error_code=ErrorCode.none if error is None else error.code,
            error_message=None if error is None else error_message(error),
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        responses.append(response)
        audit(
            ctx,
            action,
            resource_type=ResourceType.name_of(resource.resource_type),
            resource=repr(resource.resource_name),
            configs=describe(resource),
            validate_only=validate_only,
            result=response.error_code.name,
            message=repr(response.error_message),
        )
    return responses


def check_config_keys(names: Sequence[str]) -> None:
    if len(set(names)) != len(names):
        raise KafkaError(
            ErrorCode.invalid_request, "Error due to duplicate config keys"
        )


async def alter_topic_configs(
    ctx: RequestContext, name: str, configs: Mapping[str, str], validate_only: bool
) -> None:
    """Replace a topic's overrides with `configs`, checked as Kafka's controller checks them."""
    from broker.config import validate_topic_configs
    from controller.placement import topic_name_error

    if not name:
        raise KafkaError(
            ErrorCode.invalid_request, "Default topic resources are not allowed."
        )
    error = topic_name_error(name)
    if error:
        raise KafkaError(ErrorCode.invalid_topic_exception, error)
    validate_topic_configs(configs, allow_null=False, topic=name)
    controller = ctx.services.controller
    if name not in controller.image.topics:
        raise KafkaError(
            ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
        )
    await controller.alter_topic_configs(
        name, dict(configs), validate_only=validate_only
    )


async def alter_group_configs(
    ctx: RequestContext, name: str, configs: Mapping[str, str], validate_only: bool
) -> None:
    """Make `configs` the group's configs (KIP-848; empty removes them), checked as Kafka's
    controller checks them (ControllerConfigurationValidator, GroupConfig.validate: INVALID_REQUEST
    for the empty name, INVALID_CONFIG with Kafka's message for an unknown name, a bad value, a
    value outside the broker's group.*.min/max bounds, a session timeout not above the heartbeat
    interval). The group need not exist; its configs outlive DeleteGroups, as in Kafka."""
    from broker.config.group import validate_group_configs

    if not name:
        raise KafkaError(ErrorCode.invalid_request, "Default group resources are not allowed.")
    validate_group_configs(configs, ctx.services.config.values)
    await ctx.services.controller.alter_group_configs(name, dict(configs), validate_only=validate_only)


def check_broker_resource(ctx: RequestContext, name: str) -> None:
    """A BROKER resource is the empty name (cluster default) or this broker's id."""
    if name:
        broker_id = broker_id_of(name, what="Node id")
        if broker_id != ctx.services.broker_id:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {ctx.services.broker_id}, but received {name}",
            )


async def alter_broker_configs(
    ctx: RequestContext, name: str, configs: Mapping[str, str], validate_only: bool
) -> None:
    """Make `configs` the dynamic broker configs of BROKER resource `name` ("" for the cluster
    default, else this broker's id), checked as Kafka's ConfigAdminManager checks them
    (INVALID_REQUEST with its message, KAFKA-13609) and then by its controller's rules for
    min.insync.replicas (INVALID_CONFIG); the controller stores them and every broker applies
    them (broker/config/dynamic.py). Names Samsa does not know are kept and change nothing, as
    in Kafka."""
    from broker.config import BROKER_CONFIGS, ConfigError
    from broker.config.dynamic import DYNAMIC_CONFIGS, PER_BROKER_CONFIGS
    from controller.model import MIN_INSYNC_REPLICAS

    check_broker_resource(ctx, name)
    fixed = [n for n in configs if n in BROKER_CONFIGS and n not in DYNAMIC_CONFIGS]
    if fixed:
        raise KafkaError(ErrorCode.invalid_request, f"Cannot update these configs dynamically: {java_set(fixed)}")
    per_broker = [n for n in configs if n in PER_BROKER_CONFIGS]
    if not name and per_broker:
        raise KafkaError(
            ErrorCode.invalid_request,
            "Cannot update these configs at default cluster level, broker id must be specified: "
            f"{java_set(per_broker)}",
        )
    for key, value in configs.items():
        if key in BROKER_CONFIGS:
            try:
                BROKER_CONFIGS[key].parse(value)
            except ConfigError as e:
                raise KafkaError(ErrorCode.invalid_request, str(e)) from None
    current = ctx.services.controller.image.broker_configs.get(name, {})
    # Kafka 4.x's eligible leader replicas: min.insync.replicas is cluster-wide only
    if name and configs.get(MIN_INSYNC_REPLICAS) != current.get(MIN_INSYNC_REPLICAS):
        raise KafkaError(
            ErrorCode.invalid_config, "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
        )
    if not name and MIN_INSYNC_REPLICAS in current and MIN_INSYNC_REPLICAS not in configs:
        raise KafkaError(
            ErrorCode.invalid_config, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
        )
    await ctx.services.controller.alter_broker_configs(name, dict(configs), validate_only=validate_only)


# --------------------------------------------------------------------------------------------
# Loggers (BROKER_LOGGER resources)
# --------------------------------------------------------------------------------------------

ROOT_LOGGER = "root"
TRACE = 5
LOG4J_TO_PYTHON = {
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 50,
}
VALID_LOG_LEVELS = ", ".join(LOG4J_TO_PYTHON)


def log4j_level(level: int) -> str:
    """A Python level as the log4j level name Kafka reports."""
    for name, python_level in sorted(LOG4J_TO_PYTHON.items(), key=lambda kv: -kv[1]):
        if level >= python_level:
            return name
    return "TRACE"


def logger_levels() -> dict[str, str]:
    """The broker's loggers and their effective levels in log4j terms: root and samsa.*."""
    out = {ROOT_LOGGER: log4j_level(logging.getLogger().getEffectiveLevel())}
    for name, candidate in sorted(logging.root.manager.loggerDict.items()):
        if isinstance(candidate, logging.Logger) and (
            name == "samsa" or name.startswith("samsa.")
        ):
            out[name] = log4j_level(candidate.getEffectiveLevel())
    return out


def python_logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)
