"""The cluster metadata model: immutable values the controller publishes and brokers read.

A `ClusterImage` is a complete, frozen snapshot of what the controller knows. The controller
replaces it whole on every change and hands (old, new) to its listeners, so readers never see a
half-applied change and never need a lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from controller.quotas import QuotaEntity
from protocol.topic_partition import TopicPartition
from protocol.types import NO_BROKER, BrokerId, ControllerEpoch, LeaderEpoch

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
DEFAULT_BROKER_ENTITY = ""
"""The entity of the cluster-wide dynamic broker config defaults (Kafka's `<default>`)."""
MIN_INSYNC_REPLICAS = "min.insync.replicas"


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: BrokerId
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    offline_replicas: frozenset[TopicPartition] = frozenset()
    """This broker's replicas whose log dir failed (Kafka's offline replicas): the controller
    treats the broker as gone for those partitions alone."""

    def endpoint(self, listener: str) -> Endpoint | None:
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        return None


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """Leader, leader epoch and ISR of one partition, as the controller last wrote them.

    `partition_epoch` is bumped on every change (the znode version in ZooKeeper mode); changes are
    compare-and-set on it, so a stale writer cannot win. While a reassignment is in progress
    (controller/reassignment.py) `replicas` is the union of the old and the target replicas and
    `adding_replicas`/`removing_replicas` say which of them come and go (Kafka's fields).
    """

    replicas: tuple[BrokerId, ...]
    isr: tuple[BrokerId, ...]
    leader: BrokerId
    leader_epoch: LeaderEpoch
    partition_epoch: int = 0
    adding_replicas: tuple[BrokerId, ...] = ()
    removing_replicas: tuple[BrokerId, ...] = ()

    @property
    def online(self) -> bool:
        return self.leader != NO_BROKER

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "partition_epoch": self.partition_epoch,
        }
        if self.reassigning:
            doc["adding_replicas"] = list(self.adding_replicas)
            doc["removing_replicas"] = list(self.removing_replicas)
        return doc

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PartitionRegistration:
        return cls(
            replicas=tuple(BrokerId(b) for b in d["replicas"]),
            isr=tuple(BrokerId(b) for b in d["isr"]),
            leader=BrokerId(d["leader"]),
            leader_epoch=LeaderEpoch(d["leader_epoch"]),
            partition_epoch=int(d.get("partition_epoch", 0)),
            adding_replicas=tuple(BrokerId(b) for b in d.get("adding_replicas", ())),
            removing_replicas=tuple(BrokerId(b) for b in d.get("removing_replicas", ())),
        )


def _frozen_map(d: Mapping[Any, Any] | None = None) -> Mapping[Any, Any]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True, slots=True)
class TopicRegistration:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]
    configs: Mapping[str, str] = field(default_factory=_frozen_map)
    """Topic-level config overrides (DYNAMIC_TOPIC_CONFIG)."""

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, Any]:
        return {
            "topic_id": str(self.topic_id),
            "partitions": {str(p): r.to_json() for p, r in self.partitions.items()},
            "configs": dict(self.configs),
        }

    @classmethod
    def from_json(cls, name: str, d: Mapping[str, Any]) -> TopicRegistration:
        return cls(
            name=name,
            topic_id=uuid.UUID(d["topic_id"]),
            partitions=_frozen_map(
                {int(p): PartitionRegistration.from_json(r) for p, r in d["partitions"].items()}
            ),
            configs=_frozen_map(d.get("configs", {})),
        )


@dataclass(frozen=True, slots=True)
class ClusterImage:
    cluster_id: str
    controller_id: BrokerId
    controller_epoch: ControllerEpoch
    brokers: Mapping[BrokerId, BrokerRegistration]
    topics: Mapping[str, TopicRegistration]
    fenced: frozenset[BrokerId] = frozenset()
    """Registered brokers a majority of the other registered brokers suspect (heartbeats): dead or
    paused or cut off as far as the cluster can tell, like a broker KRaft fenced. Metadata leaves
    them out (clients then give up requests waiting on them) and names no leader they lead."""
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=_frozen_map)
    """Dynamic broker configs by entity: "" is the cluster-wide default
    (DYNAMIC_DEFAULT_BROKER_CONFIG), a broker id's string that broker's own
    (DYNAMIC_BROKER_CONFIG)."""
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=_frozen_map)
    """User and client-id quotas (controller/quotas.py), empty entities left out."""
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=_frozen_map)
    """Group configs (KIP-848) by group id, groups without any left out (broker/config/group.py)."""
    _topic_ids: Mapping[uuid.UUID, TopicRegistration] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_topic_ids", {t.topic_id: t for t in self.topics.values()})

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRegistration | None:
        return self._topic_ids.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create: either a partition count and replication factor or explicit assignments."""

    name: str
    num_partitions: int
    replication_factor: int
    assignments: Mapping[int, tuple[BrokerId, ...]] | None = None
    configs: Mapping[str, str] = field(default_factory=_frozen_map)
