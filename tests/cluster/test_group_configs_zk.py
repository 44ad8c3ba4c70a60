"""Group configs (KIP-848 GROUP config resources) in a cluster: stored in ZooKeeper at
/config/groups/<group>, altered through any broker, seen by every broker (DescribeConfigs), removed
with the last override, and read back by a restarted broker."""

from __future__ import annotations

from kazoo.client import KazooClient

from broker.testing.cluster import SamsaCluster
from tests.support import fidelity
from tests.support.raw_client import RawClient

GROUP, DYNAMIC_GROUP_CONFIG, DEFAULT_CONFIG = 32, 8, 5
HEARTBEAT = ["consumer.heartbeat.interval.ms"]


def _znode(cluster: SamsaCluster, path: str) -> bytes | None:
    zk = KazooClient(f"127.0.0.1:{cluster.zookeeper.port}")
    zk.start(10)
    try:
        return zk.get(path)[0] if zk.exists(path) else None
    finally:
        zk.stop()
        zk.close()


def test_group_configs_through_zookeeper(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    cluster: SamsaCluster = cluster_factory(2)
    port = {i: cluster.brokers[i].client_port for i in (1, 2)}
    d = fidelity.describe_configs
    with RawClient(port[1]) as one, RawClient(port[2]) as two:
        ops = [("consumer.heartbeat.interval.ms", fidelity.SET, "6000")]
        assert fidelity.incremental_alter_configs(one, GROUP, "orders/eu", ops) == (0, None)
        cluster.wait_for(lambda: d(two, GROUP, "orders/eu", HEARTBEAT) == {
            "consumer.heartbeat.interval.ms": ("6000", DYNAMIC_GROUP_CONFIG, False)}, 10, "the override on broker 2")
        assert _znode(cluster, "/config/groups/orders%2Feu") == \
            b'{"version":1,"config":{"consumer.heartbeat.interval.ms":"6000"}}'
        assert d(two, GROUP, "orders", HEARTBEAT) == {"consumer.heartbeat.interval.ms": ("5000", DEFAULT_CONFIG, False)}
        ops = [("share.auto.offset.reset", fidelity.SET, "earliest")]
        assert fidelity.incremental_alter_configs(two, GROUP, "shares", ops) == (0, None)
    cluster.restart(2)
    with RawClient(port[1]) as one, RawClient(port[2]) as two:
        cluster.wait_for(lambda: d(two, GROUP, "orders/eu", HEARTBEAT) == {
            "consumer.heartbeat.interval.ms": ("6000", DYNAMIC_GROUP_CONFIG, False)}, 20, "the override after a restart")
        ops = [("consumer.heartbeat.interval.ms", fidelity.DELETE, None)]
        assert fidelity.incremental_alter_configs(two, GROUP, "orders/eu", ops) == (0, None)
        cluster.wait_for(lambda: d(one, GROUP, "orders/eu", HEARTBEAT) == {
            "consumer.heartbeat.interval.ms": ("5000", DEFAULT_CONFIG, False)}, 10, "the default again on broker 1")
        assert _znode(cluster, "/config/groups/orders%2Feu") is None
        assert d(one, GROUP, "shares", ["share.auto.offset.reset"]) == {
            "share.auto.offset.reset": ("earliest", DYNAMIC_GROUP_CONFIG, False)}
