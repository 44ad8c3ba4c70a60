"""A stale controller cannot win a write; ZooKeeper cut off and healed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from broker.testing.cluster import PartitionView, SamsaCluster, ZooKeeperServer
from controller import zk_layout as L
from controller.model import BrokerRegistration, Endpoint, NewTopic
from controller.zk_async import TransactionFailed
from controller.zk_settings import ZkSettings
from controller.zookeeper import ControllerState, ZooKeeperController
from protocol.types import BrokerId, LeaderEpoch
from tests.cluster.conftest import broker_logs, create_topic


def _settings(port: int) -> ZkSettings:
    return ZkSettings(
        connect=f"127.0.0.1:{port}", session_timeout_ms=6000, connection_timeout_ms=10000,
        inter_broker_listener="PLAINTEXT", unclean_default=False, heartbeat_host="127.0.0.1",
        heartbeat_port=0, heartbeat_interval_ms=200, heartbeat_timeout_ms=1000, peer_overrides={},
        controlled_shutdown_timeout_s=5,
    )  # fmt: skip


def test_controller_that_lost_its_epoch_cannot_write(tmp_path: Path) -> None:
    """In-process against a real ZooKeeper: another controller takes over (epoch bump) while the
    old one still believes it is controller; the old one's next write fails its epoch check."""
    zk_server = ZooKeeperServer(tmp_path / "zk").start()
    try:

        async def run() -> None:
            old = ZooKeeperController(_settings(zk_server.port), BrokerRegistration(BrokerId(1), (Endpoint("PLAINTEXT", "127.0.0.1", 1),)))
            await old.start()
            try:
                assert old.state is ControllerState.CONTROLLER
                await old.create_topics([NewTopic("fenced", 1, 1)])
                reg = old.image.topics["fenced"].partitions[0]
                # broker 2 wins the next election the way _try_elect does it
                zk = KazooClient(f"127.0.0.1:{zk_server.port}")
                await asyncio.to_thread(zk.start, 10)
                try:
                    data, stat = zk.get(L.CONTROLLER_EPOCH)
                    tx = zk.transaction()
                    tx.check(L.CONTROLLER_EPOCH, stat.version)
                    tx.delete(L.CONTROLLER)
                    tx.create(L.CONTROLLER, L.encode_controller(2))
                    tx.set_data(L.CONTROLLER_EPOCH, str(int(data) + 1).encode(), version=stat.version)
                    assert not any(isinstance(r, Exception) for r in tx.commit())
                    # the old controller writes before it noticed: fenced by the epoch check
                    proposed = reg.__class__(reg.replicas, reg.isr, reg.leader, LeaderEpoch(reg.leader_epoch + 1), reg.partition_epoch)
                    with pytest.raises(TransactionFailed) as failed:
                        await old.write_state_as_controller("fenced", 0, proposed)
                    assert failed.value.index == 0  # the /controller_epoch check
                    state, _ = zk.get(L.state_path("fenced", 0))
                    assert L.decode_state(state, 0).leader_epoch == reg.leader_epoch
                    # and it resigns once the watches tell it
                    for _ in range(100):
                        if old.state is ControllerState.NOT_CONTROLLER:
                            break
                        await asyncio.sleep(0.05)
                    assert old.state is ControllerState.NOT_CONTROLLER
                    # a stale leader's ISR change (old partition epoch) is refused too
                    with pytest.raises(Exception) as stale:
                        await old.alter_partition("fenced", 0, reg.leader, reg.__class__(reg.replicas, reg.isr, reg.leader, reg.leader_epoch, reg.partition_epoch - 1))
                    assert "stale" in str(stale.value)
                finally:
                    zk.stop()
                    zk.close()
            finally:
                await old.stop()

        asyncio.run(run())
    finally:
        zk_server.stop()


def test_paused_controller_is_replaced_and_stays_fenced_after_resume(cluster: SamsaCluster) -> None:
    create_topic(cluster, "st", partitions=3, replication_factor=3)
    old = cluster.controller()
    others = [i for i in (1, 2, 3) if i != old]
    cluster.pause(old)
    try:
        new = cluster.wait_for(lambda: (c := cluster.metadata(others[0]).controller_id) in others and c, 15, "new controller")
        # past the 6 s session: the paused broker's registration goes, its partitions move
        zk = KazooClient(f"127.0.0.1:{cluster.zookeeper.port}")
        zk.start(10)
        try:
            cluster.wait_for(lambda: zk.exists(L.broker_path(old)) is None, 20, "old session expired")
        finally:
            zk.stop()
            zk.close()
        moved = cluster.metadata(new).topics["st"]
        assert all(r.leader not in (old, -1) for r in moved.values())
    finally:
        cluster.resume(old)
    # the old controller wakes up, finds its session gone, resigns, re-registers as a broker
    cluster.wait_for(lambda: sorted(cluster.metadata(new).brokers) == [1, 2, 3], 20, "old broker re-registered")
    time.sleep(1)
    assert cluster.metadata(old).controller_id == new
    log = cluster.process(old).read_log()
    assert "controller resigned" in log, log[-3000:]
    resumed = log.split("zookeeper session lost", 1)[-1]
    assert "partition state changed" not in resumed, broker_logs(cluster)
    # every state znode was last written under the new controller's epoch or later
    zk = KazooClient(f"127.0.0.1:{cluster.zookeeper.port}")
    zk.start(10)
    try:
        epoch = int(zk.get(L.CONTROLLER_EPOCH)[0])
        for p in range(3):
            st = L.decode_state(zk.get(L.state_path("st", p))[0], 0)
            assert st.controller_epoch == epoch, (p, st, epoch)
    finally:
        zk.stop()
        zk.close()


def leadership(topic: dict[int, PartitionView]) -> dict[int, tuple[int, int, list[int]]]:
    """Each partition's leader, leader epoch and replicas: what a short cut must not move."""
    return {p: (r.leader, r.leader_epoch, r.replicas) for p, r in topic.items()}


def test_zookeeper_cut_off_then_healed(cluster: SamsaCluster) -> None:
    create_topic(cluster, "zk", partitions=3, replication_factor=3)
    controller = cluster.controller()
    victim = next(i for i in (1, 2, 3) if i != controller)
    before = leadership(cluster.metadata(controller).topics["zk"])
    # a short cut (inside the 6 s session): no leadership moves, the broker keeps serving (its
    # ISR memberships may lapse meanwhile: its heartbeats say it lost ZooKeeper)
    cluster.cut_zookeeper(victim)
    time.sleep(2.5)
    assert leadership(cluster.metadata(victim).topics["zk"]) == before
    cluster.heal_zookeeper(victim)
    cluster.wait_for(lambda: "zookeeper connection restored" in cluster.process(victim).read_log(), 15, "reconnect")
    assert leadership(cluster.metadata(controller).topics["zk"]) == before
    cluster.wait_for(
        lambda: all(sorted(r.isr) == sorted(r.replicas) for r in cluster.metadata(controller).topics["zk"].values()),
        15, "full ISR again",
    )
    # a long cut: the session expires, leadership moves away, the broker still answers
    cluster.cut_zookeeper(victim)
    cluster.wait_for(lambda: victim not in cluster.metadata(controller).brokers, 20, "session expired")
    moved = cluster.wait_for(
        lambda: (t := cluster.metadata(controller).topics["zk"]) and all(r.leader != victim for r in t.values()) and t,
        10, "leadership moved",
    )
    assert cluster.metadata(victim).topics["zk"]  # still serving its last image
    cluster.heal_zookeeper(victim)
    # it rejoins: new session, registration, watches; it sees the new leaders
    cluster.wait_for(lambda: victim in cluster.metadata(controller).brokers, 20, "re-registered")
    cluster.wait_for(
        lambda: all(cluster.metadata(victim).topics["zk"][p].leader == r.leader for p, r in moved.items()), 15, "caught up"
    )
    assert "zookeeper session renewed" in cluster.process(victim).read_log()
