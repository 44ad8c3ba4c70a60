"""Transactional requests as raw protocol (tests/support/raw_client.py), for tests that must say
exactly which version goes to which broker: FindCoordinator, InitProducerId, AddPartitionsToTxn
v3, Produce of one transactional batch (v8: transactions v1; v12: v2, the partition added by its
leader) and EndTxn (v3, or v5 with the epoch bump). Coordinator errors that a client retries are
retried for up to 30 s."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.end_txn.v3.request import EndTxnRequest as EndTxnRequestV3
from kio.schema.end_txn.v5.request import EndTxnRequest as EndTxnRequestV5
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v8 import request as produce_v8
from kio.schema.produce.v12 import request as produce_v12
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i8, i16, i32, i32Timedelta

from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from tests.support.raw_client import RawClient

RETRIABLE = {ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
             ErrorCode.not_coordinator, ErrorCode.concurrent_transactions}  # fmt: skip


def retry(
    call: Callable[[], Any], error_of: Callable[[Any], int] = lambda r: r.error_code, timeout: float = 30
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        answer = call()
        if error_of(answer) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def find_coordinator(client: RawClient, txn_id: str) -> Any:
    """The transaction coordinator's entry (node_id, host, port, error_code)."""
    return retry(
        lambda: client.request(FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(txn_id,))),
        lambda r: r.coordinators[0].error_code,
    ).coordinators[0]  # fmt: skip


def init(client: RawClient, txn_id: str) -> tuple[int, int]:
    answer = retry(lambda: client.request(InitProducerIdRequest(
        transactional_id=TransactionalId(txn_id), transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
    )))  # fmt: skip
    assert answer.error_code == ErrorCode.none, answer
    return int(answer.producer_id), int(answer.producer_epoch)


def add(client: RawClient, txn_id: str, pid: int, epoch: int, topic: str, partition: int) -> ErrorCode:
    answer = retry(lambda: client.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TransactionalId(txn_id), v3_and_below_producer_id=ProducerId(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(AddPartitionsToTxnTopic(name=TopicName(topic), partitions=(i32(partition),)),),
    )), lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)  # fmt: skip
    return ErrorCode(answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


def produce(
    client: RawClient, txn_id: str, topic: str, partition: int, pid: int, epoch: int, sequence: int,
    value: bytes, version: int = 8,
) -> ErrorCode:  # fmt: skip
    """One transactional batch of one record, acks=all: the partition's error."""
    schema = produce_v12 if version == 12 else produce_v8
    batch = build_batch([NewRecord(None, value, (), None)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=sequence, is_transactional=True)  # fmt: skip
    answer = client.request(schema.ProduceRequest(
        transactional_id=TransactionalId(txn_id), acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(schema.TopicProduceData(name=TopicName(topic), partition_data=(
            schema.PartitionProduceData(index=i32(partition), records=batch),)),),
    ))  # fmt: skip
    return ErrorCode(answer.responses[0].partition_responses[0].error_code)


def end(
    client: RawClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3, timeout: float = 30
) -> tuple[ErrorCode, int, int]:
    """EndTxn: (error, producer id, producer epoch); v3 answers no producer (-1, -1)."""
    cls = EndTxnRequestV5 if version == 5 else EndTxnRequestV3
    answer = retry(lambda: client.request(cls(
        transactional_id=TransactionalId(txn_id), producer_id=ProducerId(pid), producer_epoch=i16(epoch), committed=commit,
    )), timeout=timeout)  # fmt: skip
    return ErrorCode(answer.error_code), int(getattr(answer, "producer_id", -1)), int(getattr(answer, "producer_epoch", -1))
