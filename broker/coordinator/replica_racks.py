"""The racks of a topic's partition replicas, as Kafka's group coordinator takes them into its
topic metadata hash (KraftTopicMetadata.partitionRacks, Utils.computeTopicHash): for each
partition, the rack of every replica whose broker is registered and has one, sorted.

A KRaft broker stays registered (fenced) while it is down; a Samsa broker leaves the cluster
image. So that a broker going down does not look like a rack change (and rebalance every group
reading its partitions), the last rack seen for each broker id stands in for it; a broker that
comes back with another rack changes the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.model import ClusterImage
    from protocol.types import BrokerId

PartitionRacks = tuple[tuple[str, ...], ...]
"""Each partition's replica racks (sorted), by partition index."""


class ReplicaRacks:
    """Answers from the image last asked about, by topic (every heartbeat asks; a 1,000-partition
    topic takes 1 ms to walk): the image is immutable, a new one replaces it on any change."""

    def __init__(self) -> None:
        self._last_seen: dict[BrokerId, str | None] = {}
        """The rack each broker id was last registered with."""
        self._image: ClusterImage | None = None
        self._by_topic: dict[str, PartitionRacks] = {}

    def of(self, image: ClusterImage, topic: str) -> PartitionRacks:
        if image is not self._image:
            self._image = image
            self._by_topic = {}
            for broker_id, broker in image.brokers.items():
                self._last_seen[broker_id] = broker.rack
        racks = self._by_topic.get(topic)
        if racks is None:
            partitions = image.topics[topic].partitions
            out: list[tuple[str, ...]] = []
            for p in range(len(partitions)):
                reg = partitions.get(p)
                replicas = () if reg is None else reg.replicas
                out.append(tuple(sorted(rack for b in replicas if (rack := self._last_seen.get(b)))))
            racks = self._by_topic[topic] = tuple(out)
        return racks
