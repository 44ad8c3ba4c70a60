"""Group configs (KIP-848/KIP-932 GROUP config resources, ConfigResource type 32) against Samsa and
Apache Kafka 4.3.1: DescribeConfigs v4 of a group (every config with its value, source, synonyms
and type), IncrementalAlterConfigs v1 and AlterConfigs v2 with every error Kafka answers (unknown
name, bad value, out of the broker's bounds, APPEND to a non-LIST, the empty name), validate_only,
ListConfigResources v1 (KIP-1142), and kafka-configs.sh --entity-type groups (describe before and
after an alter, delete, an invalid value; every config with its synonyms is compared by the raw
scenario, which costs no JVM start)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from kio.schema.alter_configs.v2.request import AlterableConfig as LegacyConfig
from kio.schema.alter_configs.v2.request import AlterConfigsRequest
from kio.schema.alter_configs.v2.request import AlterConfigsResource as LegacyResource
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest
from kio.static.primitive import i8

from compat.jvm import run_tool
from tests.support import fidelity
from tests.support.raw_client import RawClient

GROUP = 32
SET, DELETE, APPEND = 0, 1, 2


def _describe(client: RawClient, group: str, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
    resource = DescribeConfigsResource(resource_type=i8(GROUP), resource_name=group, configuration_keys=keys)
    r = client.request(DescribeConfigsRequest(resources=(resource,), include_synonyms=True,
                                              include_documentation=False)).results[0]  # fmt: skip
    return {"error": int(r.error_code), "message": r.error_message, "configs": sorted(
        [c.name, c.value, c.read_only, int(c.config_source), c.is_sensitive, int(c.config_type),
         [[s.name, s.value, int(s.source)] for s in c.synonyms]] for c in r.configs)}  # fmt: skip


def _alter(client: RawClient, group: str, *ops: tuple[str, int, str | None], validate_only: bool = False) -> list[Any]:
    resource = AlterConfigsResource(resource_type=i8(GROUP), resource_name=group, configs=tuple(
        AlterableConfig(name=n, config_operation=i8(op), value=v) for n, op, v in ops))  # fmt: skip
    r = client.request(IncrementalAlterConfigsRequest(resources=(resource,), validate_only=validate_only)).responses[0]
    return [int(r.error_code), r.error_message]


def _replace(client: RawClient, group: str, configs: dict[str, str]) -> list[Any]:
    resource = LegacyResource(resource_type=i8(GROUP), resource_name=group, configs=tuple(
        LegacyConfig(name=n, value=v) for n, v in configs.items()))  # fmt: skip
    r = client.request(AlterConfigsRequest(resources=(resource,), validate_only=False)).responses[0]
    return [int(r.error_code), r.error_message]


def _list(client: RawClient, types: tuple[int, ...]) -> dict[str, Any]:
    """ListConfigResources v1: the error and this scenario's resources (the targets hold others)."""
    r = client.request(ListConfigResourcesRequest(resource_types=tuple(i8(t) for t in types)))
    return {"error": int(r.error_code), "resources": sorted(
        [c.resource_name, int(c.resource_type)] for c in r.config_resources
        if c.resource_name.startswith("gcfg-") or c.resource_type in (4, 8))}  # fmt: skip


@pytest.mark.compat(client="raw requests", scenario="group configs: describe, incremental and legacy alter, errors")
def test_group_configs_over_the_wire(kafka_target: Any, differential: Any) -> None:
    def run(target: Any) -> list[dict[str, Any]]:
        group = "gcfg-wire"
        obs: list[dict[str, Any]] = []
        with RawClient(int(target.bootstrap_servers.rsplit(":", 1)[1])) as client:
            fidelity.create_topic(client, "gcfg-topic")
            obs.append({"step": "describe defaults", **_describe(client, group)})
            obs.append({"step": "describe the empty name", **_describe(client, "")})
            for step, ops in [
                ("set", [("consumer.heartbeat.interval.ms", SET, "6000"), ("share.auto.offset.reset", SET, "earliest"),
                         ("share.record.lock.duration.ms", SET, "20000")]),
                ("unknown name", [("no.such.config", SET, "1")]),
                ("not a number", [("consumer.session.timeout.ms", SET, "soon")]),
                ("below the type's range", [("consumer.heartbeat.interval.ms", SET, "0")]),
                ("below the broker's minimum", [("consumer.session.timeout.ms", SET, "44999")]),
                ("above the broker's maximum", [("consumer.heartbeat.interval.ms", SET, "15001")]),
                ("assignment interval above the maximum", [("consumer.assignment.interval.ms", SET, "15001")]),
                ("share delivery count above the maximum", [("share.delivery.count.limit", SET, "11")]),
                ("bad offset reset", [("share.auto.offset.reset", SET, "by_duration:yesterday")]),
                ("bad isolation level", [("share.isolation.level", SET, "serializable")]),
                ("append to an INT", [("consumer.heartbeat.interval.ms", APPEND, "1")]),
                ("delete one", [("share.record.lock.duration.ms", DELETE, None)]),
                ("delete an unset one", [("streams.num.standby.replicas", DELETE, None)]),
            ]:  # fmt: skip
                obs.append({"step": f"alter: {step}", "answer": _alter(client, group, *ops)})
            obs.append({"step": "alter the empty name",
                        "answer": _alter(client, "", ("consumer.heartbeat.interval.ms", SET, "6000"))})
            obs.append({"step": "validate only", "answer": _alter(
                client, group, ("consumer.heartbeat.interval.ms", SET, "7000"), validate_only=True)})
            obs.append({"step": "describe after", **_describe(client, group)})
            obs.append({"step": "describe some keys", **_describe(client, group, (
                "consumer.heartbeat.interval.ms", "share.isolation.level", "nope"))})
            obs.append({"step": "legacy replace", "answer": _replace(client, group, {"consumer.session.timeout.ms": "50000"})})
            obs.append({"step": "legacy unknown name", "answer": _replace(client, group, {"nope": "1"})})
            obs.append({"step": "legacy empty name", "answer": _replace(client, "", {"consumer.session.timeout.ms": "50000"})})
            obs.append({"step": "describe after replace", **_describe(client, group)})
            for types in ((GROUP,), (GROUP, 2), (), (1,)):
                obs.append({"step": f"list config resources {types}", **_list(client, types)})
        return obs

    obs = differential("group-configs-wire", run)
    assert obs[0]["error"] == 0 and len(obs[0]["configs"]) == 17
    assert obs[2]["answer"] == [0, None]


def _norm(text: str) -> list[str]:
    return [re.sub(r"\s+", " ", re.sub(r"127\.0\.0\.1:\d+", "<broker>", line)).strip()
            for line in text.splitlines() if line.strip()]


@pytest.mark.compat(client="kafka-configs", scenario="groups: describe, alter, delete config")
def test_kafka_configs_groups(kafka_target: Any, differential: Any) -> None:
    def run(target: Any) -> list[dict[str, Any]]:
        ent = ["--bootstrap-server", target.bootstrap_servers, "--entity-type", "groups", "--entity-name", "gcfg-cli"]
        obs: list[dict[str, Any]] = []
        # a group without members or configs: the tool asks ListGroups and ListConfigResources
        r = run_tool("kafka-configs", *ent, "--describe")
        obs.append({"step": "describe", "out": _norm(r.stdout)})
        r = run_tool("kafka-configs", *ent, "--alter", "--add-config",
                     "consumer.heartbeat.interval.ms=6000,share.isolation.level=read_committed")
        obs.append({"step": "alter", "out": _norm(r.stdout)})
        r = run_tool("kafka-configs", *ent, "--describe")
        obs.append({"step": "describe after", "out": _norm(r.stdout)})
        r = run_tool("kafka-configs", *ent, "--alter", "--delete-config", "share.isolation.level")
        obs.append({"step": "delete", "out": _norm(r.stdout)})
        r = run_tool("kafka-configs", *ent, "--alter", "--add-config", "consumer.session.timeout.ms=1", check=False)
        obs.append({"step": "alter invalid", "rc": r.returncode,
                    "err": [line for line in _norm(r.stderr + r.stdout) if "consumer.session.timeout.ms" in line]})
        return obs

    obs = differential("cli-kafka-configs-groups", run)
    assert any("consumer.heartbeat.interval.ms=6000" in line for line in obs[2]["out"])
    assert obs[-1]["rc"] != 0
