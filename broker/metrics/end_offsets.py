"""High watermarks of partitions this broker does not host, for consumer group lag.

A group's coordinator knows its committed offsets, and the high watermark of every partition it
hosts; for the others it asks their leaders, as kafka_exporter and kafka-lag-exporter do, with
ListOffsets (LATEST, read_uncommitted: the high watermark) through the broker's
PartitionMetadataClient (broker/partition_metadata_client.py). Each scrape says which partitions
it needs (`wanted`) and reads what the previous refresh learned; a refresh runs in a task of its
own, one at a time, one request per leader over the inter-broker listener, so a scrape never waits
on another broker. A partition whose leader does not answer has no value (and no lag sample) until it
does.

States: IDLE --wanted() with partitions--> REFRESHING (task asking each leader) --done--> IDLE.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from broker.partition_metadata_client import PartitionMetadataClient
from protocol.topic_partition import TopicPartition


class RemoteEndOffsets:
    def __init__(self, client: PartitionMetadataClient) -> None:
        self._client = client
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
        learned = await self._client.list_latest_offsets(partitions)
        for tp in partitions:  # unanswered: no value, rather than a stale one
            offset = learned.get(tp)
            if isinstance(offset, int) and offset >= 0:
                self.high_watermarks[tp] = offset
            else:
                self.high_watermarks.pop(tp, None)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
