"""Raw-bytes requests for the protocol fidelity tests (issue 13): the same helpers drive Samsa in
tests/integration/test_fidelity.py and both Samsa and Apache Kafka in compat/test_fidelity.py.

Everything here works on any Kafka-compatible broker: topics are created with CreateTopics, and a
new topic's leadership (which reaches Kafka a moment after CreateTopics answers) is waited for.
"""

from __future__ import annotations

import datetime
import importlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.create_topics.v7.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from protocol.records import HEADER_SIZE, BatchHeader, NewRecord, build_batch
from protocol.schemas.fetch_v12_chain import FetchPartition, FetchRequest, FetchTopic
from tests.support.raw_client import RawClient
from tests.support.wire import produce

__all__ = [
    "FetchAnswer", "await_coordinator", "batch_of", "create_topic", "create_topics", "fetch", "fetch_by_id",
    "list_offsets", "metadata",
    "produce",
    "topic_id", "wait_for_leader",
]


def create_topic(client: RawClient, topic: str, configs: dict[str, str] | None = None, partitions: int = 1) -> None:
    """CreateTopics v7 (replication factor 1), then wait until the partitions have a leader."""
    answer = create_topics(client, topic, configs, partitions)
    assert answer[0] == 0, (topic, answer)
    for p in range(partitions):
        wait_for_leader(client, topic, p)


def create_topics(
    client: RawClient, topic: str, configs: dict[str, str] | None = None, partitions: int = 1
) -> tuple[int, str | None]:
    """CreateTopics v7 of one topic (replication factor 1): (error code, message)."""
    response = client.request(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=TopicName(topic),
                    num_partitions=i32(partitions),
                    replication_factor=i16(1),
                    assignments=(),
                    configs=tuple(
                        CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                    ),
                ),
            ),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            validate_only=False,
        )
    )
    (created,) = response.topics
    return int(created.error_code), created.error_message


def wait_for_leader(client: RawClient, topic: str, partition: int = 0, timeout: float = 30) -> None:
    """Until a fetch of the partition answers without error."""
    deadline = time.monotonic() + timeout
    while True:
        answer = fetch(client, [(topic, partition, 0)])
        if answer.error == 0 and answer.partitions[0][2] == 0:
            return
        assert time.monotonic() < deadline, f"{topic}-{partition} has no leader: {answer}"
        time.sleep(0.1)


def batch_of(count: int, value_size: int = 10, key: bytes | None = b"k") -> bytes:
    """One uncompressed batch of `count` records, timestamped now."""
    now = int(time.time() * 1000)
    return build_batch(
        [NewRecord(key=key, value=b"v" * value_size, timestamp=now) for _ in range(count)]
    )


@dataclass(frozen=True)
class FetchAnswer:
    """A Fetch response: top-level error, session id, and per partition (topic, partition, error,
    high watermark, base offsets of the whole batches returned, bytes returned)."""

    error: int
    session_id: int
    partitions: tuple[tuple[str, int, int, int, tuple[int, ...], int], ...]
    seconds: float


def fetch(
    client: RawClient,
    parts: Sequence[tuple[str, int, int]],
    *,
    session_id: int = 0,
    session_epoch: int = -1,
    min_bytes: int = 1,
    max_wait_ms: int = 0,
    partition_max_bytes: int = 1 << 20,
    isolation_level: int = 0,
    chain_reports: bytes | None = None,
) -> FetchAnswer:
    """Fetch v12 of (topic, partition, offset)s, timed; `chain_reports`: Samsa's tagged field on
    each partition (kio's v12 bytes without it)."""
    topics: dict[str, list[FetchPartition]] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append(
            FetchPartition(
                partition=i32(partition),
                current_leader_epoch=i32(-1),
                fetch_offset=i64(offset),
                last_fetched_epoch=i32(-1),
                log_start_offset=i64(-1),
                partition_max_bytes=i32(partition_max_bytes),
                chain_reports=chain_reports,
            )
        )
    request = FetchRequest(
        replica_id=BrokerId(-1),
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
        min_bytes=i32(min_bytes),
        max_bytes=i32(50 << 20),
        isolation_level=i8(isolation_level),
        session_id=i32(session_id),
        session_epoch=i32(session_epoch),
        topics=tuple(FetchTopic(topic=TopicName(t), partitions=tuple(ps)) for t, ps in topics.items()),
        forgotten_topics_data=(),
        rack_id="",
    )
    started = time.monotonic()
    response = client.request(request)
    seconds = time.monotonic() - started
    partitions = []
    for t in response.responses:
        for p in t.partitions:
            data = bytes(p.records or b"")
            partitions.append(
                (str(t.topic), int(p.partition_index), int(p.error_code), int(p.high_watermark), _batch_bases(data),
                 len(data))
            )  # fmt: skip
    return FetchAnswer(int(response.error_code), int(response.session_id), tuple(partitions), seconds)


def _batch_bases(data: bytes) -> tuple[int, ...]:
    """Base offsets of the whole batches in `data`."""
    bases = []
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        header = BatchHeader.parse(data, pos)
        if pos + header.size > len(data):
            break
        bases.append(int(header.base_offset))
        pos += header.size
    return tuple(bases)


def fetch_by_id(
    client: RawClient, parts: Sequence[tuple[uuid.UUID, int, int]], version: int, *, current_leader_epoch: int = -1
) -> tuple[int, list[tuple[uuid.UUID, int, int, int, tuple[int, ...]]]]:
    """Fetch v13+ of (topic id, partition, offset)s, sessionless: (top-level error, per partition
    (topic id, partition, error, high watermark, base offsets of the whole batches))."""
    schema = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    topics: dict[uuid.UUID, list[Any]] = {}
    for tid, partition, offset in parts:
        topics.setdefault(tid, []).append(schema.FetchPartition(
            partition=i32(partition), current_leader_epoch=i32(current_leader_epoch), fetch_offset=i64(offset),
            last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20),
        ))  # fmt: skip
    response = client.request(schema.FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=0)), min_bytes=i32(1), max_bytes=i32(50 << 20),
        isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=tuple(schema.FetchTopic(topic_id=t, partitions=tuple(ps)) for t, ps in topics.items()),
        forgotten_topics_data=(), rack_id="",
    ))  # fmt: skip
    return int(response.error_code), [
        (t.topic_id, int(p.partition_index), int(p.error_code), int(p.high_watermark),
         _batch_bases(bytes(p.records or b"")))
        for t in response.responses for p in t.partitions
    ]  # fmt: skip


def list_offsets(client: RawClient, topic: str, timestamp: int, version: int) -> tuple[int, int, int, int]:
    """ListOffsets of `version` for partition 0 of `topic` at `timestamp`: (error, timestamp,
    offset, leader epoch); v1 has no leader epoch (-1)."""
    schema = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
    partition: dict[str, Any] = {"partition_index": i32(0), "timestamp": i64(timestamp)}
    if version >= 4:
        partition["current_leader_epoch"] = i32(-1)
    fields: dict[str, Any] = {"replica_id": BrokerId(-1)}
    if version >= 2:
        fields["isolation_level"] = i8(0)
    if version >= 10:
        fields["timeout"] = i32Timedelta.parse(datetime.timedelta(seconds=5))
    response = client.request(schema.ListOffsetsRequest(topics=(schema.ListOffsetsTopic(
        name=TopicName(topic), partitions=(schema.ListOffsetsPartition(**partition),)),), **fields))  # fmt: skip
    (p,) = response.topics[0].partitions
    return int(p.error_code), int(p.timestamp), int(p.offset), int(getattr(p, "leader_epoch", -1))


def await_coordinator(client: RawClient, key: str, key_type: int = 0, timeout_s: float = 60) -> None:
    """Until FindCoordinator v6 finds the coordinator of `key` (key type 0 group, 1 transactional
    id, 2 share partition): the first lookup creates the coordinator's topic, whose leaders come a
    moment later."""
    from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest

    request = FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=(key,))
    deadline = time.monotonic() + timeout_s
    while (answer := client.request(request).coordinators[0]).error_code != 0:
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)


def topic_id(client: RawClient, topic: str) -> uuid.UUID:
    """The topic's id, from Metadata v12."""
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    response = client.request(MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=TopicName(topic)),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    ))  # fmt: skip
    (found,) = response.topics
    assert found.error_code == 0 and found.topic_id is not None, found
    return found.topic_id


def metadata(
    client: RawClient, topics: Sequence[str], version: int, *, allow_auto_creation: bool = True
) -> list[tuple[str, int, int]]:
    """Metadata of `version` naming `topics`: (name, error code, partition count) per topic.
    v0-3 have no auto-creation flag (they always allow it)."""
    schema = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    fields: dict[str, object] = {}
    if version >= 4:
        fields["allow_auto_topic_creation"] = allow_auto_creation
    if 8 <= version <= 10:
        fields["include_cluster_authorized_operations"] = False
    if version >= 8:
        fields["include_topic_authorized_operations"] = False
    named = [
        schema.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=TopicName(t))
        if version >= 10
        else schema.MetadataRequestTopic(name=TopicName(t))
        for t in topics
    ]
    response = client.request(schema.MetadataRequest(topics=tuple(named), **fields))
    return [(str(t.name), int(t.error_code), len(t.partitions)) for t in response.topics]


BROKER = 4
TOPIC = 2
SET, DELETE = 0, 1


def incremental_alter_configs(
    client: RawClient, resource_type: int, name: str, ops: Sequence[tuple[str, int, str | None]]
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 of one resource with (config, operation, value)s: (error code,
    message)."""
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    response = client.request(
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=i8(resource_type),
                    resource_name=name,
                    configs=tuple(
                        AlterableConfig(name=k, config_operation=i8(op), value=v) for k, op, v in ops
                    ),
                ),
            ),
            validate_only=False,
        )
    )
    (answer,) = response.responses
    return int(answer.error_code), answer.error_message


def describe_configs(
    client: RawClient, resource_type: int, name: str, keys: Sequence[str] | None = None
) -> dict[str, tuple[str | None, int, bool]]:
    """DescribeConfigs v4 of one resource: config -> (value, source, read only)."""
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

    response = client.request(
        DescribeConfigsRequest(
            resources=(
                DescribeConfigsResource(
                    resource_type=i8(resource_type),
                    resource_name=name,
                    configuration_keys=None if keys is None else tuple(keys),
                ),
            ),
            include_synonyms=False,
            include_documentation=False,
        )
    )
    (result,) = response.results
    assert result.error_code == 0, (result.error_code, result.error_message)
    return {c.name: (c.value, int(c.config_source), bool(c.read_only)) for c in result.configs}
