"""Malformed produced batches and duplicate partitions, as raw frames, against Samsa and Kafka.

Every batch of the catalogue in tests/support/malformed.py goes to a topic (default configs,
compacted, or LogAppendTime) in a Produce v11 request of its own; the observation is the error
code, the batch indexes of the KIP-467 record errors, how many records the log end offset moved
by, and, for an accepted batch, how it was stored (timestamp type, and whether maxTimestamp is
the one sent or the records' largest). Kafka's own answers are the specification: the
catalogue's `kafka_code` is asserted on Kafka, Samsa's code on Samsa, and the differences are
the entries of compat/differences.py that name these cases.

The second scenario names one partition twice in Produce, Fetch, ListOffsets, DeleteRecords,
OffsetCommit, OffsetFetch, OffsetForLeaderEpoch and OffsetDelete requests.
"""

from __future__ import annotations

import datetime
import importlib
import time
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.delete_records.v2.request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.list_offsets.v9.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_delete.v0.request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from protocol.records import HEADER_SIZE, BatchHeader, NewRecord, build_batch
from tests.support import malformed
from tests.support.clients import create_topic
from tests.support.raw_client import RawClient

TOPICS = {
    malformed.PLAIN: ("malformed-plain", {}),
    malformed.COMPACTED: ("malformed-compacted", {"cleanup.policy": "compact"}),
    malformed.LOG_APPEND_TIME: ("malformed-log-append-time", {"message.timestamp.type": "LogAppendTime"}),
}
VERSION_CASES = [
    ("zstd in Produce v6", 6, lambda: malformed.batch(malformed.zstd_frame(malformed.records(3)), 3, attributes=4)),
    ("zstd in Produce v7", 7, lambda: malformed.batch(malformed.zstd_frame(malformed.records(3)), 3, attributes=4)),
]
_TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=10))


def _port(target: Any) -> int:
    return int(target.bootstrap_servers.rsplit(":", 1)[1])


def _produce(client: RawClient, topic: str, data: bytes, version: int = 11, partitions: tuple[tuple[int, bytes], ...] | None = None) -> Any:
    schema = importlib.import_module(f"kio.schema.produce.v{version}.request")
    parts = partitions if partitions is not None else ((0, data),)
    request = schema.ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=_TIMEOUT,
        topic_data=(
            schema.TopicProduceData(
                name=TopicName(topic),
                partition_data=tuple(schema.PartitionProduceData(index=i32(i), records=d) for i, d in parts),
            ),
        ),
    )
    return client.request(request, api_version=version)


def _end_offset(client: RawClient, topic: str, partition: int = 0) -> int:
    """The partition's high watermark, once its leader answers (Kafka's leadership of a new
    topic's partitions arrives a moment after CreateTopics returns)."""
    deadline = time.monotonic() + 30
    while True:
        error, offset = _list_latest(client, topic, partition)
        if error == 0 or time.monotonic() > deadline:
            return offset
        time.sleep(0.1)


def _list_latest(client: RawClient, topic: str, partition: int) -> tuple[int, int]:
    response = client.request(
        ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=i8(0),
            topics=(
                ListOffsetsTopic(
                    name=TopicName(topic),
                    partitions=(ListOffsetsPartition(partition_index=i32(partition), current_leader_epoch=i32(-1), timestamp=i64(-1)),),
                ),
            ),
        )
    )
    answer = response.topics[0].partitions[0]
    return int(answer.error_code), int(answer.offset)


def _fetch_partition(partition: int, offset: int) -> FetchPartition:
    return FetchPartition(
        partition=i32(partition),
        current_leader_epoch=i32(-1),
        fetch_offset=i64(offset),
        log_start_offset=i64(-1),
        partition_max_bytes=i32(1 << 20),
    )


def _fetch(client: RawClient, topics: tuple[FetchTopic, ...]) -> Any:
    return client.request(
        FetchRequest(
            replica_id=BrokerId(-1),
            max_wait=i32Timedelta.parse(datetime.timedelta(0)),
            min_bytes=i32(0),
            max_bytes=i32(1 << 20),
            isolation_level=i8(0),
            session_id=i32(0),
            session_epoch=i32(-1),
            topics=topics,
            forgotten_topics_data=(),
            rack_id="",
        )
    )


def _stored_batch(client: RawClient, topic: str, offset: int) -> BatchHeader:
    response = _fetch(client, (FetchTopic(topic=TopicName(topic), partitions=(_fetch_partition(0, offset),)),))
    return BatchHeader.parse(bytes(response.responses[0].partitions[0].records or b""))


def observe_malformed(target: Any) -> list[dict[str, Any]]:
    """Each case's answer, checked here against the catalogue (Kafka's code on Kafka, Samsa's on
    Samsa: the normalised observations the test compares hide the deliberate differences)."""
    for topic, configs in TOPICS.values():
        create_topic(target.bootstrap_servers, topic, configs=configs)
    expected = {c.name: c for c in malformed.CASES}
    obs: list[dict[str, Any]] = []
    with RawClient(_port(target)) as client:
        cases = [(c.name, TOPICS[c.topic][0], 11, c.build) for c in malformed.CASES]
        cases += [(name, TOPICS[malformed.PLAIN][0], version, build) for name, version, build in VERSION_CASES]
        for name, topic, version, build in cases:
            sent = build()
            before = _end_offset(client, topic)
            answer = _produce(client, topic, sent, version).responses[0].partition_responses[0]
            after = _end_offset(client, topic)
            o: dict[str, Any] = {
                "step": "produce",
                "case": name,
                "error": answer.error_code.name,
                "recordErrors": [int(e.batch_index) for e in getattr(answer, "record_errors", ())],
                "appended": after - before,
            }
            if answer.error_code == 0 and after > before:
                header = _stored_batch(client, topic, before)
                sent_header = BatchHeader.parse(sent)
                o["storedType"] = header.timestamp_type.name
                o["storedMax"] = "sent" if header.max_timestamp == sent_header.max_timestamp else "rewritten"
            case = expected.get(name)
            if case is not None:
                code = case.kafka_code if target.name == "kafka" else case.code
                assert (o["error"], tuple(o["recordErrors"])) == (code.name, case.record_errors), (target.name, o)
                assert o["appended"] == (case.appended if code == 0 else 0), (target.name, o)
            obs.append(o)
    return obs


@pytest.mark.compat(client="raw protocol", scenario="malformed produced batches")
def test_malformed_batches(differential: Any) -> None:
    obs = {o["case"]: o for o in differential("raw-produce-malformed", observe_malformed)}
    assert obs["3 records claiming 2^31-1"] == {
        "step": "produce", "case": "3 records claiming 2^31-1", "error": "invalid_record", "recordErrors": [], "appended": 0,
    }
    assert obs["null keys on a compacted topic"]["recordErrors"] == [1, 3]
    assert obs["zstd in Produce v6"]["error"] == "unsupported_compression_type"
    assert (obs["zstd in Produce v7"]["error"], obs["zstd in Produce v7"]["appended"]) == ("none", 3)
    # Kafka rewrites maxTimestamp to the records' largest, and a CreateTime topic stores a batch the
    # producer marked LogAppendTime as CreateTime
    assert obs["maxTimestamp ahead, records not"]["storedMax"] == "rewritten"
    assert obs["producer sets LogAppendTime, in range"]["storedType"] == "CREATE_TIME"


def _group_coordinator_ready(client: RawClient, group: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        response = client.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)))
        if response.coordinators[0].error_code == 0 or time.monotonic() > deadline:
            return
        time.sleep(0.2)


def _until_coordinator_answers(send: Callable[[], Any]) -> Any:
    """Send again while the group coordinator is not ready (a loaded Kafka answered an OffsetCommit
    NOT_COORDINATOR after FindCoordinator had named it), as clients retry these errors."""
    retriable = {"not_coordinator", "coordinator_load_in_progress", "coordinator_not_available"}
    deadline = time.monotonic() + 30
    while True:
        response = send()
        errors = {p.error_code.name for t in response.topics for p in t.partitions}
        if not errors & retriable or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def observe_duplicates(target: Any) -> list[dict[str, Any]]:
    topic, group = "duplicate-partitions", "duplicate-partitions-group"
    create_topic(target.bootstrap_servers, topic, partitions=2)
    one = build_batch([NewRecord(None, b"one")])
    two = build_batch([NewRecord(None, b"two"), NewRecord(None, b"three")])
    obs: list[dict[str, Any]] = []
    with RawClient(_port(target)) as client:
        assert [_end_offset(client, topic, 0), _end_offset(client, topic, 1)] == [0, 0]
        answer = _produce(client, topic, b"", partitions=((1, one), (0, one), (0, two)))
        obs.append({
            "step": "produce",
            "answers": sorted((int(p.index), p.error_code.name, int(p.base_offset)) for t in answer.responses for p in t.partition_responses),
            "endOffsets": [_end_offset(client, topic, 0), _end_offset(client, topic, 1)],
        })
        stored = _stored_batch(client, topic, 0)
        obs.append({"step": "stored", "firstBatchRecords": stored.records_count})

        fetched = _fetch(client, (
            FetchTopic(topic=TopicName(topic), partitions=(_fetch_partition(0, 0), _fetch_partition(1, 0))),
            FetchTopic(topic=TopicName(topic), partitions=(_fetch_partition(0, 1),)),
        ))
        obs.append({
            "step": "fetch",
            "answers": [
                (int(p.partition_index), p.error_code.name, BatchHeader.parse(bytes(p.records)).base_offset if len(p.records or b"") >= HEADER_SIZE else None)
                for t in fetched.responses for p in t.partitions
            ],
        })

        listed = client.request(ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=i8(0),
            topics=(ListOffsetsTopic(name=TopicName(topic), partitions=tuple(
                ListOffsetsPartition(partition_index=i32(i), current_leader_epoch=i32(-1), timestamp=i64(ts))
                for i, ts in ((0, -1), (1, -1), (0, -2))
            )),),
        ))
        obs.append({"step": "listOffsets", "answers": sorted((int(p.partition_index), p.error_code.name, int(p.offset)) for t in listed.topics for p in t.partitions)})

        epochs = client.request(OffsetForLeaderEpochRequest(replica_id=BrokerId(-1), topics=(OffsetForLeaderTopic(topic=TopicName(topic), partitions=tuple(
            OffsetForLeaderPartition(partition=i32(i), current_leader_epoch=i32(-1), leader_epoch=i32(0)) for i in (0, 0, 1)
        )),)))
        obs.append({"step": "offsetForLeaderEpoch", "answers": [(int(p.partition), p.error_code.name, int(p.end_offset)) for t in epochs.topics for p in t.partitions]})

        _group_coordinator_ready(client, group)
        committed = _until_coordinator_answers(lambda: client.request(OffsetCommitRequest(
            group_id=GroupId(group), generation_id_or_member_epoch=i32(-1), member_id="", group_instance_id=None,
            topics=(OffsetCommitRequestTopic(name=TopicName(topic), partitions=tuple(
                OffsetCommitRequestPartition(partition_index=i32(i), committed_offset=i64(o), committed_leader_epoch=i32(-1), committed_metadata=f"m{o}")
                for i, o in ((0, 1), (0, 2), (1, 1))
            )),),
        )))
        obs.append({"step": "offsetCommit", "answers": [(int(p.partition_index), p.error_code.name) for t in committed.topics for p in t.partitions]})
        fetched_offsets = client.request(OffsetFetchRequest(
            group_id=GroupId(group), topics=(OffsetFetchRequestTopic(name=TopicName(topic), partition_indexes=(i32(0), i32(0), i32(1))),), require_stable=False,
        ))
        obs.append({"step": "offsetFetch", "answers": [(int(p.partition_index), int(p.committed_offset), p.metadata) for t in fetched_offsets.topics for p in t.partitions]})
        deleted_offsets = client.request(OffsetDeleteRequest(group_id=GroupId(group), topics=(OffsetDeleteRequestTopic(
            name=TopicName(topic), partitions=(OffsetDeleteRequestPartition(partition_index=i32(0)), OffsetDeleteRequestPartition(partition_index=i32(0))),
        ),)))
        obs.append({"step": "offsetDelete", "error": deleted_offsets.error_code.name, "answers": [(int(p.partition_index), p.error_code.name) for t in deleted_offsets.topics for p in t.partitions]})

        deleted = client.request(DeleteRecordsRequest(topics=(DeleteRecordsTopic(name=TopicName(topic), partitions=tuple(
            DeleteRecordsPartition(partition_index=i32(i), offset=i64(o)) for i, o in ((0, 1), (0, 2), (1, 0))
        )),), timeout=_TIMEOUT))
        obs.append({"step": "deleteRecords", "answers": sorted((int(p.partition_index), p.error_code.name, int(p.low_watermark)) for t in deleted.topics for p in t.partitions)})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="a partition named twice in one request")
def test_duplicate_partitions(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-duplicate-partitions", observe_duplicates)}
    # the last entry wins: only its batch (2 records) is appended, and answered with its offset
    assert obs["produce"]["answers"] == [(0, "none", 0), (1, "none", 0)]
    assert obs["produce"]["endOffsets"] == [2, 1]
    assert obs["stored"]["firstBatchRecords"] == 2
    assert [a[0] for a in obs["fetch"]["answers"]] == [0, 1]
    assert obs["listOffsets"]["answers"] == [(0, "invalid_request", -1), (1, "none", 1)]
    assert len(obs["offsetForLeaderEpoch"]["answers"]) == 3
    assert [a[1] for a in obs["offsetFetch"]["answers"]] == [2, 2, 1]
    assert obs["deleteRecords"]["answers"] == [(0, "none", 2), (1, "none", 0)]
