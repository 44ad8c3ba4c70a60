# DescribeTransactions (key 65), version 0.
# kafka-transactions.sh describe and Admin.describeTransactions: for each transactional id this
# broker coordinates, its state name (Kafka's: Empty, Ongoing, PrepareCommit, ...), timeout,
# start time (-1 without a transaction), producer id and epoch and the partitions of the ongoing
# transaction, from the transaction coordinator's memory. Per id: NOT_COORDINATOR,
# COORDINATOR_LOAD_IN_PROGRESS, TRANSACTIONAL_ID_NOT_FOUND.
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
from protocol.types import NO_THROTTLE, ProducerId, TopicName

API_KEY = 65


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    states = []
    for txn_id in request.transactional_ids:
        d = ctx.services.txn_coordinator.describe(txn_id)
        by_topic: dict[str, list[int]] = {}
        for tp in d.partitions:
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
