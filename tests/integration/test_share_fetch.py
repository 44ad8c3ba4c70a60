"""The share partition leader's fetch manager (broker/share/share_fetch.py) in a real broker, with
records produced by a real client over TCP and the share-group state in `__share_group_state`
through the share coordinator: share sessions and their errors, records acquired by one member
and not handed to another, a delayed share fetch woken by a produce, acknowledgements piggybacked
and alone (INVALID_RECORD_STATE for records not acquired), released records redelivered with
their delivery count raised, acquisition locks that expire, a final fetch that releases the
member's records, the state written and read back, and Kafka's errors for an unknown topic id and
a share partition whose state was never initialized."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from broker.share.in_flight import (
    AcknowledgementBatch,
    AcknowledgeType,
    PersisterStateBatch,
    RecordState,
    SharePartitionSettings,
)
from broker.share.persister import SharePersister
from broker.share.share_coordinator_shard import ReadAnswer
from broker.share.share_fetch import ShareFetchParams, ShareFetchResult, SharePartitionManager
from broker.share.share_session import FINAL_EPOCH
from broker.share.share_state import SharePartitionKey
from broker.testing.inprocess import SamsaInProcess
from protocol.errors import ErrorCode
from protocol.records import decode_records, iter_batch_headers

GROUP = "queue"
LOCK_MS = 400
QUICK = ShareFetchParams(max_wait_ms=50)


def _manager(samsa: SamsaInProcess) -> SharePartitionManager:
    broker = samsa.broker
    assert broker.share_coordinator is not None
    rm = broker.replica_manager

    def topic_name(topic_id: uuid.UUID) -> str | None:
        topic = broker.controller.image.topic_by_id(topic_id)
        return None if topic is None else topic.name

    settings = SharePartitionSettings(record_lock_duration_ms=LOCK_MS, delivery_count_limit=3)
    return SharePartitionManager(rm.leader_partition, topic_name, broker.share_coordinator, rm.delayed_fetch, lambda _: settings)


class Member:
    """A share consumer's side of the manager: its session epoch and its connection."""

    def __init__(self, samsa: SamsaInProcess, manager: SharePartitionManager, member_id: str,
                 tips: Sequence[tuple[uuid.UUID, int]]) -> None:  # fmt: skip
        self.samsa, self.manager, self.member_id, self.tips = samsa, manager, member_id, list(tips)
        self.epoch = 0

    def fetch(
        self,
        params: ShareFetchParams = QUICK,
        acks: Mapping[tuple[uuid.UUID, int], Sequence[AcknowledgementBatch]] | None = None,
        epoch: int | None = None,
    ) -> ShareFetchResult:
        return self.samsa.run(self.fetch_coro(params, acks, epoch))

    def fetch_coro(self, params: ShareFetchParams = QUICK,
                   acks: Mapping[tuple[uuid.UUID, int], Sequence[AcknowledgementBatch]] | None = None,
                   epoch: int | None = None) -> Coroutine[Any, Any, ShareFetchResult]:  # fmt: skip
        async def go() -> ShareFetchResult:
            sent = self.epoch if epoch is None else epoch
            result = await self.manager.fetch(
                GROUP, self.member_id, sent, self.tips if sent == 0 else [], [], acks or {}, params,
                f"conn-{self.member_id}",
            )  # fmt: skip
            if result.error == ErrorCode.none and sent != FINAL_EPOCH:
                self.epoch = sent + 1
            return result

        return go()

    def acknowledge(self, acks: Mapping[tuple[uuid.UUID, int], Sequence[AcknowledgementBatch]]) -> dict[tuple[uuid.UUID, int], ErrorCode]:
        return self.samsa.run(self.manager.acknowledge(GROUP, self.member_id, acks))


def _acquired(result: ShareFetchResult, tip: tuple[uuid.UUID, int]) -> list[tuple[int, int, int]]:
    assert result.error == ErrorCode.none, result
    part = result.partitions[tip]
    assert part.error == ErrorCode.none, part
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired]


def _offsets(result: ShareFetchResult, tip: tuple[uuid.UUID, int]) -> list[int]:
    """The offsets of the records answered (whole batches)."""
    data = result.partitions[tip].records
    return [r.offset for pos, header in iter_batch_headers(data) for r in decode_records(data, pos, header)]


def _accept(first: int, last: int, ack: AcknowledgeType = AcknowledgeType.ACCEPT) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, (int(ack),))


def _completed_up_to(state: ReadAnswer) -> int:
    """The first offset whose delivery is not complete in the persisted state (its start offset
    is written before the write moves it, as Kafka writes it)."""
    assert state.error == ErrorCode.none
    offset = state.start_offset
    for batch in state.state_batches:
        if batch.first_offset <= offset <= batch.last_offset and batch.delivery_state in (
            RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):  # fmt: skip
            offset = batch.last_offset + 1
    return offset


def _until(what: Callable[[], bool], timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_share_fetch_acquire_acknowledge_release_and_expire(tmp_path: Path) -> None:
    samsa = SamsaInProcess(tmp_path / "data", {"share.coordinator.state.topic.num.partitions": "1"}).start()
    producer: KafkaProducer | None = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap_servers)
        admin.create_topics([NewTopic("jobs", 1, 1), NewTopic("other", 1, 1)])
        admin.close()
        topic_id: uuid.UUID = samsa.broker.controller.image.topics["jobs"].topic_id
        tip = (topic_id, 0)
        coordinator = samsa.broker.share_coordinator
        assert coordinator is not None
        manager = _manager(samsa)
        a = Member(samsa, manager, "a", [tip])
        b = Member(samsa, manager, "b", [tip])

        assert samsa.run(_persister(samsa).initialize_partitions(GROUP, 1, {topic_id: frozenset({0})})) == {topic_id: frozenset({0})}
        assert _acquired(a.fetch(), tip) == []  # loads the share partition at the high watermark (0)

        # never initialized by the group coordinator: the read is refused (INVALID_REQUEST), which
        # Kafka's fetchPersisterError answers UNKNOWN_SERVER_ERROR; an unknown topic id: UNKNOWN_TOPIC_ID
        other = Member(samsa, manager, "x", [(samsa.broker.controller.image.topics["other"].topic_id, 0), (uuid.uuid4(), 0)])
        failed = other.fetch()
        assert [p.error for p in failed.partitions.values()] == [ErrorCode.unknown_server_error, ErrorCode.unknown_topic_id]


        # a delayed share fetch waits for min_bytes and is woken by the produce
        producer = KafkaProducer(bootstrap_servers=samsa.bootstrap_servers, acks="all", linger_ms=20)
        with ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            pending = pool.submit(samsa.run, a.fetch_coro(ShareFetchParams(max_wait_ms=10_000)))
            time.sleep(0.2)
            assert not pending.done()
            for i in range(10):
                producer.send("jobs", f"r{i}".encode())
            producer.flush()
            first = pending.result(10)
        assert time.monotonic() - started < 5
        got = _acquired(first, tip)
        assert got and got[0][0] == 0 and all(count == 1 for _f, _l, count in got)
        while got[-1][1] < 9:  # the produce may have landed in more than one batch
            got += _acquired(a.fetch(), tip)
        assert got[-1][1] == 9 and _offsets(first, tip)[0] == 0

        # b gets nothing: every record is held by a
        assert _acquired(b.fetch(), tip) == []
        # a acknowledges what it does not hold: INVALID_RECORD_STATE for b
        assert b.acknowledge({tip: [_accept(0, 0)]}) == {tip: ErrorCode.invalid_record_state}
        # a accepts 0-3 with its next fetch and releases 4-9 alone
        accepted = a.fetch(acks={tip: [_accept(0, 3)]})
        assert accepted.acknowledged == {tip: ErrorCode.none} and _acquired(accepted, tip) == []
        assert a.acknowledge({tip: [_accept(4, 9, AcknowledgeType.RELEASE)]}) == {tip: ErrorCode.none}
        # released: b gets them, delivered a second time
        second = b.fetch()
        assert _acquired(second, tip) == [(4, 9, 2)] and min(_offsets(second, tip)) <= 4
        assert samsa.run(coordinator.read(SharePartitionKey(GROUP, topic_id, 0), -1)).start_offset == 4

        # b holds them past the lock: a fetch waiting for records is woken when they come back;
        # on their last delivery (limit 3) records go out one at a time (Kafka's throttling)
        waited = time.monotonic()
        third = a.fetch(ShareFetchParams(max_wait_ms=5_000))
        assert _acquired(third, tip) == [(4, 4, 3)] and time.monotonic() - waited < 2.5
        assert a.acknowledge({tip: [_accept(4, 4, AcknowledgeType.REJECT)]}) == {tip: ErrorCode.none}
        assert _acquired(a.fetch(), tip) == [(5, 5, 3)]
        # a's final fetch releases 5, at the delivery limit: archived
        final = a.fetch(epoch=FINAL_EPOCH)
        assert final.error == ErrorCode.none and final.partitions == {}
        assert a.fetch(epoch=FINAL_EPOCH).error == ErrorCode.share_session_not_found
        key = SharePartitionKey(GROUP, topic_id, 0)
        assert _completed_up_to(samsa.run(coordinator.read(key, -1))) == 6
        # b takes the rest one by one, accepting each with its next fetch
        held: list[tuple[int, int, int]] = []
        for _ in range(6):
            held = _acquired(b.fetch(acks={tip: [_accept(f, last) for f, last, _c in held]} if held else None), tip)
            if not held:
                break
        assert _completed_up_to(samsa.run(coordinator.read(key, -1))) == 10
        assert _acquired(b.fetch(), tip) == []  # nothing more for anyone

        # session errors answer the whole request
        assert b.fetch(epoch=b.epoch + 5).error == ErrorCode.invalid_share_session_epoch
        assert Member(samsa, manager, "c", [tip]).fetch(epoch=3).error == ErrorCode.share_session_not_found
        assert a.fetch(acks={tip: [_accept(0, 0)]}, epoch=0).error == ErrorCode.invalid_request

        # a record produced now goes to one member, whose crash (connection closed) releases it
        producer.send("jobs", b"late")
        producer.flush()
        _until(lambda: bool(_acquired(b.fetch(), tip)))
        samsa.run(_disconnect(manager, "conn-b"))
        _until(lambda: samsa.run(coordinator.read(SharePartitionKey(GROUP, topic_id, 0), -1)).state_batches
               == (PersisterStateBatch(10, 10, RecordState.AVAILABLE, 1),))  # fmt: skip
        c = Member(samsa, manager, "c", [tip])
        assert _acquired(c.fetch(), tip) == [(10, 10, 2)]
        manager.close()
    finally:
        if producer is not None:
            producer.close()
        samsa.close()


async def _disconnect(manager: SharePartitionManager, connection_id: str) -> None:
    manager.on_disconnect(connection_id)


def _persister(samsa: SamsaInProcess) -> SharePersister:
    persister = samsa.broker.share_persister
    assert persister is not None
    return persister
