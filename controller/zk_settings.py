"""What the ZooKeeper controller is configured with (the broker builds it from its config:
broker/server.py `zk_settings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.types import BrokerId


@dataclass(frozen=True, slots=True)
class ZkSettings:
    connect: str
    session_timeout_ms: int
    connection_timeout_ms: int
    inter_broker_listener: str
    unclean_default: bool
    heartbeat_host: str
    """where the heartbeat socket binds (the first listener's host)"""
    heartbeat_port: int
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int
    peer_overrides: Mapping[BrokerId, tuple[str, int, int]]
    controlled_shutdown_timeout_s: float
    auto_leader_rebalance: bool = True
    leader_imbalance_check_interval_s: float = 300.0
    leader_imbalance_percentage: int = 10
    preferred_leader_settle_s: float = 10.0
    """a broker registered more recently is not made preferred leader (clients' reconnect backoff)"""
    heartbeat_advertised_host: str = ""
    """what peers send heartbeats to: the inter-broker listener's advertised host"""
    cluster_id: str | None = None
    """cluster.id: the id /cluster/id is created with, and must hold if it exists"""
    static_min_insync_replicas: int = 1
    """min.insync.replicas from the broker's properties: the cluster default a controller writes
    when there is none"""
