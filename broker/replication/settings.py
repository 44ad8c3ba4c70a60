"""What the replication machinery is configured with, taken from the broker config once."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from broker.config import BrokerConfig
from broker.security.client import ClientSecurity
from protocol.types import BrokerId


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """The replica fetchers' settings (replica.fetch.*, num.replica.fetchers)."""

    broker_id: BrokerId
    listener_name: str
    max_bytes: int = 1_048_576
    min_bytes: int = 1
    max_wait_ms: int = 500
    backoff_ms: int = 1000
    response_max_bytes: int = 10_485_760
    socket_timeout_ms: int = 30_000
    num_fetchers: int = 1
    security: ClientSecurity | None = None
    """TLS and SASL of the inter-broker listener (None: PLAINTEXT)"""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> FetcherSettings:
        return cls(
            broker_id=BrokerId(config.broker_id),
            listener_name=config.inter_broker_listener_name,
            max_bytes=config.replica_fetch_max_bytes,
            min_bytes=config.replica_fetch_min_bytes,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            backoff_ms=config.replica_fetch_backoff_ms,
            response_max_bytes=config.replica_fetch_response_max_bytes,
            socket_timeout_ms=config.replica_socket_timeout_ms,
            num_fetchers=max(1, config.num_replica_fetchers),
            security=ClientSecurity.from_config(config),
        )


def _nobody() -> AbstractSet[BrokerId]:
    return frozenset()


@dataclass(frozen=True, slots=True)
class IsrSettings:
    """The leader's ISR checks: replica.lag.time.max.ms, and in a cluster the failure detector's
    suspicions (samsa.heartbeat.timeout.ms, checked again every samsa.heartbeat.interval.ms)."""

    replica_lag_time_max_ms: int = 30_000
    suspected: Callable[[], AbstractSet[BrokerId]] = field(default=_nobody)
    """The peers that cannot follow this broker now, by its own evidence (none on a single
    node; controller/zk_health.py `suspected_peers`)."""
    suspicion_timeout_ms: int = 1000
    suspicion_recheck_ms: int = 200

    @classmethod
    def from_config(
        cls, config: BrokerConfig, suspected: Callable[[], AbstractSet[BrokerId]] = _nobody
    ) -> IsrSettings:
        return cls(
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            suspected=suspected,
            suspicion_timeout_ms=config.samsa_heartbeat_timeout_ms,
            suspicion_recheck_ms=config.samsa_heartbeat_interval_ms,
        )
