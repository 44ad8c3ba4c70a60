"""Idempotent-producer state for one partition (Kafka's ProducerStateManager).

For every producer id the partition remembers its epoch and the metadata of its last five batches
(first/last sequence, first/last offset, timestamp). On a leader append, `prepare` validates each
batch against that state in a `ProducerAppendInfo` staging copy; the log commits it with `update`
only after the bytes are written, so a rejected append leaves no trace.

Per-producer sequence state machine (leader appends, Kafka's rules):

    UNKNOWN --any epoch, any sequence--> KNOWN(epoch e, last seq s)
    KNOWN(e, s) --epoch e, seq s+1 (or 0 after Int.MAX)--> KNOWN(e, last seq of batch)
    KNOWN(e, s) --epoch e, a batch among the last 5--> unchanged; append returns the original
                                                         offsets (duplicate)
    KNOWN(e, s) --epoch e, any other seq--> rejected OUT_OF_ORDER_SEQUENCE_NUMBER
    KNOWN(e, s) --epoch > e, seq 0--> KNOWN(new epoch, ...), batch history cleared
    KNOWN(e, s) --epoch > e, seq != 0--> rejected OUT_OF_ORDER_SEQUENCE_NUMBER
    KNOWN(e, s) --epoch < e--> rejected INVALID_PRODUCER_EPOCH
    KNOWN --idle longer than producer.id.expiration.ms--> UNKNOWN

Follower appends and log replay apply batches without these checks (the leader already did).

Transactions (Kafka's rules): the first transactional batch of a producer begins its transaction
(`current_txn_first_offset`, and an entry in `ongoing_txns`, keyed and ordered by first offset); a
non-transactional batch while it is open is INVALID_TXN_STATE; its COMMIT or ABORT marker (a
control batch) ends it, and a marker whose coordinator epoch is older than the last one seen is
TRANSACTION_COORDINATOR_FENCED. An ended transaction is "unreplicated" until the high watermark
passes its marker. The first unstable offset is the first offset of the oldest ongoing or
unreplicated transaction; the partition's last stable offset (LSO) is the smaller of it and the
high watermark.

    NONE --transactional batch at offset f--> ONGOING(f)
    ONGOING(f) --marker at offset m--> UNREPLICATED(f, m) --high watermark > m--> gone
    ONGOING(f) --log truncated below f--> NONE

Persistence: `take_snapshot()` writes `<20-digit offset>.snapshot` (the state after every batch
below that offset) on segment roll and on close; `load(...)` takes the newest valid snapshot not
beyond the log end and the log replays the batches after it. Snapshot file layout: magic `PSNP`,
int16 version, uint32 CRC-32C of the payload, payload = JSON.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config import DEFAULT_PRODUCER_ID_EXPIRATION_MS, INT_MAX
from broker.log.checkpoints import atomic_write
from protocol.control import EndTxnMarker
from protocol.crc import crc32c
from protocol.errors import ErrorCode, KafkaError
from protocol.records import BatchHeader

log = logging.getLogger("samsa.log")

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_HEADER = struct.Struct(">4shI")
_SNAPSHOT_MAGIC = b"PSNP"
_SNAPSHOT_VERSION = 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one producer batch for duplicate detection."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker at `last_offset` (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class TxnMetadata:
    """An ongoing (last_offset None) or ended but unreplicated transaction."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


@dataclass(slots=True)
class ProducerStateEntry:
    """The state of one producer id."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch with exactly this epoch and sequence range, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def to_json(self) -> dict[str, object]:
        return {
            "pid": self.producer_id,
            "epoch": self.producer_epoch,
            "coordinator_epoch": self.coordinator_epoch,
            "last_timestamp": self.last_timestamp,
            "txn_first_offset": self.current_txn_first_offset,
            "batches": [
                [b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                for b in self.batches
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProducerStateEntry:
        entry = cls(int(data["pid"]), int(data["epoch"]))
        entry.coordinator_epoch = int(data["coordinator_epoch"])
        entry.last_timestamp = int(data["last_timestamp"])
        txn = data.get("txn_first_offset")
        entry.current_txn_first_offset = None if txn is None else int(txn)
        for b in data["batches"]:
            entry.batches.append(BatchMetadata(*(int(x) for x in b)))
        return entry


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """True if `next_seq` directly follows `last_seq` (sequences wrap from Int.MAX to 0)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


class ProducerAppendInfo:
    """The staged effect of one append on one producer's state (Kafka's ProducerAppendInfo)."""

    def __init__(
        self,
        current: ProducerStateEntry | None,
        producer_id: int,
        *,
        validate: bool,
        check_sequence: bool | None = None,
    ) -> None:
        self.producer_id = producer_id
        self.validate = validate
        self.check_sequence = validate if check_sequence is None else check_sequence
        """Sequences are checked for clients' appends only (a coordinator's transactional
        offset commits all start at sequence 0, as Kafka writes them)."""
        self.current = current or ProducerStateEntry(producer_id)
        self.updated = self.current.copy()
        self.started_txns: list[TxnMetadata] = []
        """Transactions this append began (Kafka's `transactions`)."""

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        """Validate (leader appends) and stage one data batch."""
        self._check_epoch(epoch)
        if self.check_sequence:
            self._check_sequence(epoch, first_seq)
        if epoch != self.updated.producer_epoch:
            self.updated.batches.clear()
            self.updated.producer_epoch = epoch
        self.updated.batches.append(
            BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp)
        )
        self.updated.last_timestamp = timestamp
        if self.updated.current_txn_first_offset is not None and not is_transactional:
            message = (
                f"Expected transactional write from producer {self.producer_id} at offset {first_offset}"
            )
            if self.validate:
                raise KafkaError(ErrorCode.invalid_txn_state, message)
            log.warning("replicated batch %s", message)
        elif self.updated.current_txn_first_offset is None and is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_txns.append(TxnMetadata(self.producer_id, first_offset))

    def append_replicated(self, header: BatchHeader, marker: EndTxnMarker | None) -> CompletedTxn | None:
        """Stage a batch written by a leader (follower append, log replay): no sequence checks.
        `marker` is what a control batch says (None: empty or not a transaction marker)."""
        if header.is_control:
            if marker is None:
                return None
            return self.append_end_txn_marker(
                marker, header.producer_epoch, header.base_offset, header.max_timestamp
            )
        self.append_data_batch(
            header.producer_epoch,
            header.base_sequence,
            header.last_sequence,
            header.max_timestamp,
            header.base_offset,
            header.last_offset,
            header.is_transactional,
        )
        return None

    def append_end_txn_marker(
        self, marker: EndTxnMarker, epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        """Stage a COMMIT or ABORT marker at `offset` (Kafka's appendEndTxnMarker): the open
        transaction ends. Returns it, or None when the producer had none open (a marker of an
        empty transaction changes no LSO and no index)."""
        self._check_epoch(epoch)
        if self.updated.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"Invalid coordinator epoch for producer {self.producer_id} at offset {offset}: "
                f"{marker.coordinator_epoch} (zombie), {self.updated.coordinator_epoch} (current)"
            )
            if self.validate:
                raise KafkaError(ErrorCode.transaction_coordinator_fenced, message)
            log.info("replicated marker %s", message)
        first = self.updated.current_txn_first_offset
        completed = (
            None if first is None else CompletedTxn(self.producer_id, first, offset, marker.is_abort)
        )
        if epoch != self.updated.producer_epoch:
            self.updated.batches.clear()
            self.updated.producer_epoch = epoch
        self.updated.coordinator_epoch = marker.coordinator_epoch
        self.updated.current_txn_first_offset = None
        self.updated.last_timestamp = timestamp
        return completed

    def _check_epoch(self, epoch: int) -> None:
        if epoch < self.updated.producer_epoch:
            message = (
                f"producer {self.producer_id} epoch {epoch} is older than the current epoch "
                f"{self.updated.producer_epoch}"
            )
            if self.validate:
                raise KafkaError(ErrorCode.invalid_producer_epoch, message)
            log.warning("replicated batch from fenced producer %s", message)

    def _check_sequence(self, epoch: int, first_seq: int) -> None:
        if epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {self.producer_id}: new epoch {epoch} must start at sequence 0, got {first_seq}",
                )
            return
        if self.updated.batches:
            last_seq = self.updated.last_seq
        elif epoch == self.current.producer_epoch:
            last_seq = self.current.last_seq
        else:
            last_seq = NO_SEQUENCE
        if self.current.producer_epoch == NO_PRODUCER_EPOCH:
            return  # nothing known (new, expired or removed producer): accept any sequence
        if not in_sequence(last_seq, first_seq):
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"producer {self.producer_id} epoch {epoch}: expected sequence {(last_seq + 1) % (INT_MAX + 1)}, "
                f"got {first_seq}",
            )


class ProducerStateManager:
    """All producers' state for one partition plus its snapshot files."""

    def __init__(
        self, log_dir: Path, *, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> None:
        self.log_dir = log_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        """State reflects every batch below this offset."""
        self.ongoing_txns: dict[int, TxnMetadata] = {}
        """Open transactions by first offset."""
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        """Ended transactions whose marker the high watermark has not passed, by first offset."""

    # ----------------------------------------------------------------- queries
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def prepare(
        self,
        producer_id: int,
        staged: dict[int, ProducerAppendInfo],
        *,
        validate: bool,
        check_sequence: bool | None = None,
    ) -> ProducerAppendInfo:
        """The staging object for `producer_id` within one append (created on first use)."""
        info = staged.get(producer_id)
        if info is None:
            info = ProducerAppendInfo(
                self.producers.get(producer_id), producer_id, validate=validate, check_sequence=check_sequence
            )
            staged[producer_id] = info
        return info

    # --------------------------------------------------------------- mutations
    def update(self, info: ProducerAppendInfo) -> None:
        """Commit a staged append."""
        self.producers[info.producer_id] = info.updated
        for txn in info.started_txns:
            self.ongoing_txns[txn.first_offset] = txn

    def replay(self, header: BatchHeader, marker: EndTxnMarker | None) -> CompletedTxn | None:
        """Apply one batch already in the log (loading, truncation), unchecked; a transaction
        its marker ended is returned, still ongoing (the caller indexes it, then `complete_txn`)."""
        info = ProducerAppendInfo(
            self.producers.get(header.producer_id), header.producer_id, validate=False
        )
        completed = info.append_replicated(header, marker)
        self.update(info)
        return completed

    # ------------------------------------------------------------ transactions
    def complete_txn(self, completed: CompletedTxn) -> None:
        """The transaction's marker is in the log: it stays unstable until the HW passes it."""
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            txn = TxnMetadata(completed.producer_id, completed.first_offset)
        txn.last_offset = completed.last_offset
        self.unreplicated_txns[completed.first_offset] = txn

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """Kafka's lastStableOffset(completedTxn), for the aborted-transaction index: the first
        offset of the oldest other transaction still open, else the marker's offset + 1."""
        for first in sorted(self.ongoing_txns):
            if self.ongoing_txns[first].producer_id != completed.producer_id:
                return first
        return completed.last_offset + 1

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget ended transactions whose marker lies below the high watermark."""
        if self.unreplicated_txns:
            for first in [f for f, t in self.unreplicated_txns.items()
                          if t.last_offset is not None and t.last_offset < high_watermark]:
                del self.unreplicated_txns[first]

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest ongoing or unreplicated transaction (None: none)."""
        ongoing = min(self.ongoing_txns, default=None)
        unreplicated = min(self.unreplicated_txns, default=None)
        if ongoing is None:
            return unreplicated
        if unreplicated is None:
            return ongoing
        return min(ongoing, unreplicated)

    def _rebuild_ongoing_txns(self) -> None:
        self.unreplicated_txns.clear()
        self.ongoing_txns = {
            e.current_txn_first_offset: TxnMetadata(e.producer_id, e.current_txn_first_offset)
            for e in sorted(
                (e for e in self.producers.values() if e.current_txn_first_offset is not None),
                key=lambda e: e.current_txn_first_offset or 0,
            )
            if e.current_txn_first_offset is not None
        }

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle longer than producer.id.expiration.ms (not in a transaction)."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything and delete every snapshot."""
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        for path in self.snapshot_files():
            _unlink(path)
        self.map_end_offset = offset

    # --------------------------------------------------------------- snapshots
    def snapshot_path(self, offset: int) -> Path:
        return self.log_dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_files(self) -> list[Path]:
        """Snapshot files sorted by offset."""
        found = []
        for path in self.log_dir.glob(f"*{SNAPSHOT_SUFFIX}"):
            stem = path.name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                found.append((int(stem), path))
        return [p for _, p in sorted(found)]

    def latest_snapshot_offset(self) -> int | None:
        files = self.snapshot_files()
        return int(files[-1].name[:20]) if files else None

    def take_snapshot(self) -> Path:
        """Write the current state as `<map_end_offset>.snapshot`."""
        payload = json.dumps(
            {
                "map_end_offset": self.map_end_offset,
                "producers": [e.to_json() for e in self.producers.values()],
            },
            separators=(",", ":"),
        ).encode()
        header = _SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, _SNAPSHOT_VERSION, crc32c(payload))
        path = self.snapshot_path(self.map_end_offset)
        atomic_write(path, header + payload)
        return path

    def delete_snapshots_before(self, offset: int) -> None:
        """Remove snapshots older than `offset` (their segments are gone)."""
        for path in self.snapshot_files():
            if int(path.name[:20]) < offset:
                _unlink(path)

    def delete_snapshots_after(self, offset: int) -> None:
        """Remove snapshots beyond `offset` (the log was truncated)."""
        for path in self.snapshot_files():
            if int(path.name[:20]) > offset:
                _unlink(path)

    def load(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> int:
        """Load the newest valid snapshot within [log_start_offset, log_end_offset].

        Returns the offset from which the log must replay batches; snapshots outside the range
        or failing their checksum are deleted.
        """
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        for path in reversed(self.snapshot_files()):
            offset = int(path.name[:20])
            if offset > log_end_offset or offset < log_start_offset:
                _unlink(path)
                continue
            try:
                producers = _read_snapshot(path)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("producer snapshot corrupt, deleting path=%s error=%s", path, exc)
                _unlink(path)
                continue
            self.producers = {e.producer_id: e for e in producers}
            self.map_end_offset = offset
            self.remove_expired_producers(now_ms)
            self._rebuild_ongoing_txns()
            return offset
        self.map_end_offset = log_start_offset
        return log_start_offset


def _read_snapshot(path: Path) -> list[ProducerStateEntry]:
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEADER.size:
        raise ValueError("snapshot too short")
    magic, version, crc = _SNAPSHOT_HEADER.unpack_from(data)
    payload = data[_SNAPSHOT_HEADER.size :]
    if magic != _SNAPSHOT_MAGIC or version != _SNAPSHOT_VERSION:
        raise ValueError(f"bad snapshot magic/version {magic!r}/{version}")
    if crc32c(payload) != crc:
        raise ValueError("snapshot checksum mismatch")
    body = json.loads(payload)
    return [ProducerStateEntry.from_json(e) for e in body["producers"]]


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
