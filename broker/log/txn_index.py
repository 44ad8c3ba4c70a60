"""The aborted-transaction index of one segment (Kafka's TransactionIndex, `<base>.txnindex`).

One entry per aborted transaction whose ABORT marker lies in the segment, in marker order, each
34 bytes as Kafka writes them: int16 version (0), int64 producer id, int64 first offset, int64
last offset (the marker's), int64 last stable offset (the first offset of the oldest other
transaction still open when the marker was written, else the marker's offset + 1). A
read_committed fetch collects the entries overlapping its range (`collect_aborted_txns`) and
sends them as `aborted_transactions`, so the consumer drops those producers' records.

The file is created with its first entry; entries live in memory once read (lazily) and are
appended to the file at once (they are rare: one per aborted transaction). Truncation rewrites
the file. A file whose length is not a whole number of entries is cut to the last whole one.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("samsa.log")

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry: an aborted transaction of `producer_id` spanning [first_offset, last_offset]."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(
            _VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    aborted: list[AbortedTxn]
    is_complete: bool
    """True when an entry's last stable offset reached the upper bound: later segments cannot
    hold an aborted transaction overlapping the range."""


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None
        self._unsynced = False

    # ------------------------------------------------------------------ reads
    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        whole = len(data) - len(data) % ENTRY_SIZE
        if whole != len(data):
            log.warning(
                "transaction index has a partial entry, cutting it path=%s size=%d", self.path, len(data)
            )
            os.truncate(self.path, whole)
        out = []
        for pos in range(0, whole, ENTRY_SIZE):
            _, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Kafka's TransactionIndex.collectAbortedTxns: entries overlapping
        [fetch_offset, upper_bound_offset)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    # -------------------------------------------------------------- mutations
    def append(self, txn: AbortedTxn) -> None:
        """Add an entry (markers come in offset order); raises OSError if the write fails, with
        nothing added."""
        entries = self.entries
        if entries and txn.last_offset < entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} is before the last entry's "
                f"{entries[-1].last_offset} in {self.path}"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            written = os.pwrite(fd, txn.to_bytes(), len(entries) * ENTRY_SIZE)
            if written != ENTRY_SIZE:
                os.ftruncate(fd, len(entries) * ENTRY_SIZE)
                raise OSError(28, "short write to the transaction index")
        finally:
            os.close(fd)
        entries.append(txn)
        self._unsynced = True

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after `offset` (the log was cut there)."""
        entries = self.entries
        kept = [t for t in entries if t.last_offset < offset]
        if len(kept) != len(entries):
            self._entries = kept
            self._rewrite()

    def reset(self) -> None:
        """Forget every entry (recovery rebuilds them)."""
        self._entries = []
        self._rewrite()

    def replace_with(self, entries: list[AbortedTxn]) -> None:
        self._entries = list(entries)
        self._rewrite()

    def _rewrite(self) -> None:
        entries = self._entries or []
        if not entries:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            return
        with open(self.path, "wb") as f:
            f.write(b"".join(t.to_bytes() for t in entries))
        self._unsynced = True

    def flush(self) -> None:
        if not self._unsynced:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._unsynced = False
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._unsynced = False

    def rename_to(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
