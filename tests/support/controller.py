"""The test double for the controller: one shared metadata image, a `View` (a `Controller`) per
broker. Brokers run in the test's own process against it (tests/unit/test_fetcher.py,
test_failover_inprocess.py); partitions alone use it for their ISR changes (test_replication.py).
alter_partition is the real rule: compare-and-set on the leader epoch and the partition epoch.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from controller.interface import ImageListener
from controller.model import (
    BrokerRegistration,
    ClusterImage,
    PartitionRegistration,
    TopicRegistration,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId, ControllerEpoch


class SharedController:
    """One metadata image for every broker (each sees it through its `View`, the `Controller` a
    broker runs); `held` brokers get no images until released, and cannot reach the controller."""

    def __init__(self) -> None:
        self.image = ClusterImage(
            "test-cluster",
            BrokerId(1),
            ControllerEpoch(1),
            MappingProxyType({}),
            MappingProxyType({}),
        )
        self.views: dict[BrokerId, View] = {}
        self.held: set[BrokerId] = set()
        self.calls: list[PartitionRegistration] = []
        """Every ISR change proposed to it, in order."""
        self.fail_with: KafkaError | None = None
        """When set, every alter_partition fails with it (the controller refuses)."""

    def attach(self, registration: BrokerRegistration) -> View:
        view = View(self, registration.broker_id)
        self.views[registration.broker_id] = view
        self.image = replace(
            self.image,
            brokers=MappingProxyType(
                {**self.image.brokers, registration.broker_id: registration}
            ),
        )
        return view

    def publish(self, image: ClusterImage) -> None:
        self.image = image
        for view in self.views.values():
            if view.broker_id not in self.held:
                view.deliver(image)

    def release(self, broker_id: BrokerId) -> None:
        self.held.discard(broker_id)
        self.views[broker_id].deliver(self.image)

    def set_partition(self, tp: TopicPartition, reg: PartitionRegistration) -> None:
        topic = self.image.topics.get(tp.topic) or TopicRegistration(
            tp.topic, uuid.uuid4(), MappingProxyType({})
        )
        topic = replace(
            topic, partitions=MappingProxyType({**topic.partitions, tp.partition: reg})
        )
        self.publish(
            replace(
                self.image,
                topics=MappingProxyType({**self.image.topics, tp.topic: topic}),
            )
        )

    def reg(self, tp: TopicPartition) -> PartitionRegistration:
        found = self.image.partition(tp.topic, tp.partition)
        assert found is not None
        return found


class View:
    def __init__(self, shared: SharedController, broker_id: BrokerId) -> None:
        self.shared = shared
        self.broker_id = broker_id
        self.listeners: list[ImageListener] = []
        self.seen: ClusterImage | None = None

    @property
    def image(self) -> ClusterImage:
        return self.seen or self.shared.image

    def deliver(self, image: ClusterImage) -> None:
        old, self.seen = self.seen, image
        for listener in self.listeners:
            listener(old, image)

    def subscribe(self, listener: ImageListener) -> None:
        self.listeners.append(listener)
        self.seen = self.shared.image
        listener(None, self.shared.image)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def controlled_shutdown(self) -> bool:
        return True

    def suspected_peers(self) -> frozenset[BrokerId]:
        return frozenset()

    def add_suspicion_listener(self, listener: Callable[[], None]) -> None:
        pass

    async def report_offline_replicas(self, replicas: Any) -> None:
        """Failed log dirs: the double keeps what it was told."""
        self.offline_replicas = frozenset(replicas)

    async def create_topics(
        self, topics: Any, *, validate_only: bool = False
    ) -> dict[str, KafkaError | None]:
        return {
            t.name: KafkaError(ErrorCode.invalid_request, "test controller")
            for t in topics
        }

    async def allocate_producer_ids(self, broker_id: BrokerId, count: int) -> int:
        return 1000 * broker_id

    async def alter_partition(
        self,
        topic: str,
        partition: int,
        broker_id: BrokerId,
        proposed: PartitionRegistration,
    ) -> PartitionRegistration:
        self.shared.calls.append(proposed)
        await asyncio.sleep(0)
        if self.shared.fail_with is not None:
            raise self.shared.fail_with
        if self.broker_id in self.shared.held:
            raise KafkaError(ErrorCode.request_timed_out, "cut off from the controller")
        current = self.shared.reg(TopicPartition(topic, partition))
        if current.leader != broker_id or current.leader_epoch != proposed.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch)
        if current.partition_epoch != proposed.partition_epoch:
            raise KafkaError(ErrorCode.invalid_update_version)
        committed = replace(proposed, partition_epoch=current.partition_epoch + 1)
        self.shared.set_partition(TopicPartition(topic, partition), committed)
        return committed
