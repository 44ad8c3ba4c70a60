"""One partition on this broker: its log plus leadership, leader epoch, ISR and high watermark.

State machine (`PartitionRole`), driven by the controller's metadata image:

    NONE      --make_leader-->    LEADER     (this broker is the registration's leader)
    NONE      --make_follower-->  FOLLOWER   (this broker is a replica, another is leader)
    LEADER    --make_follower-->  FOLLOWER   (new leader epoch elsewhere)
    FOLLOWER  --make_leader-->    LEADER     (elected from the ISR; epoch bumped)
    any       --make_offline-->   OFFLINE    (topic deleted or replica removed; log closed)

A transition is only taken for a leader epoch at least the current one, so a stale image cannot
undo a newer leadership. On the leader the high watermark (HW) is the smallest log end offset
(LEO) among the ISR, never moving backwards; consumers read below the HW, followers below the LEO.
With a single replica the ISR is {self} and the HW follows the LEO after every append.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from controller.model import PartitionRegistration
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    BrokerId,
    LeaderEpoch,
    NO_BROKER,
    NO_LEADER_EPOCH,
    Offset,
)

EARLIEST_LOCAL_TIMESTAMP = -4
"""ListOffsets v8+ (KIP-405): the first offset in local storage; the log start offset here."""
LATEST_TIERED_TIMESTAMP = -5
"""ListOffsets v9+ (KIP-1005): the last tiered offset; -1 since there is no tiered storage."""

from broker.log.info import TimestampAndOffset

if TYPE_CHECKING:
    from broker.log.info import FetchDataInfo, LogAppendInfo
    from broker.log.log import UnifiedLog

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


@dataclass(frozen=True, slots=True)
class ReadResult:
    info: FetchDataInfo | None
    high_watermark: Offset
    last_stable_offset: Offset
    log_start_offset: Offset
    log_end_offset: Offset


def _now_ms() -> int:
    return int(time.time() * 1000)


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        local_broker_id: BrokerId,
        log_: UnifiedLog,
        *,
        initial_high_watermark: Offset = Offset(0),
        on_high_watermark: Callable[[TopicPartition], None] = lambda tp: None,
    ) -> None:
        self.tp = tp
        self.local_broker_id = local_broker_id
        self.log = log_
        self.role = PartitionRole.NONE
        self.leader_id: BrokerId = NO_BROKER
        self.leader_epoch: LeaderEpoch = NO_LEADER_EPOCH
        self.partition_epoch = -1
        self.replicas: tuple[BrokerId, ...] = ()
        self.isr: frozenset[BrokerId] = frozenset()
        self.high_watermark = Offset(min(initial_high_watermark, log_.log_end_offset))
        self._replica_states: dict[BrokerId, ReplicaState] = {}
        self._on_high_watermark = on_high_watermark

    def __repr__(self) -> str:
        return (
            f"Partition({self.tp}, role={self.role.value}, leader={self.leader_id}, "
            f"epoch={self.leader_epoch}, isr={sorted(self.isr)}, hw={self.high_watermark}, "
            f"leo={self.log.log_end_offset})"
        )

    # -- leadership transitions ------------------------------------------------------------------

    def make_leader(self, reg: PartitionRegistration) -> bool:
        """Become (or stay) leader for `reg`; returns False if the registration is stale."""
        if reg.leader_epoch < self.leader_epoch:
            return False
        is_new_leader = self.role != PartitionRole.LEADER or reg.leader_epoch > self.leader_epoch
        self.role = PartitionRole.LEADER
        self.leader_id = reg.leader
        self.replicas = reg.replicas
        self.isr = frozenset(reg.isr)
        self.partition_epoch = reg.partition_epoch
        if is_new_leader:
            self.leader_epoch = reg.leader_epoch
            self.log.leader_epoch_cache.assign(reg.leader_epoch, self.log.log_end_offset)
            now = _now_ms()
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
                self.log.log_end_offset,
            )
        self.maybe_increment_high_watermark()
        return True

    def make_follower(self, reg: PartitionRegistration) -> bool:
        if reg.leader_epoch < self.leader_epoch:
            return False
        self.role = PartitionRole.FOLLOWER
        self.leader_id = reg.leader
        self.leader_epoch = reg.leader_epoch
        self.replicas = reg.replicas
        self.isr = frozenset(reg.isr)
        self.partition_epoch = reg.partition_epoch
        self._replica_states = {}
        return True

    def make_offline(self) -> None:
        self.role = PartitionRole.OFFLINE

    @property
    def is_leader(self) -> bool:
        return self.role == PartitionRole.LEADER

    # -- leader: produce -------------------------------------------------------------------------

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

    def append_records_to_leader(self, records: bytes | memoryview, required_acks: int) -> LogAppendInfo:
        self._require_leader()
        min_isr = self.log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"The size of the current ISR {sorted(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.tp}",
            )
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms=_now_ms())
        self.maybe_increment_high_watermark()
        return info

    def acks_satisfied(self, required_offset: Offset) -> tuple[bool, ErrorCode]:
        """For acks=all: has the HW reached `required_offset` (the batch's next offset)?"""
        if self.role != PartitionRole.LEADER:
            return True, ErrorCode.not_leader_or_follower
        if self.high_watermark >= required_offset:
            if len(self.isr) < self.log.config.min_insync_replicas:
                return True, ErrorCode.not_enough_replicas_after_append
            return True, ErrorCode.none
        return False, ErrorCode.none

    # -- high watermark --------------------------------------------------------------------------

    def maybe_increment_high_watermark(self) -> bool:
        if self.role != PartitionRole.LEADER:
            return False
        candidate = self.log.log_end_offset
        for broker in self.isr:
            if broker == self.local_broker_id:
                continue
            state = self._replica_states.get(broker)
            if state is None or state.log_end_offset < 0:
                return False
            candidate = min(candidate, state.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = Offset(candidate)
            self._on_high_watermark(self.tp)
            return True
        return False

    def update_follower_high_watermark(self, leader_high_watermark: Offset) -> None:
        """A follower's HW is the leader's, bounded by its own LEO."""
        new = Offset(min(leader_high_watermark, self.log.log_end_offset))
        if new > self.high_watermark:
            self.high_watermark = new
            self._on_high_watermark(self.tp)

    def truncate_high_watermark(self) -> None:
        """After a truncation the HW may not exceed the LEO."""
        if self.high_watermark > self.log.log_end_offset:
            self.high_watermark = self.log.log_end_offset

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
    ) -> ReadResult:
        if fetch_only_from_leader:
            self._require_leader()
        self.check_leader_epoch(current_leader_epoch)
        hw = self.high_watermark
        leo = self.log.log_end_offset
        max_offset = leo if isolation == FetchIsolation.LOG_END else hw
        info = self.log.read(fetch_offset, max_bytes, max_offset, min_one_message=min_one_message)
        return ReadResult(
            info=info,
            high_watermark=hw,
            last_stable_offset=hw,
            log_start_offset=self.log.log_start_offset,
            log_end_offset=leo,
        )

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
        if fetch_only_from_leader:
            self._require_leader()
        self.check_leader_epoch(current_leader_epoch)
        last_fetchable = self.log.log_end_offset if isolation == FetchIsolation.LOG_END else self.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, Offset(last_fetchable), self.leader_epoch)
        if timestamp in (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP):
            found = self.log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
            if found is not None:
                epoch = self.log.leader_epoch_cache.epoch_for_offset(found.offset)
                found = TimestampAndOffset(-1, found.offset, -1 if epoch is None else epoch)
            return found
        if timestamp == LATEST_TIERED_TIMESTAMP:
            return TimestampAndOffset(-1, Offset(-1), -1)  # no tiered storage
        found = self.log.fetch_offset_by_timestamp(timestamp)
        if found is None or found.offset >= last_fetchable:
            return None
        return found

    def bytes_available(self, fetch_offset: Offset, isolation: FetchIsolation) -> int:
        """Bytes a fetch at `fetch_offset` would get now (0 if none, or on any error)."""
        if self.role != PartitionRole.LEADER:
            return 0
        max_offset = self.log.log_end_offset if isolation == FetchIsolation.LOG_END else self.high_watermark
        if fetch_offset >= max_offset:
            return 0
        try:
            info = self.log.read(fetch_offset, 1 << 30, max_offset, min_one_message=True)
        except KafkaError:
            return 1  # an error answers the fetch at once
        return 0 if info is None or info.records is None else len(info.records)
