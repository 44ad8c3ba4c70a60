# InitializeShareGroupState (key 83), version 0.
# Sent by a group coordinator to the share coordinator of a share group's partitions (Kafka's
# persister for GroupCoordinatorService.persisterInitialize): per partition, the state is
# initialized at the state epoch and start offset given (share_coordinator_shard.initialize:
# FENCED_STATE_EPOCH for an older state epoch, NOT_COORDINATOR where the state partition is not
# led here, INVALID_REQUEST for a malformed key).
# Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every partition).
# Held to Kafka 4.3.1 by compat/test_share_state_rpcs.py (raw requests: only brokers send it).
from __future__ import annotations

from typing import Any

from kio.schema.initialize_share_group_state.v0.request import InitializeShareGroupStateRequest
from kio.schema.initialize_share_group_state.v0.response import (
    InitializeShareGroupStateResponse,
    InitializeStateResult,
    PartitionResult,
)
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._share_state import answer_each
from broker.share.share_coordinator import ShareCoordinator
from broker.share.share_coordinator_shard import StateAnswer
from broker.share.share_state import SharePartitionKey

API_KEY = 83


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
    async def initialize(coordinator: ShareCoordinator, key: SharePartitionKey, p: Any) -> StateAnswer:
        return await coordinator.initialize(key, int(p.state_epoch), int(p.start_offset))

    topics = await answer_each(ctx, request.group_id, request.topics, initialize, StateAnswer)
    return InitializeShareGroupStateResponse(results=tuple(
        InitializeStateResult(topic_id=topic_id, partitions=tuple(
            PartitionResult(partition=i32(p.partition), error_code=a.error, error_message=a.message)
            for p, a in answers))
        for topic_id, answers in topics
    ))  # fmt: skip
