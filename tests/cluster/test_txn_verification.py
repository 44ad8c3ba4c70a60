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

import datetime
import time
from collections.abc import Callable
from typing import Any

from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i8, i16, i32, i32Timedelta

from broker.testing.cluster import SamsaCluster
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from tests.cluster.conftest import create_topic
from tests.support.raw_client import RawClient

TOPIC, TXN_ID = "verified", "verified-tid"
RETRIABLE = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
             ErrorCode.not_coordinator, ErrorCode.concurrent_transactions}  # fmt: skip


def _retry(call: Callable[[], Any], error_of: Callable[[Any], int] = lambda r: r.error_code) -> Any:
    deadline = time.monotonic() + 30
    while True:
        answer = call()
        if error_of(answer) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def _produce(client: RawClient, pid: int, epoch: int, sequence: int, partition: int) -> ErrorCode:
    batch = build_batch([NewRecord(None, b"v%d" % sequence, (), None)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=sequence, is_transactional=True)  # fmt: skip
    answer = client.request(ProduceRequest(
        transactional_id=TransactionalId(TXN_ID), acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(TopicProduceData(name=TopicName(TOPIC),
                                     partition_data=(PartitionProduceData(index=i32(partition), records=batch),)),),
    ))  # fmt: skip
    return ErrorCode(answer.responses[0].partition_responses[0].error_code)


def _init(client: RawClient) -> tuple[int, int]:
    answer = _retry(lambda: client.request(InitProducerIdRequest(
        transactional_id=TransactionalId(TXN_ID), transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
    )))  # fmt: skip
    assert answer.error_code == ErrorCode.none
    return int(answer.producer_id), int(answer.producer_epoch)


def test_leader_verifies_with_a_remote_coordinator(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(2, overrides={
        "transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "1",
    })  # the coordinator stopped, no other broker takes its partition over
    any_port = cluster.process(cluster.live()[0]).port
    with RawClient(any_port, timeout=30) as client:
        found = _retry(
            lambda: client.request(FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(TXN_ID,))),
            lambda r: r.coordinators[0].error_code,
        ).coordinators[0]  # fmt: skip
    coordinator = int(found.node_id)
    leader = next(i for i in cluster.live() if i != coordinator)
    create_topic(cluster, TOPIC, assignments=[[leader], [leader]])
    with RawClient(int(found.port), timeout=30) as coord, RawClient(cluster.process(leader).port, timeout=30) as data:
        pid, epoch = _init(coord)
        added = _retry(lambda: coord.request(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TransactionalId(TXN_ID), v3_and_below_producer_id=ProducerId(pid),
            v3_and_below_producer_epoch=i16(epoch),
            v3_and_below_topics=(AddPartitionsToTxnTopic(name=TopicName(TOPIC), partitions=(i32(0),)),),
        )), lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)  # fmt: skip
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.none
        assert _produce(data, pid, epoch, 0, partition=1) == ErrorCode.invalid_txn_state
        assert _produce(data, pid, epoch, 0, partition=0) == ErrorCode.none
        ended = _retry(lambda: coord.request(EndTxnRequest(
            transactional_id=TransactionalId(TXN_ID), producer_id=ProducerId(pid), producer_epoch=i16(epoch), committed=False,
        )))  # fmt: skip
        assert ended.error_code == ErrorCode.none
        assert _init(coord) == (pid, epoch + 1)
        assert _produce(data, pid, epoch, 1, partition=0) == ErrorCode.invalid_producer_epoch  # the zombie
        cluster.stop(coordinator)
        assert _produce(data, pid, epoch + 1, 0, partition=0) == ErrorCode.not_enough_replicas
