"""The share partition leader's side of ShareFetch and ShareAcknowledge (KIP-932), as Kafka 4.3.1's
SharePartitionManager, DelayedShareFetch and ShareFetchUtils serve them: share sessions, the
share partitions this broker leads (loaded through the state persister on first use), records
read through `Partition` and acquired for the fetching member, acknowledgements and releases
written with WriteShareGroupState before they take effect, acquisition locks that expire, and
the delayed share fetch that waits for `min_bytes`; the ShareFetch and ShareAcknowledge handlers
(api_78, api_79) call it.

A share partition (one group's view of one topic partition led here), in `SharePartitionManager`:

    absent    -> loading   the first fetch naming it: this broker must lead the topic partition
                           (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION otherwise); its
                           state is read with ReadShareGroupState at the partition's leader epoch
    loading   -> loaded    the read answered; a share partition never started starts where the
                           group's `share.auto.offset.reset` says (`reset_offset`)
    loading   -> absent    the read failed: the fetch gets Kafka's mapping of the persister's
                           error (SharePartition.fetchPersisterError), the next fetch tries again
    loaded    -> absent    the topic partition's leader epoch moved or leadership left this broker
                           (seen by the next fetch or acknowledgement, which loads it again at the
                           new epoch), or a state write was fenced (FENCED_LEADER_EPOCH,
                           FENCED_STATE_EPOCH: the next fetch reloads it and is fenced if another
                           broker now leads it)

While loaded, a timer follows its earliest acquisition lock: when it fires, the expired records
go back to AVAILABLE (or ARCHIVED at the delivery limit), the change is written, and waiting
fetches of the partition are woken.

A share fetch (`fetch`): the session (share_session.py) first, whose errors answer the whole
request; the piggybacked acknowledgements next; a final-epoch request then closes its session,
releasing the member's acquired records, and fetches nothing. Otherwise the session's partitions
are loaded, and the fetch waits (at most `max_wait_ms`, woken by the partitions' high watermark
moving and by records released, acknowledged or expired) until the records readable from the
acquirable partitions reach `min_bytes` or a read fails; then each acquirable partition is read
from its next fetch offset (`max_bytes` divided evenly among them, Kafka's uniform strategy) up to
the high watermark, whole batches are acquired for the member (`max_records` a soft limit over the
request), and the bytes answered are cut to the acquired ones (ShareFetchUtils.
maybeSliceFetchRecords). A read past the log start offset (OFFSET_OUT_OF_RANGE) moves the share
partition's start offset and answers no records and no error.

The group's configs (`settings`, read on each use) set a loaded share partition's lock duration,
delivery count limit, in-flight limit and isolation level (read_committed reads up to the last
stable offset and archives the records of aborted transactions).

Not built yet: the record_limit acquire mode
(KIP-1206), a separate purgatory (fetches wait in the replica manager's fetch purgatory, keyed by
topic partition).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker import clock
from broker.config.values import duration_ms
from broker.replication.partition import FetchIsolation, Partition
from broker.replication.purgatory import Purgatory
from broker.share import share_partition_state
from broker.share.in_flight import (
    AbortedTransaction,
    AcknowledgementBatch,
    AcquiredRecords,
    FetchedBatch,
    PersisterStateBatch,
    SharePartitionSettings,
)
from broker.share.share_partition import SharePartition
from broker.share.share_partition_state import SharePartitionPersister, StatePersister
from broker.share.share_session import (
    ContextKind,
    ShareFetchContext,
    ShareSessionCache,
    TopicIdPartition,
)
from broker.share.share_state import SharePartitionKey
from protocol.errors import ErrorCode, KafkaError
from protocol.records import HEADER_SIZE, BatchHeader, CorruptRecordError, decode_batch
from protocol.topic_partition import TopicPartition
from protocol.types import Offset

log = logging.getLogger("samsa.share")

_PERSISTER_ERRORS = {
    ErrorCode.not_coordinator: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_not_available: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress: ErrorCode.coordinator_not_available,
    ErrorCode.group_id_not_found: ErrorCode.group_id_not_found,
    ErrorCode.unknown_topic_or_partition: ErrorCode.unknown_topic_or_partition,
    ErrorCode.fenced_leader_epoch: ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_state_epoch: ErrorCode.not_leader_or_follower,
}
"""Kafka's SharePartition.fetchPersisterError: anything else is UNKNOWN_SERVER_ERROR."""


def persister_error(error: ErrorCode) -> ErrorCode:
    if error == ErrorCode.none:
        return error
    return _PERSISTER_ERRORS.get(error, ErrorCode.unknown_server_error)


def reset_offset(partition: Partition, strategy: str, now_ms: int) -> int:
    """Where a share partition never initialized starts (Kafka's SharePartition at its
    initialization, through ShareFetchUtils): `earliest` the log start offset, `latest` the high
    watermark, `by_duration:<d>` the first offset with a timestamp at or after now - d (the high
    watermark when there is none)."""
    kind, _, duration = strategy.partition(":")
    if kind.lower() == "earliest":
        return partition.log_start_offset
    if kind.lower() == "by_duration":
        found = partition.fetch_offset_for_timestamp(now_ms - duration_ms(duration), FetchIsolation.HIGH_WATERMARK)
        if found is not None:
            return found.offset
    return partition.high_watermark


def _isolation(sp: SharePartition) -> FetchIsolation:
    """`share.isolation.level`: read_committed reads up to the last stable offset."""
    return FetchIsolation.TXN_COMMITTED if sp.settings.read_committed else FetchIsolation.HIGH_WATERMARK


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(frozen=True, slots=True)
class ShareFetchParams:
    """What a ShareFetch asks for beside its partitions."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 50 * 1024 * 1024
    max_records: int = 500
    batch_size: int = 500


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition of a ShareFetch answer (Kafka's ShareFetchResponseData.PartitionData)."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    records: bytes = b""
    acquired: tuple[AcquiredRecords, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareFetchResult:
    """A ShareFetch's answer: `error` for the whole request (the session's), else the context,
    the acknowledgement errors and the partitions fetched."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    context: ShareFetchContext | None = None
    acknowledged: Mapping[TopicIdPartition, ErrorCode] = field(default_factory=dict)
    partitions: Mapping[TopicIdPartition, PartitionFetch] = field(default_factory=dict)


@dataclass(slots=True)
class _Loaded:
    sp: SharePartition
    persister: SharePartitionPersister
    tp: TopicPartition
    timer: asyncio.TimerHandle | None = None


def whole_batches(data: bytes) -> tuple[bytes, tuple[FetchedBatch, ...], list[int]]:
    """The whole v2 batches at the front of a log read (a read cut at max_bytes may end in part
    of one): their bytes, their offsets and each one's start position."""
    batches: list[FetchedBatch] = []
    starts: list[int] = []
    pos = 0
    while len(data) - pos >= HEADER_SIZE:
        try:
            header = BatchHeader.parse(data, pos)
        except CorruptRecordError:
            break
        if pos + header.size > len(data):
            break
        abort = header.is_control and _is_abort_marker(data, pos)
        batches.append(
            FetchedBatch(
                header.base_offset, header.last_offset, header.producer_id, header.is_transactional, abort
            )
        )
        starts.append(pos)
        pos += header.size
    return data[:pos], tuple(batches), starts


def _is_abort_marker(data: bytes, pos: int) -> bool:
    """A control batch's one record has the key (version, type): type 0 is ABORT."""
    records = decode_batch(data, pos)
    key = records[0].key if records else None
    return key is not None and len(key) >= 4 and int.from_bytes(key[2:4], "big") == 0


def slice_acquired(data: bytes, starts: Sequence[int], batches: Sequence[FetchedBatch],
                   acquired: Sequence[AcquiredRecords]) -> bytes:  # fmt: skip
    """The batches from the one holding the first acquired offset to the one holding the last
    (Kafka's maybeSliceFetchRecords)."""
    first, last = acquired[0].first_offset, acquired[-1].last_offset
    lo = 0
    for i, batch in enumerate(batches):
        if batch.base_offset <= first:
            lo = i
    hi = len(batches)
    for i, batch in enumerate(batches):
        if batch.base_offset > last:
            hi = i
            break
    end = starts[hi] if hi < len(starts) else len(data)
    return data[starts[lo] : end]


class SharePartitionManager:
    """The share sessions and share partitions of this broker (see the module docstring)."""

    def __init__(
        self,
        leader_partition: Callable[[TopicPartition], Partition],
        topic_name: Callable[[uuid.UUID], str | None],
        persister: StatePersister,
        purgatory: Purgatory[TopicPartition],
        settings: Callable[[str], SharePartitionSettings] | None = None,
        max_sessions: int = 2_000,
    ) -> None:
        """`leader_partition` is the replica manager's (raises KafkaError unless led here);
        `settings` gives a group's settings now (its group configs; None: Kafka's defaults)."""
        self._leader_partition = leader_partition
        self._topic_name = topic_name
        self._persister = persister
        self._purgatory = purgatory
        self.settings: Callable[[str], SharePartitionSettings] = settings or (lambda _: SharePartitionSettings())
        self.sessions = ShareSessionCache(max_sessions)
        self._partitions: dict[SharePartitionKey, _Loaded] = {}
        self._loading: dict[SharePartitionKey, asyncio.Task[tuple[ErrorCode, str | None]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    # == ShareFetch ================================================================================

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        session_epoch: int,
        fetch: Sequence[TopicIdPartition],
        forget: Sequence[TopicIdPartition],
        acknowledgements: Mapping[TopicIdPartition, Sequence[AcknowledgementBatch]],
        params: ShareFetchParams,
        connection_id: str,
        refuse: Callable[[TopicIdPartition], ErrorCode | None] | None = None,
        fetch_records: bool = True,
        acknowledgements_present: bool = False,
    ) -> ShareFetchResult:
        """Kafka's KafkaApis.handleShareFetchRequest over SharePartitionManager. `refuse` names
        the session's partitions answered an error instead of fetched (the handler's topic
        authorization); `fetch_records` False acknowledges only (a RENEW acknowledgement);
        `acknowledgements_present`: the request carried some, even if none are left to apply
        (refused by the handler), which an initial epoch does not allow."""
        try:
            context = self.sessions.new_context(
                group_id, member_id, session_epoch, fetch, forget,
                acknowledgements_present or bool(acknowledgements), connection_id,
            )  # fmt: skip
        except KafkaError as e:
            return ShareFetchResult(e.code, e.message)
        acknowledged = await self.acknowledge(group_id, member_id, acknowledgements) if acknowledgements else {}
        if context.kind is ContextKind.FINAL:
            await self.release_session(group_id, member_id)
            return ShareFetchResult(context=context, acknowledged=acknowledged)
        if not fetch_records:
            return ShareFetchResult(context=context, acknowledged=acknowledged)
        refused = {t: error for t in context.partitions if refuse is not None and (error := refuse(t)) is not None}
        partitions = await self._fetch(group_id, member_id, [t for t in context.partitions if t not in refused], params)
        partitions.update((t, PartitionFetch(error)) for t, error in refused.items())
        return ShareFetchResult(context=context, acknowledged=acknowledged,
                                partitions={t: partitions[t] for t in context.partitions})  # fmt: skip

    async def _fetch(
        self, group_id: str, member_id: str, tips: Sequence[TopicIdPartition], params: ShareFetchParams
    ) -> dict[TopicIdPartition, PartitionFetch]:
        answers: dict[TopicIdPartition, PartitionFetch] = {}
        loaded: dict[TopicIdPartition, _Loaded] = {}
        for tip, (error, message) in zip(tips, await asyncio.gather(*(self._load(group_id, t) for t in tips)),
                                         strict=True):  # fmt: skip
            entry = self._partitions.get(SharePartitionKey(group_id, *tip))
            if error != ErrorCode.none or entry is None:
                answers[tip] = PartitionFetch(error if error != ErrorCode.none else ErrorCode.unknown_server_error,
                                              message)  # fmt: skip
            else:
                loaded[tip] = entry
        if loaded:
            await self._purgatory.wait(
                [e.tp for e in loaded.values()],
                lambda: self._satisfied(loaded, params),
                params.max_wait_ms / 1000,
            )
            answers.update(self._acquire(member_id, loaded, params))
        return {tip: answers[tip] for tip in tips}

    def _acquirable(self, loaded: Mapping[TopicIdPartition, _Loaded]) -> dict[TopicIdPartition, _Loaded]:
        return {tip: e for tip, e in loaded.items() if self._partitions.get(e.persister.key) is e
                and e.sp.can_acquire_records()}  # fmt: skip

    def _satisfied(self, loaded: Mapping[TopicIdPartition, _Loaded], params: ShareFetchParams) -> bool:
        """DelayedShareFetch.tryComplete: enough readable bytes, or a read that fails."""
        acquirable = self._acquirable(loaded)
        if not acquirable:
            return False
        per_partition = params.max_bytes // len(acquirable)
        total = 0
        for entry in acquirable.values():
            try:
                total += self._readable_bytes(entry, entry.sp.next_fetch_offset(), per_partition)
            except KafkaError:
                return True
            if total >= params.min_bytes:
                return True
        return False

    def _led(self, entry: _Loaded) -> Partition:
        """The topic partition, if still led here at the epoch the share partition was loaded."""
        partition = self._leader_partition(entry.tp)
        if partition.leader_epoch != entry.persister.leader_epoch:
            raise KafkaError(ErrorCode.not_leader_or_follower, "The partition's leader epoch moved.")
        return partition

    def _readable_bytes(self, entry: _Loaded, offset: int, max_bytes: int) -> int:
        """The bytes a read from `offset` returns now, up to `max_bytes` (the read's size)."""
        result = self._led(entry).read_records(Offset(offset), max_bytes, _isolation(entry.sp))
        return 0 if result.info is None or result.info.records is None else len(result.info.records)

    def _acquire(
        self, member_id: str, loaded: Mapping[TopicIdPartition, _Loaded], params: ShareFetchParams
    ) -> dict[TopicIdPartition, PartitionFetch]:
        """ShareFetchUtils.processFetchResponse, with no await between a read and its acquisition."""
        answers = {tip: PartitionFetch() for tip in loaded}
        acquirable = self._acquirable(loaded)
        if not acquirable:
            return answers
        per_partition = params.max_bytes // len(acquirable)
        count = 0
        now = monotonic_ms()
        for tip, entry in acquirable.items():
            entry.sp.settings = self.settings(entry.persister.key.group_id)
            offset = entry.sp.next_fetch_offset()
            try:
                partition = self._led(entry)
                if offset < partition.log_start_offset:  # Kafka's OFFSET_OUT_OF_RANGE case
                    entry.sp.update_cache_and_offsets(partition.log_start_offset)
                    continue
                result = partition.read_records(Offset(offset), per_partition, _isolation(entry.sp))
            except KafkaError as e:
                if e.code in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
                    self._drop(entry)
                answers[tip] = PartitionFetch(e.code, e.message)
                continue
            if result.info is None or result.info.records is None:
                continue
            data, batches, starts = whole_batches(result.info.records.read_bytes())
            aborted = result.aborted_transactions
            acquired = entry.sp.acquire(
                member_id, batches, offset, params.max_records - count, params.batch_size, now,
                None if aborted is None else [AbortedTransaction(a.producer_id, a.first_offset) for a in aborted],
            )
            if not acquired:
                continue
            count += sum(a.last_offset - a.first_offset + 1 for a in acquired)
            answers[tip] = PartitionFetch(
                records=slice_acquired(data, starts, batches, acquired), acquired=tuple(acquired)
            )
            self._schedule_expiry(entry)
        return answers

    # == loading ===================================================================================

    async def _load(self, group_id: str, tip: TopicIdPartition) -> tuple[ErrorCode, str | None]:
        """The share partition loaded (see the module docstring), or the fetch's error for it."""
        key = SharePartitionKey(group_id, *tip)
        topic = self._topic_name(tip[0])
        if topic is None:
            return ErrorCode.unknown_topic_id, None
        tp = TopicPartition(topic, tip[1])
        try:
            partition = self._leader_partition(tp)
        except KafkaError as e:
            return e.code, e.message
        entry = self._partitions.get(key)
        if entry is not None:
            if entry.persister.leader_epoch == partition.leader_epoch:
                return ErrorCode.none, None
            self._drop(entry)
        task = self._loading.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._read_state(key, tp, partition))
            self._loading[key] = task
            task.add_done_callback(lambda _: self._loading.pop(key, None))
        return await asyncio.shield(task)

    async def _read_state(
        self, key: SharePartitionKey, tp: TopicPartition, partition: Partition
    ) -> tuple[ErrorCode, str | None]:
        epoch = partition.leader_epoch
        settings = self.settings(key.group_id)
        error, sp, persister = await share_partition_state.load(
            self._persister, key, tp.topic, epoch, settings,
            lambda: reset_offset(partition, settings.auto_offset_reset, clock.now_ms()),
        )
        if error != ErrorCode.none or sp is None or persister is None:
            log.info("share partition not loaded group=%s topic=%s partition=%d error=%s",
                     key.group_id, tp.topic, tp.partition, error.name)  # fmt: skip
            return persister_error(error), None
        if not partition.is_leader or partition.leader_epoch != epoch:
            return ErrorCode.not_leader_or_follower, None
        self._partitions[key] = _Loaded(sp, persister, tp)
        log.info("share partition loaded group=%s topic=%s partition=%d leader_epoch=%d start_offset=%d",
                 key.group_id, tp.topic, tp.partition, epoch, sp.start_offset)  # fmt: skip
        return ErrorCode.none, None

    def _drop(self, entry: _Loaded) -> None:
        if self._partitions.get(entry.persister.key) is entry:
            del self._partitions[entry.persister.key]
            if entry.timer is not None:
                entry.timer.cancel()
            log.info("share partition dropped group=%s topic=%s partition=%d",
                     entry.persister.key.group_id, entry.tp.topic, entry.tp.partition)  # fmt: skip

    def _current(self, group_id: str, tip: TopicIdPartition) -> _Loaded | None:
        """The loaded share partition, if this broker still leads it at the epoch it was loaded."""
        entry = self._partitions.get(SharePartitionKey(group_id, *tip))
        if entry is None:
            return None
        try:
            self._led(entry)
        except KafkaError:
            self._drop(entry)
            return None
        entry.sp.settings = self.settings(group_id)
        return entry

    # == acknowledgements and releases ============================================================

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        acknowledgements: Mapping[TopicIdPartition, Sequence[AcknowledgementBatch]],
    ) -> dict[TopicIdPartition, ErrorCode]:
        """Kafka's SharePartitionManager.acknowledge: each partition's error."""
        tips = list(acknowledgements)
        errors = await asyncio.gather(
            *(self._acknowledge_one(group_id, member_id, t, acknowledgements[t]) for t in tips)
        )
        return dict(zip(tips, errors, strict=True))

    async def _acknowledge_one(
        self, group_id: str, member_id: str, tip: TopicIdPartition, batches: Sequence[AcknowledgementBatch]
    ) -> ErrorCode:
        entry = self._current(group_id, tip)
        if entry is None:
            return ErrorCode.unknown_topic_or_partition
        now = monotonic_ms()
        try:
            transition = entry.sp.acknowledge(member_id, batches, now)
        except KafkaError as e:
            return e.code
        error = await entry.persister.persist(entry.sp, transition, monotonic_ms())
        self._changed(entry, error)
        return persister_error(error)

    async def release_session(self, group_id: str, member_id: str) -> None:
        """The member's share session closed (a final fetch, its connection closed): its acquired
        records are released (Kafka's releaseSession)."""
        session = self.sessions.remove(group_id, member_id)
        if session is not None:
            await self._release(group_id, member_id, list(session.partitions))

    async def _release(self, group_id: str, member_id: str, tips: Sequence[TopicIdPartition]) -> None:
        for tip in tips:
            entry = self._current(group_id, tip)
            if entry is None:
                continue
            try:
                transition = entry.sp.release_acquired_records(member_id, monotonic_ms())
            except KafkaError as e:
                log.info("share records not released group=%s member_id=%s topic=%s partition=%d error=%s",
                         group_id, member_id, entry.tp.topic, entry.tp.partition, e.code.name)  # fmt: skip
                continue
            if transition.state_batches:
                error = await entry.persister.persist(entry.sp, transition, monotonic_ms())
                self._changed(entry, error)

    def on_disconnect(self, connection_id: str) -> None:
        """A connection closed: the share session opened on it goes, its records released."""
        session = self.sessions.on_disconnect(connection_id)
        if session is not None and not self._closed:
            self._spawn(self._release(session.group_id, session.member_id, list(session.partitions)))

    # == acquisition locks =========================================================================

    def _schedule_expiry(self, entry: _Loaded) -> None:
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        expiry = entry.sp.next_lock_expiry_ms()
        if expiry is None or self._partitions.get(entry.persister.key) is not entry:
            return
        delay = (max(0, expiry - monotonic_ms()) + 1) / 1000
        entry.timer = asyncio.get_running_loop().call_later(delay, self._expire, entry)

    def _expire(self, entry: _Loaded) -> None:
        """Kafka's releaseAcquisitionLockOnTimeout: the change is made, then written."""
        entry.timer = None
        changed = entry.sp.expire_locks(monotonic_ms())
        if changed:
            log.info("share acquisition locks expired group=%s topic=%s partition=%d records=%d",
                     entry.persister.key.group_id, entry.tp.topic, entry.tp.partition,
                     sum(b.last_offset - b.first_offset + 1 for b in changed))  # fmt: skip
            self._spawn(self._write_expired(entry, changed))
        self._changed(entry, ErrorCode.none)

    async def _write_expired(self, entry: _Loaded, changed: list[PersisterStateBatch]) -> None:
        error = await entry.persister.write(entry.sp, changed)
        if error != ErrorCode.none:
            log.warning("share state not written group=%s topic=%s partition=%d error=%s",
                        entry.persister.key.group_id, entry.tp.topic, entry.tp.partition, error.name)  # fmt: skip
            self._changed(entry, error)

    def _changed(self, entry: _Loaded, error: ErrorCode) -> None:
        """After a state change: a fenced write drops the share partition; the lock timer follows
        the earliest lock; fetches waiting on the partition look again."""
        if error in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch):
            self._drop(entry)
        self._schedule_expiry(entry)
        self._purgatory.check_and_complete(entry.tp)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close(self) -> None:
        self._closed = True
        for entry in list(self._partitions.values()):
            if entry.timer is not None:
                entry.timer.cancel()
        self._partitions.clear()
        for task in self._tasks:
            task.cancel()
