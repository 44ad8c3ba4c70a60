"""Client quotas in a cluster: stored where Kafka's ZooKeeper mode kept them (/config/clients,
/config/users[/clients]), altered through one broker, described through another, kept across a
restart, and removed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, EntityData, EntryData, OpData
from kio.schema.describe_client_quotas.v1.request import ComponentData, DescribeClientQuotasRequest
from kio.static.primitive import f64, i8

from broker.testing.cluster import SamsaCluster
from tests.support.raw_client import RawClient

ENTITIES: list[list[tuple[str, str | None]]] = [[("user", "alice"), ("client-id", "app 1")], [("client-id", None)]]


def alter(port: int, value: float | None) -> list[int]:
    with RawClient(port) as c:
        r: Any = c.request(AlterClientQuotasRequest(entries=tuple(
            EntryData(entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity),
                      ops=(OpData(key="producer_byte_rate", value=f64(value or 0.0), remove=value is None),))
            for entity in ENTITIES
        ), validate_only=False))  # fmt: skip
    return [int(e.error_code) for e in r.entries]


def described(port: int) -> list[tuple[list[tuple[str, str | None]], list[tuple[str, float]]]]:
    with RawClient(port) as c:
        r: Any = c.request(DescribeClientQuotasRequest(
            components=(ComponentData(entity_type="client-id", match_type=i8(2), match=None),), strict=False))  # fmt: skip
    return sorted(
        (([(d.entity_type, d.entity_name) for d in e.entity], [(v.key, float(v.value)) for v in e.values])
         for e in r.entries), key=repr)  # fmt: skip


def test_client_quotas_in_zookeeper(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(2)
    port1, port2 = cluster.brokers[1].client_port, cluster.brokers[2].client_port
    assert alter(port1, 1024.0) == [0, 0]
    want = sorted([([("client-id", None)], [("producer_byte_rate", 1024.0)]),
                   ([("client-id", "app 1"), ("user", "alice")], [("producer_byte_rate", 1024.0)])], key=repr)  # fmt: skip
    cluster.wait_for(lambda: described(port2) == want, 10, "broker 2 sees the quotas")
    zk = KazooClient(f"127.0.0.1:{cluster.zookeeper.port}")
    zk.start(10)
    try:
        for path in ("/config/users/alice/clients/app%201", "/config/clients/<default>"):
            data, _ = zk.get(path)
            assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1024"}}, path
    finally:
        zk.stop()
        zk.close()
    cluster.restart(2)
    cluster.wait_for(lambda: described(port2) == want, 20, "broker 2 reads them back after a restart")
    assert alter(port2, None) == [0, 0]
    cluster.wait_for(lambda: described(port1) == [], 10, "broker 1 sees them removed")
