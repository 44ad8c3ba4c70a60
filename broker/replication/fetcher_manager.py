"""The replica fetcher manager: which fetcher copies which followed partition.

`ReplicaFetcherManager.update` (called from every metadata image, no awaits) assigns each
partition this broker follows to the `ReplicaFetcher` (broker/replication/fetcher.py) of its
leader and shard, num.replica.fetchers shards per leader, and re-adds it from scratch whenever its
leader or leader epoch changes; fetchers left without partitions stop.

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

    def update(
        self, image: ClusterImage, partitions: Mapping[TopicPartition, Partition]
    ) -> None:
        if self.closed:  # shut down: no fetcher starts again
            return
        self.image = image
        desired: dict[TopicPartition, tuple[BrokerId, LeaderEpoch]] = {
            tp: (p.leader_id, p.leader_epoch)
            for tp, p in partitions.items()
            if p.role == PartitionRole.FOLLOWER
            and p.leader_id >= 0
            and p.leader_id != self.settings.broker_id
        }
        for tp, a in list(self._assigned.items()):
            if desired.get(tp) != (a.leader_id, a.leader_epoch):
                fetcher = self.fetchers.get(a.key)
                if fetcher is not None:
                    fetcher.remove(tp)
                del self._assigned[tp]
        for tp, (leader, epoch) in desired.items():
            if tp in self._assigned:
                continue
            key = (leader, shard_of(tp, self.settings.num_fetchers))
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                from broker.replication.fetcher import (
                    ReplicaFetcher,  # with the first follower
                )

                fetcher = self.fetchers[key] = ReplicaFetcher(
                    self.settings, leader, key[1], self.partition, self.endpoint, stats=self.stats, quota=self.quota
                )
                fetcher.start()
            fetcher.add(tp, leader, epoch)
            self._assigned[tp] = _Assignment(key, leader, epoch)
            log.info(
                "follower assigned topic=%s partition=%d leader=%d leader_epoch=%d fetcher=%d/%d",
                tp.topic, tp.partition, leader, epoch, leader, key[1],
            )  # fmt: skip
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                fetcher.stop()
                del self.fetchers[key]

    def endpoint(self, broker_id: BrokerId) -> Endpoint | None:
        """Where a leader's inter-broker listener is, from the latest image."""
        broker = self.image.brokers.get(broker_id) if self.image is not None else None
        return None if broker is None else broker.endpoint(self.settings.listener_name)

    async def shutdown(self) -> None:
        self.closed = True
        tasks = [t for f in self.fetchers.values() if (t := f.stop()) is not None]
        self.fetchers.clear()
        self._assigned.clear()
        await asyncio.gather(*tasks, return_exceptions=True)
