"""Replica fetchers: how a follower copies its leader's log (Kafka's ReplicaFetcherThread).

One `ReplicaFetcher` task per (leader broker, shard), num.replica.fetchers shards per leader;
`ReplicaFetcherManager` (broker/replication/fetcher_manager.py) assigns the partitions this broker
follows to them.

Per-partition state machine (`FetchState`):

    TRUNCATING --OffsetForLeaderEpoch answered, truncated-->          FETCHING (fetch offset = LEO)
    TRUNCATING --answered epoch unknown here (KIP-279)-->             TRUNCATING (again, lower epoch)
    TRUNCATING --no local epoch-->                                    FETCHING (truncated to the HW)
    FETCHING   --records-->                                           FETCHING (appended, HW from leader)
    FETCHING   --OFFSET_OUT_OF_RANGE, leader's log start is above-->  FETCHING (log restarted there)
    FETCHING   --OFFSET_OUT_OF_RANGE otherwise / diverging epoch-->   TRUNCATING
    any        --FENCED_LEADER_EPOCH-->                               DELAYED -> TRUNCATING
    any        --NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, ...--> DELAYED -> same state
    any        --connection error-->                                  DELAYED -> same state
    any        --new leader or epoch in an image-->                   removed; re-added TRUNCATING

A partition added while a fetch long-polls on the leader would wait up to replica.fetch.wait.max.ms
for its turn, and the high watermark of a partition that just changed leader waits on it: the
fetcher abandons that fetch (closes the connection; nothing was applied from it) and starts again
with the new partition's truncation.

DELAYED lasts replica.fetch.backoff.ms (at most 50 ms for the errors of a leader that has not yet
applied the image this follower has: NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH). Truncation asks the leader for the end offset of this
replica's latest epoch (`truncation_offset`, a pure function, decides where to cut). Fetches
long-poll on the leader (replica.fetch.wait.max.ms, replica.fetch.min.bytes) from the log end
offset and are appended with `append_as_follower`, which keeps the leader's offsets, epochs and
producer state. Every response is applied only after re-checking, after the await, that the
partition is still assigned to this fetcher under the same state object, is still a follower of
the same leader epoch, and that its log end offset is still the offset fetched.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.static.primitive import i32, i32Timedelta, i64

from broker import clock
from broker.metrics.stats import BrokerTopicStats
from broker.replication.leader_client import LeaderClient, LeaderConnectionError
from broker.replication.partition import Partition, PartitionRole
from broker.replication.settings import FetcherSettings
from broker.replication.throttle import ReplicationQuota, throttled
from controller.model import Endpoint
from protocol.errors import ErrorCode, KafkaError
from protocol.schemas.fetch_v12_chain import FetchPartition, FetchRequest, FetchTopic, encode_chain_reports
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId, LeaderEpoch, Offset, TopicName

log = logging.getLogger("samsa.fetcher")

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

METADATA_RACE_ERRORS = frozenset(
    {
        ErrorCode.unknown_leader_epoch,
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
    }
)
"""Errors of a leader that has not applied the image this follower already has (the usual case
right after an election): retried after METADATA_RACE_BACKOFF_MS, not the full backoff, because
the failover time waits on them."""
METADATA_RACE_BACKOFF_MS = 50
CHAIN_REPORT_WAIT_MS = 2
"""A chain member's fetch wait while a successor's progress is to be reported (the leader's HW
waits on it): the report goes up within this long of the successor's fetch."""


# -- truncation (pure) -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Truncation:
    """Where to cut the follower's log, and whether that ends truncation (KIP-101/279)."""

    offset: Offset
    completed: bool


def truncation_offset(
    leader_epoch: int,
    leader_end_offset: int,
    local_end_offset_for: Callable[[int], tuple[int, int]],
    log_end_offset: int,
    high_watermark: int,
) -> Truncation:
    """Kafka's AbstractFetcherThread.getOffsetTruncationState.

    `leader_epoch`/`leader_end_offset` are the leader's OffsetForLeaderEpoch answer for this
    replica's latest epoch: the largest epoch the leader knows at or below it, and where that epoch
    ends on the leader. `local_end_offset_for(epoch)` is the same question asked of the local
    leader-epoch cache ((-1, -1) when unknown).

    - leader knows no such epoch (end offset -1): cut to the HW, the only offset known safe
    - leader answered without an epoch: cut to min(leader end, LEO)
    - this replica knows the answered epoch: cut to min(leader end, local end of it, LEO); done
    - it does not (the leader answered an earlier epoch this replica never saw): cut to the end
      of the largest local epoch below it and ask again with the new latest epoch (not done)
    """
    if leader_end_offset == UNDEFINED_OFFSET:
        return Truncation(Offset(min(high_watermark, log_end_offset)), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return Truncation(Offset(min(leader_end_offset, log_end_offset)), True)
    local_epoch, local_end = local_end_offset_for(leader_epoch)
    if local_end == UNDEFINED_OFFSET:
        return Truncation(Offset(min(leader_end_offset, log_end_offset)), True)
    if local_epoch != leader_epoch:
        return Truncation(Offset(min(local_end, log_end_offset)), False)
    return Truncation(Offset(min(leader_end_offset, local_end, log_end_offset)), True)


# -- per-partition fetch state ---------------------------------------------------------------------


class FetchState(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    DELAYED = "delayed"


@dataclass(slots=True, eq=False)
class PartitionFetchState:
    tp: TopicPartition
    leader_id: BrokerId
    leader_epoch: LeaderEpoch
    state: FetchState = FetchState.TRUNCATING
    fetch_offset: Offset = Offset(-1)
    resume_state: FetchState = FetchState.TRUNCATING
    delay_until: float = 0.0
    """monotonic seconds; meaningful while DELAYED"""
    leader_high_watermark: Offset = Offset(-1)
    """the leader's HW in its last fetch answer (-1 before one): the replica lag is its
    distance from the fetch offset (Kafka's FetcherLagMetrics ConsumerLag)"""


# -- one fetcher task per leader (shard) -----------------------------------------------------------


class ReplicaFetcher:
    def __init__(
        self,
        settings: FetcherSettings,
        leader_id: BrokerId,
        shard: int,
        partition: Callable[[TopicPartition], Partition | None],
        endpoint: Callable[[BrokerId], Endpoint | None],
        *,
        stats: BrokerTopicStats | None = None,
        quota: ReplicationQuota | None = None,
        on_append: Callable[[TopicPartition], object] = lambda tp: None,
        source_failed: Callable[[TopicPartition, BrokerId, str], None] = lambda tp, source, reason: None,
    ) -> None:
        """`leader_id`: the broker fetched from, the partitions' leader or, for chain replication,
        their chain predecessor (broker/replication/chain.py); `partition(tp)`: this broker's
        partition of `tp`; `endpoint(broker_id)`: where a broker's inter-broker listener is (both
        from the fetcher manager); `stats`: where the replicated bytes are counted; `quota`: the
        follower's replication throttle; `on_append(tp)`: after an append; `source_failed(tp,
        source, reason)`: a chain predecessor failed a partition (any error of its, the fetcher
        manager sends the partition to its leader)."""
        self._on_append = on_append
        self._source_failed = source_failed
        self.settings = settings
        self._quota = quota if quota is not None else ReplicationQuota()
        self._stats = stats if stats is not None else BrokerTopicStats()
        self._partition_of = partition
        self._endpoint_of = endpoint
        self.leader_id = leader_id
        self.shard = shard
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._wakeup = asyncio.Event()
        self._client: LeaderClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._fetch_request: asyncio.Future[Any] | None = None
        """the fetch request in flight (long-polling on the leader)"""
        self._abandoned = False
        """`add` cancelled that request: its end is no error"""

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader={self.leader_id}, shard={self.shard}, partitions={len(self.partitions)})"

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> asyncio.Task[None] | None:
        # The flag, not only the cancel: on CPython < 3.12, asyncio.wait_for swallows a cancellation
        # that arrives as its inner read completes (closing the client below completes it), and the
        # round then ends with a connection error instead; the loop would go on fetching for good
        # and the broker's shutdown, which awaits this task, would hang.
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
        if self._client is not None:
            self._client.close()
            self._client = None
        return self._task

    def add(self, tp: TopicPartition, leader_id: BrokerId, leader_epoch: LeaderEpoch) -> None:
        """Start following `tp` from scratch (TRUNCATING), at once: a fetch in flight is abandoned."""
        self.partitions[tp] = PartitionFetchState(tp, leader_id, leader_epoch)
        self._wakeup.set()
        if self._fetch_request is not None and not self._fetch_request.done():
            self._abandoned = True
            self._fetch_request.cancel()  # the request closes its connection, out of step now

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    @property
    def client_id(self) -> str:
        """Kafka's name for this fetcher (the clientId label of its lag metrics)."""
        return f"ReplicaFetcherThread-{self.shard}-{self.leader_id}"

    def lags(self) -> list[tuple[TopicPartition, int]]:
        """Each partition's replica lag: the leader's last high watermark minus this replica's
        fetch offset, at least 0 (Kafka's AbstractFetcherThread)."""
        return [
            (st.tp, max(0, st.leader_high_watermark - st.fetch_offset) if st.leader_high_watermark >= 0 else 0)
            for st in list(self.partitions.values())
        ]

    # -- checks ----------------------------------------------------------------------------------

    def _partition(
        self, st: PartitionFetchState, expected: FetchState
    ) -> Partition | None:
        """The follower partition for `st` if nothing moved since the request was built."""
        if self.partitions.get(st.tp) is not st or st.state != expected:
            return None
        partition = self._partition_of(st.tp)
        if (
            partition is None
            or partition.role != PartitionRole.FOLLOWER
            or partition.leader_id != st.leader_id
            or partition.leader_epoch != st.leader_epoch
        ):
            return None
        return partition

    def _delay(
        self,
        st: PartitionFetchState,
        resume: FetchState,
        reason: str,
        *,
        error: ErrorCode | None = None,
    ) -> None:
        if self.partitions.get(st.tp) is not st:
            return
        if st.leader_id != self.leader_id:  # a chain predecessor failed: to the leader at once
            self._source_failed(st.tp, self.leader_id, reason)
        st.state = FetchState.DELAYED
        st.resume_state = resume
        backoff_ms = self.settings.backoff_ms
        if error in METADATA_RACE_ERRORS:
            backoff_ms = min(backoff_ms, METADATA_RACE_BACKOFF_MS)
        st.delay_until = time.monotonic() + backoff_ms / 1000
        log.info(
            "partition delayed topic=%s partition=%d leader=%d leader_epoch=%d reason=%s resume=%s",
            st.tp.topic, st.tp.partition, self.leader_id, st.leader_epoch, reason, resume.value,
        )  # fmt: skip

    def _to_fetching(self, st: PartitionFetchState, partition: Partition) -> None:
        st.state = FetchState.FETCHING
        st.fetch_offset = partition.log_end_offset
        partition.chain_follower_truncated(st.leader_epoch)

    # -- loop ------------------------------------------------------------------------------------

    def _ensure_client(self) -> LeaderClient | None:
        endpoint = self._endpoint_of(self.leader_id)
        if endpoint is None:
            return None
        client = self._client
        if client is not None and (client.host, client.port) != (
            endpoint.host,
            endpoint.port,
        ):
            client.close()
            client = None
        if client is None:
            client = LeaderClient(
                endpoint.host,
                endpoint.port,
                client_id=f"samsa-replica-fetcher-{self.settings.broker_id}-{self.leader_id}-{self.shard}",
                timeout_s=self.settings.socket_timeout_ms / 1000,
                security=self.settings.security,
            )
            self._client = client
        return client

    async def _run(self) -> None:
        log.info("fetcher started leader=%d shard=%d", self.leader_id, self.shard)
        try:
            while not self._stopped:
                try:
                    await self._run_once()
                except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                    raise
                except (
                    Exception
                ):  # a bug or a closed log must not end replication for good
                    log.exception(
                        "fetcher round failed leader=%d shard=%d",
                        self.leader_id,
                        self.shard,
                    )
                    for st in list(self.partitions.values()):
                        if st.state != FetchState.DELAYED:
                            self._delay(st, FetchState.TRUNCATING, "fetcher error")
        except asyncio.CancelledError:
            log.info("fetcher stopped leader=%d shard=%d", self.leader_id, self.shard)
            raise
        log.info("fetcher stopped leader=%d shard=%d", self.leader_id, self.shard)

    async def _run_once(self) -> None:
        self._wakeup.clear()
        now = time.monotonic()
        for st in self.partitions.values():
            if st.state == FetchState.DELAYED and now >= st.delay_until:
                st.state = st.resume_state
        truncating = [
            st for st in self.partitions.values() if st.state == FetchState.TRUNCATING
        ]
        fetching = [
            st for st in self.partitions.values() if st.state == FetchState.FETCHING
        ]
        if not truncating and not fetching:
            delays = [
                st.delay_until - now
                for st in self.partitions.values()
                if st.state == FetchState.DELAYED
            ]
            try:
                await asyncio.wait_for(
                    self._wakeup.wait(), max(0.0, min(delays)) if delays else None
                )
            except TimeoutError:
                pass
            return
        client = self._ensure_client()
        if client is None:
            for st in truncating + fetching:
                self._delay(st, st.state, "leader endpoint unknown")
            return
        try:
            if truncating:
                await self._truncate(client, truncating)
            else:
                await self._fetch(client, fetching)
        except LeaderConnectionError as e:
            log.warning(
                "fetch from leader failed leader=%d error=%s", self.leader_id, e
            )
            for st in truncating + fetching:
                if st.state in (FetchState.TRUNCATING, FetchState.FETCHING):
                    self._delay(st, st.state, "connection error")

    # -- truncation ------------------------------------------------------------------------------

    async def _truncate(
        self, client: LeaderClient, states: list[PartitionFetchState]
    ) -> None:
        asked: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        for st in states:
            partition = self._partition(st, FetchState.TRUNCATING)
            if partition is None:
                continue
            latest = partition.latest_epoch
            if latest is None:
                # nothing known about epochs here: only the HW is known to be on the leader
                await self._cut(partition, Offset(partition.high_watermark), "no local epoch")
                self._to_fetching(st, partition)
                continue
            asked[st.tp] = (st, latest)
        if not asked:
            return
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        for tp, (st, epoch) in asked.items():
            by_topic.setdefault(tp.topic, []).append(
                OffsetForLeaderPartition(
                    partition=i32(tp.partition),
                    current_leader_epoch=i32(st.leader_epoch),
                    leader_epoch=i32(epoch),
                )
            )
        request = OffsetForLeaderEpochRequest(
            replica_id=BrokerId(self.settings.broker_id),
            topics=tuple(
                OffsetForLeaderTopic(topic=TopicName(t), partitions=tuple(ps))
                for t, ps in by_topic.items()
            ),
        )
        response = await client.request(request)
        for topic in response.topics:
            for answer in topic.partitions:
                tp = TopicPartition(topic.topic, answer.partition)
                entry = asked.get(tp)
                if entry is None:
                    continue
                st, sent_epoch = entry
                partition = self._partition(st, FetchState.TRUNCATING)
                if partition is None or partition.latest_epoch != sent_epoch:
                    continue  # moved on while we waited; the next round asks again
                if answer.error_code != ErrorCode.none:
                    resume = FetchState.TRUNCATING
                    self._delay(
                        st,
                        resume,
                        f"OffsetForLeaderEpoch {answer.error_code.name}",
                        error=answer.error_code,
                    )
                    continue
                decision = truncation_offset(
                    answer.leader_epoch,
                    answer.end_offset,
                    partition.end_offset_for_epoch,
                    partition.log_end_offset,
                    partition.high_watermark,
                )
                await self._cut(
                    partition,
                    decision.offset,
                    f"epoch {sent_epoch}: leader epoch {answer.leader_epoch} ends at {answer.end_offset}",
                )
                if decision.completed:
                    self._to_fetching(st, partition)

    async def _cut(self, partition: Partition, offset: Offset, reason: str) -> None:
        if offset < partition.log_end_offset:
            log.info(
                "truncating follower topic=%s partition=%d from=%d to=%d reason=%s",
                partition.tp.topic, partition.tp.partition, partition.log_end_offset, offset, reason,
            )  # fmt: skip
        await partition.truncate_to(offset)

    # -- fetching --------------------------------------------------------------------------------

    async def _fetch(
        self, client: LeaderClient, states: list[PartitionFetchState]
    ) -> None:
        sent: dict[TopicPartition, tuple[PartitionFetchState, Offset]] = {}
        by_topic: dict[str, list[FetchPartition]] = {}
        held_back = False
        now_ms = clock.now_ms()
        for st in states:
            partition = self._partition(st, FetchState.FETCHING)
            if partition is None:
                continue
            if self._throttled(partition) and self._quota.exceeded(clock.now_ms()) \
                    and self.settings.broker_id not in partition.isr:
                held_back = True  # Kafka's shouldFollowerThrottle: left out of this fetch
                continue
            if st.fetch_offset != partition.log_end_offset:
                st.fetch_offset = partition.log_end_offset
            sent[st.tp] = (st, st.fetch_offset)
            reports = partition.chain_reports(now_ms)
            by_topic.setdefault(st.tp.topic, []).append(
                FetchPartition(
                    partition=i32(st.tp.partition),
                    current_leader_epoch=i32(st.leader_epoch),
                    fetch_offset=i64(st.fetch_offset),
                    last_fetched_epoch=i32(-1),
                    log_start_offset=i64(partition.log_start_offset),
                    partition_max_bytes=i32(self.settings.max_bytes),
                    chain_reports=encode_chain_reports(reports) if reports else None,
                )
            )
        if not sent:
            if held_back:  # Kafka's fetcher backs off replica.fetch.backoff.ms on an empty fetch
                try:
                    await asyncio.wait_for(self._wakeup.wait(), self.settings.backoff_ms / 1000)
                except TimeoutError:
                    pass
            return
        s = self.settings
        # a chain successor's progress not reported yet holds the leader's HW back: no long poll
        # then, the next fetch carries the report at once (broker/replication/chain.py)
        report_pending = any(
            p is not None and p.chain_report_pending(now_ms, s.max_wait_ms)
            for p in (self._partition_of(tp) for tp in sent)
        )
        max_wait_ms = min(s.max_wait_ms, CHAIN_REPORT_WAIT_MS) if report_pending else s.max_wait_ms
        request = FetchRequest(
            replica_id=BrokerId(s.broker_id),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=max_wait_ms)),
            min_bytes=i32(s.min_bytes),
            max_bytes=i32(s.response_max_bytes),
            isolation_level=0,  # type: ignore[arg-type]
            session_id=i32(0),
            session_epoch=i32(-1),
            topics=tuple(
                FetchTopic(topic=TopicName(t), partitions=tuple(ps)) for t, ps in by_topic.items()
            ),
            forgotten_topics_data=(),
            rack_id="",
        )
        self._abandoned = False
        self._fetch_request = asyncio.ensure_future(
            client.request(request, timeout_s=(s.max_wait_ms + s.socket_timeout_ms) / 1000)
        )
        try:
            response = await self._fetch_request
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self._abandoned or (task is not None and task.cancelling()):
                raise
            return  # abandoned by `add`: the next round truncates the new partition
        finally:
            self._fetch_request = None
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                entry = sent.get(tp)
                if entry is None:
                    continue
                st, offset = entry
                partition = self._partition(st, FetchState.FETCHING)
                if (
                    partition is None
                    or partition.log_end_offset != offset
                    or st.fetch_offset != offset
                ):
                    continue
                await self._apply_fetched(st, partition, offset, data)

    def _throttled(self, partition: Partition) -> bool:
        """Whether the topic's follower.replication.throttled.replicas names this replica."""
        replicas = partition.log_config.follower_replication_throttled_replicas
        return bool(replicas) and throttled(replicas, partition.tp.partition, self.settings.broker_id)

    async def _apply_fetched(
        self,
        st: PartitionFetchState,
        partition: Partition,
        offset: Offset,
        data: object,
    ) -> None:
        error: ErrorCode = data.error_code  # type: ignore[attr-defined]
        tp = st.tp
        if error == ErrorCode.none:
            diverging = data.diverging_epoch  # type: ignore[attr-defined]
            if diverging is not None and diverging.epoch >= 0:
                st.state = FetchState.TRUNCATING
                return
            records = data.records  # type: ignore[attr-defined]
            if records:
                self._stats.replication_bytes_in += len(records)
                if self._throttled(partition):
                    self._quota.record(len(records), clock.now_ms())
                try:
                    await partition.append_records_to_follower(records)
                except KafkaError as e:
                    log.error(
                        "follower append failed topic=%s partition=%d offset=%d error=%s message=%s",
                        tp.topic, tp.partition, offset, e.code.name, e.message,
                    )  # fmt: skip
                    self._delay(st, FetchState.TRUNCATING, "append failed")
                    return
                self._on_append(tp)
            st.fetch_offset = partition.log_end_offset
            partition.update_follower_log_start_offset(Offset(int(data.log_start_offset)))  # type: ignore[attr-defined]
            st.leader_high_watermark = Offset(int(data.high_watermark))  # type: ignore[attr-defined]
            partition.update_follower_high_watermark(st.leader_high_watermark)
            return
        if error == ErrorCode.offset_out_of_range:
            leader_start = int(data.log_start_offset)  # type: ignore[attr-defined]
            if leader_start > offset:
                log.info(
                    "follower behind leader's log start topic=%s partition=%d fetch_offset=%d leader_log_start=%d",
                    tp.topic, tp.partition, offset, leader_start,
                )  # fmt: skip
                await partition.truncate_fully_and_start_at(Offset(leader_start))
                st.fetch_offset = partition.log_end_offset
            else:
                st.state = FetchState.TRUNCATING
            return
        resume = (
            FetchState.TRUNCATING
            if error == ErrorCode.fenced_leader_epoch
            else FetchState.FETCHING
        )
        self._delay(st, resume, f"Fetch {error.name}", error=error)
