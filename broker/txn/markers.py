"""Writing COMMIT/ABORT markers to the partitions of a transaction (Kafka's
TransactionMarkerChannelManager and the WriteTxnMarkers path of KafkaApis).

`write_markers_locally` is what a partition leader does with a WriteTxnMarkers request: one
control batch per partition, appended with acks=all through the replica manager (origin
COORDINATOR), and, for `__consumer_offsets` partitions, the transaction's pending offsets handed
to the group coordinator (committed or dropped).

`MarkerSender.send` is the coordinator's side: it writes the markers of one ended transaction to
every partition's leader, through `write_markers_locally` when this broker leads it and with an
inter-broker WriteTxnMarkers v1 request otherwise, and retries every partition that failed
(leader moving, not enough replicas, timeouts, connection errors) until all are written. A
partition that no longer exists in the metadata is skipped, as Kafka does; INVALID_PRODUCER_EPOCH
and TRANSACTION_COORDINATOR_FENCED mean a newer coordinator took over and the send stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.static.primitive import i16, i32

from broker import clock
from broker.coordinator.coordinator import OFFSETS_TOPIC
from broker.log.info import AppendOrigin
from broker.replication.leader_client import BrokerClients, LeaderConnectionError
from broker.security.client import ClientSecurity
from protocol.control import build_end_txn_marker
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import ProducerId, TopicName

if TYPE_CHECKING:
    from broker.coordinator.coordinator import GroupCoordinator
    from broker.replication.replica_manager import ReplicaManager
    from controller.interface import Controller

log = logging.getLogger("samsa.txn")

RETRY_BACKOFF_S = 0.1
MARKER_TIMEOUT_MS = 30_000
"""How long a marker append waits for acks=all (Kafka: the broker's request.timeout.ms)."""
_STOP = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """The markers of one ended transaction."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


async def write_markers_locally(
    replica_manager: ReplicaManager,
    group_coordinator: GroupCoordinator,
    marker: TxnMarker,
    timeout_ms: int,
) -> dict[TopicPartition, ErrorCode]:
    """Append the marker to each partition this broker leads (KafkaApis.handleWriteTxnMarkersRequest)."""
    now = clock.now_ms()
    entries: list[tuple[TopicPartition, bytes | memoryview]] = []
    results: dict[TopicPartition, ErrorCode] = {}
    for tp in marker.partitions:
        if tp in replica_manager.partitions:
            data = build_end_txn_marker(
                marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.commit, timestamp=now
            )
            entries.append((tp, data))
        else:
            results[tp] = ErrorCode.unknown_topic_or_partition
    appended = await replica_manager.append_records(entries, -1, timeout_ms, AppendOrigin.COORDINATOR)
    for tp, result in appended.items():
        results[tp] = result.error
    offsets = [tp.partition for tp, e in results.items() if tp.topic == OFFSETS_TOPIC and e == ErrorCode.none]
    if offsets:
        group_coordinator.complete_transaction(marker.producer_id, offsets, marker.commit)
    return results


class MarkerSender:
    def __init__(
        self,
        broker_id: int,
        controller: Controller,
        write_local: Callable[[TxnMarker], Awaitable[dict[TopicPartition, ErrorCode]]],
        *,
        listener: str,
        timeout_ms: int,
        security: ClientSecurity | None,
    ) -> None:
        self._broker_id = broker_id
        self._controller = controller
        self._write_local = write_local
        self._clients = BrokerClients(
            lambda: controller.image, listener, client_id=f"samsa-txn-markers-{broker_id}",
            timeout_s=timeout_ms / 1000 + 5, security=security,
        )  # fmt: skip

    def close(self) -> None:
        self._clients.close()

    async def send(self, marker: TxnMarker, still_valid: Callable[[], bool]) -> bool:
        """Write every marker; False if the send was given up (the coordinator moved on)."""
        pending = set(marker.partitions)
        attempt = 0
        while pending:
            if not still_valid():
                return False
            image = self._controller.image
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in list(pending):
                reg = image.partition(tp.topic, tp.partition)
                if reg is None:
                    log.info(
                        "partition gone, skipping its transaction marker topic=%s partition=%d producer_id=%d",
                        tp.topic, tp.partition, marker.producer_id,
                    )  # fmt: skip
                    pending.discard(tp)
                elif reg.leader >= 0:
                    by_leader.setdefault(int(reg.leader), []).append(tp)
            calls = [self._write(leader, marker, tps) for leader, tps in by_leader.items()]
            for results in await asyncio.gather(*calls):
                for tp, error in results.items():
                    if error == ErrorCode.none:
                        pending.discard(tp)
                    elif error in _STOP:
                        log.info(
                            "transaction markers given up producer_id=%d topic=%s partition=%d error=%s",
                            marker.producer_id, tp.topic, tp.partition, error.name,
                        )  # fmt: skip
                        return False
            if pending:
                attempt += 1
                if attempt % 50 == 1:
                    log.info(
                        "transaction markers pending producer_id=%d commit=%s partitions=%d attempt=%d",
                        marker.producer_id, marker.commit, len(pending), attempt,
                    )  # fmt: skip
                await asyncio.sleep(RETRY_BACKOFF_S)
        return True

    async def _write(
        self, leader: int, marker: TxnMarker, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        one = TxnMarker(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.commit, tuple(partitions))
        if leader == self._broker_id:
            return await self._write_local(one)
        try:
            return await self._write_remote(leader, one)
        except LeaderConnectionError as exc:
            log.debug("transaction markers to broker=%d failed error=%s", leader, exc)
            return {tp: ErrorCode.not_leader_or_follower for tp in partitions}

    async def _write_remote(self, leader: int, marker: TxnMarker) -> dict[TopicPartition, ErrorCode]:
        client = self._clients.get(leader)
        if client is None:
            return {tp: ErrorCode.not_leader_or_follower for tp in marker.partitions}
        by_topic: dict[str, list[int]] = {}
        for tp in marker.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=ProducerId(marker.producer_id),
                    producer_epoch=i16(marker.producer_epoch),
                    transaction_result=marker.commit,
                    topics=tuple(
                        WritableTxnMarkerTopic(name=TopicName(t), partition_indexes=tuple(i32(p) for p in ps))
                        for t, ps in by_topic.items()
                    ),
                    coordinator_epoch=i32(marker.coordinator_epoch),
                ),
            )
        )
        async with self._clients.lock(leader):  # the client keeps one request in flight
            response = await client.request(request)
        out: dict[TopicPartition, ErrorCode] = {}
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    out[TopicPartition(str(topic.name), int(p.partition_index))] = ErrorCode(p.error_code)
        for tp in marker.partitions:
            out.setdefault(tp, ErrorCode.unknown_server_error)
        return out
