# Over 700 lines: Partition is the one gate to its log, and each rule keeping HW, LEO, ISR and leader epoch consistent is one of its methods.
"""One partition on this broker: its log plus leadership, leader epoch, ISR and high watermark.

State machine (`PartitionRole`), driven by the controller's metadata image:

    NONE      --make_leader-->    LEADER     (this broker is the registration's leader)
    NONE      --make_follower-->  FOLLOWER   (this broker is a replica, another is leader)
    LEADER    --make_follower-->  FOLLOWER   (new leader epoch elsewhere)
    FOLLOWER  --make_leader-->    LEADER     (elected from the ISR; epoch bumped)
    any       --make_offline-->   OFFLINE    (topic deleted or replica removed; log closed)

A transition is only taken for a leader epoch at least the current one (and, within one leader
epoch, a partition epoch at least the current one), so a stale image cannot undo a newer
leadership or ISR. On the leader the high watermark (HW) is the smallest log end offset (LEO)
among the ISR, never moving backwards; consumers read below the HW, followers below the LEO.
With a single replica the ISR is {self} and the HW follows the LEO after every append.

Followers and the ISR (leader side, Kafka's rules). Each follower fetch updates that follower's
`ReplicaState`: its LEO is the fetch offset; it was caught up at this fetch if the fetch offset
reached the leader's LEO, or at its previous fetch if the fetch offset reached the leader's LEO
as it stood then. The ISR changes through the controller (compare-and-set on partition_epoch);
while a change is in flight the proposed ISR is "pending" and the HW is computed over the larger
of the two sets (the maximal ISR), so it never runs ahead of a replica that may be in the ISR.

    shrink: an ISR follower not caught up for replica.lag.time.max.ms -> propose ISR without it;
            also, at once, a follower this broker's failure detector suspects that holds the HW
            back and has not fetched for the heartbeat timeout (`suspected_out_of_sync_replicas`)
    expand: a replica outside the ISR whose fetch offset reached the HW and the start offset of
            the current leader epoch -> propose ISR with it
    committed (controller answer or new image) -> ISR replaced, pending cleared, HW re-checked
    failed (stale partition epoch, controller unreachable) -> pending cleared, wait for an image

min.insync.replicas is checked against the committed ISR: acks=all gets NOT_ENOUGH_REPLICAS
before the append and NOT_ENOUGH_REPLICAS_AFTER_APPEND when the HW passes the batch but the ISR
has shrunk below it meanwhile, so a leader left alone in its ISR never acknowledges acks=all.

The partition is the one gate to its log (Kafka's `Partition`): the log is private, and every rule
that keeps HW, LEO, log start offset and ISR consistent is a method here: appends as leader and as
follower, truncation (the HW never above the LEO), records deletion on the leader, the follower's
log start offset, a follower fetch's state with ISR expansion and HW, last offset for an epoch,
config changes. The replica manager, the fetcher, the coordinators and the handlers ask the
partition, never the log.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker import clock
from broker.log.info import AppendOrigin, LogAppendInfo, LogOffsetMetadata, TimestampAndOffset
from broker.log.writer import INLINE_WRITER, LogWriter
from broker.replication.chain import apply_report, report_of
from broker.replication.chain import successor as chain_successor
from controller.model import PartitionRegistration
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_BROKER,
    NO_LEADER_EPOCH,
    BrokerId,
    LeaderEpoch,
    Offset,
)

START_OFFSET = Offset(0)
DELETE_TO_HIGH_WATERMARK = -1
"""DeleteRecords offset meaning "up to the high watermark"."""
EARLIEST_LOCAL_TIMESTAMP = -4
"""ListOffsets v8+ (KIP-405): the first offset in local storage; the log start offset here."""
LATEST_TIERED_TIMESTAMP = -5
"""ListOffsets v9+ (KIP-1005): the last tiered offset; -1 since there is no tiered storage."""
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
"""ListOffsets v11+ (KIP-1023): the first offset not yet in tiered storage; -1 without it (Kafka's
UnifiedLog answers -1 for a topic without remote storage)."""


if TYPE_CHECKING:
    from broker.config import LogConfig
    from broker.log.info import FetchDataInfo
    from broker.log.log import PendingAppend, UnifiedLog
    from broker.log.producer_state import ProducerStateEntry
    from broker.log.txn_index import AbortedTxn
    from broker.log.validation import CheckedRecords
    from protocol.schemas.fetch_v12_chain import ChainReport

AlterIsr = Callable[["Partition", PartitionRegistration], None]
"""Send a proposed ISR to the controller; the answer comes back through isr_change_committed or
isr_change_failed."""

log = logging.getLogger("samsa.partition")


class PartitionRole(enum.Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"


class FetchIsolation(enum.Enum):
    """How far a fetch may read: followers to the LEO, consumers to the HW or the LSO."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: Offset = Offset(-1)
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: Offset = Offset(-1)

    def update_fetch_state(self, fetch_offset: Offset, fetch_time_ms: int, leader_end_offset: Offset) -> None:
        """Kafka's Replica.updateFetchState: caught up now if the fetch offset reached the leader's
        LEO; caught up at the previous fetch if it reached the leader's LEO as it stood then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms

    def is_caught_up(self, leader_end_offset: Offset, now_ms: int, max_lag_ms: int) -> bool:
        return self.log_end_offset == leader_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms


@dataclass(frozen=True, slots=True)
class LogOffsetSnapshot:
    """The log's offsets with where each lies (Kafka's LogOffsetSnapshot)."""

    log_start_offset: Offset
    log_end_offset: LogOffsetMetadata
    high_watermark: LogOffsetMetadata
    last_stable_offset: LogOffsetMetadata

    def end_offset(self, isolation: FetchIsolation) -> LogOffsetMetadata:
        """How far a fetch with this isolation may read."""
        if isolation == FetchIsolation.LOG_END:
            return self.log_end_offset
        if isolation == FetchIsolation.TXN_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark


@dataclass(frozen=True, slots=True)
class ReadResult:
    info: FetchDataInfo | None
    high_watermark: Offset
    last_stable_offset: Offset
    log_start_offset: Offset
    log_end_offset: Offset
    aborted_transactions: tuple[AbortedTxn, ...] | None = None
    """read_committed reads: the aborted transactions overlapping what was read (else None)."""



class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        local_broker_id: BrokerId,
        log_: UnifiedLog,
        *,
        initial_high_watermark: Offset = START_OFFSET,
        on_high_watermark: Callable[[TopicPartition], None] = lambda tp: None,
        alter_isr: AlterIsr | None = None,
        writer: LogWriter = INLINE_WRITER,
    ) -> None:
        """`alter_isr(partition, proposal)` sends an ISR change to the controller (the IsrManager);
        without it a proposal is only marked pending (tests drive the answer themselves).
        `writer` writes the bytes of appends (broker/log/writer.py; default: inline)."""
        self.tp = tp
        self.local_broker_id = local_broker_id
        self._log = log_
        self._alter_isr = alter_isr
        self.role = PartitionRole.NONE
        self.leader_id: BrokerId = NO_BROKER
        self.leader_epoch: LeaderEpoch = NO_LEADER_EPOCH
        self.partition_epoch = -1
        self.replicas: tuple[BrokerId, ...] = ()
        self.isr: frozenset[BrokerId] = frozenset()
        self.high_watermark = Offset(min(initial_high_watermark, log_.log_end_offset))
        log_.on_high_watermark_updated(self.high_watermark)
        self._replica_states: dict[BrokerId, ReplicaState] = {}
        self._on_high_watermark = on_high_watermark
        self.pending_isr: frozenset[BrokerId] | None = None
        """ISR proposed to the controller and not yet committed (one change in flight at a time)."""
        self.leader_epoch_start_offset: Offset = Offset(-1)
        self._expansion_held_until_ms = 0
        self._writer = writer
        self._log_lock = asyncio.Lock()
        """Held by every append and truncation: one change of the log at a time, and none while
        an append's bytes are written (Kafka's log lock)."""
        self._chain_states: dict[BrokerId, ReplicaState] = {}
        """A follower serving chain successors (broker/replication/chain.py): what it knows of
        each successor down the chain, from their fetches here and the reports on them."""
        self._chain_reported: dict[BrokerId, Offset] = {}
        """Each successor's log end offset as last reported upstream."""
        self._chain_truncated_epoch: LeaderEpoch = NO_LEADER_EPOCH
        """The leader epoch this follower finished truncating for: it serves successors from then."""
        self._role_generation = 0
        """Bumped whenever role or leader epoch change: an append prepared under an older one is
        abandoned when its write returns (Kafka holds the leader-ISR lock across the append)."""
        self._future_log: UnifiedLog | None = None
        """The copy of this replica's log in the dir it is moving to (AlterReplicaLogDirs)."""
        self._truncations = 0
        """Bumped by every truncation: a copy step that read before one starts over."""

    def __repr__(self) -> str:
        return (
            f"Partition({self.tp}, role={self.role.value}, leader={self.leader_id}, "
            f"epoch={self.leader_epoch}, isr={sorted(self.isr)}, hw={self.high_watermark}, "
            f"leo={self._log.log_end_offset})"
        )

    # -- the log's state, read only ----------------------------------------------------------------

    @property
    def log_end_offset(self) -> Offset:
        return self._log.log_end_offset

    @property
    def log_start_offset(self) -> Offset:
        return self._log.log_start_offset

    @property
    def latest_epoch(self) -> LeaderEpoch | None:
        """The latest leader epoch in this replica's log (None: nothing known)."""
        return self._log.latest_epoch

    @property
    def last_stable_offset(self) -> Offset:
        """Kafka's LSO: the first offset of the oldest transaction that is open (or ended with
        its marker not yet below the HW), capped by the HW; the HW when there is none.
        read_committed consumers read below it."""
        first = self._log.first_unstable_offset
        hw = self.high_watermark
        return hw if first is None or first >= hw else first

    def active_producers(self) -> list[ProducerStateEntry]:
        """DescribeProducers: the producers this replica's log tracks (copies)."""
        return [e.copy() for e in self._log.producer_state.producers.values()]

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Kafka's UnifiedLog.hasOngoingTransaction: this producer, at this epoch, has a
        transaction open in this log (its partition was verified or added when it began)."""
        entry = self._log.producer_state.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None and entry.producer_epoch == producer_epoch

    def ongoing_transaction_first_offsets(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction in this log."""
        return {t.producer_id: first for first, t in self._log.producer_state.ongoing_txns.items()}

    @property
    def log_config(self) -> LogConfig:
        return self._log.config

    def update_log_config(self, config: LogConfig) -> None:
        """The topic's configs changed (AlterConfigs): the log obeys the new ones from now on."""
        self._log.config = config

    def end_offset_for_epoch(self, epoch: int) -> tuple[LeaderEpoch, Offset]:
        """This replica's (epoch, end offset) for `epoch` from its leader-epoch cache (Kafka's
        LeaderEpochFileCache.endOffsetFor): the follower's side of truncation."""
        return self._log.end_offset_for_epoch(epoch)

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int, *, fetch_only_from_leader: bool
    ) -> tuple[LeaderEpoch, Offset]:
        """OffsetForLeaderEpoch (Kafka's Partition.lastOffsetForLeaderEpoch): the requester's
        current leader epoch is fenced as for a fetch; a follower answers only to a debugging
        client (`fetch_only_from_leader` False)."""
        self.check_leader_epoch(current_leader_epoch)
        if fetch_only_from_leader:
            self._require_leader()
        return self._log.end_offset_for_epoch(leader_epoch)

    # -- leadership transitions ------------------------------------------------------------------

    def _is_stale(self, reg: PartitionRegistration) -> bool:
        if reg.leader_epoch != self.leader_epoch:
            return reg.leader_epoch < self.leader_epoch
        return reg.partition_epoch < self.partition_epoch

    def make_leader(self, reg: PartitionRegistration) -> bool:
        """Become (or stay) leader for `reg`; returns False if the registration is stale."""
        if self._is_stale(reg):
            return False
        is_new_leader = self.role != PartitionRole.LEADER or reg.leader_epoch > self.leader_epoch
        self.role = PartitionRole.LEADER
        self.leader_id = reg.leader
        self.replicas = reg.replicas
        self.isr = frozenset(reg.isr)
        if is_new_leader or reg.partition_epoch > self.partition_epoch:
            self.pending_isr = None
        self.partition_epoch = reg.partition_epoch
        if is_new_leader:
            self._role_generation += 1
            self.leader_epoch = reg.leader_epoch
            self.leader_epoch_start_offset = self._log.log_end_offset
            self._log.leader_epoch_cache.assign(reg.leader_epoch, self._log.log_end_offset)
            now = clock.now_ms()
            self._replica_states = {
                b: ReplicaState(last_caught_up_time_ms=now) for b in reg.replicas if b != self.local_broker_id
            }
            log.info(
                "became leader topic=%s partition=%d leader_epoch=%d isr=%s hw=%d leo=%d",
                self.tp.topic,
                self.tp.partition,
                self.leader_epoch,
                sorted(self.isr),
                self.high_watermark,
                self._log.log_end_offset,
            )
        else:  # same leadership, maybe a new replica set (reassignment): track exactly the replicas
            now = clock.now_ms()
            self._replica_states = {
                b: self._replica_states.get(b) or ReplicaState(last_caught_up_time_ms=now)
                for b in reg.replicas
                if b != self.local_broker_id
            }
        self.maybe_increment_high_watermark()
        return True

    def make_follower(self, reg: PartitionRegistration) -> bool:
        """Follow `reg.leader`; returns False if the registration is stale. The replica fetcher
        truncates (OffsetForLeaderEpoch) before it fetches whenever leader or epoch change."""
        if self._is_stale(reg):
            return False
        if self.role != PartitionRole.FOLLOWER or reg.leader_epoch != self.leader_epoch:
            self._role_generation += 1
            self._chain_states = {}
            self._chain_reported = {}
            self._chain_truncated_epoch = NO_LEADER_EPOCH
            log.info(
                "became follower topic=%s partition=%d leader=%d leader_epoch=%d hw=%d leo=%d",
                self.tp.topic,
                self.tp.partition,
                reg.leader,
                reg.leader_epoch,
                self.high_watermark,
                self._log.log_end_offset,
            )
        self.role = PartitionRole.FOLLOWER
        self.leader_id = reg.leader
        self.leader_epoch = reg.leader_epoch
        self.replicas = reg.replicas
        self.isr = frozenset(reg.isr)
        self.partition_epoch = reg.partition_epoch
        self._replica_states = {}
        self.pending_isr = None
        return True

    def make_offline(self) -> None:
        self._role_generation += 1
        self.role = PartitionRole.OFFLINE

    @property
    def is_leader(self) -> bool:
        return self.role == PartitionRole.LEADER

    # -- leader: produce -------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> frozenset[BrokerId]:
        """The committed ISR together with a pending change: the set the HW must wait for."""
        return self.isr if self.pending_isr is None else self.isr | self.pending_isr

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Fence requests that carry a leader epoch other than ours (KIP-320)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch, f"leader epoch {current_leader_epoch} is stale")
        raise KafkaError(ErrorCode.unknown_leader_epoch, f"leader epoch {current_leader_epoch} is unknown")

    def _require_leader(self) -> None:
        if self.role != PartitionRole.LEADER:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"This broker is not the leader for partition {self.tp}",
            )

    async def append_records_to_leader(
        self,
        records: CheckedRecords | bytes | memoryview,
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Append produced records (checked by the replica manager's RecordChecker; plain bytes
        are checked by the log first), Kafka's appendRecordsToLeader: NOT_ENOUGH_REPLICAS for
        acks=all with the ISR below min.insync.replicas; NOT_LEADER_OR_FOLLOWER if leadership
        moved while the bytes were written (they are dropped). A coordinator's records (origin
        COORDINATOR) may be transaction markers, which end transactions and so move the LSO."""
        async with self._log_lock:
            self._require_leader()
            min_isr = self._log.config.min_insync_replicas
            if required_acks == -1 and len(self.isr) < min_isr:
                raise KafkaError(
                    ErrorCode.not_enough_replicas,
                    f"The size of the current ISR {sorted(self.isr)} is insufficient to satisfy the "
                    f"min.isr requirement of {min_isr} for partition {self.tp}",
                )
            prepared = self._log.prepare_append_as_leader(records, self.leader_epoch, now_ms=clock.now_ms(), origin=origin)
            if isinstance(prepared, LogAppendInfo):
                return prepared
            info = await self._write(prepared)
            self.maybe_increment_high_watermark()
            return info

    async def _write(self, pending: PendingAppend, future: UnifiedLog | None = None) -> LogAppendInfo:
        """Write an append's bytes (inline while the disk is fast, else on a writer thread) and
        account them, unless role or leader epoch changed meanwhile (an append to the `future`
        log, a copy of this replica's own log, does not depend on them)."""
        target = self._log if future is None else future
        if self._writer.write_inline(pending):
            return target.complete_append(pending)
        generation = self._role_generation
        write = asyncio.ensure_future(self._writer.write_threaded(pending))
        cancelled = False
        while not write.done():  # the bytes land whatever happens to the caller: wait for them
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                cancelled = True
            except Exception:  # noqa: BLE001 - raised below, once the append is ended
                break
        failure = None if write.cancelled() else write.exception()
        if cancelled or write.cancelled() or failure is not None:
            # nobody waits for the answer, or the writer failed: the append does not count
            target.abandon_append(pending)
            if failure is not None:
                raise failure
            raise asyncio.CancelledError
        if future is None and generation != self._role_generation:
            target.abandon_append(pending)
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"Leadership of {self.tp} changed while the append was written",
            )
        return target.complete_append(pending)

    def acks_satisfied(
        self, required_offset: Offset, leader_epoch: int | None = None
    ) -> tuple[bool, ErrorCode]:
        """For acks=all: has the HW reached `required_offset` (the batch's next offset)?

        Done with NOT_LEADER_OR_FOLLOWER once this broker is no longer leader, or leads under
        another epoch than the one the batch was appended in (`leader_epoch`)."""
        if self.role != PartitionRole.LEADER or (leader_epoch is not None and leader_epoch != self.leader_epoch):
            return True, ErrorCode.not_leader_or_follower
        if self.high_watermark >= required_offset:
            if len(self.isr) < self._log.config.min_insync_replicas:
                return True, ErrorCode.not_enough_replicas_after_append
            return True, ErrorCode.none
        return False, ErrorCode.none

    # -- high watermark --------------------------------------------------------------------------

    def maybe_increment_high_watermark(self) -> bool:
        if self.role != PartitionRole.LEADER:
            return False
        candidate = self._log.log_end_offset
        for broker in self.maximal_isr:
            if broker == self.local_broker_id:
                continue
            state = self._replica_states.get(broker)
            if state is None or state.log_end_offset < 0:
                return False
            candidate = min(candidate, state.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = Offset(candidate)
            self._log.on_high_watermark_updated(candidate)
            self._on_high_watermark(self.tp)
            return True
        return False

    # -- leader: followers and the ISR -----------------------------------------------------------

    def replica_state(self, replica_id: BrokerId) -> ReplicaState | None:
        return self._replica_states.get(replica_id)

    def update_follower_fetch_state(
        self, replica_id: BrokerId, fetch_offset: Offset, fetch_time_ms: int, leader_end_offset: Offset
    ) -> None:
        """A follower fetched at `fetch_offset` (its LEO), Kafka's updateFollowerFetchState:
        record its state, propose it for the ISR if it caught up, move the HW. Raises
        NOT_LEADER_OR_FOLLOWER for a broker that is not a replica of this partition or when this
        broker is not leader."""
        self._require_leader()
        state = self._replica_states.get(replica_id)
        if state is None:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"broker {replica_id} is not a replica of {self.tp} (replicas {list(self.replicas)})",
            )
        state.update_fetch_state(fetch_offset, fetch_time_ms, leader_end_offset)
        self.maybe_expand_isr(replica_id)
        self.maybe_increment_high_watermark()

    # -- chain replication (broker/replication/chain.py) ----------------------------------------

    def update_chain_fetch_states(self, reporter: BrokerId, reports: Sequence[ChainReport], now_ms: int) -> None:
        """The leader: apply a chain member's reports on its successors (after its own fetch state),
        then move the HW. Reports on unknown replicas, on the reporter or on this broker are
        ignored, so are reports older than what is known (`chain.apply_report`). No ISR expansion
        comes from a report: a follower outside the ISR fetches from the leader itself."""
        self._require_leader()
        reporter_state = self._replica_states.get(reporter)
        if reporter_state is None:
            return
        for report in reports:
            replica = BrokerId(report.replica_id)
            state = self._replica_states.get(replica)
            if state is None or replica == reporter:
                continue
            apply_report(
                state, report, now_ms,
                reporter_log_end_offset=reporter_state.log_end_offset,
                reporter_caught_up_ms=reporter_state.last_caught_up_time_ms,
                leader_end_offset=self._log.log_end_offset,
            )  # fmt: skip
        self.maybe_increment_high_watermark()

    def chain_follower_truncated(self, leader_epoch: LeaderEpoch) -> None:
        """The fetcher finished truncating this follower for `leader_epoch`: its log is now a
        prefix of the leader's, and it may serve chain successors."""
        if self.role == PartitionRole.FOLLOWER and leader_epoch == self.leader_epoch:
            self._chain_truncated_epoch = leader_epoch

    def check_serves_chain(self, replica_id: BrokerId, current_leader_epoch: int) -> None:
        """Whether this follower may serve `replica_id`'s replica fetch or OffsetsForLeaderEpoch as
        its chain predecessor: the request's leader epoch is this follower's (FENCED or UNKNOWN
        LEADER_EPOCH otherwise, as Kafka fences), it finished truncating for it, and `replica_id`
        is its successor in the chain; NOT_LEADER_OR_FOLLOWER otherwise."""
        self.check_leader_epoch(current_leader_epoch)  # before leadership, as Kafka fences
        if self.role != PartitionRole.FOLLOWER:
            self._require_leader()
            return
        enabled = self._log.config.replication_pipeline_enable
        if (
            self._chain_truncated_epoch != self.leader_epoch
            or current_leader_epoch != self.leader_epoch
            or chain_successor(self.local_broker_id, self.replicas, self.leader_id, enabled=enabled) != replica_id
        ):
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"This broker is not the leader for partition {self.tp} nor serves broker {replica_id} in its chain",
            )

    def update_chain_successor_fetch_state(
        self, replica_id: BrokerId, fetch_offset: Offset, now_ms: int, reports: Sequence[ChainReport]
    ) -> None:
        """A chain successor fetched here at `fetch_offset` (checked by `check_serves_chain`):
        record its state against this follower's log end offset (Kafka's rule, as a leader does),
        and the reports it carried on the successors further down, to relay upstream."""
        state = self._chain_states.get(replica_id)
        if state is None:
            state = self._chain_states[replica_id] = ReplicaState(last_caught_up_time_ms=now_ms)
        state.update_fetch_state(fetch_offset, now_ms, self._log.log_end_offset)
        for report in reports:
            further = BrokerId(report.replica_id)
            if further in (replica_id, self.local_broker_id) or further not in self.replicas:
                continue
            apply_report(
                self._chain_states.setdefault(further, ReplicaState(last_caught_up_time_ms=now_ms)),
                report, now_ms,
                reporter_log_end_offset=state.log_end_offset,
                reporter_caught_up_ms=state.last_caught_up_time_ms,
                leader_end_offset=self._log.log_end_offset,
            )  # fmt: skip

    def chain_reports(self, now_ms: int) -> tuple[ChainReport, ...]:
        """What this follower reports upstream on its next fetch: its successors' states."""
        self._chain_reported = {b: s.log_end_offset for b, s in self._chain_states.items()}
        return tuple(report_of(b, s, now_ms) for b, s in self._chain_states.items())

    def chain_report_pending(self, now_ms: int, active_ms: int) -> bool:
        """Whether a successor's progress is not reported upstream yet, or a successor that
        fetched within `active_ms` is behind this follower (it will make progress soon): the
        leader's HW waits on that report, so the next upstream fetch must not long-poll."""
        leo = self._log.log_end_offset
        for b, s in self._chain_states.items():
            if self._chain_reported.get(b) != s.log_end_offset:
                return True
            if s.log_end_offset < leo and now_ms - s.last_fetch_time_ms <= active_ms:
                return True
        return False

    def _propose(self, new_isr: frozenset[BrokerId]) -> PartitionRegistration:
        """Mark `new_isr` pending and send it to the controller (one change in flight at a time)."""
        self.pending_isr = new_isr
        proposal = PartitionRegistration(
            replicas=self.replicas,
            isr=tuple(b for b in self.replicas if b in new_isr),
            leader=self.local_broker_id,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
        )
        if self._alter_isr is not None:
            self._alter_isr(self, proposal)
        return proposal

    def maybe_expand_isr(self, replica_id: BrokerId) -> PartitionRegistration | None:
        """A proposal adding `replica_id` to the ISR if it has caught up (Kafka: its LEO reached
        the HW and the start of this leader epoch); None otherwise or while a change is pending."""
        if self.role != PartitionRole.LEADER or self.pending_isr is not None or replica_id in self.isr:
            return None
        if clock.now_ms() < self._expansion_held_until_ms:
            return None
        state = self._replica_states.get(replica_id)
        if state is None:
            return None
        if state.log_end_offset < self.high_watermark or state.log_end_offset < self.leader_epoch_start_offset:
            return None
        new_isr = self.isr | {replica_id}
        log.info(
            "expanding isr topic=%s partition=%d leader_epoch=%d isr=%s proposed=%s follower_leo=%d hw=%d",
            self.tp.topic, self.tp.partition, self.leader_epoch, sorted(self.isr), sorted(new_isr),
            state.log_end_offset, self.high_watermark,
        )  # fmt: skip
        return self._propose(new_isr)

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> frozenset[BrokerId]:
        leo = self._log.log_end_offset
        lagging = set()
        for broker in self.isr:
            if broker == self.local_broker_id:
                continue
            state = self._replica_states.get(broker)
            if state is None or not state.is_caught_up(leo, now_ms, max_lag_ms):
                lagging.add(broker)
        return frozenset(lagging)

    def suspected_out_of_sync_replicas(
        self, now_ms: int, suspected: AbstractSet[BrokerId], silence_ms: int
    ) -> frozenset[BrokerId]:
        """ISR followers this leader's failure detector suspects (no heartbeat for
        samsa.heartbeat.timeout.ms) that also hold the HW back: behind the leader's LEO, with no
        fetch for `silence_ms`. They leave without waiting for replica.lag.time.max.ms.

        Only while this leader still hears some other ISR follower: a leader cut off from every
        follower suspects them all, and must not shrink the ISR to itself before the controller
        moves its leadership away (the followers suspect it in turn)."""
        leo = self._log.log_end_offset
        out = set()
        for broker in self.isr:
            if broker == self.local_broker_id or broker not in suspected:
                continue
            state = self._replica_states.get(broker)
            if state is None or (state.log_end_offset < leo and now_ms - state.last_fetch_time_ms > silence_ms):
                out.add(broker)
        if not out or not any(b not in suspected for b in self.isr - out if b != self.local_broker_id):
            return frozenset()
        return frozenset(out)

    def maybe_shrink_isr(
        self,
        now_ms: int,
        max_lag_ms: int,
        suspected: AbstractSet[BrokerId] = frozenset(),
        silence_ms: int = 0,
    ) -> PartitionRegistration | None:
        """A proposal removing ISR followers not caught up for `max_lag_ms` (Kafka's rule), and
        followers `suspected_out_of_sync_replicas` names; None if all are in sync, this broker is
        not leader, or a change is pending."""
        if self.role != PartitionRole.LEADER or self.pending_isr is not None:
            return None
        lagging = self.out_of_sync_replicas(now_ms, max_lag_ms)
        silent = self.suspected_out_of_sync_replicas(now_ms, suspected, silence_ms) if suspected else frozenset()
        if not lagging and not silent:
            return None
        new_isr = self.isr - lagging - silent
        log.info(
            "shrinking isr topic=%s partition=%d leader_epoch=%d isr=%s proposed=%s out_of_sync=%s suspected=%s leo=%d hw=%d",
            self.tp.topic, self.tp.partition, self.leader_epoch, sorted(self.isr), sorted(new_isr),
            sorted(lagging), sorted(silent - lagging), self._log.log_end_offset, self.high_watermark,
        )  # fmt: skip
        return self._propose(new_isr)

    def isr_change_committed(self, reg: PartitionRegistration) -> bool:
        """Apply the controller's answer to our proposal (unless an image already moved past it)."""
        if self.role != PartitionRole.LEADER or reg.leader_epoch != self.leader_epoch:
            return False
        if reg.partition_epoch < self.partition_epoch:
            return False
        if reg.partition_epoch > self.partition_epoch:
            self.isr = frozenset(reg.isr)
            self.partition_epoch = reg.partition_epoch
        self.pending_isr = None
        log.info(
            "isr updated topic=%s partition=%d leader_epoch=%d partition_epoch=%d isr=%s",
            self.tp.topic, self.tp.partition, self.leader_epoch, self.partition_epoch, sorted(self.isr),
        )  # fmt: skip
        self.maybe_increment_high_watermark()
        return True

    def isr_change_failed(self, proposal: PartitionRegistration, hold_expansion_ms: int = 0) -> None:
        """The controller refused or could not be reached; wait for the next image or check. A
        refused expansion (a replica not eligible yet: suspected, shutting down) is not proposed
        again for `hold_expansion_ms` (each follower fetch would propose it again)."""
        if self.pending_isr is not None and proposal.partition_epoch == self.partition_epoch:
            self.pending_isr = None
        if hold_expansion_ms:
            self._expansion_held_until_ms = clock.now_ms() + hold_expansion_ms

    def update_follower_high_watermark(self, leader_high_watermark: Offset) -> None:
        """A follower's HW is the leader's, bounded by its own LEO."""
        new = Offset(min(leader_high_watermark, self._log.log_end_offset))
        if new > self.high_watermark:
            self.high_watermark = new
            self._log.on_high_watermark_updated(new)
            self._on_high_watermark(self.tp)

    # -- follower: replication ----------------------------------------------------------------

    async def append_records_to_follower(self, records: bytes | memoryview) -> LogAppendInfo:
        """Append what the leader sent, keeping its offsets and epochs (Kafka's
        appendRecordsToFollowerOrFutureReplica); NOT_LEADER_OR_FOLLOWER if role or leader epoch
        changed while the bytes were written (they are dropped; the fetcher starts over)."""
        async with self._log_lock:
            prepared = self._log.prepare_append_as_follower(records, now_ms=clock.now_ms())
            if isinstance(prepared, LogAppendInfo):
                return prepared
            return await self._write(prepared)

    async def truncate_to(self, offset: Offset) -> bool:
        """Cut this replica's log from the batch holding `offset` on (a follower diverged from
        its leader); the HW never stays above the new LEO. True if anything was removed."""
        async with self._log_lock:
            removed = self._log.truncate_to(max(0, offset))
            self._truncations += 1
            if self._future_log is not None and self._future_log.log_end_offset > offset:
                self._future_log.truncate_to(max(0, offset))
            self._cap_high_watermark()
            return removed

    async def truncate_fully_and_start_at(self, offset: Offset) -> None:
        """Empty the log and restart it at `offset` (the leader's log start offset is past
        everything this replica has); the HW moves to `offset` if it was above or below it."""
        async with self._log_lock:
            self._log.truncate_fully_and_start_at(offset)
            self._truncations += 1
            if self._future_log is not None:
                self._future_log.truncate_fully_and_start_at(offset)
            self._cap_high_watermark()
            self.update_follower_high_watermark(offset)

    # -- a replica moving between log dirs (AlterReplicaLogDirs) ---------------------------------

    @property
    def future_log_end_offset(self) -> Offset | None:
        """Where the future log ends (None: the replica is not moving)."""
        return None if self._future_log is None else self._future_log.log_end_offset

    def add_future_replica(self, future: UnifiedLog) -> None:
        """Start filling `future` (new, or reloaded at start-up) from this replica's log (Kafka's
        createLogIfNotExists(isFuture) and the alter-log-dirs fetcher's first fetch): a future
        log that holds nothing, or ends outside this log, restarts at this log's start."""
        self._future_log = future
        start, end = self._log.log_start_offset, self._log.log_end_offset
        if future.log_end_offset == future.log_start_offset or not start <= future.log_end_offset <= end:
            self._future_log.truncate_fully_and_start_at(start)
        elif future.log_start_offset < start:
            self._future_log.maybe_increment_log_start_offset(start)

    def remove_future_replica(self) -> None:
        """Stop moving (Kafka's removeFutureLocalReplica); the log manager deletes the files."""
        self._future_log = None

    async def append_records_to_future_replica(self, max_bytes: int) -> int:
        """One step of the copy (Kafka's ReplicaAlterLogDirsThread: a fetch from this replica's
        log, appended to the future log as a follower appends): the bytes copied, 0 when the
        future log has caught up. The bytes are read off the loop and without the log lock; a
        truncation meanwhile (`_truncations`) discards them. The log start offset is followed
        (retention, DeleteRecords), restarting the copy when it passed the future log's end."""
        future = self._future_log
        if future is None:
            return 0
        truncations = self._truncations
        start = future.log_end_offset
        data = b""
        if self._log.log_start_offset <= start < self._log.log_end_offset:
            info = self._log.read(start, max_bytes, self._log.log_end_offset)
            if info.records is not None:
                data = await asyncio.to_thread(info.records.read_bytes)
        async with self._log_lock:
            if self._future_log is None or self._future_log is not future or truncations != self._truncations:
                return 1  # moved, cancelled or truncated meanwhile: the next step looks again
            if not self._log.log_start_offset <= future.log_end_offset <= self._log.log_end_offset:
                self._future_log.truncate_fully_and_start_at(self._log.log_start_offset)
                return 1
            if future.log_start_offset < self._log.log_start_offset:
                self._future_log.maybe_increment_log_start_offset(self._log.log_start_offset)
            if not data:
                return 0
            prepared = future.prepare_append_as_follower(data, now_ms=clock.now_ms())
            if isinstance(prepared, LogAppendInfo):
                return 0
            await self._write(prepared, future)
            return len(data)

    async def maybe_replace_current_with_future_replica(self, replace: Callable[[], UnifiedLog]) -> bool:
        """Kafka's maybeReplaceCurrentWithFutureReplica: under the log lock (no append in
        flight), if the future log has caught up, `replace()` (the log manager's rename of the
        future log into place) gives this partition its new log. False: not caught up yet."""
        async with self._log_lock:
            future = self._future_log
            if future is None or future.log_end_offset != self._log.log_end_offset:
                return False
            self._log = replace()
            self._future_log = None
            self._log.on_high_watermark_updated(self.high_watermark)
            return True

    async def quiesce(self) -> None:
        """Wait for an append or truncation in progress to end (shutdown)."""
        async with self._log_lock:
            pass

    def update_follower_log_start_offset(self, leader_log_start_offset: Offset) -> None:
        """Follow the leader's log start offset (retention, DeleteRecords) when it lies within
        this replica's log."""
        if self._log.log_start_offset < leader_log_start_offset <= self._log.log_end_offset:
            self._log.maybe_increment_log_start_offset(leader_log_start_offset)

    def _cap_high_watermark(self) -> None:
        """After a truncation: the HW never above the LEO, and the rebuilt producer state's
        ended transactions below it stable."""
        if self.high_watermark > self._log.log_end_offset:
            self.high_watermark = self._log.log_end_offset
        self._log.on_high_watermark_updated(self.high_watermark)

    # -- leader: DeleteRecords ------------------------------------------------------------------

    def delete_records_on_leader(self, offset: Offset) -> Offset:
        """Move the log start offset to `offset` (-1: the HW), Kafka's deleteRecordsOnLeader;
        returns the new low watermark. POLICY_VIOLATION on a topic without the delete policy,
        OFFSET_OUT_OF_RANGE for a negative offset or one past the HW."""
        self._require_leader()
        if not self._log.config.delete:
            raise KafkaError(
                ErrorCode.policy_violation,
                f"Records of partition {self.tp} can not be deleted due to the configured policy",
            )
        target = self.high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if target < 0:
            raise KafkaError(
                ErrorCode.offset_out_of_range, f"The offset {target} for partition {self.tp} is not valid"
            )
        if target > self.high_watermark:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"Cannot increment the log start offset to {target} of partition {self.tp} since it "
                f"is larger than the high watermark {self.high_watermark}",
            )
        self._log.maybe_increment_log_start_offset(target)
        return self._log.log_start_offset

    # -- reads -----------------------------------------------------------------------------------

    def read_records(
        self,
        fetch_offset: Offset,
        max_bytes: int,
        isolation: FetchIsolation,
        *,
        current_leader_epoch: int = -1,
        fetch_only_from_leader: bool = True,
        min_one_message: bool = True,
        max_offset: Offset | None = None,
    ) -> ReadResult:
        """Read from `fetch_offset` up to what `isolation` allows (and `max_offset`, if lower)."""
        self.check_leader_epoch(current_leader_epoch)
        if fetch_only_from_leader:
            self._require_leader()
        hw = self.high_watermark
        lso = self.last_stable_offset
        leo = self._log.log_end_offset
        bound = self._max_offset(isolation)
        if max_offset is not None:
            bound = Offset(min(bound, max_offset))
        info = self._log.read(fetch_offset, max_bytes, bound, min_one_message=min_one_message)
        aborted: tuple[AbortedTxn, ...] | None = None
        if isolation == FetchIsolation.TXN_COMMITTED:
            aborted = ()
            if info.records is not None:  # Kafka's addAbortedTransactions
                upper = self._log.fetch_upper_bound_offset(fetch_offset)
                aborted = tuple(self._log.collect_aborted_transactions(fetch_offset, upper))
        return ReadResult(
            info=info,
            high_watermark=hw,
            last_stable_offset=lso,
            log_start_offset=self._log.log_start_offset,
            log_end_offset=leo,
            aborted_transactions=aborted,
        )

    def _max_offset(self, isolation: FetchIsolation) -> Offset:
        """How far a read may go: the LEO (followers), the HW or the LSO (read_committed)."""
        if isolation == FetchIsolation.LOG_END:
            return self._log.log_end_offset
        if isolation == FetchIsolation.TXN_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        isolation: FetchIsolation,
        *,
        current_leader_epoch: int = -1,
        fetch_only_from_leader: bool = True,
    ) -> TimestampAndOffset | None:
        """ListOffsets (Kafka's Partition.fetchOffsetForTimestamp).

        Consumers never learn of offsets at or above what they may fetch: LATEST is the HW (or LSO),
        and a timestamp or max-timestamp match at or beyond it is no match (None).
        """
        self.check_leader_epoch(current_leader_epoch)
        if fetch_only_from_leader:
            self._require_leader()
        last_fetchable = self._max_offset(isolation)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, Offset(last_fetchable), self.leader_epoch)
        if timestamp in (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP):
            found = self._log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
            if found is not None:
                epoch = self._log.leader_epoch_cache.epoch_for_offset(found.offset)
                found = TimestampAndOffset(-1, found.offset, -1 if epoch is None else epoch)
            return found
        if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return TimestampAndOffset(-1, Offset(-1), -1)  # no tiered storage
        found = self._log.fetch_offset_by_timestamp(timestamp)
        if found is None or found.offset >= last_fetchable:
            return None
        return found

    def fetch_offset_snapshot(
        self, current_leader_epoch: int = -1, *, fetch_only_from_leader: bool = True
    ) -> LogOffsetSnapshot:
        """Where the log's offsets lie now (Kafka's Partition.fetchOffsetSnapshot), for a waiting
        fetch to measure what has become available. Raises as a read would: a fenced epoch, not
        the leader."""
        self.check_leader_epoch(current_leader_epoch)
        if fetch_only_from_leader:
            self._require_leader()
        leo = self._log.offset_metadata(self._log.log_end_offset)
        hw = leo if self.high_watermark == leo.message_offset else self._log.offset_metadata(self.high_watermark)
        lso_offset = self.last_stable_offset
        lso = hw if lso_offset == hw.message_offset else self._log.offset_metadata(lso_offset)
        return LogOffsetSnapshot(
            log_start_offset=self._log.log_start_offset,
            log_end_offset=leo,
            high_watermark=hw,
            last_stable_offset=lso,
        )

    def offset_metadata(self, offset: Offset) -> LogOffsetMetadata:
        """Where `offset` lies in the log (segment and position); only the offset when it lies
        outside [log start offset, log end offset]."""
        if not self._log.log_start_offset <= offset <= self._log.log_end_offset:
            return LogOffsetMetadata(offset)
        return self._log.offset_metadata(offset)
