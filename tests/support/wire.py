"""Typed helpers on top of tests/support/raw_client.py for the data path: InitProducerId, Produce
of a hand-built batch (protocol.records.build_batch), Fetch decoded into records, ListOffsets.
Tests use them to say exactly which producer id, epoch and sequence a batch carries."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from protocol.compression import CompressionType
from protocol.errors import ErrorCode
from protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    NewRecord,
    Record,
    build_batch,
    decode_records,
    verify_crc,
)
from tests.support.raw_client import RawClient

__all__ = ["RawClient", "ProduceAnswer", "init_producer_id", "produce", "idempotent_batch",
           "fetch", "fetch_batches", "fetch_all", "list_offset"]  # fmt: skip


@dataclass(frozen=True)
class ProduceAnswer:
    error: ErrorCode
    base_offset: int
    log_append_time: int
    log_start_offset: int
    error_message: str | None


def init_producer_id(client: RawClient) -> tuple[int, int]:
    """A new idempotent producer id and epoch."""
    resp = client.request(
        InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
            producer_id=ProducerId(-1),
            producer_epoch=i16(-1),
        )
    )
    assert resp.error_code == ErrorCode.none, resp
    return int(resp.producer_id), int(resp.producer_epoch)


def idempotent_batch(
    values: Sequence[bytes],
    producer_id: int,
    epoch: int,
    base_sequence: int,
    *,
    compression: CompressionType = CompressionType.NONE,
    timestamp: int | None = None,
) -> bytes:
    return build_batch(
        [NewRecord(None, v, (), timestamp) for v in values],
        compression=compression,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=base_sequence,
    )


def produce(client: RawClient, topic: str, partition: int, batch: bytes, acks: int = -1) -> ProduceAnswer:
    resp = client.request(
        ProduceRequest(
            transactional_id=None,
            acks=i16(acks),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
            topic_data=(
                TopicProduceData(
                    name=TopicName(topic),
                    partition_data=(PartitionProduceData(index=i32(partition), records=batch),),
                ),
            ),
        )
    )
    (t,) = resp.responses
    (p,) = t.partition_responses
    lat = p.log_append_time
    return ProduceAnswer(
        ErrorCode(p.error_code),
        int(p.base_offset),
        -1 if lat is None else int(lat.timestamp() * 1000),
        int(p.log_start_offset),
        p.error_message,
    )


def fetch(
    client: RawClient, topic: str, partition: int, offset: int, max_bytes: int = 4 << 20
) -> tuple[ErrorCode, int, list[Record]]:
    """One Fetch (no wait): (error, high watermark, decoded records of the returned batches,
    including those before `offset` when it falls inside a batch)."""
    error, hw, batches = fetch_batches(client, topic, partition, offset, max_bytes)
    return error, hw, [r for _, _, records in batches for r in records]


def fetch_all(client: RawClient, topic: str, partition: int = 0, start: int = 0) -> list[Record]:
    """Every record from `start` up to the high watermark."""
    out: list[Record] = []
    offset = start
    while True:
        error, hw, records = fetch(client, topic, partition, offset)
        assert error == ErrorCode.none, error
        records = [r for r in records if r.offset >= offset]
        out += records
        if records:
            offset = records[-1].offset + 1
        if offset >= hw:
            return out
        assert records, f"no progress at offset {offset} below high watermark {hw}"


def list_offset(client: RawClient, topic: str, partition: int, timestamp: int) -> tuple[ErrorCode, int, int]:
    """ListOffsets v7 for one partition: (error, offset, timestamp)."""
    resp = client.request(
        ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=i8(0),
            topics=(
                ListOffsetsTopic(
                    name=TopicName(topic),
                    partitions=(
                        ListOffsetsPartition(
                            partition_index=i32(partition),
                            current_leader_epoch=i32(-1),
                            timestamp=i64(timestamp),
                        ),
                    ),
                ),
            ),
        )
    )
    (t,) = resp.responses if hasattr(resp, "responses") else resp.topics
    (p,) = t.partitions
    return ErrorCode(p.error_code), int(p.offset), int(p.timestamp)


def fetch_batches(
    client: RawClient, topic: str, partition: int, offset: int, max_bytes: int = 4 << 20
) -> tuple[ErrorCode, int, list[tuple[int, int, list[Record]]]]:
    """Like `fetch`, but keeps the batches apart: (error, high watermark, [(base offset, last
    offset, records)]) for each whole batch returned."""
    resp = client.request(
        FetchRequest(
            replica_id=BrokerId(-1),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)),
            min_bytes=i32(0),
            max_bytes=i32(max_bytes),
            isolation_level=i8(0),
            session_id=i32(0),
            session_epoch=i32(-1),
            topics=(
                FetchTopic(
                    topic=TopicName(topic),
                    partitions=(
                        FetchPartition(
                            partition=i32(partition),
                            current_leader_epoch=i32(-1),
                            fetch_offset=i64(offset),
                            log_start_offset=i64(-1),
                            partition_max_bytes=i32(max_bytes),
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
    )
    (t,) = resp.responses
    (p,) = t.partitions
    data = bytes(p.records or b"")
    batches: list[tuple[int, int, list[Record]]] = []
    pos = 0
    # like Kafka, the broker may end the records with a partial batch cut at max_bytes, which
    # clients drop
    while pos + HEADER_SIZE <= len(data):
        h = BatchHeader.parse(data, pos)
        if pos + h.size > len(data):
            break
        assert verify_crc(data, pos, h), f"batch at {h.base_offset} fails its CRC"
        batches.append((int(h.base_offset), int(h.last_offset), decode_records(data, pos, h)))
        pos += h.size
    return ErrorCode(p.error_code), int(p.high_watermark), batches
