# Fetch (key 1), versions 4-17.
# Consumers (replica_id -1) read below the high watermark; read_committed reads below the last
# stable offset (the first offset of the oldest open transaction, capped by the HW) and gets the
# aborted transactions overlapping what it read (from the segments' aborted-transaction indexes,
# as Kafka's collectAbortedTransactions). Every answer carries the LSO. Followers (replica_id >= 0)
# read below the log end offset; each follower fetch records that follower's LEO (its fetch
# offset) and caught-up time on the leader, which may expand the ISR and move the HW
# (broker/replication/replica_manager.py). Records are sent zero-copy: each partition's records are a file
# region of a segment that network.py hands to os.sendfile. A fetch that starts inside a batch
# returns the whole batch. If fewer than min_bytes are available the request long-polls in the
# fetch purgatory until an append brings enough or max_wait_ms passes (no timer polling).
# The response budget is the request's max_bytes capped by the broker's fetch.max.bytes and, for a
# consumer with a consumer_byte_rate quota, by what the quota lets through in a window, and
# min_bytes is capped by that budget, as in Kafka (the first batch still goes out whole).
# A partition named twice is answered once, for its last entry (as Kafka's fetch session map).
# Fetch sessions (KIP-227): Samsa keeps none, and answers every session id and epoch as Kafka's
# FetchManager.newContext does with an empty session cache. A full fetch (epoch 0, INITIAL_EPOCH,
# or -1, FINAL_EPOCH) is served whatever session id it names (0, -1, any: Kafka would close that
# session), with session id 0: for epoch 0 that is Kafka's answer when it creates no session,
# which clients take as "no session" and send full fetches again; for epoch -1 it is a sessionless
# fetch in Kafka too. Any other epoch is incremental and names a session there is not:
# FETCH_SESSION_ID_NOT_FOUND, no topics (the client then starts over with a full fetch).
# Authorization (KafkaApis): a follower fetch needs CLUSTER_ACTION on the cluster, a consumer READ on
# each topic; a partition refused is answered TOPIC_AUTHORIZATION_FAILED and not read.
# v13+ name topics by id (KIP-516): an id the cluster does not know is answered UNKNOWN_TOPIC_ID
# (before authorization, as Kafka's KafkaApis), and the answer names topics by id. v15+ carry the
# follower's id in the replica state (KIP-903; the replica epoch is KRaft's and not used), v17 the
# follower's directory id (KRaft's, not used). v16+ (KIP-951): a partition answered
# NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries its current leader and epoch, and the
# response the leaders' endpoints (broker/handlers/_leaders.py). Partitions refused (unknown id,
# not authorized, not in the cluster's metadata) are answered after those read, as Kafka's
# KafkaApis orders its response: unknown ids first, then the others in request order.
# Requests up to v12 are taken and answered in v12's classes, v13+ in v17's (a follower's v12
# fetch is not converted).
# Chain replication (Samsa's, replication.pipeline.enable: broker/replication/chain.py): a follower
# serves its chain successor's replica fetch from its own log up to its LEO (leader epoch fenced as
# on the leader; NOT_LEADER_OR_FOLLOWER to any other replica), and a v12 follower fetch may carry
# its successors' states in a Samsa-reserved tagged field (protocol/schemas/fetch_v12_chain.py;
# malformed: ignored with a log line, as Kafka ignores the tag), which the leader applies.
# Not supported: v18 (the follower's high watermark, KIP-1166), rack-aware preferred read replicas.
from __future__ import annotations

import logging
import uuid
from typing import Any, cast

from kio.schema.fetch.v12.request import FetchRequest as FetchRequestV12
from kio.schema.fetch.v12.request import FetchTopic as FetchTopicV12
from kio.schema.fetch.v12.response import AbortedTransaction as AbortedTransactionV12
from kio.schema.fetch.v12.response import FetchableTopicResponse as FetchableTopicResponseV12
from kio.schema.fetch.v12.response import FetchResponse as FetchResponseV12
from kio.schema.fetch.v12.response import PartitionData as PartitionDataV12
from kio.schema.fetch.v17.request import FetchRequest
from kio.schema.fetch.v17.response import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from kio.static.primitive import i32, i64

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._leaders import LeaderDiscovery
from broker.replication.partition import FetchIsolation
from broker.replication.replica_manager import FetchRequestPartition, FetchResult
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.kio_compat import as_records
from protocol.messages import convert, replace
from protocol.schemas.fetch_v12_chain import ChainReport, decode_chain_reports
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, BrokerId, Offset, ProducerId, TopicName

API_KEY = 1
log = logging.getLogger("samsa.fetch")
ZERO_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1
FINAL_EPOCH = -1
INITIAL_EPOCH = 0


_LEADER_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


def _upgrade(api_version: int, request: Any) -> FetchRequestV12 | FetchRequest:
    """v4-12 as v12 (topics by name), v13+ as v17 (topics by id); v12 as decoded (Samsa's class,
    with the chain reports)."""
    if api_version == 12:
        return request
    return convert(request, FetchRequestV12 if api_version <= 12 else FetchRequest)


def _chain_reports(ctx: RequestContext, p: Any) -> tuple[ChainReport, ...]:
    """A follower's reports on its chain successors (v12, Samsa's tagged field). A malformed field
    is ignored, with a log line, as Kafka ignores the tag: the fetch is served."""
    data = getattr(p, "chain_reports", None)
    if not data:
        return ()
    try:
        return decode_chain_reports(data)
    except ValueError as e:
        log.warning("chain reports ignored client_id=%s correlation_id=%d partition=%d error=%s",
                    ctx.client_id, ctx.correlation_id, p.partition, e)  # fmt: skip
        return ()


def _partition_fields(result: FetchResult, read_committed: bool, aborted_kind: type) -> dict[str, Any]:
    """A partition's answer, as the fields of v12's and v17's PartitionData (the same in both)."""
    read = result.read
    records = read.info.records if read is not None and read.info is not None else None
    aborted = None
    if read_committed:
        aborted = tuple(
            aborted_kind(producer_id=ProducerId(t.producer_id), first_offset=i64(t.first_offset))
            for t in (read.aborted_transactions or () if read is not None else ())
        )
    # casts, not i32()/i64(): kio's phantom types check a value when built (about 1 µs each, per
    # partition of every fetch); these are the broker's own ints, and the writer's struct.pack
    # refuses any out of range
    return {
        "partition_index": cast(i32, result.tp.partition),
        "error_code": result.error,
        "high_watermark": cast(i64, read.high_watermark if read else -1),
        "last_stable_offset": cast(i64, read.last_stable_offset if read else -1),
        "log_start_offset": cast(i64, read.log_start_offset if read else -1),
        "aborted_transactions": aborted,
        "records": as_records(records if records is not None else b""),
    }


def _session_error(request: FetchRequestV12 | FetchRequest) -> ErrorCode:
    """Kafka's FetchManager.newContext without sessions: a full fetch is served, an incremental
    one names a session that does not exist."""
    if request.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        return ErrorCode.none
    return ErrorCode.fetch_session_id_not_found


@registry.api(API_KEY, upgrade=_upgrade)
async def handle(ctx: RequestContext, request: FetchRequestV12 | FetchRequest) -> FetchResponse | FetchResponseV12:
    by_id = isinstance(request, FetchRequest)
    session_error = _session_error(request)
    if session_error != ErrorCode.none:
        return (FetchResponse if by_id else FetchResponseV12)(
            throttle_time=NO_THROTTLE, error_code=session_error, session_id=i32(0), responses=()
        )
    replica_id = request.replica_state.replica_id if isinstance(request, FetchRequest) else request.replica_id
    is_follower = replica_id >= 0
    read_committed = request.isolation_level == READ_COMMITTED
    if is_follower:
        isolation = FetchIsolation.LOG_END
    elif read_committed:
        isolation = FetchIsolation.TXN_COMMITTED
    else:
        isolation = FetchIsolation.HIGH_WATERMARK
    image = ctx.services.controller.image
    # A partition named twice is fetched once, with its last entry, in its first place (Kafka's
    # fetch session keeps the partitions in a LinkedHashMap).
    wanted: dict[TopicPartition, FetchRequestPartition] = {}
    unknown_ids: dict[tuple[uuid.UUID, int], None] = {}
    ids: dict[str, uuid.UUID] = {}
    for topic in request.topics:
        if isinstance(topic, FetchTopicV12):
            name: str | None = topic.topic
        else:
            registration = image.topic_by_id(topic.topic_id) if topic.topic_id is not None else None
            name = None
            if registration is not None:
                name = registration.name
                ids[name] = registration.topic_id
        for p in topic.partitions:
            if name is None:
                assert not isinstance(topic, FetchTopicV12)
                unknown_ids[(topic.topic_id or ZERO_UUID, int(p.partition))] = None
                continue
            tp = TopicPartition(name, p.partition)
            wanted[tp] = FetchRequestPartition(
                tp=tp,
                fetch_offset=Offset(p.fetch_offset),
                max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                log_start_offset=Offset(p.log_start_offset),
                chain_reports=_chain_reports(ctx, p) if is_follower else (),
            )
    # Kafka's order of the refused: unknown ids, then in request order the partitions not
    # authorized or not in the cluster's metadata; they are answered after those read.
    allowed_cluster = is_follower and ctx.authorized(AclOperation.CLUSTER_ACTION)
    refused: list[FetchResult] = []
    for tp in wanted:
        if not (allowed_cluster if is_follower else ctx.authorized(AclOperation.READ, ResourceType.TOPIC, tp.topic)):
            refused.append(FetchResult(tp, ErrorCode.topic_authorization_failed))
        elif image.partition(tp.topic, tp.partition) is None:
            refused.append(FetchResult(tp, ErrorCode.unknown_topic_or_partition))
    for result in refused:
        del wanted[result.tp]
    max_bytes = min(request.max_bytes, ctx.services.config.fetch_max_bytes)
    if not is_follower:  # no more than the consumer's quota lets through in a window (Kafka's maxQuotaWindowBytes)
        max_bytes = min(max_bytes, ctx.services.quotas.max_fetch_bytes(ctx.principal.name, ctx.client_id or ""))
    results = await ctx.services.replica_manager.fetch_messages(
        list(wanted.values()),
        isolation,
        max_wait_ms=int(request.max_wait.total_seconds() * 1000),
        min_bytes=min(request.min_bytes, max_bytes),
        max_bytes=max_bytes,
        replica_id=replica_id if is_follower else -1,
    )
    if not by_id:
        return _response_v12(results + refused, read_committed)
    leaders = LeaderDiscovery(image, ctx.listener) if ctx.api_version >= 16 else None
    responses: list[FetchableTopicResponse] = []
    for result in results:
        data = PartitionData(**_partition_fields(result, read_committed, AbortedTransaction))
        if leaders is not None and result.error in _LEADER_ERRORS:
            leader_id, leader_epoch = leaders.current_leader(result.tp)
            data = replace(data, current_leader=LeaderIdAndEpoch(
                leader_id=BrokerId(leader_id), leader_epoch=i32(leader_epoch)))  # fmt: skip
        _add(responses, ids[result.tp.topic], data)
    for topic_id, partition in unknown_ids:
        _add(responses, topic_id, PartitionData(
            partition_index=i32(partition), error_code=ErrorCode.unknown_topic_id, high_watermark=i64(-1),
            last_stable_offset=i64(-1), log_start_offset=i64(-1), aborted_transactions=None, records=as_records(b""),
        ))  # fmt: skip
    for result in refused:
        _add(responses, ids[result.tp.topic], PartitionData(**_partition_fields(result, False, AbortedTransaction)))
    return FetchResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=tuple(responses),
        node_endpoints=tuple(
            NodeEndpoint(node_id=BrokerId(n.node_id), host=n.host, port=i32(n.port), rack=n.rack)
            for n in (leaders.nodes if leaders is not None else ())
        ),
    )


def _add(responses: list[FetchableTopicResponse], topic_id: uuid.UUID, data: PartitionData) -> None:
    """Append `data` under its topic, extending the last topic entry if it is the same topic."""
    if responses and responses[-1].topic_id == topic_id:
        last = responses[-1]
        responses[-1] = FetchableTopicResponse(topic_id=topic_id, partitions=(*last.partitions, data))
    else:
        responses.append(FetchableTopicResponse(topic_id=topic_id, partitions=(data,)))


def _response_v12(results: list[FetchResult], read_committed: bool) -> FetchResponseV12:
    responses: list[FetchableTopicResponseV12] = []
    for result in results:
        data = PartitionDataV12(**_partition_fields(result, read_committed, AbortedTransactionV12))
        if responses and responses[-1].topic == result.tp.topic:
            last = responses[-1]
            responses[-1] = FetchableTopicResponseV12(topic=last.topic, partitions=(*last.partitions, data))
        else:
            responses.append(FetchableTopicResponseV12(topic=TopicName(result.tp.topic), partitions=(data,)))
    return FetchResponseV12(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=tuple(responses),
    )
