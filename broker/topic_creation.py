"""Topics created on first use: Kafka's AutoTopicCreationManager.

A Metadata request that names unknown topics (and allows it, with auto.create.topics.enable on)
has them created with the broker's defaults: num.partitions, and default.replication.factor
capped by the brokers alive.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from broker.config import BrokerConfig
from controller.interface import Controller
from controller.model import NewTopic
from protocol.errors import KafkaError

log = logging.getLogger("samsa.broker")


class AutoTopicCreator:
    def __init__(self, controller: Controller, config: BrokerConfig) -> None:
        self._controller = controller
        self._config = config

    async def create(self, names: Sequence[str]) -> dict[str, KafkaError | None]:
        """Create `names` with the broker defaults; each name's error, or None once created."""
        live = len(self._controller.image.brokers)
        partitions = self._config.num_partitions
        topics = [
            NewTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=min(self._config.default_replication_factor, live),
            )
            for name in names
        ]
        results = await self._controller.create_topics(topics)
        for name, error in results.items():
            if error is None:
                log.info("topic auto-created topic=%s partitions=%d", name, partitions)
        return results
