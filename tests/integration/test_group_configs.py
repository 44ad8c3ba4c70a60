"""Group configs (KIP-848 GROUP config resources) on a broker process: DescribeConfigs,
IncrementalAlterConfigs and AlterConfigs through kafka-python's admin client and the exact wire
answers (ListConfigResources too), the overrides kept in the metadata file across a restart, and their effect: a
consumer-protocol member is told the group's own heartbeat interval."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest
from kio.static.primitive import i8

from broker.config.group import GROUP_CONFIGS
from broker.testing import SamsaProcess
from tests.support import fidelity
from tests.support.consumer_protocol import heartbeat, join
from tests.support.raw_client import RawClient

GROUP = ConfigResourceType.GROUP
INVALID_CONFIG, INVALID_REQUEST = 40, 42


def _describe(admin: KafkaAdminClient, group: str) -> dict[str, Any]:
    result = admin.describe_configs([ConfigResource(GROUP, group)], include_synonyms=True, config_filter="all")
    return dict(result["group"][group])


def _alter(client: RawClient, group: str, *ops: tuple[str, int, str | None]) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on one group: (error code, message)."""
    return fidelity.incremental_alter_configs(client, int(GROUP), group, ops)


def _list(client: RawClient, *types: int) -> tuple[int, list[tuple[str, int]]]:
    answer = client.request(ListConfigResourcesRequest(resource_types=tuple(i8(t) for t in types)))
    return answer.error_code.value, [(r.resource_name, int(r.resource_type)) for r in answer.config_resources]


@pytest.mark.timeout(90)
def test_describe_alter_errors_and_restart(tmp_path: Path) -> None:
    broker = SamsaProcess(tmp_path / "data", {"group.consumer.max.heartbeat.interval.ms": "60000"}).start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="group-configs")
    try:
        configs = _describe(admin, "g1")
        assert set(configs) == set(GROUP_CONFIGS)
        hb = configs["consumer.heartbeat.interval.ms"]
        assert (hb["value"], hb["config_source"], hb["read_only"]) == ("5000", "DEFAULT_CONFIG", False)
        assert [(s["name"], s["source"]) for s in hb["synonyms"]] == [("group.consumer.heartbeat.interval.ms",
                                                                       "DEFAULT_CONFIG")]
        reset = configs["share.auto.offset.reset"]
        assert [(s["name"], s["value"], s["source"]) for s in reset["synonyms"]] == [
            ("share.auto.offset.reset", "latest", "DEFAULT_CONFIG")]

        # kafka-python sends IncrementalAlterConfigs; a value within the broker's raised bound is taken
        admin.alter_configs([ConfigResource(GROUP, "g1", {"consumer.heartbeat.interval.ms": (AlterConfigOp.SET, "16000"),
                                                           "consumer.session.timeout.ms": (AlterConfigOp.SET, "50000")})],
                            raise_on_unknown=False)  # fmt: skip
        hb = _describe(admin, "g1")["consumer.heartbeat.interval.ms"]
        assert (hb["value"], hb["config_source"]) == ("16000", "DYNAMIC_GROUP_CONFIG")
        assert [s["source"] for s in hb["synonyms"]] == ["DYNAMIC_GROUP_CONFIG", "DEFAULT_CONFIG"]

        with RawClient(broker.port, timeout=30) as client:
            SET, DELETE, APPEND = 0, 1, 2
            assert _alter(client, "g1", ("no.such.config", SET, "1")) == (
                INVALID_CONFIG, "Unknown group config name: no.such.config")
            assert _alter(client, "g1", ("consumer.heartbeat.interval.ms", SET, "abc")) == (
                INVALID_CONFIG,
                "Invalid value abc for configuration consumer.heartbeat.interval.ms: Not a number of type INT")
            assert _alter(client, "g1", ("consumer.heartbeat.interval.ms", SET, "1000")) == (
                INVALID_CONFIG,
                "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms")
            assert _alter(client, "g1", ("consumer.session.timeout.ms", SET, "45000"),
                          ("consumer.heartbeat.interval.ms", SET, "50000")) == (
                INVALID_CONFIG, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
            assert _alter(client, "g1", ("consumer.heartbeat.interval.ms", APPEND, "1")) == (
                INVALID_CONFIG, "Can't APPEND to key consumer.heartbeat.interval.ms because its type is not LIST.")
            assert _alter(client, "", ("consumer.heartbeat.interval.ms", SET, "6000")) == (
                INVALID_REQUEST, "Default group resources are not allowed.")
            assert _alter(client, "g1", ("consumer.session.timeout.ms", DELETE, None)) == (0, None)
            # ListConfigResources v1 (KIP-1142) names the groups with configs, as kafka-configs asks
            assert _list(client, GROUP) == (0, [("g1", GROUP)])
            assert _list(client) == (0, [("g1", GROUP), ("0", 8), ("0", 4)])  # BROKER_LOGGER, BROKER
            assert _list(client, 1) == (35, [])  # UNSUPPORTED_VERSION: ANY is no config resource type

        broker.stop()
        broker.start()
        admin.close()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="group-configs")
        configs = _describe(admin, "g1")
        assert configs["consumer.heartbeat.interval.ms"]["value"] == "16000"
        assert configs["consumer.session.timeout.ms"]["config_source"] == "DEFAULT_CONFIG"
        assert _describe(admin, "g2")["consumer.heartbeat.interval.ms"]["value"] == "5000"
    finally:
        admin.close()
        broker.close()


@pytest.mark.timeout(60)
def test_consumer_protocol_member_gets_the_groups_heartbeat_interval(tmp_path: Path) -> None:
    broker = SamsaProcess(tmp_path / "data", {"offsets.topic.num.partitions": "1"}).start()
    try:
        with RawClient(broker.port, timeout=30) as client:
            fidelity.create_topic(client, "gcfg", partitions=1)
            for group in ("gcfg-group", "gcfg-other"):
                fidelity.await_coordinator(client, group)
            assert _alter(client, "gcfg-group", ("consumer.heartbeat.interval.ms", 0, "7000")) == (0, None)
            member = join(client, "member-a-0123456789abcd", topics=("gcfg",), group="gcfg-group")
            assert (member.error_code, int(member.heartbeat_interval.total_seconds() * 1000)) == (0, 7000)
            other = join(client, "member-b-0123456789abcd", topics=("gcfg",), group="gcfg-other")
            assert int(other.heartbeat_interval.total_seconds() * 1000) == 5000
            # a change applies from the next heartbeat on
            assert _alter(client, "gcfg-group", ("consumer.heartbeat.interval.ms", 1, None)) == (0, None)
            deadline = time.monotonic() + 10
            while True:
                again = heartbeat(client, "member-a-0123456789abcd", int(member.member_epoch), group="gcfg-group")
                if int(again.heartbeat_interval.total_seconds() * 1000) == 5000 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert int(again.heartbeat_interval.total_seconds() * 1000) == 5000
    finally:
        broker.close()


@pytest.mark.timeout(60)
def test_without_acls_on_the_group(tmp_path: Path) -> None:
    """With an authorizer and no ACL, ANONYMOUS may neither describe nor alter a group's configs
    (GROUP_AUTHORIZATION_FAILED, Kafka's ConfigHelper and ConfigAdminManager) nor list config
    resources (CLUSTER_AUTHORIZATION_FAILED, KafkaApis.handleListConfigResources)."""
    broker = SamsaProcess(tmp_path / "data", {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    broker.start()
    try:
        with RawClient(broker.port, timeout=30) as client:
            resource = DescribeConfigsResource(resource_type=i8(int(GROUP)), resource_name="g1", configuration_keys=None)
            described = client.request(DescribeConfigsRequest(resources=(resource,), include_synonyms=False,
                                                              include_documentation=False)).results[0]  # fmt: skip
            assert described.error_code == 30  # GROUP_AUTHORIZATION_FAILED
            assert _alter(client, "g1", ("consumer.heartbeat.interval.ms", 0, "6000"))[0] == 30
            assert _list(client, GROUP) == (31, [])  # CLUSTER_AUTHORIZATION_FAILED
    finally:
        broker.close()
