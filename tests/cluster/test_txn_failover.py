"""The transaction coordinator moving with the leadership of __transaction_state (3 brokers).

- A coordinator killed (kill -9) between PrepareCommit and CompleteCommit: the data partition's
  leader is paused, so the COMMIT marker cannot be written and the transaction stays in
  PrepareCommit after the producer's commit returned; the coordinator is killed; the broker that
  takes over __transaction_state's partition loads PrepareCommit and finishes the commit, and a
  read_committed consumer reads the transaction whole.
- The same with transactions v2 (raw requests): the record goes to its leader with Produce v12
  (which adds the partition through the coordinator on another broker), EndTxn v5 bumps the
  epoch and is answered once PrepareCommit is written; the new coordinator finishes the commit at
  the bumped epoch, answers the retried EndTxn v5 as a retry, and the producer goes on at the
  bumped epoch while its old one is fenced on the partition.
- A transactional producer that goes on committing while, in the middle of a transaction, its
  coordinator is killed, later restarted, and then a data partition's leader is killed: every
  transaction whose commit returned is read whole and exactly once, in order, by a read_committed
  consumer, and a transaction whose commit failed is whole or absent.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from broker.coordinator.records import partition_for
from broker.testing.cluster import SamsaCluster
from protocol.errors import ErrorCode
from tests.cluster.conftest import broker_logs, create_topic
from tests.support import txn_requests as txn
from tests.support.raw_client import RawClient

TXN_STATE = "__transaction_state"
OVERRIDES = {
    "transaction.state.log.num.partitions": "3",
    "replica.lag.time.max.ms": "3000",  # a paused follower leaves the ISR soon
}


def _producer(cluster: SamsaCluster, txn_id: str, **extra: Any) -> Any:
    p = Producer({**extra,
        "bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id, "linger.ms": 5,
        "transaction.timeout.ms": 60000, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000,
    })  # fmt: skip
    p.init_transactions(60)
    return p


def _coordinator(cluster: SamsaCluster, txn_id: str) -> int:
    state = cluster.metadata(topics=[TXN_STATE]).topics[TXN_STATE]
    return state[partition_for(txn_id, len(state))].leader


def _read_committed(cluster: SamsaCluster, topic: str, partitions: int, until: Callable[[list[bytes]], bool],
                    timeout: float = 60) -> list[bytes]:  # fmt: skip
    c = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": f"rc-{uuid.uuid4()}",
        "isolation.level": "read_committed", "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000,
    })  # fmt: skip
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not until(got):
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    got.append(m.value())
    finally:
        c.close()
    return got


def _await_completion_by_next_coordinator(cluster: SamsaCluster, txn_id: str) -> None:
    """The broker that takes over the transaction's __transaction_state partition loads it in
    PrepareCommit and completes it. A read_committed reader may see the commit before that: the
    killed coordinator's WriteTxnMarkers request sat in the paused leader's socket and is served
    when it resumes (safely: its coordinator epoch is still current)."""
    line = f"completing transaction left by the previous coordinator transactional_id={txn_id} state=PrepareCommit"
    cluster.wait_for(lambda: line in broker_logs(cluster, tail=200_000), 30, "the next coordinator completing the commit")


def test_coordinator_killed_in_prepare_commit_is_completed_by_the_next(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(3, overrides=OVERRIDES)
    txn_id, topic = "prepared-tid", "prepared"
    p = _producer(cluster, txn_id)
    coordinator = _coordinator(cluster, txn_id)
    leader = next(i for i in cluster.live() if i != coordinator)
    # the data partition's only replica is the leader: while it is paused nothing can take its
    # leadership, so the old coordinator cannot finish the commit before it is killed
    create_topic(cluster, topic, assignments=[[leader]])
    cluster.wait_for(lambda: cluster.metadata(topics=[topic]).topics[topic][0].leader == leader, 20, "data leader")

    p.begin_transaction()
    for i in range(10):
        p.produce(topic, b"r%d" % i, partition=0)
    p.flush(30)
    cluster.pause(leader)  # the COMMIT marker cannot be written
    try:
        p.commit_transaction(60)  # answered once PrepareCommit is written
        assert "transaction ending transactional_id=prepared-tid" in cluster.process(coordinator).read_log()
        cluster.kill(coordinator)
    finally:
        cluster.resume(leader)
    got = _read_committed(cluster, topic, 1, lambda got: len(got) >= 10)
    assert got == [b"r%d" % i for i in range(10)], broker_logs(cluster)
    _await_completion_by_next_coordinator(cluster, "prepared-tid")
    cluster.restart(coordinator)
    # the producer goes on with the new coordinator
    p.begin_transaction()
    p.produce(topic, b"after", partition=0)
    p.commit_transaction(60)
    assert _read_committed(cluster, topic, 1, lambda got: len(got) >= 11)[-1] == b"after"


def test_coordinator_killed_in_prepare_commit_of_transactions_v2(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(3, overrides=OVERRIDES)
    txn_id, topic = "prepared-v2-tid", "prepared-v2"
    with RawClient(cluster.process(cluster.live()[0]).port, timeout=30) as client:
        coordinator = int(txn.find_coordinator(client, txn_id).node_id)
    leader = next(i for i in cluster.live() if i != coordinator)
    other = next(i for i in cluster.live() if i not in (coordinator, leader))
    create_topic(cluster, topic, assignments=[[leader, other, coordinator]])
    cluster.wait_for(lambda: cluster.metadata(topics=[topic]).topics[topic][0].leader == leader, 20, "data leader")
    with RawClient(cluster.process(coordinator).port, timeout=30) as coord, \
            RawClient(cluster.process(leader).port, timeout=30) as data:  # fmt: skip
        pid, e = txn.init(coord, txn_id)
        assert txn.produce(data, txn_id, topic, 0, pid, e, 0, b"v2-0", version=12) == ErrorCode.none
        cluster.pause(leader)  # the COMMIT marker cannot be written
        try:
            assert txn.end(coord, txn_id, pid, e, commit=True, version=5) == (ErrorCode.none, pid, e + 1)
            cluster.kill(coordinator)
        finally:
            cluster.resume(leader)
        assert _read_committed(cluster, topic, 1, lambda got: len(got) >= 1) == [b"v2-0"], broker_logs(cluster)
        _await_completion_by_next_coordinator(cluster, "prepared-v2-tid")
        with RawClient(cluster.process(other).port, timeout=30) as client:
            found = txn.find_coordinator(client, txn_id)
        now_leader = cluster.metadata(topics=[topic]).topics[topic][0].leader  # it may have moved meanwhile
        with RawClient(int(found.port), timeout=30) as coord, RawClient(cluster.process(now_leader).port, timeout=30) as data:
            # a retry, answered once CompleteCommit is written: that waits for __transaction_state's ISR
            # to be back at min.insync.replicas (2) after one replica was paused and another killed
            retried = txn.end(coord, txn_id, pid, e, commit=True, version=5, timeout=90)
            assert retried == (ErrorCode.none, pid, e + 1), broker_logs(cluster, tail=20_000)
            assert txn.produce(data, txn_id, topic, 0, pid, e + 1, 0, b"v2-1", version=12) == ErrorCode.none
            assert txn.produce(data, txn_id, topic, 0, pid, e, 1, b"zombie", version=12) == ErrorCode.invalid_producer_epoch
            assert txn.end(coord, txn_id, pid, e + 1, commit=True, version=5) == (ErrorCode.none, pid, e + 2)
    assert _read_committed(cluster, topic, 1, lambda got: len(got) >= 2) == [b"v2-0", b"v2-1"]


def test_transactions_survive_their_coordinator_being_killed(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(3, overrides=OVERRIDES)
    txn_id, topic, partitions = "survivor-tid", "survivor", 2
    create_topic(cluster, topic, partitions, 3)
    p = _producer(cluster, txn_id)
    committed: list[int] = []  # transactions whose commit returned
    unknown: list[int] = []  # commit failed: whole or absent
    coordinator = _coordinator(cluster, txn_id)
    faults = {  # after this many commits, in the middle of the next transaction (records sent)
        8: lambda: cluster.kill(coordinator),
        16: lambda: cluster.restart(coordinator),
        24: lambda: cluster.kill(cluster.metadata(topics=[topic]).topics[topic][0].leader),
    }
    deadline = time.monotonic() + 120
    n = 0
    while len(committed) < 32 and time.monotonic() < deadline:
        try:
            p.begin_transaction()
            for i in range(10):
                p.produce(topic, b"%d:%d" % (n, i), partition=i % partitions)
            fault = faults.pop(len(committed), None)
            if fault is not None:
                p.flush(30)
                fault()
            p.commit_transaction(60)
            committed.append(n)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            unknown.append(n)
            if error.txn_requires_abort():
                p.abort_transaction(60)
            elif not error.retriable():
                p = _producer(cluster, txn_id)  # fatal (fenced): a new producer fences this one
        n += 1
    assert not faults and len(committed) >= 32, f"committed {len(committed)}, failed {unknown}"
    print(f"committed {len(committed)} transactions, {len(unknown)} failed: {unknown}")

    expected = 10 * len(committed)
    got = _read_committed(cluster, topic, partitions, lambda got: len(got) >= expected)
    by_txn: dict[int, list[int]] = {}
    for value in got:
        t, i = map(int, value.split(b":"))
        by_txn.setdefault(t, []).append(i)
    for t in committed:
        assert sorted(by_txn.get(t, [])) == list(range(10)), f"transaction {t}: {by_txn.get(t)}"
    for t, records in by_txn.items():
        assert t in committed or (t in unknown and sorted(records) == list(range(10))), f"transaction {t}: {records}"
    # in order within each partition: transactions ascend
    for part in range(partitions):
        seen = [int(v.split(b":")[0]) for v in got if int(v.split(b":")[1]) % partitions == part]
        assert seen == sorted(seen)


def test_transactional_offsets_follow_the_group_coordinator(cluster_factory: Callable[..., SamsaCluster]) -> None:
    """TxnOffsetCommit across group coordinator moves: offsets of an aborted transaction never
    show; offsets written to one coordinator, whose broker is then killed, become the group's when
    the transaction commits (the new coordinator replayed them as pending and the COMMIT marker
    reaches it)."""
    cluster = cluster_factory(3, overrides={**OVERRIDES, "offsets.topic.num.partitions": "3"})
    src, group, txn_id = "ctp-in", "ctp-group", "ctp-tid"
    create_topic(cluster, src, 1, 3)
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(30):
        plain.produce(src, b"m%d" % i, partition=0)
    assert plain.flush(30) == 0
    p = _producer(cluster, txn_id)
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000,
    })  # fmt: skip
    consumer.assign([TopicPartition(src, 0, 0)])

    def group_coordinator() -> int:
        offsets = cluster.metadata(topics=["__consumer_offsets"]).topics["__consumer_offsets"]
        return offsets[partition_for(group, len(offsets))].leader

    def committed() -> int:
        c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
        try:
            return c.committed([TopicPartition(src, 0)], timeout=30)[0].offset
        finally:
            c.close()

    def send_offsets(offset: int) -> None:
        p.send_offsets_to_transaction([TopicPartition(src, 0, offset)], consumer.consumer_group_metadata(), 30)

    try:
        p.begin_transaction()
        send_offsets(10)
        p.commit_transaction(60)
        assert committed() == 10
        p.begin_transaction()
        send_offsets(20)
        p.abort_transaction(60)
        assert committed() == 10
        first = group_coordinator()
        cluster.kill(first)
        cluster.wait_for(lambda: group_coordinator() not in (first, -1), 30, "a new group coordinator")
        assert committed() == 10  # the aborted offsets were not replayed as committed
        # a new producer (fencing the old): librdkafka's cache of group coordinators would have the
        # old one wait for the killed broker (its TxnOffsetCommit never sent, whatever the timeout)
        cluster.restart(first)
        p = _producer(cluster, txn_id)
        p.begin_transaction()
        send_offsets(25)  # written to the new coordinator, pending
        cluster.kill(group_coordinator())  # the pending offsets move once more
        p.commit_transaction(60)
        cluster.wait_for(lambda: committed() == 25, 60, "the committed transaction's offsets")
    finally:
        consumer.close()
