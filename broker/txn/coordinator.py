# Over 700 lines: the transaction coordinator is one state machine per transactional id plus the
# load, marker and expiry work that drive it; splitting it would scatter its transitions.
"""The transaction coordinator (Kafka's TransactionCoordinator and TransactionStateManager).

The coordinator of a transactional id is the leader of partition
`abs(javaHashCode(id)) % transaction.state.log.num.partitions` of the compacted, replicated
`__transaction_state` topic (created on the first FindCoordinator for a transaction). It follows
leadership as the group coordinator does: on becoming leader of such a partition it loads the
partition's transactional ids (`replay_partition`, shared with the group coordinator), with the
partition's leader epoch as its coordinator epoch, and finishes every transaction it finds in
PrepareCommit or PrepareAbort (the previous coordinator died before writing every marker); on
losing leadership it drops them, and its marker sends stop.

Every state change is prepared (the transactional id's `pending_state`), written to the partition
with acks=all, and applied only once written (`metadata.py` has the state machine). EndTxn is
answered once PrepareCommit/PrepareAbort is written; the markers then go to every partition of the
transaction (`markers.py`, retried until written) and CompleteCommit/CompleteAbort is written.

Periodic work: transactions past their timeout are aborted with a bumped epoch, which fences their
producer (`transaction.abort.timed.out.transaction.cleanup.interval.ms`), and transactional ids
idle in Empty/CompleteCommit/CompleteAbort for `transactional.id.expiration.ms` are removed with a
tombstone (`transaction.remove.expired.transaction.cleanup.interval.ms`).

Transactions v2 (KIP-890 part 2) follow the request's version, as Kafka's do: AddPartitionsToTxn
v4+ marks the transaction v2, EndTxn v5+ ends it with the epoch bumped (`_end_v2`), and a fencing
abort of a v2 transaction bumps the epoch the v2 way.

Not supported yet: two-phase commit (KIP-939).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker import clock
from broker.coordinator.partitions import CoordinatorPartition, LoadStatus, PartitionedCoordinator, Replay
from broker.coordinator.partitions import append_error as _append_error
from broker.coordinator.records import partition_for
from broker.handlers.versions import FEATURES
from broker.security.client import ClientSecurity
from broker.txn.markers import MARKER_TIMEOUT_MS, MarkerSender, TxnMarker, write_markers_locally
from broker.txn.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
)
from broker.txn.records import TransactionLogValue, key_bytes, read_key, read_value, value_bytes
from broker.txn.verification import RemoteVerifier
from protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from protocol.records import HEADER_SIZE, BatchHeader, NewRecord, build_batch, decode_records
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.coordinator.coordinator import GroupCoordinator
    from broker.producer_ids import ProducerIdManager
    from broker.replication.replica_manager import ReplicaManager
    from controller.interface import Controller

log = logging.getLogger("samsa.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"
LOG_VALUE_VERSION = 1 if FEATURES.get("transaction.version", (0, 0))[1] >= 2 else 0
"""TransactionLogValue version written: Kafka writes v1 once transaction.version 2 is finalized."""
S = TransactionState


@dataclass(eq=False)
class TxnPartition(CoordinatorPartition):
    """One `__transaction_state` partition this broker leads and its transactional ids."""

    coordinator_epoch: int = field(kw_only=True)
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TxnDescription:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_timestamp_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class _Chunk:
    records: tuple[tuple[str, TransactionLogValue | None], ...]
    next_offset: int


def _decode(data: bytes, start_offset: int) -> _Chunk:
    """The (transactional id, value) records of the whole batches in `data` (worker thread)."""
    out: list[tuple[str, TransactionLogValue | None]] = []
    pos = 0
    next_offset = start_offset
    while len(data) - pos >= HEADER_SIZE:
        header = BatchHeader.parse(data, pos)
        if pos + header.size > len(data):
            break
        if not header.is_control:
            for record in decode_records(data, pos, header):
                if record.offset < start_offset:
                    continue
                try:
                    txn_id = read_key(record.key)
                    if txn_id is not None:
                        out.append((txn_id, read_value(record.value)))
                except CorruptRecordError as exc:
                    log.warning("unreadable __transaction_state record offset=%d error=%s", record.offset, exc)
        next_offset = header.next_offset
        pos += header.size
    return _Chunk(tuple(out), next_offset)


class TransactionCoordinator(PartitionedCoordinator[TxnPartition]):
    _load_label = "transactions"

    def __init__(
        self,
        config: BrokerConfig,
        controller: Controller,
        replica_manager: ReplicaManager,
        producer_ids: ProducerIdManager,
        group_coordinator: GroupCoordinator,
    ) -> None:
        super().__init__(TRANSACTION_STATE_TOPIC, controller, replica_manager, log)
        self.config = config
        self._producer_ids = producer_ids
        self._group_coordinator = group_coordinator
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: list[asyncio.Task[None]] = []
        listener = config.inter_broker_listener_name or config.listeners[0].name
        security = ClientSecurity.from_config(config)  # markers and verifications go over that listener
        self.markers = MarkerSender(
            config.broker_id, controller, self.write_markers_locally, listener=listener, timeout_ms=MARKER_TIMEOUT_MS,
            security=security,
        )
        self._verifier = RemoteVerifier(
            config.broker_id, controller, listener=listener, timeout_ms=MARKER_TIMEOUT_MS, security=security
        )

    # == lifecycle ================================================================================

    def start(self) -> None:
        self._active = True
        loop = asyncio.get_running_loop()
        self._timers = [
            loop.create_task(self._every(
                self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms, self.abort_timed_out_transactions
            )),
            loop.create_task(self._every(
                self.config.transaction_remove_expired_transaction_cleanup_interval_ms, self.remove_expired_transactional_ids
            )),
        ]  # fmt: skip

    async def shutdown(self) -> None:
        self._active = False
        self._unload_all()
        tasks = [*self._timers, *self._tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.markers.close()
        self._verifier.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every(self, interval_ms: int, job: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction coordinator periodic task failed")

    async def write_markers_locally(
        self, marker: TxnMarker, timeout_ms: int = MARKER_TIMEOUT_MS
    ) -> dict[TopicPartition, ErrorCode]:
        """What this broker, leading the partitions, does with markers (WriteTxnMarkers)."""
        return await write_markers_locally(self._replica_manager, self._group_coordinator, marker, timeout_ms)

    # == partitions ===============================================================================

    def _configured_partitions(self) -> int:
        return self.config.transaction_state_log_num_partitions

    def _new_partition(self, tp: TopicPartition) -> TxnPartition | None:
        partition = self._replica_manager.partitions.get(tp)
        if partition is None:
            return None
        return TxnPartition(tp.partition, coordinator_epoch=int(partition.leader_epoch))

    def _release(self, part: TxnPartition) -> None:
        if part.txns:
            log.info("transactions unloaded partition=%d transactional_ids=%d", part.index, len(part.txns))
        part.txns.clear()

    def _topic_settings(self, live_brokers: int) -> tuple[int, dict[str, str]]:
        replication = max(1, min(self.config.transaction_state_log_replication_factor, live_brokers))
        return replication, {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(min(self.config.transaction_state_log_min_isr, replication)),
            "segment.bytes": str(self.config.transaction_state_log_segment_bytes),
            "unclean.leader.election.enable": "false",
        }

    def _replay(self, part: TxnPartition) -> Replay[Any]:
        loaded: dict[str, TransactionLogValue] = {}

        def apply(chunk: _Chunk) -> None:
            for txn_id, value in chunk.records:
                if value is None:
                    loaded.pop(txn_id, None)
                else:
                    loaded[txn_id] = value

        def install(end: int, elapsed_ms: float) -> None:
            for txn_id, value in loaded.items():
                part.txns[txn_id] = _metadata_of(txn_id, value)
            log.info(
                "transactions loaded partition=%d coordinator_epoch=%d transactional_ids=%d end_offset=%d ms=%.0f",
                part.index, part.coordinator_epoch, len(part.txns), end, elapsed_ms,
            )  # fmt: skip
            for metadata in part.txns.values():
                if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):  # a coordinator died mid-way
                    log.info(
                        "completing transaction left by the previous coordinator transactional_id=%s state=%s",
                        metadata.transactional_id, metadata.state.kafka_name,
                    )  # fmt: skip
                    self._spawn(self._complete(part, metadata, metadata.state is S.PREPARE_COMMIT))

        return Replay(_decode, apply, install)

    def is_local(self, transactional_id: str) -> bool:
        """Whether this broker coordinates `transactional_id` (loaded or loading)."""
        return self._active and self.partition_for(transactional_id) in self._partitions

    # == FindCoordinator ==========================================================================

    async def find_coordinator_partition(self, transactional_id: str) -> tuple[ErrorCode, int]:
        """(error, partition of __transaction_state) for FindCoordinator; creates the topic."""
        if TRANSACTION_STATE_TOPIC not in self._controller.image.topics:
            await self._create_topic()
        topic = self._controller.image.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return ErrorCode.coordinator_not_available, -1
        index = partition_for(transactional_id, len(topic.partitions))
        await self._wait_loaded(index)
        return ErrorCode.none, index

    # == persistence ==============================================================================

    async def _write(self, part: TxnPartition, metadata: TransactionMetadata, transit: TxnTransit) -> ErrorCode:
        """Append the transit to the log (acks=all) and apply it once written (Kafka's
        appendTransactionToLog); on failure the pending transition is dropped."""
        if transit.state is S.DEAD:
            value: bytes | None = None
        else:
            value = value_bytes(
                TransactionLogValue(
                    transit.producer_id, transit.producer_epoch, transit.timeout_ms, int(transit.state),
                    None if transit.state is S.EMPTY else transit.partitions,
                    transit.last_update_timestamp_ms, transit.start_timestamp_ms,
                    transit.previous_producer_id, transit.next_producer_id,
                    client_transaction_version=transit.client_transaction_version,
                ),
                LOG_VALUE_VERSION,
            )  # fmt: skip
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, part.index)
        batch = build_batch([NewRecord(key_bytes(metadata.transactional_id), value)])
        results = await self._replica_manager.append_records([(tp, batch)], -1, MARKER_TIMEOUT_MS)
        result = results.get(tp)
        error = _append_error(ErrorCode.unknown_server_error if result is None else result.error)
        if error == ErrorCode.none and not self._is_current(part):
            error = ErrorCode.not_coordinator
        if error == ErrorCode.none and part.coordinator_epoch != self._leader_epoch(part):
            error = ErrorCode.not_coordinator
        if error == ErrorCode.none:
            metadata.complete_transition(transit)
        else:
            metadata.abort_transition()
            log.info(
                "writing transaction state failed transactional_id=%s state=%s error=%s",
                metadata.transactional_id, transit.state.kafka_name, error.name,
            )  # fmt: skip
        return error

    def _leader_epoch(self, part: TxnPartition) -> int:
        partition = self._replica_manager.partitions.get(TopicPartition(TRANSACTION_STATE_TOPIC, part.index))
        return -1 if partition is None or not partition.is_leader else int(partition.leader_epoch)

    # == InitProducerId ===========================================================================

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_pid: int, expected_epoch: int
    ) -> InitProducerIdResult:
        """Kafka's handleInitProducerId for a transactional id."""
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.invalid_request)
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(ErrorCode.invalid_transaction_timeout)
        error, part = self._checked_partition(transactional_id)
        if part is None:
            return InitProducerIdResult(error)
        metadata = part.txns.get(transactional_id)
        if metadata is None:
            pid = await self._producer_ids.generate()
            metadata = part.txns.setdefault(
                transactional_id,
                TransactionMetadata(transactional_id, int(pid), timeout_ms=timeout_ms, last_update_timestamp_ms=clock.now_ms()),
            )
        expected = (expected_pid, expected_epoch) if expected_pid >= 0 else None
        try:
            transit = await self._prepare_init(metadata, timeout_ms, expected)
        except KafkaError as exc:
            return InitProducerIdResult(exc.code)
        if transit.state is S.PREPARE_EPOCH_FENCE:
            # abort the ongoing transaction with the bumped epoch; the client retries
            error = await self._fence(part, metadata, transit)
            return InitProducerIdResult(error if error != ErrorCode.none else ErrorCode.concurrent_transactions)
        error = await self._write(part, metadata, transit)
        if error != ErrorCode.none:
            return InitProducerIdResult(error)
        log.info(
            "producer id initialized transactional_id=%s producer_id=%d producer_epoch=%d",
            transactional_id, metadata.producer_id, metadata.producer_epoch,
        )  # fmt: skip
        return InitProducerIdResult(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)

    async def _prepare_init(
        self, metadata: TransactionMetadata, timeout_ms: int, expected: tuple[int, int] | None
    ) -> TxnTransit:
        """Kafka's prepareInitProducerIdTransit."""

        def valid(pid: int, epoch: int) -> bool:
            return (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or pid == metadata.producer_id
                or (pid == metadata.previous_producer_id and epoch >= 32766)
            )

        if metadata.pending_transition_in_progress:
            raise KafkaError(ErrorCode.concurrent_transactions, "a transition is in progress")
        if expected is not None and not valid(*expected):
            raise KafkaError(ErrorCode.producer_fenced, "producer id and epoch are fenced")
        now = clock.now_ms()
        if metadata.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise KafkaError(ErrorCode.concurrent_transactions, "the transaction is completing")
        if metadata.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
                new_pid = int(await self._producer_ids.generate())
                return metadata.prepare_producer_id_rotation(new_pid, timeout_ms, now, expected is not None)
            return metadata.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], now)
        if metadata.state is S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        raise KafkaError(ErrorCode.unknown_server_error, f"transactional id in state {metadata.state.name}")

    # == AddPartitionsToTxn / AddOffsetsToTxn =====================================================

    def _check_producer(self, metadata: TransactionMetadata, producer_id: int, producer_epoch: int) -> ErrorCode:
        if metadata.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced
        return ErrorCode.none

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: set[TopicPartition],
        client_transaction_version: int = 0,
    ) -> ErrorCode:
        """Kafka's handleAddPartitionsToTransaction: one error for all the partitions;
        `client_transaction_version` 2 for AddPartitionsToTxn v4+ (a transactions v2 client's
        partitions, added by their leader or by the group coordinator), else 0."""
        if not transactional_id:
            return ErrorCode.invalid_request
        error, part = self._checked_partition(transactional_id)
        if part is None:
            return error
        metadata = part.txns.get(transactional_id)
        if metadata is None:
            return ErrorCode.invalid_producer_id_mapping
        error = self._check_producer(metadata, producer_id, producer_epoch)
        if error != ErrorCode.none:
            return error
        if metadata.pending_transition_in_progress or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        if metadata.state is S.ONGOING and partitions <= metadata.partitions:
            return ErrorCode.none
        transit = metadata.prepare_add_partitions(partitions, clock.now_ms(), client_transaction_version)
        return await self._write(part, metadata, transit)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's handleVerifyPartitionsInTransaction (AddPartitionsToTxn v4+ verify-only and
        the leader's check of a transactional produce, KIP-890): NONE for each partition in the
        transaction, TRANSACTION_ABORTABLE for the others."""
        partitions = list(partitions)
        if not transactional_id:
            return dict.fromkeys(partitions, ErrorCode.invalid_request)
        error, part = self._checked_partition(transactional_id)
        if part is None:
            return dict.fromkeys(partitions, error)
        metadata = part.txns.get(transactional_id)
        error = ErrorCode.invalid_producer_id_mapping if metadata is None else self._check_producer(
            metadata, producer_id, producer_epoch
        )
        if error == ErrorCode.none and metadata is not None and metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            error = ErrorCode.concurrent_transactions
        if error != ErrorCode.none or metadata is None:
            return dict.fromkeys(partitions, error)
        return {
            tp: ErrorCode.none if tp in metadata.partitions else ErrorCode.transaction_abortable for tp in partitions
        }

    async def verify_append(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        *,
        add: bool = False,
    ) -> dict[TopicPartition, ErrorCode]:
        """A partition leader's check before a transactional append: the partitions that fail
        it, with the error. KIP-890 part 1 verifies that the transaction has them; with `add`
        (transactions v2: Produce v12+, TxnOffsetCommit v5+) they are added to it (as
        AddPartitionsToTxn v4+ would). Asks the coordinator's broker when it is another
        (broker/txn/verification.py)."""
        if self.is_local(transactional_id):
            if add:
                error = await self.add_partitions(transactional_id, producer_id, producer_epoch, set(partitions), 2)
                codes = dict.fromkeys(partitions, error)
            else:
                codes = self.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
            return {
                tp: ErrorCode.invalid_producer_epoch if code == ErrorCode.producer_fenced else code
                for tp, code in codes.items() if code != ErrorCode.none
            }  # fmt: skip
        topic = self._controller.image.topics.get(TRANSACTION_STATE_TOPIC)
        reg = None if topic is None else self._controller.image.partition(
            TRANSACTION_STATE_TOPIC, partition_for(transactional_id, len(topic.partitions))
        )
        if reg is None or reg.leader < 0:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        if int(reg.leader) == self.config.broker_id:  # becoming coordinator: not loaded yet
            return dict.fromkeys(partitions, ErrorCode.coordinator_load_in_progress)
        return await self._verifier.verify(
            int(reg.leader), transactional_id, producer_id, producer_epoch, partitions, verify_only=not add
        )

    def offsets_partition(self, group_id: str) -> TopicPartition:
        """The __consumer_offsets partition AddOffsetsToTxn adds for a group."""
        return TopicPartition("__consumer_offsets", self._group_coordinator.partition_for(group_id))

    # == EndTxn ===================================================================================

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, client_transaction_version: int = 0
    ) -> EndTxnResult:
        """Kafka's handleEndTransaction from a client; `client_transaction_version` 2 for EndTxn
        v5+ (the epoch bumped by every end), else 0. The result carries the producer id and epoch
        the client goes on with (EndTxn v5)."""
        if not transactional_id:
            return EndTxnResult(ErrorCode.invalid_request)
        error, part = self._checked_partition(transactional_id)
        if part is None:
            return EndTxnResult(error)
        metadata = part.txns.get(transactional_id)
        if metadata is None:
            return EndTxnResult(ErrorCode.invalid_producer_id_mapping)
        if client_transaction_version >= 2:
            return await self._end_v2(part, metadata, producer_id, producer_epoch, commit=commit, from_client=True)
        error = await self._end(part, metadata, producer_id, producer_epoch, commit=commit, from_client=True)
        return EndTxnResult(error, metadata.producer_id, metadata.producer_epoch) if error == ErrorCode.none else EndTxnResult(error)

    async def _end_v2(
        self,
        part: TxnPartition,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        from_client: bool,
    ) -> EndTxnResult:
        """Kafka's endTransaction for transactions v2: PrepareCommit/PrepareAbort bump the epoch;
        a retry is recognised by the epoch the client sent being the one just bumped from
        (or, after an overflow, the previous producer id's last epoch); an abort with nothing
        added (Empty, CompleteCommit, CompleteAbort) is allowed."""
        is_epoch_fence = metadata.pending_state is S.PREPARE_EPOCH_FENCE
        retry_on_overflow = (
            not is_epoch_fence and metadata.previous_producer_id == producer_id
            and producer_epoch == SHORT_MAX - 1 and metadata.producer_epoch == 0
        )  # fmt: skip
        retry_on_bump = not is_epoch_fence and metadata.producer_epoch == producer_epoch + 1
        state = metadata.state
        if is_epoch_fence:
            valid_epoch = (not from_client or producer_epoch == metadata.producer_epoch) and (
                producer_epoch >= metadata.producer_epoch
            )
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == metadata.producer_epoch
        else:
            valid_epoch = producer_epoch == metadata.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow
        if metadata.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(ErrorCode.invalid_producer_id_mapping)
        if not valid_epoch:
            return EndTxnResult(ErrorCode.producer_fenced)
        if metadata.pending_transition_in_progress and not is_epoch_fence:
            return EndTxnResult(ErrorCode.concurrent_transactions)
        wanted = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        if state is S.ONGOING:
            no_partition_added = False
        elif state is done and is_retry:
            return EndTxnResult(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)
        elif not commit and not is_retry and state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            no_partition_added = True
        elif state is wanted:
            return EndTxnResult(ErrorCode.concurrent_transactions)
        else:
            log.info(
                "invalid transaction state transition transactional_id=%s state=%s commit=%s",
                metadata.transactional_id, state.kafka_name, commit,
            )  # fmt: skip
            return EndTxnResult(ErrorCode.invalid_txn_state)
        next_producer_id = NO_PRODUCER_ID
        if not is_epoch_fence and metadata.is_producer_epoch_exhausted:
            next_producer_id = int(await self._producer_ids.generate())
        if is_epoch_fence:
            metadata.pending_state = None  # the fence becomes this abort, at the fenced epoch
            metadata.producer_epoch = producer_epoch
            metadata.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = metadata.prepare_abort_or_commit(wanted, clock.now_ms(), 2, next_producer_id, no_partition_added)
        error = await self._write(part, metadata, transit)
        if error != ErrorCode.none:
            if is_epoch_fence:
                metadata.has_failed_epoch_fence = True
            return EndTxnResult(error)
        log.info(
            "transaction ending transactional_id=%s producer_id=%d producer_epoch=%d result=%s partitions=%d",
            metadata.transactional_id, metadata.producer_id, metadata.producer_epoch,
            "commit" if commit else "abort", len(metadata.partitions),
        )  # fmt: skip
        self._spawn(self._complete(part, metadata, commit))
        if next_producer_id != NO_PRODUCER_ID:
            return EndTxnResult(ErrorCode.none, next_producer_id, 0)
        return EndTxnResult(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)

    async def _end(
        self,
        part: TxnPartition,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        from_client: bool,
    ) -> ErrorCode:
        if metadata.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if (from_client and producer_epoch != metadata.producer_epoch) or producer_epoch < metadata.producer_epoch:
            return ErrorCode.producer_fenced
        if metadata.pending_transition_in_progress and metadata.pending_state is not S.PREPARE_EPOCH_FENCE:
            return ErrorCode.concurrent_transactions
        state = metadata.state
        wanted = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if state is S.ONGOING:
            if not commit and metadata.pending_state is S.PREPARE_EPOCH_FENCE:
                metadata.pending_state = None  # the fence becomes this abort, at the bumped epoch
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = metadata.prepare_abort_or_commit(wanted, clock.now_ms())
        elif state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            return ErrorCode.none
        elif state is wanted:
            return ErrorCode.concurrent_transactions
        else:
            log.info(
                "invalid transaction state transition transactional_id=%s state=%s commit=%s",
                metadata.transactional_id, state.kafka_name, commit,
            )  # fmt: skip
            if metadata.pending_state is S.PREPARE_EPOCH_FENCE:
                metadata.abort_transition()
            return ErrorCode.invalid_txn_state
        error = await self._write(part, metadata, transit)
        if error != ErrorCode.none:
            if not from_client:
                metadata.has_failed_epoch_fence = True
            return error
        log.info(
            "transaction ending transactional_id=%s producer_id=%d producer_epoch=%d result=%s partitions=%d",
            metadata.transactional_id, metadata.producer_id, metadata.producer_epoch,
            "commit" if commit else "abort", len(metadata.partitions),
        )  # fmt: skip
        self._spawn(self._complete(part, metadata, commit))
        return ErrorCode.none

    async def _fence(self, part: TxnPartition, metadata: TransactionMetadata, transit: TxnTransit) -> ErrorCode:
        """Abort the ongoing transaction at the fencing epoch (an InitProducerId or a timeout),
        the way of the transaction's own version."""
        if metadata.client_transaction_version >= 2:
            result = await self._end_v2(
                part, metadata, transit.producer_id, transit.producer_epoch, commit=False, from_client=False
            )
            return result.error
        return await self._end(part, metadata, transit.producer_id, transit.producer_epoch, commit=False, from_client=False)

    async def _complete(self, part: TxnPartition, metadata: TransactionMetadata, commit: bool) -> None:
        """Write every marker, then CompleteCommit/CompleteAbort (retried while this broker is
        still the coordinator with the same epoch)."""
        marker = TxnMarker(
            metadata.producer_id, metadata.producer_epoch, part.coordinator_epoch, commit,
            tuple(sorted(metadata.partitions, key=lambda tp: (tp.topic, tp.partition))),
        )  # fmt: skip
        if not await self.markers.send(marker, lambda: self._is_current(part)):
            return
        while self._is_current(part):
            if metadata.pending_transition_in_progress:
                await asyncio.sleep(0.05)
                continue
            if metadata.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return
            error = await self._write(part, metadata, metadata.prepare_complete(clock.now_ms()))
            if error == ErrorCode.none:
                log.info(
                    "transaction completed transactional_id=%s producer_id=%d state=%s",
                    metadata.transactional_id, metadata.producer_id, metadata.state.kafka_name,
                )  # fmt: skip
                return
            if error == ErrorCode.not_coordinator:
                return
            await asyncio.sleep(0.1)

    # == timeouts and expiration ==================================================================

    async def abort_timed_out_transactions(self) -> int:
        """Kafka's abortTimedOutTransactions: fence (bump the epoch of) and abort every ongoing
        transaction past its timeout."""
        now = clock.now_ms()
        aborted = 0
        for part in list(self._partitions.values()):
            if part.status is not LoadStatus.ACTIVE:
                continue
            for metadata in list(part.txns.values()):
                if (
                    metadata.state is not S.ONGOING
                    or metadata.pending_transition_in_progress
                    or metadata.start_timestamp_ms + metadata.timeout_ms >= now
                ):
                    continue
                transit = metadata.prepare_fence_producer_epoch()
                log.info(
                    "aborting timed out transaction transactional_id=%s producer_id=%d timeout_ms=%d",
                    metadata.transactional_id, metadata.producer_id, metadata.timeout_ms,
                )  # fmt: skip
                await self._fence(part, metadata, transit)
                aborted += 1
        return aborted

    async def remove_expired_transactional_ids(self) -> int:
        now = clock.now_ms()
        removed = 0
        for part in list(self._partitions.values()):
            if part.status is not LoadStatus.ACTIVE:
                continue
            for txn_id, metadata in list(part.txns.items()):
                if (
                    metadata.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    or metadata.pending_transition_in_progress
                    or metadata.last_update_timestamp_ms > now - self.config.transactional_id_expiration_ms
                ):
                    continue
                if await self._write(part, metadata, metadata.prepare_dead()) == ErrorCode.none:
                    if part.txns.get(txn_id) is metadata:
                        del part.txns[txn_id]
                    removed += 1
                    log.info("transactional id expired transactional_id=%s", txn_id)
        return removed

    # == admin ====================================================================================

    def describe(self, transactional_id: str) -> TxnDescription:
        error, part = self._checked_partition(transactional_id)
        if part is None:
            return TxnDescription(transactional_id, error)
        metadata = part.txns.get(transactional_id)
        if metadata is None or metadata.state is S.DEAD:
            return TxnDescription(transactional_id, ErrorCode.transactional_id_not_found)
        return TxnDescription(
            transactional_id, ErrorCode.none, metadata.state.kafka_name, metadata.timeout_ms,
            metadata.start_timestamp_ms, metadata.producer_id, metadata.producer_epoch,
            tuple(sorted(metadata.partitions, key=lambda tp: (tp.topic, tp.partition))),
        )  # fmt: skip

    def list_transactions(
        self,
        states: list[str],
        producer_ids: set[int],
        duration_ms: int = -1,
        pattern: str | None = None,
    ) -> tuple[ErrorCode, list[str], list[TxnListing]]:
        """Kafka's listTransactionStates: (error, unknown state filters, listings);
        COORDINATOR_LOAD_IN_PROGRESS while any partition loads."""
        known = {s.kafka_name: s for s in TransactionState}
        unknown = [name for name in states if name not in known]
        wanted = {known[name] for name in states if name in known}
        if not self._active:
            return ErrorCode.coordinator_not_available, unknown, []
        if any(p.status is LoadStatus.LOADING for p in self._partitions.values()):
            return ErrorCode.coordinator_load_in_progress, unknown, []
        regex = re.compile(pattern) if pattern else None
        now = clock.now_ms()
        out = []
        for part in self._partitions.values():
            for txn_id, metadata in part.txns.items():
                if metadata.state is S.DEAD:
                    continue
                if producer_ids and metadata.producer_id not in producer_ids:
                    continue
                if states and metadata.state not in wanted:
                    continue
                if duration_ms >= 0 and now - metadata.start_timestamp_ms <= duration_ms:
                    continue
                if regex is not None and not regex.fullmatch(txn_id):
                    continue
                out.append(TxnListing(txn_id, metadata.producer_id, metadata.state.kafka_name))
        return ErrorCode.none, unknown, out


def _metadata_of(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id,
        value.producer_id,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        producer_epoch=value.producer_epoch,
        timeout_ms=value.timeout_ms,
        state=TransactionState(value.status),
        partitions=set(value.partitions or ()),
        start_timestamp_ms=value.start_timestamp_ms,
        last_update_timestamp_ms=value.last_update_timestamp_ms,
        client_transaction_version=value.client_transaction_version,
    )
