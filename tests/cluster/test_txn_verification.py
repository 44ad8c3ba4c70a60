"""KIP-890 part 1 across brokers: a partition leader that is not the transaction coordinator asks
the coordinator (AddPartitionsToTxn v4 verify-only) before it appends a transactional batch.

Two brokers; the data topic's partitions are led by the broker that does not coordinate the
transactional id. Raw requests: a batch to a partition the transaction has not added is refused
(INVALID_TXN_STATE, Produce v8), one to an added partition is appended, and after the
transaction is aborted and the producer's epoch bumped by a second InitProducerId, a zombie batch
of the old epoch, which the partition's own producer state would take (its last epoch is the
marker's), is refused with INVALID_PRODUCER_EPOCH by the coordinator's answer. With the
coordinator stopped (__transaction_state of one replica), the leader answers NOT_ENOUGH_REPLICAS
(retriable) and appends nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.testing.cluster import SamsaCluster
from protocol.errors import ErrorCode
from tests.cluster.conftest import create_topic
from tests.support import txn_requests as txn
from tests.support.raw_client import RawClient

TOPIC, TXN_ID = "verified", "verified-tid"


def test_leader_verifies_with_a_remote_coordinator(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(2, overrides={
        "transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "1",
    })  # the coordinator stopped, no other broker takes its partition over
    with RawClient(cluster.process(cluster.live()[0]).port, timeout=30) as client:
        found = txn.find_coordinator(client, TXN_ID)
    coordinator = int(found.node_id)
    leader = next(i for i in cluster.live() if i != coordinator)
    create_topic(cluster, TOPIC, assignments=[[leader], [leader]])
    with RawClient(int(found.port), timeout=30) as coord, RawClient(cluster.process(leader).port, timeout=30) as data:
        pid, epoch = txn.init(coord, TXN_ID)
        assert txn.add(coord, TXN_ID, pid, epoch, TOPIC, 0) == ErrorCode.none
        assert txn.produce(data, TXN_ID, TOPIC, 1, pid, epoch, 0, b"v0") == ErrorCode.invalid_txn_state
        assert txn.produce(data, TXN_ID, TOPIC, 0, pid, epoch, 0, b"v0") == ErrorCode.none
        assert txn.end(coord, TXN_ID, pid, epoch, commit=False)[0] == ErrorCode.none
        assert txn.init(coord, TXN_ID) == (pid, epoch + 1)
        assert txn.produce(data, TXN_ID, TOPIC, 0, pid, epoch, 1, b"v1") == ErrorCode.invalid_producer_epoch  # zombie
        cluster.stop(coordinator)
        assert txn.produce(data, TXN_ID, TOPIC, 0, pid, epoch + 1, 0, b"v0") == ErrorCode.not_enough_replicas
