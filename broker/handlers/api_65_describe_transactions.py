# DescribeTransactions (key 65), version 0.
# kafka-transactions.sh describe and Admin.describeTransactions: for each transactional id this
# broker coordinates, its state name (Kafka's: Empty, Ongoing, PrepareCommit, ...), timeout,
# start time (-1 without a transaction), producer id and epoch and the partitions of the ongoing
# transaction, from the transaction coordinator's memory. Per id: NOT_COORDINATOR,
# COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND.
# Authorization: DESCRIBE on each transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it);
# its partitions only of the topics the principal may DESCRIBE.
# Not supported: nothing of v0 is left out.
from __future__ import annotations

import datetime
from typing import cast

from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)
from kio.static.primitive import TZAware, i16, i32

from broker.context import RequestContext
from broker.handlers import registry
from controller.security_model import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE, ProducerId, TopicName

API_KEY = 65
_EPOCH = cast(TZAware, datetime.datetime.fromtimestamp(0, tz=datetime.UTC))


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    states = []
    for txn_id in request.transactional_ids:
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            states.append(TransactionState(
                error_code=ErrorCode.transactional_id_authorization_failed, transactional_id=txn_id,
                transaction_state="", transaction_timeout=datetime.timedelta(0),  # type: ignore[arg-type]
                transaction_start_time=_EPOCH, producer_id=ProducerId(0), producer_epoch=i16(0), topics=(),
            ))  # fmt: skip  (the other fields at the schema's defaults, as Kafka leaves them)
            continue
        d = ctx.services.txn_coordinator.describe(txn_id)
        by_topic: dict[str, list[int]] = {}
        for tp in d.partitions:  # only the topics the principal may describe (Kafka's KafkaApis)
            if ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, tp.topic):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
        # -1 (no transaction) too is written as milliseconds since the epoch
        start = cast(TZAware, datetime.datetime.fromtimestamp(d.start_timestamp_ms / 1000, tz=datetime.UTC))
        states.append(
            TransactionState(
                error_code=d.error,
                transactional_id=txn_id,
                transaction_state=d.state,
                transaction_timeout=datetime.timedelta(milliseconds=d.timeout_ms),  # type: ignore[arg-type]
                transaction_start_time=start,
                producer_id=ProducerId(d.producer_id),
                producer_epoch=i16(d.producer_epoch),
                topics=tuple(
                    TopicData(topic=TopicName(t), partitions=tuple(i32(p) for p in ps)) for t, ps in by_topic.items()
                ),
            )
        )
    return DescribeTransactionsResponse(throttle_time=NO_THROTTLE, transaction_states=tuple(states))
