# ElectLeaders (key 43), versions 0-2.
# An operator's leader elections (kafka-leader-election.sh, Admin.electLeaders): preferred (v0
# has no election type: always preferred) or unclean, for the partitions named, or for every
# partition when topic_partitions is null (then partitions that need no election are left out of
# the answer, as Kafka's controller does). The controller elects under Kafka's rules
# (controller/election.py `elect_leader`): ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
# ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION ("No such topic as t", "No such
# partition as t-p") per partition; a broker that is not the active controller forwards the
# request to it, as Kafka 4.x brokers do (handlers/_forward.py), and answers NOT_CONTROLLER per
# partition only when it cannot. An
# unknown election type -> INVALID_REQUEST at the top and on every partition named
# (ElectLeadersRequest.getErrorResponse). The answer comes once this broker's metadata shows the
# new leaders, or after the request's timeout.
# Not supported: authorization (no ACLs yet: issue 14); throttle_time is always 0.
from __future__ import annotations

from collections import Counter

from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.elect_leaders.v2.response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import audit, error_message
from broker.handlers._forward import forward_to_controller
from controller.election import ElectionResults, ElectionType
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE

API_KEY = 43


def _response(results: ElectionResults, error: ErrorCode = ErrorCode.none) -> ElectLeadersResponse:
    return ElectLeadersResponse(
        throttle_time=NO_THROTTLE,
        error_code=error,
        replica_election_results=tuple(
            ReplicaElectionResult(
                topic=TopicName(topic),
                partition_result=tuple(
                    PartitionResult(
                        partition_id=i32(p),
                        error_code=ErrorCode.none if e is None else e.code,
                        error_message=None if e is None else error_message(e),
                    )
                    for p, e in partitions
                ),
            )
            for topic, partitions in results
        ),
    )


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    named = (
        None
        if request.topic_partitions is None
        else [(t.topic, [int(p) for p in t.partitions]) for t in request.topic_partitions]
    )
    try:
        election_type = ElectionType(request.election_type)
    except ValueError:
        error = KafkaError(ErrorCode.invalid_request, f"Unknown election type {request.election_type}")
        results: ElectionResults = [(t, [(p, error) for p in ps]) for t, ps in named or []]
        return _response(results, error.code)
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    try:
        results = await ctx.services.controller.elect_leaders(election_type, named, timeout_ms)
    except KafkaError as e:  # the metadata could not be written (a full disk on one node)
        results = [(t, [(p, e) for p in ps]) for t, ps in named or []]
    if results and all(e is not None and e.code == ErrorCode.not_controller for _, ps in results for _, e in ps):
        forwarded = await forward_to_controller(ctx, request, ElectLeadersResponse, timeout_ms / 1000 + 5)
        if forwarded is not None:  # Kafka 4.x brokers forward to the controller
            audit(ctx, "elect_leaders", forwarded_to=ctx.services.controller.image.controller_id)
            return forwarded
    audit(
        ctx,
        "elect_leaders",
        election_type=election_type.name,
        partitions="all" if named is None else sum(len(ps) for _, ps in named),
        results=dict(Counter("NONE" if e is None else e.code.name for _, ps in results for _, e in ps)),
    )
    return _response(results)
