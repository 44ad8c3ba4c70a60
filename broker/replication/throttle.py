"""Replication throttles (Kafka's ReplicationQuotaManager), for partition reassignments.

Two per broker: the leader's (`leader.replication.throttled.rate`, bytes/s this broker sends to
followers of the partitions `leader.replication.throttled.replicas` names for it) and the
follower's (`follower.replication.throttled.rate`, bytes/s it fetches for the partitions
`follower.replication.throttled.replicas` names for it). A topic's list holds
`partitionId:brokerId` pairs, of which a broker takes those naming itself, or `*` (every
partition), as Kafka's TopicConfigHandler.parseThrottledPartitions; kafka-reassign-partitions
--throttle sets both lists (existing replicas lead, moving ones follow) and both rates.

The bytes of throttled partitions are measured by a rate over `replication.quota.window.num`
windows of `replication.quota.window.size.seconds` (Kafka's Rate over a SampledStat); while it is
above the limit, a replica that is not in the ISR gets nothing for a throttled partition: the
leader answers its fetch with no records (ReplicaManager.readFromLocalLog, shouldLeaderThrottle)
and the follower leaves the partition out of its fetch (ReplicaFetcherThread.buildFetch,
shouldFollowerThrottle). In-sync replicas are never held back; their bytes count all the same.
The default limit, Long.MAX_VALUE, is no throttle.
"""

from __future__ import annotations

from broker.quotas import Rate

UNLIMITED = 9_223_372_036_854_775_807
"""Kafka's default for the throttled rates (Long.MAX_VALUE): no throttle."""


def throttled(replicas: str, partition: int, broker_id: int) -> bool:
    """Whether a topic's `*.replication.throttled.replicas` names `partition` for `broker_id`
    (the value as LogConfig holds a list: comma-separated)."""
    items = [i.strip() for i in replicas.split(",")]
    return items == ["*"] or f"{partition}:{broker_id}" in items


class ReplicationQuota:
    """One direction's throttle: the rate of throttled replication bytes against its limit."""

    def __init__(self, limit: int = UNLIMITED, samples: int = 11, window_ms: int = 1000) -> None:
        self.limit = limit
        self._rate = Rate(samples, window_ms)

    def configure(self, limit: int, samples: int, window_ms: int) -> None:
        """A new limit (dynamic broker configs) or window; the measured bytes are kept."""
        self.limit = limit
        if (samples, window_ms) != (self._rate.samples, self._rate.window_ms):
            self._rate = Rate(samples, window_ms)

    def record(self, size: int, now_ms: int) -> None:
        if self.limit < UNLIMITED and size:
            self._rate.record(size, now_ms)

    def exceeded(self, now_ms: int) -> bool:
        """Kafka's isQuotaExceeded: the measured rate is above the limit."""
        return self.limit < UNLIMITED and self._rate.rate(now_ms) > self.limit
