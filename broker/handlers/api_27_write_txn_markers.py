# WriteTxnMarkers (key 27), version 1.
# Sent by a transaction coordinator (another broker's, or kafka-transactions.sh abort through the
# admin client) to a partition leader: for each marker, one COMMIT or ABORT control batch of the
# producer id and epoch is appended to each named partition this broker leads, with acks=all
# (Kafka's handleWriteTxnMarkersRequest through broker/txn/markers.py); a __consumer_offsets
# partition then commits or drops the transaction's offsets. Per partition: NONE,
# UNKNOWN_TOPIC_OR_PARTITION (not hosted here), NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
# INVALID_PRODUCER_EPOCH (an epoch older than the producer's), TRANSACTION_COORDINATOR_FENCED (an
# older coordinator epoch than the last marker's).
# Authorization: CLUSTER_ACTION on the cluster (brokers only; CLUSTER_AUTHORIZATION_FAILED for every
# partition).
# Not supported: v2 (KIP-1228 transaction version of the marker, for transactions v2).
from __future__ import annotations

from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest
from kio.schema.write_txn_markers.v1.response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from broker.txn.markers import MARKER_TIMEOUT_MS, TxnMarker
from controller.security_model import AclOperation
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import TopicName

API_KEY = 27


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    results = []
    allowed = ctx.authorized(AclOperation.CLUSTER_ACTION)
    for marker in request.markers:
        partitions = tuple(TopicPartition(str(t.name), int(p)) for t in marker.topics for p in t.partition_indexes)
        if not allowed:
            written = dict.fromkeys(partitions, ErrorCode.cluster_authorization_failed)
        else:
            written = await ctx.services.txn_coordinator.write_markers_locally(
                TxnMarker(
                    int(marker.producer_id), int(marker.producer_epoch), int(marker.coordinator_epoch),
                    marker.transaction_result, partitions,
                ),
                MARKER_TIMEOUT_MS,
            )  # fmt: skip
        by_topic: dict[str, list[WritableTxnMarkerPartitionResult]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(
                WritableTxnMarkerPartitionResult(partition_index=i32(tp.partition), error_code=written[tp])
            )
        results.append(
            WritableTxnMarkerResult(
                producer_id=marker.producer_id,
                topics=tuple(
                    WritableTxnMarkerTopicResult(name=TopicName(t), partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
            )
        )
    return WriteTxnMarkersResponse(markers=tuple(results))
