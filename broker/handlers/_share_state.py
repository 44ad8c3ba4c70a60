"""Shared pieces of the share coordinator's state RPC handlers (keys 83-87, KIP-932).

Not a handler: the registry only imports `api_*` modules. Each state RPC names a group and its
topics' partitions; each partition is answered by the share coordinator (broker/share/
share_coordinator.py) on its own, as Kafka's ShareCoordinatorService does, and the requests are
refused whole without CLUSTER_ACTION (brokers only), as KafkaApis refuses them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from broker.context import RequestContext
from broker.share.share_coordinator import ShareCoordinator
from broker.share.share_state import SharePartitionKey
from controller.security_model import AclOperation
from protocol.errors import ErrorCode

CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."
"""Kafka's message for the code (toGlobalErrorResponse)."""

A = TypeVar("A")


class _Topic(Protocol):
    @property
    def topic_id(self) -> uuid.UUID | None: ...

    @property
    def partitions(self) -> Sequence[Any]: ...


async def answer_each(
    ctx: RequestContext, group_id: str, topics: Sequence[_Topic],
    answer: Callable[[ShareCoordinator, SharePartitionKey, Any], Awaitable[A]],
    refused: Callable[[ErrorCode, str], A],
) -> list[tuple[uuid.UUID, list[tuple[Any, A]]]]:  # fmt: skip
    """Each topic's partitions (as requested) with their answers: `answer` from the share
    coordinator, or `refused` (CLUSTER_AUTHORIZATION_FAILED; COORDINATOR_NOT_AVAILABLE on a
    broker without a share coordinator) for every one."""
    coordinator = ctx.services.share_coordinator
    pairs = [(t.topic_id or uuid.UUID(int=0), p) for t in topics for p in t.partitions]
    answers: list[A]
    if not ctx.authorized(AclOperation.CLUSTER_ACTION):
        answers = [refused(ErrorCode.cluster_authorization_failed, CLUSTER_AUTHORIZATION_FAILED) for _ in pairs]
    elif coordinator is None:
        answers = [refused(ErrorCode.coordinator_not_available, ErrorCode.coordinator_not_available.name)
                   for _ in pairs]  # fmt: skip
    else:
        answers = list(await asyncio.gather(*(
            answer(coordinator, SharePartitionKey(group_id, topic_id, int(p.partition)), p) for topic_id, p in pairs
        )))  # fmt: skip
    grouped: dict[uuid.UUID, list[tuple[Any, A]]] = {}
    for (topic_id, p), a in zip(pairs, answers, strict=True):
        grouped.setdefault(topic_id, []).append((p, a))
    return list(grouped.items())
