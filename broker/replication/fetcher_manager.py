"""The replica fetcher manager: which fetcher copies which followed partition.

`ReplicaFetcherManager.update` (called from every metadata image, no awaits) assigns each
partition this broker follows to the `ReplicaFetcher` (broker/replication/fetcher.py) of its
leader and shard, num.replica.fetchers shards per leader, and re-adds it from scratch whenever its
leader or leader epoch changes, or the broker it fetches from (its chain predecessor or its
leader: broker/replication/chain.py `fetch_source`); fetchers left without partitions stop. A
fetcher is keyed by the broker it fetches from.

The fetcher module (with the Fetch and OffsetForLeaderEpoch schemas it sends) is imported with the
first followed partition: a single broker never follows, and that import is a tenth of its start.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.metrics.stats import BrokerTopicStats
from broker.replication.chain import ChainHealth, fetch_source
from broker.replication.partition import Partition, PartitionRole
from broker.replication.settings import FetcherSettings
from broker.replication.throttle import ReplicationQuota
from controller.model import ClusterImage, Endpoint
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId, LeaderEpoch

if TYPE_CHECKING:
    from broker.replication.fetcher import ReplicaFetcher

log = logging.getLogger("samsa.fetcher")


def shard_of(tp: TopicPartition, shards: int) -> int:
    return (zlib.crc32(tp.topic.encode()) + tp.partition) % shards


@dataclass(slots=True)
class _Assignment:
    key: tuple[BrokerId, int]
    """(the broker fetched from, shard)"""
    leader_id: BrokerId
    leader_epoch: LeaderEpoch


@dataclass(slots=True)
class ReplicaFetcherManager:
    """Owns the fetchers; `update` follows the replica manager's partitions (no awaits).
    `partition(tp)` is the replica manager's partition of `tp`, if it hosts one."""

    settings: FetcherSettings
    partition: Callable[[TopicPartition], Partition | None]
    image: ClusterImage | None = None
    fetchers: dict[tuple[BrokerId, int], ReplicaFetcher] = field(default_factory=dict)
    _assigned: dict[TopicPartition, _Assignment] = field(default_factory=dict)
    closed: bool = False
    stats: BrokerTopicStats = field(default_factory=BrokerTopicStats)
    """The broker's BrokerTopicMetrics: the fetchers count ReplicationBytesIn."""
    quota: ReplicationQuota = field(default_factory=ReplicationQuota)
    """The follower's replication throttle (follower.replication.throttled.rate)."""
    on_append: Callable[[TopicPartition], object] = lambda tp: None
    """Called after the fetchers append to a partition (a chain successor's fetch may wait on it)."""
    chain_health: ChainHealth = field(default_factory=ChainHealth)
    """Chain predecessors found broken (broker/replication/chain.py): their successors fetch
    from the leader meanwhile."""
    _partitions: Mapping[TopicPartition, Partition] = field(default_factory=dict)
    _replan: asyncio.TimerHandle | None = None

    def update(
        self, image: ClusterImage, partitions: Mapping[TopicPartition, Partition]
    ) -> None:
        if self.closed:  # shut down: no fetcher starts again
            return
        self.image = image
        self._partitions = partitions
        broken = self.chain_health.broken()
        local = self.settings.broker_id
        desired: dict[TopicPartition, tuple[BrokerId, LeaderEpoch, BrokerId]] = {
            tp: (p.leader_id, p.leader_epoch, fetch_source(
                local, p.replicas, p.leader_id, p.isr, enabled=p.log_config.replication_pipeline_enable, broken=broken))
            for tp, p in partitions.items()
            if p.role == PartitionRole.FOLLOWER
            and p.leader_id >= 0
            and p.leader_id != local
        }  # fmt: skip
        for tp, a in list(self._assigned.items()):
            if desired.get(tp) != (a.leader_id, a.leader_epoch, a.key[0]):
                fetcher = self.fetchers.get(a.key)
                if fetcher is not None:
                    fetcher.remove(tp)
                del self._assigned[tp]
        for tp, (leader, epoch, source) in desired.items():
            if tp in self._assigned:
                continue
            key = (source, shard_of(tp, self.settings.num_fetchers))
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                from broker.replication.fetcher import (
                    ReplicaFetcher,  # with the first follower
                )

                fetcher = self.fetchers[key] = ReplicaFetcher(
                    self.settings, source, key[1], self.partition, self.endpoint, stats=self.stats,
                    quota=self.quota, on_append=self.on_append, source_failed=self.source_failed,
                )  # fmt: skip
                fetcher.start()
            fetcher.add(tp, leader, epoch)
            self._assigned[tp] = _Assignment(key, leader, epoch)
            log.info(
                "follower assigned topic=%s partition=%d leader=%d leader_epoch=%d fetcher=%d/%d",
                tp.topic, tp.partition, leader, epoch, source, key[1],
            )  # fmt: skip
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                fetcher.stop()
                del self.fetchers[key]

    def source_failed(self, tp: TopicPartition, source: BrokerId, reason: str) -> None:
        """A chain predecessor failed `tp`'s fetcher: it is broken for a while, and every partition
        it served fetches from its leader at once (re-planned on the next loop turn, outside the
        fetcher's round); the plan is made again when the while ends, to go back into the chain."""
        if self.closed:
            return
        log.info(
            "chain predecessor failed topic=%s partition=%d source=%d reason=%s retry_ms=%d",
            tp.topic, tp.partition, source, reason, self.chain_health.retry_ms,
        )  # fmt: skip
        self.chain_health.failed(source)
        loop = asyncio.get_running_loop()
        loop.call_soon(self._update_again)
        if self._replan is not None:
            self._replan.cancel()
        self._replan = loop.call_later(self.chain_health.retry_ms / 1000 + 0.01, self._update_again)

    def _update_again(self) -> None:
        if self.image is not None:
            self.update(self.image, self._partitions)

    def endpoint(self, broker_id: BrokerId) -> Endpoint | None:
        """Where a leader's inter-broker listener is, from the latest image."""
        broker = self.image.brokers.get(broker_id) if self.image is not None else None
        return None if broker is None else broker.endpoint(self.settings.listener_name)

    async def shutdown(self) -> None:
        self.closed = True
        if self._replan is not None:
            self._replan.cancel()
        tasks = [t for f in self.fetchers.values() if (t := f.stop()) is not None]
        self.fetchers.clear()
        self._assigned.clear()
        await asyncio.gather(*tasks, return_exceptions=True)
