"""The ZooKeeper controller: election, re-election, replica placement, whole-cluster Metadata."""

from __future__ import annotations

import time
from collections.abc import Callable

from kazoo.client import KazooClient

from broker.testing.cluster import SamsaCluster
from tests.cluster.conftest import create_topic


def zk_get(cluster: SamsaCluster, path: str) -> bytes:
    zk = KazooClient(f"127.0.0.1:{cluster.zookeeper.port}")
    zk.start(10)
    try:
        return zk.get(path)[0]
    finally:
        zk.stop()
        zk.close()


def test_topics_spread_over_brokers_and_racks_and_metadata_is_whole(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(3, racks={1: "rack-a", 2: "rack-b", 3: "rack-a"})
    create_topic(cluster, "spread", partitions=6, replication_factor=3)
    create_topic(cluster, "racked", partitions=4, replication_factor=2)
    # a loaded machine may stall a broker past the failure detector's 0.5 s, and a suspicion
    # shrinks ISRs until it is withdrawn: wait for full ISRs before comparing the views
    cluster.wait_for(
        lambda: all(len(p.isr) == len(p.replicas) for p in cluster.metadata().topics["spread"].values()),
        15, "full ISRs",
    )
    views = [cluster.metadata(i) for i in (1, 2, 3)]
    for v in views:  # every broker answers with the whole cluster, the same way
        assert sorted(v.brokers) == [1, 2, 3]
        assert {b: r for b, (_h, _p, r) in v.brokers.items()} == {1: "rack-a", 2: "rack-b", 3: "rack-a"}
        assert v.topics == views[0].topics and v.controller_id == views[0].controller_id
    spread = views[0].topics["spread"]
    assert len(spread) == 6
    assert {p.leader for p in spread.values()} == {1, 2, 3}  # leaders spread
    for p in spread.values():
        assert sorted(p.replicas) == [1, 2, 3] and sorted(p.isr) == [1, 2, 3] and p.leader_epoch == 0
    for p in views[0].topics["racked"].values():  # each partition spans both racks
        racks = {views[0].brokers[b][2] for b in p.replicas}
        assert racks == {"rack-a", "rack-b"}, p


def test_controller_elected_and_reelected_when_it_dies(cluster: SamsaCluster) -> None:
    first = cluster.controller()
    assert first in (1, 2, 3)
    assert all(cluster.metadata(i).controller_id == first for i in (1, 2, 3))
    epoch_before = int(zk_get(cluster, "/controller_epoch"))
    killed_at = time.monotonic()
    cluster.kill(first)
    others = [i for i in (1, 2, 3) if i != first]
    new = cluster.wait_for(
        lambda: (c := cluster.metadata(others[0]).controller_id) not in (first, -1) and c, 15, "a new controller"
    )
    elapsed = time.monotonic() - killed_at
    print(f"controller re-elected: {first} -> {new} in {elapsed:.2f}s (session timeout 6s)")
    assert new in others
    assert int(zk_get(cluster, "/controller_epoch")) > epoch_before
    # the killed controller comes back as an ordinary broker
    cluster.restart(first)
    cluster.wait_for(lambda: sorted(cluster.metadata(first).brokers) == [1, 2, 3], 20, "rejoined")
    assert cluster.metadata(first).controller_id == new
