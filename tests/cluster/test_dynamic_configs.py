"""Dynamic broker configs in a cluster (issue 13, A6): stored in ZooKeeper as Kafka stored them
(/config/brokers/<default>, /config/brokers/<id>), altered through any broker and applied by every
broker without a restart."""

from __future__ import annotations

import json

from kazoo.client import KazooClient

from broker.testing.cluster import SamsaCluster
from tests.support import fidelity
from tests.support.raw_client import RawClient

DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3


def _znode(cluster: SamsaCluster, path: str) -> dict[str, object]:
    zk = KazooClient(f"127.0.0.1:{cluster.zookeeper.port}")
    zk.start(10)
    try:
        data, _ = zk.get(path)
        return dict(json.loads(data))
    finally:
        zk.stop()
        zk.close()


def test_dynamic_broker_configs_through_zookeeper(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster: SamsaCluster = cluster_factory(2)
    port = {i: cluster.brokers[i].client_port for i in (1, 2)}
    b, d = fidelity.BROKER, fidelity.describe_configs
    message_max = ["message.max.bytes"]
    with RawClient(port[1]) as one, RawClient(port[2]) as two:
        # the controller wrote the cluster-wide min.insync.replicas, as Kafka 4.x's does
        cluster.wait_for(lambda: d(two, b, "") == {"min.insync.replicas": ("1", DYNAMIC_DEFAULT_BROKER_CONFIG, False)},
                         10, "cluster-level min.insync.replicas")
        # a default set through broker 1 reaches broker 2
        assert fidelity.incremental_alter_configs(one, b, "", [("message.max.bytes", fidelity.SET, "2000")]) == (0, None)
        cluster.wait_for(
            lambda: d(two, b, "2", message_max) == {"message.max.bytes": ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG, False)},
            10, "the default on broker 2",
        )
        assert _znode(cluster, "/config/brokers/<default>") == {
            "version": 1, "config": {"min.insync.replicas": "1", "message.max.bytes": "2000"},
        }
        # broker 2's own value: broker 2 only
        assert fidelity.incremental_alter_configs(two, b, "2", [("message.max.bytes", fidelity.SET, "3000")]) == (0, None)
        assert d(two, b, "2", message_max) == {"message.max.bytes": ("3000", DYNAMIC_BROKER_CONFIG, False)}
        assert d(one, b, "1", message_max) == {"message.max.bytes": ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG, False)}
        assert _znode(cluster, "/config/brokers/2") == {"version": 1, "config": {"message.max.bytes": "3000"}}
        # another broker's resource is refused, as Kafka refuses it
        code, message = fidelity.incremental_alter_configs(one, b, "2", [("message.max.bytes", fidelity.SET, "1")])
        assert (code, message) == (42, "Unexpected broker id, expected 1, but received 2")
    cluster.restart(2)
    with RawClient(port[2]) as two:
        cluster.wait_for(
            lambda: d(two, b, "2", message_max) == {"message.max.bytes": ("3000", DYNAMIC_BROKER_CONFIG, False)},
            20, "broker 2's value after its restart",
        )
