"""The share.* group configs, set with IncrementalAlterConfigs on a GROUP resource, in effect on a
real broker: ShareGroupHeartbeat answers the group's share.heartbeat.interval.ms, ShareFetch
starts a share partition where share.auto.offset.reset says, answers and applies the group's
share.record.lock.duration.ms (clamped to the broker's bounds), archives records after
share.delivery.count.limit deliveries, and with share.isolation.level=read_committed never hands
out records of an aborted transaction; a group without configs keeps the broker defaults."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResourceType, NewTopic
from kio.schema.share_group_heartbeat.v1 import request as heartbeat_v1
from kio.static.primitive import i32

from broker.testing.inprocess import SamsaInProcess
from protocol.errors import ErrorCode
from tests.integration.test_share_fetch_wire import RELEASE, _acknowledge, _acquired, _fetch, _partitions
from tests.support import fidelity
from tests.support.raw_client import RawClient

GROUP_RESOURCE, SET = int(ConfigResourceType.GROUP), 0
GROUPS = ("queue", "defaults", "recent", "committed", "uncommitted")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[SamsaInProcess, uuid.UUID]]:
    samsa = SamsaInProcess(tmp_path / "data", {"share.coordinator.state.topic.num.partitions": "1",
                                               "offsets.topic.num.partitions": "1"}).start()  # fmt: skip
    try:
        admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap_servers)
        admin.create_topics([NewTopic("jobs", 1, 1)])
        admin.close()
        topic_id: uuid.UUID = samsa.broker.controller.image.topics["jobs"].topic_id
        persister = samsa.broker.share_persister
        assert persister is not None
        for group in GROUPS:
            assert samsa.run(persister.initialize_partitions(group, 1, {topic_id: frozenset({0})})) == {
                topic_id: frozenset({0})}  # fmt: skip
        yield samsa, topic_id
    finally:
        samsa.close()


def _set(samsa: SamsaInProcess, client: RawClient, group: str, **configs: str) -> None:
    ops = [(name.replace("_", "."), SET, value) for name, value in configs.items()]
    assert fidelity.incremental_alter_configs(client, GROUP_RESOURCE, group, ops) == (0, None)
    deadline = time.monotonic() + 10
    while len(samsa.broker.controller.image.group_configs.get(group, {})) < len(ops):
        assert time.monotonic() < deadline, "the group configs did not reach the metadata image"
        time.sleep(0.02)


def _fetch_all(client: RawClient, topic_id: uuid.UUID, group: str, epoch: int, until: int) -> tuple[Any, list[
        tuple[int, int, int]], int]:  # fmt: skip
    """Share fetches until offset `until` was acquired: (last response, acquired, next epoch)."""
    got: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + 10
    while not got or got[-1][1] < until:
        assert time.monotonic() < deadline, got
        response = client.request(_fetch(topic_id, epoch, group=group, max_wait_ms=500))
        epoch += 1
        got += _acquired(_partitions(response)[(topic_id, 0)])
    return response, got, epoch


def test_lock_duration_delivery_limit_and_offset_reset(broker: tuple[SamsaInProcess, uuid.UUID]) -> None:
    samsa, topic_id = broker
    tip = (topic_id, 0)
    producer = KafkaProducer(bootstrap_servers=samsa.bootstrap_servers, acks="all")
    client = RawClient(samsa.port)
    try:
        for i in range(3):
            producer.send("jobs", f"r{i}".encode())
        producer.flush()
        _set(samsa, client, "queue", share_auto_offset_reset="earliest", share_delivery_count_limit="2")
        _set(samsa, client, "queue", share_record_lock_duration_ms="20000")

        # the group without configs starts at the high watermark, with the broker's 30 s lock
        other = client.request(_fetch(topic_id, 0, group="defaults", member="member-d"))
        assert _acquired(_partitions(other)[tip]) == []
        assert other.acquisition_lock_timeout == datetime.timedelta(seconds=30)

        # by_duration: the first record at most an hour old
        _set(samsa, client, "recent", share_auto_offset_reset="by_duration:PT1H")
        _response, recent, _epoch = _fetch_all(client, topic_id, "recent", 0, until=2)
        assert recent[0][0] == 0

        response, got, epoch = _fetch_all(client, topic_id, "queue", 0, until=2)
        assert got[0][0] == 0 and {c for _f, _l, c in got} == {1}  # earliest: from offset 0
        assert response.acquisition_lock_timeout == datetime.timedelta(seconds=20)
        released = client.request(_acknowledge(topic_id, epoch, [(0, 2, RELEASE)]))
        assert [p.error_code for t in released.responses for p in t.partitions] == [0]
        epoch += 1
        _response, again, epoch = _fetch_all(client, topic_id, "queue", epoch, until=2)
        assert {c for _f, _l, c in again} == {2}
        released = client.request(_acknowledge(topic_id, epoch, [(0, 2, RELEASE)]))
        assert [p.error_code for t in released.responses for p in t.partitions] == [0]
        epoch += 1
        # released at the delivery limit: archived, never delivered again
        assert _acquired(_partitions(client.request(_fetch(topic_id, epoch, group="queue", max_wait_ms=200)))[tip]) == []
    finally:
        client.close()
        producer.close()


def test_read_committed_never_hands_out_aborted_records(broker: tuple[SamsaInProcess, uuid.UUID]) -> None:
    samsa, topic_id = broker
    tip = (topic_id, 0)
    client = RawClient(samsa.port)
    txn = KafkaProducer(bootstrap_servers=samsa.bootstrap_servers, transactional_id="share-cfg-txn")
    try:
        for group, level in (("committed", "read_committed"), ("uncommitted", "read_uncommitted")):
            _set(samsa, client, group, share_auto_offset_reset="earliest", share_isolation_level=level)
        txn.init_transactions()
        txn.begin_transaction()
        txn.send("jobs", b"aborted-0")
        txn.send("jobs", b"aborted-1")
        txn.flush()
        txn.abort_transaction()  # offsets 0-1 and the abort marker at 2
        txn.begin_transaction()
        txn.send("jobs", b"committed")
        txn.commit_transaction()  # offset 3 and the commit marker at 4
        acquired: dict[str, set[int]] = {}
        epochs: dict[str, int] = {}
        for group in ("committed", "uncommitted"):
            _response, got, epochs[group] = _fetch_all(client, topic_id, group, 0, until=3)
            acquired[group] = {o for first, last, _c in got for o in range(first, last + 1)}
        assert {0, 1, 3} <= acquired["uncommitted"]
        assert 3 in acquired["committed"] and not {0, 1} & acquired["committed"]
        # archived, not released: nothing of the aborted transaction comes later either
        later = client.request(_fetch(topic_id, epochs["committed"], group="committed", max_wait_ms=200))
        assert _acquired(_partitions(later)[tip]) == []
    finally:
        txn.close()
        client.close()


def test_heartbeat_interval(broker: tuple[SamsaInProcess, uuid.UUID]) -> None:
    samsa, _topic_id = broker
    with RawClient(samsa.port) as client:
        _set(samsa, client, "queue", share_heartbeat_interval_ms="7000")
        fidelity.await_coordinator(client, "queue")  # the first creates __consumer_offsets
        for group, interval in (("queue", 7_000), ("defaults", 5_000)):
            answer = client.request(heartbeat_v1.ShareGroupHeartbeatRequest(
                group_id=group, member_id=f"{group}-member-0123456789abcdef", member_epoch=i32(0), rack_id=None,
                subscribed_topic_names=("jobs",)))  # fmt: skip
            assert answer.error_code == 0, answer
            assert answer.heartbeat_interval == datetime.timedelta(milliseconds=interval)


def test_group_share_max_size(tmp_path: Path) -> None:
    """The broker's group.share.max.size: a member joining a full share group is refused with
    GROUP_MAX_SIZE_REACHED and Kafka's message; one already in keeps heartbeating."""
    with SamsaInProcess(tmp_path / "data", {"group.share.max.size": "2", "offsets.topic.num.partitions": "1"}) as samsa:
        with RawClient(samsa.port) as client:
            fidelity.await_coordinator(client, "full")

            def beat(member: str, epoch: int = 0) -> Any:
                return client.request(heartbeat_v1.ShareGroupHeartbeatRequest(
                    group_id="full", member_id=f"{member}-0123456789abcdef", member_epoch=i32(epoch), rack_id=None,
                    subscribed_topic_names=("jobs",) if epoch == 0 else None))  # fmt: skip

            first, second = beat("one"), beat("two")
            assert (first.error_code, second.error_code) == (0, 0)
            third = beat("three")
            assert (third.error_code, third.error_message) == (
                ErrorCode.group_max_size_reached, "The share group has reached its maximum capacity of 2 members.")
            assert beat("one", int(first.member_epoch)).error_code == 0
