"""The share-group state persister (Kafka's DefaultStatePersister and PersisterStateManager): the
state RPCs of a share partition go to the share coordinator of its key, the leader of the key's
`__share_group_state` partition, found in the metadata image as Kafka's
ShareCoordinatorMetadataCacheHelperImpl finds it. This broker's own ShareCoordinator answers the
partitions it leads; another broker is sent InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState or DeleteShareGroupState over the inter-broker listener (one request in
flight per broker).

An answer of NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS, no
leader for the state partition, or a broker that cannot be reached is retried with a growing
backoff (Kafka's persister retries these), the coordinator looked up anew each time, for as long
as Kafka's PersisterStateManager does (5 attempts, backoff 1 s doubling: about 15 s), so that a
share coordinator's failover does not fail the acknowledgements written meanwhile; the retries
start sooner (50 ms, doubling up to 1 s) because a failover here takes about a second; then the
error is answered. Without a `__share_group_state` partition for the key (no state was ever initialized:
the topic is created first) COORDINATOR_NOT_AVAILABLE is answered at once.

The topic is created by the group coordinator's first initialization (`initialize_partitions`,
ShareCoordinator.ensure_topic), where Kafka's persister sends FindCoordinator with key type SHARE;
FindCoordinator v6 (key type 2 for clients and tools) is not served yet.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from kio.schema.delete_share_group_state.v0 import request as delete_req
from kio.schema.initialize_share_group_state.v0 import request as init_req
from kio.schema.read_share_group_state.v0 import request as read_req
from kio.schema.read_share_group_state_summary.v1 import request as summary_req
from kio.schema.write_share_group_state.v1 import request as write_req
from kio.static.primitive import i8, i16, i32, i64

from broker.replication.leader_client import BrokerClients, LeaderConnectionError
from broker.share.in_flight import PersisterStateBatch, RecordState
from broker.share.share_coordinator import SHARE_GROUP_STATE_TOPIC, ShareCoordinator, coordinator_key
from broker.share.share_coordinator_shard import ReadAnswer, StateAnswer, SummaryAnswer
from broker.share.share_state import UNINITIALIZED_START_OFFSET, SharePartitionKey
from controller.model import ClusterImage
from protocol.errors import ErrorCode

log = logging.getLogger("samsa.share")

_RETRIABLE = frozenset({
    ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
})  # fmt: skip
BACKOFF_MS = 50
BACKOFF_MAX_MS = 1_000
RETRY_BUDGET_MS = 15_000

A = TypeVar("A", ReadAnswer, StateAnswer, SummaryAnswer)


class SharePersister:
    """ReadShareGroupState, WriteShareGroupState, InitializeShareGroupState and
    DeleteShareGroupState of one share partition at a time, wherever its coordinator is."""

    def __init__(
        self, broker_id: int, local: ShareCoordinator, image: Callable[[], ClusterImage], clients: BrokerClients
    ) -> None:
        self._broker_id = broker_id
        self._local = local
        self._image = image
        self._clients = clients

    def close(self) -> None:
        self._clients.close()

    def _coordinator(self, key: SharePartitionKey) -> int | None:
        """The broker leading the state partition of `key`, -1 while it has no leader, None if
        there is no such partition (`__share_group_state` not created: no state to wait for)."""
        registration = self._image().partition(SHARE_GROUP_STATE_TOPIC, self._local.partition_for(coordinator_key(key)))
        return None if registration is None else int(registration.leader)

    async def _call(
        self, key: SharePartitionKey, local: Callable[[], Awaitable[A]], remote: Callable[[int], Awaitable[A]],
        failed: Callable[[ErrorCode], A],
    ) -> A:  # fmt: skip
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RETRY_BUDGET_MS / 1000
        backoff_ms = BACKOFF_MS
        while True:
            leader = self._coordinator(key)
            if leader is None:
                return failed(ErrorCode.coordinator_not_available)
            if leader < 0:
                answer = failed(ErrorCode.coordinator_not_available)
            elif leader == self._broker_id:
                answer = await local()
            else:
                answer = await remote(leader)
            if answer.error not in _RETRIABLE or loop.time() + backoff_ms / 1000 > deadline:
                return answer
            await asyncio.sleep(backoff_ms / 1000)
            backoff_ms = min(backoff_ms * 2, BACKOFF_MAX_MS)

    async def _send(self, broker_id: int, request: Any) -> Any | None:
        """The response of another broker, or None if it could not be reached."""
        client = self._clients.get(broker_id)
        if client is None:
            return None
        try:
            async with self._clients.lock(broker_id):
                return await client.request(request)
        except LeaderConnectionError as e:
            log.info("share state request failed broker=%d api_key=%d error=%s",
                     broker_id, int(request.__api_key__), e)  # fmt: skip
            return None

    # == the state RPCs ===========================================================================

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadAnswer:
        """ReadShareGroupState."""

        async def remote(broker_id: int) -> ReadAnswer:
            response = await self._send(broker_id, read_req.ReadShareGroupStateRequest(
                group_id=key.group_id, topics=(read_req.ReadStateData(topic_id=key.topic_id, partitions=(
                    read_req.PartitionData(partition=i32(key.partition), leader_epoch=i32(leader_epoch)),)),),
            ))  # fmt: skip
            p = _only(response)
            if p is None:
                return ReadAnswer(ErrorCode.coordinator_not_available, None)
            return ReadAnswer(
                p.error_code, p.error_message, int(p.state_epoch), int(p.start_offset),
                tuple(PersisterStateBatch(int(b.first_offset), int(b.last_offset), RecordState(int(b.delivery_state)),
                                          int(b.delivery_count)) for b in p.state_batches),
            )  # fmt: skip

        return await self._call(key, lambda: self._local.read(key, leader_epoch), remote, _read_failed)

    async def write(
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
        delivery_complete_count: int, batches: Iterable[PersisterStateBatch],
    ) -> StateAnswer:  # fmt: skip
        """WriteShareGroupState (v1: with the delivery complete count)."""
        batches = tuple(batches)

        async def remote(broker_id: int) -> StateAnswer:
            return _state(await self._send(broker_id, write_req.WriteShareGroupStateRequest(
                group_id=key.group_id, topics=(write_req.WriteStateData(topic_id=key.topic_id, partitions=(
                    write_req.PartitionData(
                        partition=i32(key.partition), state_epoch=i32(state_epoch), leader_epoch=i32(leader_epoch),
                        start_offset=i64(start_offset), delivery_complete_count=i32(delivery_complete_count),
                        state_batches=tuple(
                            write_req.StateBatch(first_offset=i64(b.first_offset), last_offset=i64(b.last_offset),
                                                 delivery_state=i8(int(b.delivery_state)),
                                                 delivery_count=i16(b.delivery_count))
                            for b in batches),
                    ),)),),
            )))  # fmt: skip

        return await self._call(
            key,
            lambda: self._local.write(key, state_epoch, leader_epoch, start_offset, delivery_complete_count, batches),
            remote, _state_failed,
        )  # fmt: skip

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> StateAnswer:
        """InitializeShareGroupState."""

        async def remote(broker_id: int) -> StateAnswer:
            return _state(await self._send(broker_id, init_req.InitializeShareGroupStateRequest(
                group_id=key.group_id, topics=(init_req.InitializeStateData(topic_id=key.topic_id, partitions=(
                    init_req.PartitionData(partition=i32(key.partition), state_epoch=i32(state_epoch),
                                           start_offset=i64(start_offset)),)),),
            )))  # fmt: skip

        return await self._call(key, lambda: self._local.initialize(key, state_epoch, start_offset), remote,
                                _state_failed)  # fmt: skip

    async def delete(self, key: SharePartitionKey) -> StateAnswer:
        """DeleteShareGroupState."""

        async def remote(broker_id: int) -> StateAnswer:
            return _state(await self._send(broker_id, delete_req.DeleteShareGroupStateRequest(
                group_id=key.group_id, topics=(delete_req.DeleteStateData(topic_id=key.topic_id, partitions=(
                    delete_req.PartitionData(partition=i32(key.partition)),)),),
            )))  # fmt: skip

        return await self._call(key, lambda: self._local.delete(key), remote, _state_failed)

    async def read_summary(self, key: SharePartitionKey) -> SummaryAnswer:
        """ReadShareGroupStateSummary (v1: with the delivery complete count), for
        DescribeShareGroupOffsets."""

        async def remote(broker_id: int) -> SummaryAnswer:
            p = _only(await self._send(broker_id, summary_req.ReadShareGroupStateSummaryRequest(
                group_id=key.group_id, topics=(summary_req.ReadStateSummaryData(topic_id=key.topic_id, partitions=(
                    summary_req.PartitionData(partition=i32(key.partition), leader_epoch=i32(0)),)),),
            )))  # fmt: skip
            if p is None:
                return SummaryAnswer(ErrorCode.coordinator_not_available, None)
            return SummaryAnswer(p.error_code, p.error_message, int(p.state_epoch), int(p.leader_epoch),
                                 int(p.start_offset), int(p.delivery_complete_count))  # fmt: skip

        async def local() -> SummaryAnswer:
            return self._local.read_summary(key)

        return await self._call(key, local, remote, _summary_failed)

    # == the group coordinator's initializer ======================================================

    async def initialize_partitions(
        self, group_id: str, state_epoch: int, todo: Mapping[uuid.UUID, frozenset[int]]
    ) -> dict[uuid.UUID, frozenset[int]]:
        """Initialize the state of a share group's partitions (start offset -1: the share
        partition leader decides it on its first fetch), as Kafka's persister does for
        GroupCoordinatorService.persisterInitialize: the partitions initialized."""
        keys = [SharePartitionKey(group_id, topic_id, p) for topic_id, ps in todo.items() for p in sorted(ps)]
        answers = await asyncio.gather(*(self._initialize_one(key, state_epoch) for key in keys))
        done: dict[uuid.UUID, set[int]] = {}
        for key, answer in zip(keys, answers, strict=True):
            if answer.error == ErrorCode.none:
                done.setdefault(key.topic_id, set()).add(key.partition)
            else:
                log.info("share partition state not initialized group=%s topic_id=%s partition=%d error=%s",
                         group_id, key.topic_id, key.partition, answer.error.name)  # fmt: skip
        return {topic_id: frozenset(ps) for topic_id, ps in done.items()}

    async def delete_partitions(self, group_id: str, partitions: Mapping[uuid.UUID, frozenset[int]]) -> ErrorCode:
        """Delete the state of a share group's partitions (DeleteGroups on a share group, Kafka's
        GroupCoordinatorService.deleteShareGroup over its persister's deleteState): the first
        partition's error, else NONE."""
        keys = [SharePartitionKey(group_id, topic_id, p) for topic_id, ps in partitions.items() for p in sorted(ps)]
        answers = await asyncio.gather(*(self.delete(key) for key in keys))
        for key, answer in zip(keys, answers, strict=True):
            if answer.error != ErrorCode.none:
                log.info("share partition state not deleted group=%s topic_id=%s partition=%d error=%s",
                         group_id, key.topic_id, key.partition, answer.error.name)  # fmt: skip
                return answer.error
        return ErrorCode.none

    async def _initialize_one(self, key: SharePartitionKey, state_epoch: int) -> StateAnswer:
        return await self.initialize_creating_topic(key, state_epoch, UNINITIALIZED_START_OFFSET)

    async def initialize_creating_topic(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> StateAnswer:
        """InitializeShareGroupState, `__share_group_state` created first if it does not exist
        (Kafka's persister finds the share coordinator with FindCoordinator, which creates it)."""
        error = await self._local.ensure_topic(key)
        if error != ErrorCode.none:
            return StateAnswer(error, error.name)
        return await self.initialize(key, state_epoch, start_offset)


def _only(response: Any) -> Any | None:
    """The one partition result of a one-partition state RPC's response."""
    if response is None or len(response.results) != 1 or len(response.results[0].partitions) != 1:
        return None
    return response.results[0].partitions[0]


def _state(response: Any) -> StateAnswer:
    p = _only(response)
    return StateAnswer(ErrorCode.coordinator_not_available) if p is None else StateAnswer(p.error_code, p.error_message)


def _read_failed(error: ErrorCode) -> ReadAnswer:
    return ReadAnswer(error, error.name)


def _state_failed(error: ErrorCode) -> StateAnswer:
    return StateAnswer(error, error.name)


def _summary_failed(error: ErrorCode) -> SummaryAnswer:
    return SummaryAnswer(error, error.name)
