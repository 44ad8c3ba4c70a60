"""The share coordinator (broker/share/share_coordinator.py) in a real broker: a share group's
partitions get their state initialized in `__share_group_state` (created as Kafka creates it) and
are then assigned; the state the share partitions write is replicated, read back and fenced by
leader epoch; when leadership of its partition moves away and back, and after a broker restart,
it is replayed from the topic (snapshots and the updates after them) into the same state, while
the group keeps its initialized partitions and is not initialized again."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from broker.share import share_partition_state
from broker.share.in_flight import (
    AcknowledgementBatch,
    AcknowledgeType,
    FetchedBatch,
    PersisterStateBatch,
    RecordState,
    SharePartitionSettings,
)
from broker.share.persister import SharePersister
from broker.share.share_coordinator import SHARE_GROUP_STATE_TOPIC, ShareCoordinator, coordinator_key
from broker.share.share_coordinator_shard import ReadAnswer
from broker.share.share_group import ShareGroup, ShareHeartbeat
from broker.share.share_groups import ShareHeartbeatResult
from broker.share.share_partition import SharePartition
from broker.share.share_partition_state import SharePartitionPersister
from broker.share.share_state import SharePartitionKey
from broker.testing.inprocess import SamsaInProcess
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

T = TypeVar("T")
GROUP = "queue"


def _until(what: Callable[[], T | None], timeout_s: float = 15) -> T:
    deadline = time.monotonic() + timeout_s
    while (value := what()) is None:
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
    return value


def _heartbeat(
    samsa: SamsaInProcess, member_id: str, epoch: int, topics: tuple[str, ...] | None = None
) -> ShareHeartbeatResult:
    req = ShareHeartbeat(GROUP, member_id, epoch, subscribed_topic_names=topics)
    return samsa.run(samsa.broker.group_coordinator.share_groups.heartbeat(req, "client", "/127.0.0.1"))


def _loaded(samsa: SamsaInProcess) -> bool | None:
    """Whether the group's __consumer_offsets partition is loaded here (creating the topic)."""
    coordinator = samsa.broker.group_coordinator
    if coordinator.group_status(GROUP)[0] == ErrorCode.none:
        return True
    samsa.run(coordinator.find_coordinator(GROUP, samsa.broker.config.listeners[0].name))
    return None


def _group(samsa: SamsaInProcess) -> ShareGroup | None:
    return samsa.broker.group_coordinator.share_groups.describe(GROUP)[2] if _loaded(samsa) else None


def _share_coordinator(samsa: SamsaInProcess) -> ShareCoordinator:
    coordinator = samsa.broker.share_coordinator
    assert coordinator is not None
    return coordinator


def _read(samsa: SamsaInProcess, key: SharePartitionKey, leader_epoch: int) -> ReadAnswer | None:
    """ReadShareGroupState once the state partition is loaded."""
    answer = samsa.run(_share_coordinator(samsa).read(key, leader_epoch))
    return None if answer.error == ErrorCode.coordinator_load_in_progress else answer


def test_share_state_is_initialized_written_and_replayed_after_a_restart(tmp_path: Path) -> None:
    samsa = SamsaInProcess(tmp_path / "data", {
        "offsets.topic.num.partitions": "1",
        "share.coordinator.state.topic.num.partitions": "3",
        "share.coordinator.snapshot.update.records.per.snapshot": "2",
    }).start()  # fmt: skip
    try:
        admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap_servers)
        admin.create_topics([NewTopic("jobs", 2, 1)])
        admin.close()
        jobs_id: uuid.UUID = samsa.broker.controller.image.topics["jobs"].topic_id
        _until(lambda: _loaded(samsa))
        joined = _heartbeat(samsa, "m1", 0, ("jobs",))
        assert (
            joined.error == ErrorCode.none and joined.answer is not None and joined.answer.member_epoch == 2
        )

        # the share coordinator initializes both partitions, with the group epoch as state epoch
        group = _until(lambda: g if (g := _group(samsa)) is not None and g.initialized else None)
        assert group.initialized == {jobs_id: frozenset({0, 1})} and group.initializing == {}
        topic = samsa.broker.controller.image.topics[SHARE_GROUP_STATE_TOPIC]
        assert topic.internal and len(topic.partitions) == 3
        assert {k: topic.configs.get(k) for k in ("cleanup.policy", "retention.ms", "min.insync.replicas")} == {
            "cleanup.policy": "delete", "retention.ms": "-1", "min.insync.replicas": "1"}  # fmt: skip
        keys = [SharePartitionKey(GROUP, jobs_id, p) for p in (0, 1)]
        for key in keys:  # state epoch 2: the group's (a new group is at 1, the join bumped it)
            answer = _until(partial(_read, samsa, key, -1))
            assert (answer.error, answer.state_epoch, answer.start_offset, answer.state_batches) == (
                ErrorCode.none, 2, -1, ())  # fmt: skip

        # and a heartbeat assigns them (once group.share.assignment.interval.ms has passed)
        def assignment() -> dict[uuid.UUID, frozenset[int]] | None:
            answer = _heartbeat(samsa, "m1", _until(lambda: _group(samsa)).members["m1"].member_epoch).answer
            assert answer is not None
            return None if answer.assignment is None else dict(answer.assignment)

        assert _until(assignment) == {jobs_id: frozenset({0, 1})}

        # the share partition leader (epoch 3) writes its state: a snapshot every two updates
        coordinator = _share_coordinator(samsa)
        key = keys[0]
        assert _read(samsa, key, 3) is not None  # the new leader's read records its epoch
        writes = [
            (5, (PersisterStateBatch(5, 9, RecordState.AVAILABLE, 1),)),
            (5, (PersisterStateBatch(5, 6, RecordState.ACKNOWLEDGED, 1),)),
            (7, (PersisterStateBatch(10, 12, RecordState.ARCHIVED, 5),)),
        ]  # fmt: skip
        for start, batches in writes:
            result = samsa.run(coordinator.write(key, 2, 3, start, 2, batches))
            assert result.error == ErrorCode.none, result
        fenced = samsa.run(coordinator.write(key, 2, 2, 8, 0, ()))
        assert fenced.error == ErrorCode.fenced_leader_epoch
        state = _read(samsa, key, 3)
        assert state is not None and state.error == ErrorCode.none
        assert state.start_offset == 7
        assert state.state_batches == (
            PersisterStateBatch(7, 9, RecordState.AVAILABLE, 1),
            PersisterStateBatch(10, 12, RecordState.ARCHIVED, 5),
        )

        # leadership of the state partition moves away and back: the state is dropped, then
        # replayed from the log
        index = coordinator.partition_for(coordinator_key(key))
        state_tp = TopicPartition(SHARE_GROUP_STATE_TOPIC, index)

        async def move(is_leader: bool) -> None:
            coordinator.on_leadership_change(state_tp, is_leader)

        samsa.run(move(False))
        assert samsa.run(coordinator.read(key, 3)).error == ErrorCode.not_coordinator
        samsa.run(move(True))
        assert _until(lambda: _read(samsa, key, 3)) == state

        samsa.restart()
        after = _until(lambda: _read(samsa, key, 3))
        assert (after.error, after.state_epoch, after.start_offset, after.state_batches) == (
            ErrorCode.none, 2, state.start_offset, state.state_batches)  # fmt: skip
        assert _until(lambda: _read(samsa, keys[1], -1)).start_offset == -1
        restored = _until(lambda: _group(samsa))
        assert restored.initialized == {jobs_id: frozenset({0, 1})} and restored.initializing == {}
        again = _heartbeat(samsa, "m1", restored.members["m1"].member_epoch)
        assert again.error == ErrorCode.none  # no new initialization: the state stays as written
        time.sleep(0.1)
        assert _read(samsa, key, 3) == after
        fenced = samsa.run(_share_coordinator(samsa).write(key, 2, 2, 8, 0, ()))
        assert fenced.error == ErrorCode.fenced_leader_epoch  # the leader epoch was replayed too
    finally:
        samsa.close()


def test_a_share_partition_leader_loads_and_persists_its_state_through_the_coordinator(
    tmp_path: Path,
) -> None:
    """What a leader completed (accepted, released) is there after a restart; what it had
    acquired without completing is delivered again; an older leader's write is fenced and its
    change rolled back."""
    samsa = SamsaInProcess(tmp_path / "data", {"share.coordinator.state.topic.num.partitions": "1"}).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap_servers)
        admin.create_topics([NewTopic("t", 1, 1)])
        admin.close()
        topic_id: uuid.UUID = samsa.broker.controller.image.topics["t"].topic_id
        key = SharePartitionKey("g", topic_id, 0)
        coordinator = _share_coordinator(samsa)
        done = samsa.run(_persister(samsa).initialize_partitions("g", 4, {topic_id: frozenset({0})}))
        assert done == {topic_id: frozenset({0})}
        log = [FetchedBatch(first, first + 4) for first in range(0, 20, 5)]

        def fetch(sp: SharePartition, member: str) -> list[tuple[int, int, int]]:
            offset = sp.next_fetch_offset()
            got = sp.acquire(member, [b for b in log if b.last_offset >= offset], offset, 10, 5, 0)
            return [(a.first_offset, a.last_offset, a.delivery_count) for a in got]

        settings = SharePartitionSettings()
        error, sp, persister = samsa.run(
            share_partition_state.load(coordinator, key, "t", 3, settings, lambda: 0)
        )
        assert error == ErrorCode.none and sp is not None and persister is not None
        assert persister.state_epoch == 4
        assert fetch(sp, "a") == [(0, 4, 1), (5, 9, 1)]
        accept, release = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE)
        transition = sp.acknowledge(
            "a", [AcknowledgementBatch(0, 4, (accept,)), AcknowledgementBatch(5, 6, (release,))], 1
        )
        assert samsa.run(persister.persist(sp, transition, 1)) == ErrorCode.none
        assert sp.start_offset == 5

        samsa.restart()
        coordinator = _share_coordinator(samsa)

        def load() -> tuple[ErrorCode, SharePartition | None, SharePartitionPersister | None] | None:
            loaded = samsa.run(share_partition_state.load(coordinator, key, "t", 4, settings, lambda: 0))
            return None if loaded[0] == ErrorCode.coordinator_load_in_progress else loaded

        error, moved, new_persister = _until(load)
        assert error == ErrorCode.none and moved is not None and new_persister is not None
        assert moved.start_offset == 5 and moved.next_fetch_offset() == 5
        # 5-6 were released (count 1 kept, raised on redelivery); 7-9 were never written
        assert fetch(moved, "b") == [(5, 6, 2), (7, 14, 1)]
        # the old leader (epoch 3) is fenced now that epoch 4 read the state: its change is
        # rolled back
        old = SharePartitionPersister(coordinator, key, 3, 4)
        transition = moved.acknowledge("b", [AcknowledgementBatch(5, 6, (accept,))], 2)
        assert samsa.run(old.persist(moved, transition, 2)) == ErrorCode.fenced_leader_epoch
        state = moved.record_state(5)
        assert state is not None and (state.state, state.member_id) == (RecordState.ACQUIRED, "b")
        transition = moved.acknowledge("b", [AcknowledgementBatch(5, 6, (accept,))], 3)
        assert samsa.run(new_persister.persist(moved, transition, 3)) == ErrorCode.none
    finally:
        samsa.close()


def _persister(samsa: SamsaInProcess) -> SharePersister:
    persister = samsa.broker.share_persister
    assert persister is not None
    return persister
