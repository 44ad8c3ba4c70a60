# Produce (key 0), versions 0-12.
# Each partition's records are checked in full before the append (broker/log/validation.py, as
# Kafka's ProduceRequest.validateRecords, UnifiedLog.analyzeAndValidateRecords and LogValidator):
# v3+ must carry exactly one magic v2 batch per partition (INVALID_RECORD otherwise, a trailing
# partial batch is ignored, a batch size below 14 or a magic above 2 is CORRUPT_MESSAGE), zstd needs
# v7+ (UNSUPPORTED_COMPRESSION_TYPE), the batch's baseOffset must be 0; then the header, CRC and
# every record (INVALID_RECORD, INVALID_TIMESTAMP with KIP-467 record errors in v8+,
# MESSAGE_TOO_LARGE for a batch or its decompressed records past the bound), by the replica
# manager's record checker (broker/replication/record_checker.py: small batches on the event loop,
# large ones and bombs in a worker thread) before the partition appends them. v0-2 may carry a
# legacy magic 0/1 message set, up-converted to one v2 batch by that check (librdkafka < 2.11.1
# needs v0 advertised to compress at all). A partition named twice
# in one request is answered once, for its last entry, and only that entry's batch is appended (as
# Kafka 4.x's map of partitions does). acks 0, 1 and -1 (all: waits in the produce purgatory for
# the high watermark; min.insync.replicas is checked before and after). With acks=0 an error closes
# the connection, as Kafka does, since there is no response to carry it.
# Transactional batches (KIP-98): with transaction.partition.verification.enable (KIP-890 part 1)
# each partition is first checked with the transaction coordinator of the request's transactional
# id: a partition its transaction has not added is TRANSACTION_ABORTABLE (v11+) or INVALID_TXN_STATE,
# a fenced epoch INVALID_PRODUCER_EPOCH, a coordinator that is loading, moving or completing the
# previous transaction NOT_ENOUGH_REPLICAS (retriable), as Kafka's AddPartitionsToTxnManager maps
# them; where another broker is the transaction coordinator it is asked with AddPartitionsToTxn v5
# verify-only (broker/txn/verification.py; unreachable: NOT_ENOUGH_REPLICAS). A partition where the
# producer already has a transaction open at that epoch is not checked again (Kafka's
# maybeStartTransactionVerification). The log then checks the producer's epoch and that a producer
# inside a transaction writes only transactional batches (INVALID_TXN_STATE).
# v12 (transactions v2, KIP-890 part 2): the client sends no AddPartitionsToTxn; the leader adds the
# partitions of a transactional batch to its transaction itself (AddPartitionsToTxn v5 without
# verify_only to a coordinator on another broker), whatever transaction.partition.verification.enable
# says, with the same error mapping.
# Authorization (Kafka's KafkaApis): WRITE on each topic (TOPIC_AUTHORIZATION_FAILED, checked before
# the topic's existence), WRITE on the transactional id of a transactional produce
# (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition).
# Leader discovery (KIP-951, v10+): a partition answered NOT_LEADER_OR_FOLLOWER carries its current
# leader and epoch, and the response the leaders' endpoints (broker/handlers/_leaders.py).
# Not supported: v13 (topics named by id, KIP-516: this handler resolves names only).
from __future__ import annotations

import datetime
import logging
import struct
from dataclasses import dataclass
from typing import cast

from kio.schema.produce.v12.request import ProduceRequest
from kio.schema.produce.v12.response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.static.primitive import TZAware, i32, i64

from broker.context import CloseConnection, RequestContext
from broker.handlers import registry
from broker.handlers._leaders import LeaderDiscovery
from controller.model import INTERNAL_TOPICS
from controller.placement import topic_name_error
from controller.security_model import AclOperation, ResourceType
from protocol.compression import CompressionType
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import replace
from protocol.record_check import RecordError
from protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_OFFSET,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
)
from protocol.topic_partition import TopicPartition
from protocol.types import NO_THROTTLE, BrokerId, TopicName

API_KEY = 0
FIRST_V2_VERSION = 12
"""Produce v12+ come from transactions v2 clients: the leader adds the partition to the transaction."""
log = logging.getLogger("samsa.produce")

_BATCH_SIZE = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")
_RECORDS_COUNT = struct.Struct(">i")
_MIN_BATCH_SIZE = 14
"""Kafka's LegacyRecord.RECORD_OVERHEAD_V0: a batch (or message) size below it is corrupt."""

# The client sent records the broker will not take: answered with the code, as Kafka does, and
# logged, since a client rarely shows the code to anyone.
_REJECTED_RECORDS = frozenset(
    {
        ErrorCode.corrupt_message,
        ErrorCode.invalid_record,
        ErrorCode.invalid_timestamp,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.unsupported_compression_type,
    }
)

@dataclass(frozen=True, slots=True)
class _Rejected:
    code: ErrorCode
    message: str | None
    record_errors: tuple[RecordError, ...] = ()

    @classmethod
    def of(cls, error: KafkaError) -> _Rejected:
        return cls(error.code, error.message, getattr(error, "record_errors", ()))


def _partition_response(
    index: int,
    error: ErrorCode,
    message: str | None = None,
    base_offset: int = -1,
    log_append_time: int = -1,
    log_start_offset: int = -1,
    record_errors: tuple[RecordError, ...] = (),
) -> PartitionProduceResponse:
    # casts, not i32()/i64(): kio's phantom types check a value when built (about 1 µs each, per
    # partition of every produce); these are the broker's own ints, and the writer's struct.pack
    # refuses any out of range
    return PartitionProduceResponse(
        index=cast(i32, index),
        error_code=error,
        base_offset=cast(i64, base_offset),
        log_append_time=(
            # kio's TZAware check refuses sub-second datetimes; its writer encodes milliseconds
            cast(TZAware, datetime.datetime.fromtimestamp(log_append_time / 1000, tz=datetime.UTC))
            if log_append_time >= 0
            else None
        ),
        log_start_offset=cast(i64, log_start_offset),
        record_errors=tuple(
            BatchIndexAndErrorMessage(batch_index=i32(e.batch_index), batch_index_error_message=e.message)
            for e in record_errors
        ),
        error_message=message,
    )


def validate_records(records: bytes | None, api_version: int) -> bytes:
    """The partition's records as Kafka's ProduceRequest.validateRecords takes them (KafkaError
    otherwise): one magic v2 batch whose baseOffset is 0, without what follows its end; or, in
    v0-2, a legacy message set (up-converted later, in the record check)."""
    if not records:
        raise KafkaError(
            ErrorCode.invalid_record,
            f"Produce requests with version {api_version} must have at least one record batch per partition",
        )
    batches = _whole_batches(records)
    if not batches:
        raise KafkaError(
            ErrorCode.invalid_record,
            f"Produce requests with version {api_version} must have at least one record batch per partition",
        )
    magic = records[16]
    if api_version < 3 and magic < CURRENT_MAGIC:
        return records
    if magic != CURRENT_MAGIC:
        raise KafkaError(
            ErrorCode.invalid_record,
            f"Produce requests with version {api_version} are only allowed to contain record batches with magic version 2",
        )
    codec = records[ATTRIBUTES_OFFSET + 1] & ATTR_COMPRESSION_MASK
    if api_version < 7 and codec == CompressionType.ZSTD:
        raise KafkaError(
            ErrorCode.unsupported_compression_type,
            f"Produce requests with version {api_version} are not allowed to use ZStandard compression",
        )
    if len(batches) > 1:
        raise KafkaError(
            ErrorCode.invalid_record,
            f"Produce requests with version {api_version} must have exactly one record batch per partition",
        )
    (base_offset,) = _BASE_OFFSET.unpack_from(records, 0)
    if base_offset != 0:
        raise KafkaError(
            ErrorCode.invalid_record, f"The baseOffset of the record batch should be 0, but it is {base_offset}"
        )
    return records[: batches[0]]


def _whole_batches(records: bytes) -> list[int]:
    """End positions of the whole batches (or legacy messages) of `records`, read as Kafka's
    ByteBufferLogInputStream reads them: a size below 14 or a magic above 2 is CORRUPT_MESSAGE,
    a trailing part too short to hold its entry ends the list."""
    ends: list[int] = []
    pos = 0
    while len(records) - pos >= LOG_OVERHEAD:
        (size,) = _BATCH_SIZE.unpack_from(records, pos + 8)
        if size < _MIN_BATCH_SIZE:
            raise KafkaError(
                ErrorCode.corrupt_message,
                f"Record size {size} is less than the minimum record overhead ({_MIN_BATCH_SIZE})",
            )
        if len(records) - pos < 17:
            break
        magic = records[pos + 16]
        if magic > CURRENT_MAGIC:  # a signed byte in Kafka: 128-255 are negative magics
            signed = magic - 256 if magic > 127 else magic
            raise KafkaError(ErrorCode.corrupt_message, f"Invalid magic found in record: {signed}")
        if len(records) - pos < size + LOG_OVERHEAD:
            break
        pos += size + LOG_OVERHEAD
        ends.append(pos)
    return ends


_PRODUCER = struct.Struct(">qh")
_PRODUCER_OFFSET = 43
_RETRIABLE = frozenset({
    ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
    ErrorCode.concurrent_transactions, ErrorCode.network_exception,
})  # fmt: skip


def _has_ongoing_transaction(ctx: RequestContext, tp: TopicPartition, producer_id: int, epoch: int) -> bool:
    partition = ctx.services.replica_manager.partitions.get(tp)
    return partition is not None and partition.is_leader and partition.has_ongoing_transaction(producer_id, epoch)


async def _verify_transactional(
    ctx: RequestContext, transactional_id: str, entries: dict[TopicPartition, bytes]
) -> dict[TopicPartition, ErrorCode]:
    """KIP-890 part 1: the partitions whose transactional batch its transaction has not added,
    with the code the producer gets (Kafka's AddPartitionsToTxnManager and ReplicaManager mapping)."""
    wanted = [tp for tp, data in entries.items() if len(data) > _PRODUCER_OFFSET + 10
              and data[ATTRIBUTES_OFFSET + 1] & ATTR_TRANSACTIONAL]  # fmt: skip
    if not wanted:
        return {}
    producer_id, epoch = _PRODUCER.unpack_from(entries[wanted[0]], _PRODUCER_OFFSET)
    # as Kafka's maybeStartTransactionVerification: a transaction already open in the partition
    # at this epoch was checked (or added) when it began
    wanted = [tp for tp in wanted if not _has_ongoing_transaction(ctx, tp, producer_id, epoch)]
    if not wanted:
        return {}
    add = ctx.api_version >= FIRST_V2_VERSION
    failed = await ctx.services.txn_coordinator.verify_append(transactional_id, producer_id, epoch, wanted, add=add)
    out = {}
    for tp, code in failed.items():
        if code == ErrorCode.transaction_abortable and ctx.api_version < 11:
            code = ErrorCode.invalid_txn_state
        elif code in _RETRIABLE:
            code = ErrorCode.not_enough_replicas
        out[tp] = code
    return out


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    services = ctx.services
    acks = request.acks
    image = services.controller.image
    errors: dict[TopicPartition, _Rejected] = {}
    entries: dict[TopicPartition, bytes] = {}  # the last entry of each partition (as Kafka)
    order: list[TopicPartition] = []
    for topic in request.topic_data:
        for part in topic.partition_data:
            tp = TopicPartition(topic.name, part.index)
            if tp in errors or tp in entries:
                errors.pop(tp, None)
                entries.pop(tp, None)
            else:
                order.append(tp)
            try:
                if request.transactional_id is not None and not ctx.authorized(
                        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
                    raise KafkaError(ErrorCode.transactional_id_authorization_failed)
                if not ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, topic.name):
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                if acks not in (-1, 0, 1):
                    raise KafkaError(ErrorCode.invalid_required_acks, f"Invalid required acks {acks}")
                name_error = topic_name_error(topic.name)
                if name_error:
                    raise KafkaError(ErrorCode.invalid_topic_exception, name_error)
                if topic.name in INTERNAL_TOPICS:
                    raise KafkaError(
                        ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic.name}"
                    )
                if image.partition(topic.name, part.index) is None:
                    raise KafkaError(
                        ErrorCode.unknown_topic_or_partition,
                        "This server does not host this topic-partition.",
                    )
                entries[tp] = validate_records(part.records, ctx.api_version)
            except KafkaError as e:
                errors[tp] = _Rejected.of(e)

    if request.transactional_id and (
        ctx.api_version >= FIRST_V2_VERSION or services.config.transaction_partition_verification_enable
    ):
        for tp, code in (await _verify_transactional(ctx, request.transactional_id, entries)).items():
            errors[tp] = _Rejected(code, "The partition is not part of the producer's transaction")
            del entries[tp]
    results = await services.replica_manager.append_records(
        list(entries.items()), acks, int(request.timeout.total_seconds() * 1000), appended=ctx.release
    )

    if acks == 0:
        failed: list[tuple[TopicPartition, ErrorCode]] = [
            (tp, r.error) for tp, r in results.items() if r.error != ErrorCode.none
        ]
        failed += [(tp, e.code) for tp, e in errors.items()]
        if failed:
            raise CloseConnection(f"acks=0 produce failed: {[(str(tp), e.name) for tp, e in failed]}")
        return None

    leaders = LeaderDiscovery(image, ctx.listener) if ctx.api_version >= 10 else None
    by_topic: dict[str, list[PartitionProduceResponse]] = {}
    for tp in order:
        r = results.get(tp)
        rejected = errors[tp] if r is None else _Rejected(r.error, r.message, r.record_errors)
        if rejected.code in _REJECTED_RECORDS:
            log.info(
                "produce rejected client_id=%s correlation_id=%d topic=%s partition=%d error=%s record_errors=%d message=%s",
                ctx.client_id, ctx.correlation_id, tp.topic, tp.partition, rejected.code.name,
                len(rejected.record_errors), rejected.message,
            )  # fmt: skip
        if r is None or r.error != ErrorCode.none or r.info is None:
            resp = _partition_response(
                tp.partition, rejected.code, rejected.message, record_errors=rejected.record_errors
            )
            if leaders is not None and rejected.code == ErrorCode.not_leader_or_follower:
                leader_id, leader_epoch = leaders.current_leader(tp)
                resp = replace(resp, current_leader=LeaderIdAndEpoch(
                    leader_id=BrokerId(leader_id), leader_epoch=i32(leader_epoch)))  # fmt: skip
        else:
            resp = _partition_response(
                tp.partition,
                ErrorCode.none,
                base_offset=r.info.first_offset,
                log_append_time=r.info.log_append_time,
                log_start_offset=r.info.log_start_offset,
            )
        by_topic.setdefault(tp.topic, []).append(resp)
    return ProduceResponse(
        responses=tuple(
            TopicProduceResponse(name=TopicName(name), partition_responses=tuple(parts))
            for name, parts in by_topic.items()
        ),
        throttle_time=NO_THROTTLE,
        node_endpoints=tuple(
            NodeEndpoint(node_id=BrokerId(n.node_id), host=n.host, port=i32(n.port), rack=n.rack)
            for n in (leaders.nodes if leaders is not None else ())
        ),
    )
