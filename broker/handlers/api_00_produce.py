# Produce (key 0), versions 0-11.
# Each partition's records are one opaque batch: the log checks its header and CRC-32C, assigns
# offsets by rewriting baseOffset in place, and appends (see broker/log). v3+ must carry exactly one
# magic v2 batch per partition (INVALID_RECORD otherwise, as Kafka); v0-2 may carry a legacy magic
# 0/1 message set, which is converted to v2 batches before the append (librdkafka < 2.11.1 needs
# v0 advertised to compress at all). acks 0, 1 and -1 (all: waits in the produce purgatory for the
# high watermark; min.insync.replicas is checked before and after). With acks=0 an error closes
# the connection, as Kafka does, since there is no response to carry it.
# Not supported: transactional produce (INVALID_TXN_STATE until transactions exist); v12-13.
from __future__ import annotations

import datetime
import logging

from kio.schema.produce.v11.request import ProduceRequest
from kio.schema.produce.v11.response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.static.primitive import i32, i64

from broker.context import CloseConnection, RequestContext
from broker.handlers import registry
from controller.model import INTERNAL_TOPICS
from controller.placement import topic_name_error
from protocol import legacy
from protocol.errors import ErrorCode, KafkaError
from protocol.records import CURRENT_MAGIC, iter_batch_headers, magic_of
from protocol.topic_partition import TopicPartition

API_KEY = 0
log = logging.getLogger("samsa.produce")

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


def _partition_response(
    index: int,
    error: ErrorCode,
    message: str | None = None,
    base_offset: int = -1,
    log_append_time: int = -1,
    log_start_offset: int = -1,
) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=i32(index),
        error_code=error,
        base_offset=i64(base_offset),
        log_append_time=(
            datetime.datetime.fromtimestamp(log_append_time / 1000, tz=datetime.timezone.utc)
            if log_append_time >= 0
            else None
        ),
        log_start_offset=i64(log_start_offset),
        record_errors=(),
        error_message=message,
    )


def validate_records(records: bytes | None, api_version: int) -> bytes:
    """Records as v2 batches ready for the log, or KafkaError (Kafka's ProduceRequest rules)."""
    if not records:
        raise KafkaError(ErrorCode.invalid_record, "Produce request contains no record batch")
    magic = magic_of(records)
    if api_version >= 3:
        if magic != CURRENT_MAGIC:
            raise KafkaError(
                ErrorCode.invalid_record,
                f"Produce requests with version {api_version} are only allowed to contain record batches with magic version 2",
            )
        count = sum(1 for _ in iter_batch_headers(records))
        if count != 1:
            raise KafkaError(
                ErrorCode.invalid_record,
                f"Produce requests with version {api_version} must have exactly one record batch per partition",
            )
        return records
    if magic < CURRENT_MAGIC:
        return legacy.upconvert(records, strict=True)
    return records


@registry.api(API_KEY, 0, 11)
async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    acks = request.acks
    image = broker.controller.image
    errors: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    entries: list[tuple[TopicPartition, bytes]] = []
    order: list[TopicPartition] = []
    for topic in request.topic_data:
        for part in topic.partition_data:
            tp = TopicPartition(topic.name, part.index)
            order.append(tp)
            try:
                if request.transactional_id is not None:
                    raise KafkaError(ErrorCode.invalid_txn_state, "Transactions are not supported by this broker")
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
                entries.append((tp, validate_records(part.records, ctx.api_version)))
            except KafkaError as e:
                errors[tp] = (e.code, e.message)

    results = await broker.replica_manager.append_records(
        entries, acks, int(request.timeout.total_seconds() * 1000)
    )

    if acks == 0:
        failed = [(tp, r.error) for tp, r in results.items() if r.error != ErrorCode.none]
        failed += [(tp, code) for tp, (code, _) in errors.items()]
        if failed:
            raise CloseConnection(f"acks=0 produce failed: {[(str(tp), e.name) for tp, e in failed]}")
        return None

    by_topic: dict[str, list[PartitionProduceResponse]] = {}
    for tp in order:
        r = results.get(tp)
        code, message = errors[tp] if r is None else (r.error, r.message)
        if code in _REJECTED_RECORDS:
            log.info(
                "produce rejected client_id=%s correlation_id=%d topic=%s partition=%d error=%s message=%s",
                ctx.client_id, ctx.correlation_id, tp.topic, tp.partition, code.name, message,
            )  # fmt: skip
        if r is None or code != ErrorCode.none or r.info is None:
            resp = _partition_response(tp.partition, code, message)
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
            TopicProduceResponse(name=name, partition_responses=tuple(parts))
            for name, parts in by_topic.items()
        ),
        throttle_time=datetime.timedelta(0),
    )
