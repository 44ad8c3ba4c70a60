"""A partition leader asks a transaction coordinator on another broker whether partitions are in
a transaction (KIP-890 part 1), or has it add them (transactions v2); Kafka's AddPartitionsToTxnManager.

Before a transactional batch is appended, the leader checks with the coordinator of the
batch's transactional id that its transaction has added the partition, so that a late write
(a produce retried or delayed past the transaction's end) cannot open a transaction no marker
will ever close. Where this broker is the coordinator the check is a call
(`TransactionCoordinator.verify_append`); otherwise `RemoteVerifier.verify` sends an
AddPartitionsToTxn v5 request, `verify_only` or (transactions v2) not, to the leader of the transactional id's
`__transaction_state` partition, on the inter-broker listener, one request in flight per broker.

The answer is mapped as Kafka's AddPartitionsToTxnManager maps it: a top-level
CLUSTER_AUTHORIZATION_FAILED becomes INVALID_TXN_STATE, another top-level error applies to every
partition, a partition's PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, and an unreachable or
silent coordinator NETWORK_EXCEPTION (the produce handler turns the retriable ones into
NOT_ENOUGH_REPLICAS, as Kafka's ReplicaManager does).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kio.schema.types import TransactionalId
from kio.static.primitive import i16, i32

from broker.replication.leader_client import BrokerClients, LeaderConnectionError
from broker.security.client import ClientSecurity
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import ProducerId, TopicName

if TYPE_CHECKING:
    from controller.interface import Controller

log = logging.getLogger("samsa.txn")


class RemoteVerifier:
    def __init__(
        self, broker_id: int, controller: Controller, *, listener: str, timeout_ms: int,
        security: ClientSecurity | None,
    ) -> None:
        self._clients = BrokerClients(
            lambda: controller.image, listener, client_id=f"samsa-txn-verification-{broker_id}",
            timeout_s=timeout_ms / 1000, security=security,
        )  # fmt: skip

    def close(self) -> None:
        self._clients.close()

    async def verify(
        self,
        coordinator_id: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        *,
        verify_only: bool = True,
    ) -> dict[TopicPartition, ErrorCode]:
        """The partitions that failed verification (or, not `verify_only`, could not be added)
        with the producer's error (absent = verified or added)."""
        client = self._clients.get(coordinator_id)
        if client is None:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = AddPartitionsToTxnRequest(
            transactions=(
                AddPartitionsToTxnTransaction(
                    transactional_id=TransactionalId(transactional_id),
                    producer_id=ProducerId(producer_id),
                    producer_epoch=i16(producer_epoch),
                    verify_only=verify_only,
                    topics=tuple(
                        AddPartitionsToTxnTopic(name=TopicName(t), partitions=tuple(i32(p) for p in ps))
                        for t, ps in by_topic.items()
                    ),
                ),
            )
        )
        try:
            async with self._clients.lock(coordinator_id):
                response = await client.request(request)
        except LeaderConnectionError as exc:
            log.info(
                "transaction verification failed broker=%d transactional_id=%s error=%s",
                coordinator_id, transactional_id, exc,
            )  # fmt: skip
            return dict.fromkeys(partitions, ErrorCode.network_exception)
        if response.error_code != ErrorCode.none:
            log.info(
                "transaction verification refused broker=%d transactional_id=%s error=%s",
                coordinator_id, transactional_id, ErrorCode(response.error_code).name,
            )  # fmt: skip
            top = ErrorCode(response.error_code)
            if top == ErrorCode.cluster_authorization_failed:
                top = ErrorCode.invalid_txn_state
            return dict.fromkeys(partitions, top)
        out: dict[TopicPartition, ErrorCode] = {}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    code = ErrorCode(p.partition_error_code)
                    if code != ErrorCode.none:
                        tp = TopicPartition(str(topic.name), int(p.partition_index))
                        out[tp] = ErrorCode.invalid_producer_epoch if code == ErrorCode.producer_fenced else code
        return out
