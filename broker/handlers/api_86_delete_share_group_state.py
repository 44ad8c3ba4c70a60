# DeleteShareGroupState (key 86), version 0.
# Sent by a group coordinator to the share coordinator when a share group's state goes (Kafka's
# persister for DeleteGroups and DeleteShareGroupOffsets): per partition, the state is deleted
# with a tombstone written with acks=all (share_coordinator_shard.delete; NOT_COORDINATOR where
# the state partition is not led here).
# Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every partition).
# Held to Kafka 4.3.1 by compat/test_share_state_rpcs.py (raw requests: only brokers send it).
from __future__ import annotations

from typing import Any

from kio.schema.delete_share_group_state.v0.request import DeleteShareGroupStateRequest
from kio.schema.delete_share_group_state.v0.response import (
    DeleteShareGroupStateResponse,
    DeleteStateResult,
    PartitionResult,
)
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._share_state import answer_each
from broker.share.share_coordinator import ShareCoordinator
from broker.share.share_coordinator_shard import StateAnswer
from broker.share.share_state import SharePartitionKey

API_KEY = 86


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    async def delete(coordinator: ShareCoordinator, key: SharePartitionKey, p: Any) -> StateAnswer:
        return await coordinator.delete(key)

    topics = await answer_each(ctx, request.group_id, request.topics, delete, StateAnswer)
    return DeleteShareGroupStateResponse(results=tuple(
        DeleteStateResult(topic_id=topic_id, partitions=tuple(
            PartitionResult(partition=i32(p.partition), error_code=a.error, error_message=a.message)
            for p, a in answers))
        for topic_id, answers in topics
    ))  # fmt: skip
