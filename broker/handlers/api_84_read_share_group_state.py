# ReadShareGroupState (key 84), version 0.
# Sent by a share partition leader to the share coordinator when it loads a share partition
# (Kafka's SharePartition.maybeInitialize through the persister): per partition, the state epoch,
# start offset and state batches (share_coordinator_shard.read: a newer leader epoch is recorded,
# an older one is FENCED_LEADER_EPOCH; INVALID_REQUEST for a state never initialized;
# NOT_COORDINATOR where the state partition is not led here).
# Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every partition).
# Held to Kafka 4.3.1 by compat/test_share_state_rpcs.py (raw requests: only brokers send it).
from __future__ import annotations

from typing import Any

from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest
from kio.schema.read_share_group_state.v0.response import (
    PartitionResult,
    ReadShareGroupStateResponse,
    ReadStateResult,
    StateBatch,
)
from kio.static.primitive import i8, i16, i32, i64

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._share_state import answer_each
from broker.share.share_coordinator import ShareCoordinator
from broker.share.share_coordinator_shard import ReadAnswer
from broker.share.share_state import SharePartitionKey

API_KEY = 84


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    async def read(coordinator: ShareCoordinator, key: SharePartitionKey, p: Any) -> ReadAnswer:
        return await coordinator.read(key, int(p.leader_epoch))

    topics = await answer_each(ctx, request.group_id, request.topics, read, ReadAnswer)
    return ReadShareGroupStateResponse(results=tuple(
        ReadStateResult(topic_id=topic_id, partitions=tuple(
            PartitionResult(
                partition=i32(p.partition), error_code=a.error, error_message=a.message,
                state_epoch=i32(a.state_epoch), start_offset=i64(a.start_offset),
                state_batches=tuple(
                    StateBatch(first_offset=i64(b.first_offset), last_offset=i64(b.last_offset),
                               delivery_state=i8(int(b.delivery_state)), delivery_count=i16(b.delivery_count))
                    for b in a.state_batches),
            )
            for p, a in answers))
        for topic_id, answers in topics
    ))  # fmt: skip
