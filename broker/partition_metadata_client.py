"""The latest offset of any partition, wherever it is led (Kafka's NetworkPartitionMetadataClient).

The group coordinator computes a share group's lag (DescribeShareGroupOffsets v1) from each
partition's end offset, which only its leader knows. As Kafka does, the partitions are grouped by
the leader the metadata image names and one ListOffsets request (latest, READ_UNCOMMITTED: the high
watermark) goes to each leader over the inter-broker listener; a partition led here is read from
its Partition without a request. A partition without a leader is LEADER_NOT_AVAILABLE; a leader
that cannot be reached, NETWORK_EXCEPTION after one more attempt (Kafka retries a few times with
backoff); a partition missing from the leader's answer, UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from kio.schema.list_offsets.v9 import request as lo_req
from kio.schema.list_offsets.v9 import response as lo_resp
from kio.schema.types import BrokerId as KioBrokerId
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32, i64

from broker.replication.leader_client import BrokerClients, LeaderConnectionError
from broker.replication.replica_manager import ReplicaManager
from controller.model import ClusterImage
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition

log = logging.getLogger("samsa.partition_metadata")

LATEST_TIMESTAMP = -1
READ_UNCOMMITTED = 0
CONSUMER_REPLICA_ID = -1
ATTEMPTS = 2
RETRY_BACKOFF_S = 0.1
MESSAGES = {
    ErrorCode.leader_not_available: "There is no leader for this topic-partition as we are in the middle of a "
                                    "leadership election.",
    ErrorCode.network_exception: "The server disconnected before a response was received.",
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
}  # fmt: skip
"""Kafka's messages (Errors.X.message) for the errors this client makes itself."""


def _error(code: ErrorCode) -> KafkaError:
    return KafkaError(code, MESSAGES[code])


class PartitionMetadataClient:
    def __init__(
        self, broker_id: int, image: Callable[[], ClusterImage], replica_manager: ReplicaManager, clients: BrokerClients
    ) -> None:  # fmt: skip
        self._broker_id = broker_id
        self._image = image
        self._replica_manager = replica_manager
        self._clients = clients

    async def list_latest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | KafkaError]:
        """Each partition's latest offset (its high watermark), or the error that prevented it."""
        image = self._image()
        out: dict[TopicPartition, int | KafkaError] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            registration = image.partition(tp.topic, tp.partition)
            leader = -1 if registration is None else registration.leader
            if leader == self._broker_id:
                try:
                    out[tp] = int(self._replica_manager.leader_partition(tp).high_watermark)
                except KafkaError as e:
                    out[tp] = e
            elif leader < 0 or leader not in image.brokers:
                out[tp] = _error(ErrorCode.leader_not_available)
            else:
                by_leader.setdefault(leader, []).append(tp)
        answers = await asyncio.gather(*(self._ask(leader, tps) for leader, tps in by_leader.items()))
        for answer in answers:
            out.update(answer)
        return out

    async def _ask(self, leader: int, partitions: list[TopicPartition]) -> dict[TopicPartition, int | KafkaError]:
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = lo_req.ListOffsetsRequest(
            replica_id=KioBrokerId(CONSUMER_REPLICA_ID), isolation_level=i8(READ_UNCOMMITTED),
            topics=tuple(lo_req.ListOffsetsTopic(name=TopicName(t), partitions=tuple(
                lo_req.ListOffsetsPartition(partition_index=i32(p), current_leader_epoch=i32(-1),
                                            timestamp=i64(LATEST_TIMESTAMP)) for p in ps))
                         for t, ps in topics.items()),
        )  # fmt: skip
        response = await self._send(leader, request)
        if response is None:
            return {tp: _error(ErrorCode.network_exception) for tp in partitions}
        answered: dict[TopicPartition, int | KafkaError] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(str(topic.name), int(p.partition_index))
                answered[tp] = int(p.offset) if p.error_code == ErrorCode.none else KafkaError(p.error_code)
        return {tp: answered.get(tp, _error(ErrorCode.unknown_topic_or_partition)) for tp in partitions}

    async def _send(self, leader: int, request: lo_req.ListOffsetsRequest) -> lo_resp.ListOffsetsResponse | None:
        for attempt in range(ATTEMPTS):
            if attempt:
                await asyncio.sleep(RETRY_BACKOFF_S)
            client = self._clients.get(leader)
            if client is None:
                return None
            try:
                async with self._clients.lock(leader):
                    response = await client.request(request)
                return response if isinstance(response, lo_resp.ListOffsetsResponse) else None
            except LeaderConnectionError as e:
                log.debug("list offsets to leader failed broker=%d attempt=%d error=%s", leader, attempt + 1, e)
        return None

    def close(self) -> None:
        self._clients.close()
