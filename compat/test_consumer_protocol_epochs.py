"""KIP-1251 per-partition assignment epochs on Samsa and Apache Kafka 4.3.1, as raw requests.

A KIP-848 member A owns both partitions of a topic at epoch 1; B joins (epoch 2: A keeps one
partition, revokes the other); B leaves (epoch 3: A gets the other partition back). OffsetCommit
v9 with an epoch older than A's is accepted for a partition A has owned since that epoch, and is
STALE_MEMBER_EPOCH for a partition assigned to A at a newer epoch or not A's at all (one such
partition fails the whole request; ILLEGAL_GENERATION in TxnOffsetCommit); OffsetFetch still takes
only the current epoch.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kio.schema.consumer_group_heartbeat.v1.request import TopicPartitions
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.txn_offset_commit.v5.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32, i64

from protocol.errors import ErrorCode
from tests.support import fidelity
from tests.support import txn_requests as txn
from tests.support.consumer_protocol import heartbeat, join
from tests.support.raw_client import RawClient

TOPIC = "raw-kip1251"
GROUP = "raw-kip1251-group"
TXN_ID = "raw-kip1251-txn"
ASSIGNMENT_INTERVAL_S = 1.0
"""group.consumer.assignment.interval.ms: Kafka 4.3's default, and Samsa's."""


class _Member:
    """A raw KIP-848 member: its id, epoch and owned partitions (as the heartbeat answers them)."""

    def __init__(self, client: RawClient) -> None:
        self.client = client
        self.member_id = uuid.uuid4().hex[:22]
        self.epoch = 0
        self.owned: tuple[TopicPartitions, ...] = ()

    def partitions(self) -> list[int]:
        return sorted(int(p) for t in self.owned for p in t.partitions)

    def beat(self, answer: Any | None = None) -> None:
        if answer is None:
            answer = heartbeat(self.client, self.member_id, self.epoch, group=GROUP, owned=self.owned)
        assert answer.error_code == 0, answer
        self.epoch = int(answer.member_epoch)
        if answer.assignment is not None:
            self.owned = tuple(
                TopicPartitions(topic_id=t.topic_id, partitions=t.partitions) for t in answer.assignment.topic_partitions
            )

    def beat_until(self, after: int, partitions: int) -> None:
        """Heartbeats (owning what it was given) until its epoch is past `after` and it owns that
        many partitions."""
        deadline = time.monotonic() + 15
        while not (self.epoch > after and len(self.partitions()) == partitions):
            assert time.monotonic() < deadline, (self.epoch, self.partitions())
            time.sleep(0.1)
            self.beat()


def _commit(client: RawClient, member: _Member, epoch: int, partitions: list[int]) -> list[str]:
    answer = client.request(OffsetCommitRequest(
        group_id=GroupId(GROUP), generation_id_or_member_epoch=i32(epoch), member_id=member.member_id,
        group_instance_id=None,
        topics=(OffsetCommitRequestTopic(name=TopicName(TOPIC), partitions=tuple(
            OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(1), committed_leader_epoch=i32(-1),
                                         committed_metadata="") for p in partitions)),),
    ))  # fmt: skip
    return [ErrorCode(p.error_code).name for t in answer.topics for p in t.partitions]


def _txn_commit(client: RawClient, pid: int, producer_epoch: int, member: _Member, epoch: int, partition: int) -> str:
    """TxnOffsetCommit v5 (transactions v2: no AddOffsetsToTxn first) of one partition."""
    answer = txn.retry(lambda: client.request(TxnOffsetCommitRequest(
        transactional_id=TransactionalId(TXN_ID), group_id=GroupId(GROUP), producer_id=ProducerId(pid),
        producer_epoch=i16(producer_epoch), generation_id=i32(epoch), member_id=member.member_id,
        topics=(TxnOffsetCommitRequestTopic(name=TopicName(TOPIC), partitions=(
            TxnOffsetCommitRequestPartition(partition_index=i32(partition), committed_offset=i64(1),
                                            committed_metadata=""),)),),
    )), lambda r: r.topics[0].partitions[0].error_code)  # fmt: skip
    return ErrorCode(answer.topics[0].partitions[0].error_code).name


def _fetch(client: RawClient, member: _Member, epoch: int) -> str:
    answer = client.request(OffsetFetchRequest(
        groups=(OffsetFetchRequestGroup(group_id=GroupId(GROUP), member_id=member.member_id, member_epoch=i32(epoch),
                                        topics=(OffsetFetchRequestTopics(name=TopicName(TOPIC),
                                                                         partition_indexes=(i32(0),)),)),),
        require_stable=False,
    ))  # fmt: skip
    return ErrorCode(answer.groups[0].error_code).name


def _scenario(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, TOPIC, partitions=2)
        fidelity.await_coordinator(client, GROUP)
        a, b = _Member(client), _Member(client)
        a.beat(join(client, a.member_id, group=GROUP, topics=(TOPIC,)))
        a.beat_until(0, 2)
        targeted, e1 = time.monotonic(), a.epoch
        obs.append({"step": "alone", "partitions": a.partitions()})
        # past the assignment interval, B's join makes a new target: A revokes one partition, keeps the other
        time.sleep(max(0.0, targeted + ASSIGNMENT_INTERVAL_S + 0.2 - time.monotonic()))
        b.beat(join(client, b.member_id, group=GROUP, topics=(TOPIC,)))
        targeted = time.monotonic()
        a.beat_until(e1, 1)
        e2, kept = a.epoch, a.partitions()[0]
        other = 1 - kept
        obs.append({"step": "b-joined", "epoch": e2 - e1, "partitions": len(a.partitions())})
        obs.append({"step": "commit-older-epoch-kept", "errors": _commit(client, a, e1, [kept])})
        obs.append({"step": "commit-older-epoch-revoked", "errors": _commit(client, a, e1, [other])})
        obs.append({"step": "commit-older-epoch-both", "errors": _commit(client, a, e1, [kept, other])})
        obs.append({"step": "fetch-older-epoch", "error": _fetch(client, a, e1)})
        # B leaves: past the interval, A gets the other partition back at a newer epoch
        leave = heartbeat(client, b.member_id, -1, group=GROUP)
        obs.append({"step": "b-left", "error": ErrorCode(leave.error_code).name})
        time.sleep(max(0.0, targeted + ASSIGNMENT_INTERVAL_S + 0.2 - time.monotonic()))
        a.beat_until(e2, 2)
        e3 = a.epoch
        obs.append({"step": "b-gone", "epoch": e3 - e2, "partitions": a.partitions()})
        obs.append({"step": "commit-first-epoch-kept", "errors": _commit(client, a, e1, [kept])})
        obs.append({"step": "commit-previous-epoch-kept", "errors": _commit(client, a, e2, [kept])})
        obs.append({"step": "commit-previous-epoch-regained", "errors": _commit(client, a, e2, [other])})
        obs.append({"step": "commit-previous-epoch-both", "errors": _commit(client, a, e2, [kept, other])})
        obs.append({"step": "commit-older-than-any", "errors": _commit(client, a, e1 - 1, [kept])})
        obs.append({"step": "commit-current-epoch", "errors": _commit(client, a, e3, [kept, other])})
        obs.append({"step": "commit-newer-epoch", "errors": _commit(client, a, e3 + 1, [kept])})
        obs.append({"step": "commit-older-epoch-nothing", "errors": _commit(client, a, e2, [])})
        # TxnOffsetCommit: the same check, ILLEGAL_GENERATION instead of STALE_MEMBER_EPOCH
        txn.find_coordinator(client, TXN_ID)
        pid, producer_epoch = txn.init(client, TXN_ID)
        for step, epoch, partition in (("kept", e2, kept), ("regained", e2, other)):
            error = _txn_commit(client, pid, producer_epoch, a, epoch, partition)
            obs.append({"step": f"txn-commit-previous-epoch-{step}", "error": error})
        obs.append({"step": "txn-abort", "error": txn.end(client, TXN_ID, pid, producer_epoch, False, version=5)[0].name})
        heartbeat(client, a.member_id, -1, group=GROUP)
    return obs


@pytest.mark.compat(client="raw protocol", scenario="KIP-1251 OffsetCommit with an older member epoch")
def test_offset_commit_with_an_older_member_epoch(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-kip1251-assignment-epochs", _scenario)}
    assert obs["b-gone"]["partitions"] == [0, 1]
    assert obs["commit-older-epoch-kept"]["errors"] == ["none"]
    assert obs["commit-older-epoch-revoked"]["errors"] == ["stale_member_epoch"]
    assert obs["commit-older-epoch-both"]["errors"] == ["stale_member_epoch"] * 2
    assert obs["commit-previous-epoch-kept"]["errors"] == ["none"]
    assert obs["commit-previous-epoch-regained"]["errors"] == ["stale_member_epoch"]
    assert obs["fetch-older-epoch"]["error"] == "stale_member_epoch"
    assert obs["txn-commit-previous-epoch-kept"]["error"] == "none"
    assert obs["txn-commit-previous-epoch-regained"]["error"] == "illegal_generation"
