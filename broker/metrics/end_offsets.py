"""High watermarks of partitions this broker does not host, for consumer group lag.

A group's coordinator knows its committed offsets, and the high watermark of every partition it
hosts; for the others it asks their leaders, as kafka_exporter and kafka-lag-exporter do, with
ListOffsets (LATEST, read_uncommitted: the high watermark). Each scrape says which partitions it
needs (`wanted`) and reads what the previous refresh learned; a refresh runs in a task of its own,
one at a time, one request per leader over the inter-broker listener, so a scrape never waits on
another broker. A partition whose leader does not answer has no value (and no lag sample) until it
does.

States: IDLE --wanted() with partitions--> REFRESHING (task asking each leader) --done--> IDLE.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from kio.schema.list_offsets.v9.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.static.primitive import i8, i32, i64

from broker.replication.leader_client import BrokerClients, LeaderConnectionError
from broker.security.client import ClientSecurity
from controller.model import ClusterImage
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import NO_BROKER, BrokerId, TopicName

log = logging.getLogger("samsa.metrics")

LATEST = -1
CONSUMER = BrokerId(-1)


class RemoteEndOffsets:
    def __init__(
        self, broker_id: BrokerId, image: Callable[[], ClusterImage], listener: str, timeout_s: float = 5.0,
        security: ClientSecurity | None = None,
    ) -> None:
        """`security`: the inter-broker listener's TLS and SASL (broker/security/client.py)."""
        self._broker_id = broker_id
        self._image = image
        self._clients = BrokerClients(
            image, listener, client_id=f"samsa-metrics-{broker_id}", timeout_s=timeout_s, security=security
        )
        self._task: asyncio.Task[None] | None = None
        self.high_watermarks: dict[TopicPartition, int] = {}
        """What the last refresh learned: partition -> its leader's high watermark."""

    def wanted(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The known high watermarks of `partitions`; starts a refresh of them (no await)."""
        wanted = set(partitions)
        known = {tp: hw for tp, hw in self.high_watermarks.items() if tp in wanted}
        self.high_watermarks = known
        if wanted and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._refresh(wanted))
        return known

    async def _refresh(self, partitions: set[TopicPartition]) -> None:
        image = self._image()
        by_leader: dict[BrokerId, list[TopicPartition]] = {}
        for tp in partitions:
            reg = image.partition(tp.topic, tp.partition)
            if reg is not None and reg.leader not in (NO_BROKER, self._broker_id):
                by_leader.setdefault(reg.leader, []).append(tp)
        results = await asyncio.gather(
            *(self._ask(leader, tps) for leader, tps in by_leader.items()), return_exceptions=True
        )
        learned: dict[TopicPartition, int] = {}
        for answer in results:
            if isinstance(answer, dict):
                learned.update(answer)
            else:
                log.warning("end offsets refresh failed error=%r", answer)
        for tp in partitions:  # unanswered: no value, rather than a stale one
            if tp in learned:
                self.high_watermarks[tp] = learned[tp]
            else:
                self.high_watermarks.pop(tp, None)

    async def _ask(self, leader: BrokerId, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        client = self._clients.get(leader)
        if client is None:
            return {}
        by_topic: dict[str, list[ListOffsetsPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                ListOffsetsPartition(partition_index=i32(tp.partition), current_leader_epoch=i32(-1), timestamp=i64(LATEST))
            )
        request = ListOffsetsRequest(
            replica_id=CONSUMER,
            isolation_level=i8(0),
            topics=tuple(ListOffsetsTopic(name=TopicName(t), partitions=tuple(ps)) for t, ps in by_topic.items()),
        )
        try:
            response = await client.request(request)
        except LeaderConnectionError as e:
            log.debug("end offsets unavailable leader=%d error=%s", leader, e)
            return {}
        return {
            TopicPartition(topic.name, p.partition_index): int(p.offset)
            for topic in response.topics
            for p in topic.partitions
            if p.error_code == ErrorCode.none and p.offset >= 0
        }

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._clients.close()
