# Fetch (key 1), versions 4-12.
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
# Not supported: v13+ (topic ids in fetch), rack-aware preferred read replicas.
from __future__ import annotations

from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.response import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from kio.static.primitive import i32, i64

from broker.context import RequestContext
from broker.handlers import registry
from broker.replication.partition import FetchIsolation
from broker.replication.replica_manager import FetchRequestPartition, FetchResult
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.kio_compat import as_records
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, Offset, ProducerId, TopicName

API_KEY = 1
READ_COMMITTED = 1
FINAL_EPOCH = -1
INITIAL_EPOCH = 0


def _partition_data(result: FetchResult, read_committed: bool) -> PartitionData:
    read = result.read
    records = read.info.records if read is not None and read.info is not None else None
    aborted = None
    if read_committed:
        aborted = tuple(
            AbortedTransaction(producer_id=ProducerId(t.producer_id), first_offset=i64(t.first_offset))
            for t in (read.aborted_transactions or () if read is not None else ())
        )
    return PartitionData(
        partition_index=i32(result.tp.partition),
        error_code=result.error,
        high_watermark=i64(read.high_watermark if read else -1),
        last_stable_offset=i64(read.last_stable_offset if read else -1),
        log_start_offset=i64(read.log_start_offset if read else -1),
        aborted_transactions=aborted,
        records=as_records(records if records is not None else b""),
    )


def _session_error(request: FetchRequest) -> ErrorCode:
    """Kafka's FetchManager.newContext without sessions: a full fetch is served, an incremental
    one names a session that does not exist."""
    if request.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        return ErrorCode.none
    return ErrorCode.fetch_session_id_not_found


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    session_error = _session_error(request)
    if session_error != ErrorCode.none:
        return FetchResponse(
            throttle_time=NO_THROTTLE,
            error_code=session_error,
            session_id=i32(0),
            responses=(),
        )
    is_follower = request.replica_id >= 0
    read_committed = request.isolation_level == READ_COMMITTED
    if is_follower:
        isolation = FetchIsolation.LOG_END
    elif read_committed:
        isolation = FetchIsolation.TXN_COMMITTED
    else:
        isolation = FetchIsolation.HIGH_WATERMARK
    # A partition named twice is fetched once, with its last entry, in its first place (Kafka's
    # fetch session keeps the partitions in a LinkedHashMap).
    wanted: dict[TopicPartition, FetchRequestPartition] = {}
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            wanted[tp] = FetchRequestPartition(
                tp=tp,
                fetch_offset=Offset(p.fetch_offset),
                max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                log_start_offset=Offset(p.log_start_offset),
            )
    denied = {tp for tp in wanted if not (ctx.authorized(AclOperation.CLUSTER_ACTION) if is_follower
                                           else ctx.authorized(AclOperation.READ, ResourceType.TOPIC, tp.topic))}
    max_bytes = min(request.max_bytes, ctx.services.config.fetch_max_bytes)
    if not is_follower:  # no more than the consumer's quota lets through in a window (Kafka's maxQuotaWindowBytes)
        max_bytes = min(max_bytes, ctx.services.quotas.max_fetch_bytes(ctx.principal.name, ctx.client_id or ""))
    results = [FetchResult(tp, ErrorCode.topic_authorization_failed) for tp in wanted if tp in denied]
    results += await ctx.services.replica_manager.fetch_messages(
        [p for tp, p in wanted.items() if tp not in denied],
        isolation,
        max_wait_ms=int(request.max_wait.total_seconds() * 1000),
        min_bytes=min(request.min_bytes, max_bytes),
        max_bytes=max_bytes,
        replica_id=request.replica_id if is_follower else -1,
    )
    responses: list[FetchableTopicResponse] = []
    for result in results:
        data = _partition_data(result, read_committed)
        if responses and responses[-1].topic == result.tp.topic:
            last = responses[-1]
            responses[-1] = FetchableTopicResponse(topic=last.topic, partitions=(*last.partitions, data))
        else:
            responses.append(FetchableTopicResponse(topic=TopicName(result.tp.topic), partitions=(data,)))
    return FetchResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=tuple(responses),
    )
