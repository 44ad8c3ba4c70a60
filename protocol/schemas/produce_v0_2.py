"""Produce v0-v2 (dropped from Kafka 4.x specs, still needed by librdkafka < 2.11.1).

librdkafka before 2.11.1 only compresses if the broker advertises Produce v0 (docs/clients.md),
so Samsa serves v0-2. The request shape is the same in all three; the
response gains throttle_time_ms in v1 and log_append_time in v2. kio generates its classes from
Kafka 4.x's specs, which no longer have these versions, so they are written here in kio's form;
compat/test_produce_v0_2_schemas.py holds them byte for byte against the classes kafka-clients 3.9
generated from its specs. No `from __future__ import annotations` here: kio reads the field types
from the annotations at run time.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import Records, TZAware, i16, i32, i32Timedelta, i64

from protocol.types import NO_THROTTLE


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProduceData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(0)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    index: i32 = field(metadata={"kafka_type": "int32"})
    records: Records | None = field(metadata={"kafka_type": "records"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicProduceData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(0)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_data: tuple[PartitionProduceData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(0)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    acks: i16 = field(metadata={"kafka_type": "int16"})
    timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    topic_data: tuple[TopicProduceData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProduceResponseV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(0)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    base_offset: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionProduceResponseV2:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(0)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    base_offset: i64 = field(metadata={"kafka_type": "int64"})
    log_append_time: TZAware | None = field(metadata={"kafka_type": "datetime_i64"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicProduceResponseV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(0)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_responses: tuple[PartitionProduceResponseV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicProduceResponseV2:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(0)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_responses: tuple[PartitionProduceResponseV2, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(0)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    responses: tuple[TopicProduceResponseV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(0)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    responses: tuple[TopicProduceResponseV0, ...]
    throttle_time: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"}, default=NO_THROTTLE
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResponseV2:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(0)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    responses: tuple[TopicProduceResponseV2, ...]
    throttle_time: i32Timedelta = field(
        metadata={"kafka_type": "timedelta_i32"}, default=NO_THROTTLE
    )


SCHEMAS: dict[int, tuple[type, type]] = {
    0: (ProduceRequest, ProduceResponseV0),
    1: (ProduceRequest, ProduceResponseV1),
    2: (ProduceRequest, ProduceResponseV2),
}
