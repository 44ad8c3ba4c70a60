"""What a broker needs from a controller, whichever implementation runs it.

The embedded controller (single node, metadata in the data directory) and the ZooKeeper controller
(a cluster) both implement `Controller`. Brokers read the current `ClusterImage` and subscribe to
changes; admin requests become controller calls that return per-item errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Protocol

from controller.election import ElectionResults, ElectionType
from controller.model import ClusterImage, NewTopic, PartitionRegistration
from controller.quotas import QuotaEntity
from controller.reassignment import ReassignmentResults, Requested
from protocol.errors import KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId

ImageListener = Callable[[ClusterImage | None, ClusterImage], None]
"""Called with (previous image or None, new image) after every change, synchronously."""


class Controller(Protocol):
    @property
    def image(self) -> ClusterImage: ...

    def subscribe(self, listener: ImageListener) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def controlled_shutdown(self) -> bool:
        """Move this broker's leaderships away before it stops (Kafka's controlled shutdown);
        True when they moved in time (at once when no other broker could take them)."""

    def suspected_peers(self) -> AbstractSet[BrokerId]:
        """The brokers this broker's failure detector holds unable to follow it now (empty on a
        single node); a leader takes such a follower out of the ISR at once."""

    def add_suspicion_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener` (on the loop, no awaits) whenever `suspected_peers` may have changed."""

    async def report_offline_replicas(self, replicas: frozenset[TopicPartition]) -> None:
        """This broker's replicas whose log dir failed (every one so far): the controller moves
        their leadership to other ISR members and takes them out of the ISRs (Kafka's
        onBrokerLogDirFailure). Failures are logged, not raised."""

    async def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> dict[str, KafkaError | None]: ...

    async def delete_topics(self, names: Sequence[str]) -> dict[str, KafkaError | None]: ...

    async def create_partitions(
        self,
        name: str,
        total_count: int,
        assignments: Sequence[Sequence[BrokerId]] | None,
        *,
        validate_only: bool = False,
    ) -> None:
        """Raises KafkaError on failure."""

    async def alter_topic_configs(
        self, name: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        """Replace the topic's config overrides. Raises KafkaError on failure."""

    async def alter_broker_configs(
        self, entity: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        """Replace the dynamic broker configs of `entity` ("" for the cluster default, else a
        broker id). Raises KafkaError on failure."""

    async def alter_group_configs(
        self, group: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        """Replace a group's configs (empty: remove them), checked by the caller
        (broker/config/group.py). Raises KafkaError on failure."""

    async def alter_client_quotas(
        self, alterations: Sequence[tuple[QuotaEntity, Sequence[tuple[str, float | None]]]], *, validate_only: bool = False
    ) -> list[KafkaError | None]:
        """Apply each entity's (key, value or None to remove) operations under Kafka's rules
        (controller/quotas.py `alter`); one result per alteration, in order."""

    async def allocate_producer_ids(self, broker_id: BrokerId, count: int) -> int:
        """Reserve `count` producer ids for a broker; returns the first. Never hands out an id twice,
        across restarts too (Kafka's ProducerIdManager block allocation)."""

    async def alter_partition(
        self,
        topic: str,
        partition: int,
        broker_id: BrokerId,
        proposed: PartitionRegistration,
    ) -> PartitionRegistration:
        """Leader's ISR change, compare-and-set on partition_epoch. Raises KafkaError if stale."""

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Sequence[tuple[str, Sequence[int]]] | None,
        timeout_ms: int,
    ) -> ElectionResults:
        """An operator's leader elections (ElectLeaders) for (topic, partition ids) pairs, or
        every partition when None: per topic, (partition, error or None), answered once this
        broker's image shows the new leaders or after `timeout_ms` (controller/election.py
        `plan_elections` has the rules). NOT_CONTROLLER on a broker that is not the controller."""

    async def alter_partition_reassignments(
        self, requested: Requested, *, allow_replication_factor_change: bool, timeout_ms: int
    ) -> ReassignmentResults:
        """Start or cancel (target None) partition reassignments under Kafka's rules
        (controller/reassignment.py); per topic, (partition, error or None), answered once this
        broker's image shows the changes or after `timeout_ms`. Raises KafkaError(NOT_CONTROLLER)
        on a broker that is not the controller."""
