# ReadShareGroupStateSummary (key 87), versions 0-1.
# Sent by a group coordinator to the share coordinator for a share group's offsets and lag (Kafka's
# persister for DescribeShareGroupOffsets): per partition, the state epoch, leader epoch, start
# offset and (v1, KIP-1226) delivery complete count (share_coordinator_shard.read_summary;
# NOT_COORDINATOR where the state partition is not led here).
# Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every partition).
# Held to Kafka 4.3.1 by compat/test_share_state_rpcs.py (raw requests: only brokers send it).
from __future__ import annotations

from typing import Any

from kio.schema.read_share_group_state_summary.v1.request import ReadShareGroupStateSummaryRequest
from kio.schema.read_share_group_state_summary.v1.response import (
    PartitionResult,
    ReadShareGroupStateSummaryResponse,
    ReadStateSummaryResult,
)
from kio.static.primitive import i32, i64

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._share_state import answer_each
from broker.share.share_coordinator import ShareCoordinator
from broker.share.share_coordinator_shard import SummaryAnswer
from broker.share.share_state import SharePartitionKey

API_KEY = 87


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
    async def summary(coordinator: ShareCoordinator, key: SharePartitionKey, p: Any) -> SummaryAnswer:
        return coordinator.read_summary(key)

    topics = await answer_each(ctx, request.group_id, request.topics, summary, SummaryAnswer)
    return ReadShareGroupStateSummaryResponse(results=tuple(
        ReadStateSummaryResult(topic_id=topic_id, partitions=tuple(
            PartitionResult(
                partition=i32(p.partition), error_code=a.error, error_message=a.message,
                state_epoch=i32(a.state_epoch), leader_epoch=i32(a.leader_epoch),
                start_offset=i64(a.start_offset), delivery_complete_count=i32(a.delivery_complete_count),
            )
            for p, a in answers))
        for topic_id, answers in topics
    ))  # fmt: skip
