# WriteShareGroupState (key 85), versions 0-1.
# Sent by a share partition leader to the share coordinator before an acknowledgement, release or
# lock expiry takes effect (Kafka's SharePartition.writeShareGroupState through the persister):
# per partition, the start offset, state batches and (v1, KIP-1226) delivery complete count are
# written as a ShareUpdate or ShareSnapshot record with acks=all (share_coordinator_shard.write:
# FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for an older leader or state epoch, NOT_COORDINATOR
# where the state partition is not led here). v0 has no delivery complete count (-1, unknown).
# Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every partition).
# Held to Kafka 4.3.1 by compat/test_share_state_rpcs.py (raw requests: only brokers send it).
# Not supported: a state batch whose delivery state is none of Kafka's five record states, which
# Kafka stores as it comes; here that partition is refused with INVALID_REQUEST (no share partition
# leader writes one, and a share partition could not load it).
from __future__ import annotations

from typing import Any

from kio.schema.write_share_group_state.v1.request import WriteShareGroupStateRequest
from kio.schema.write_share_group_state.v1.response import (
    PartitionResult,
    WriteShareGroupStateResponse,
    WriteStateResult,
)
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._share_state import answer_each
from broker.share.in_flight import PersisterStateBatch, RecordState
from broker.share.share_coordinator import ShareCoordinator
from broker.share.share_coordinator_shard import StateAnswer
from broker.share.share_state import SharePartitionKey
from protocol.errors import ErrorCode

API_KEY = 85
KNOWN_STATES = frozenset(int(s) for s in RecordState)


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    async def write(coordinator: ShareCoordinator, key: SharePartitionKey, p: Any) -> StateAnswer:
        unknown = sorted({int(b.delivery_state) for b in p.state_batches} - KNOWN_STATES)
        if unknown:
            return StateAnswer(ErrorCode.invalid_request, f"Unknown delivery state {unknown[0]} in a state batch.")
        batches = [
            PersisterStateBatch(int(b.first_offset), int(b.last_offset), RecordState(int(b.delivery_state)),
                                int(b.delivery_count))
            for b in p.state_batches
        ]  # fmt: skip
        return await coordinator.write(
            key, int(p.state_epoch), int(p.leader_epoch), int(p.start_offset), int(p.delivery_complete_count), batches
        )

    topics = await answer_each(ctx, request.group_id, request.topics, write, StateAnswer)
    return WriteShareGroupStateResponse(results=tuple(
        WriteStateResult(topic_id=topic_id, partitions=tuple(
            PartitionResult(partition=i32(p.partition), error_code=a.error, error_message=a.message)
            for p, a in answers))
        for topic_id, answers in topics
    ))  # fmt: skip
