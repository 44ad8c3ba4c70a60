"""`LeaderEpochFileCache`: which leader epoch started at which offset, persisted per partition.

Entries are (epoch, start_offset) with both strictly increasing. The leader assigns an entry when
it appends the first batch of a new epoch; followers do the same from the partitionLeaderEpoch of
the batches they copy. The file is Kafka's `leader-epoch-checkpoint` (see checkpoints.py) and is
rewritten whenever the entries change. OffsetsForLeaderEpoch answers from `end_offset_for`.

A rewrite that fails (a full disk) keeps the entries in memory, logs once and leaves the cache
`dirty`; `persist()` (called by every log flush before the recovery point may move) writes it or
raises, so the recovery point never passes an epoch the file does not know.
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path

from broker.log.checkpoints import CheckpointError, LeaderEpochCheckpointFile

log = logging.getLogger("samsa.log")

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """Kafka's LeaderEpochFileCache over a `leader-epoch-checkpoint` file."""

    def __init__(self, path: Path, *, persist: bool = True) -> None:
        self._file = LeaderEpochCheckpointFile(path)
        self._persist = persist
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        self.dirty = False
        """The entries changed and the file could not be rewritten yet."""
        try:
            entries = self._file.read()
        except CheckpointError as exc:
            log.warning(
                "leader epoch checkpoint unreadable, starting empty path=%s error=%s", path, exc
            )
            entries = []
        for epoch, offset in entries:
            self._assign(epoch, offset)

    # ------------------------------------------------------------------ queries
    def entries(self) -> list[tuple[int, int]]:
        """All (epoch, start offset) entries, oldest first."""
        return list(zip(self._epochs, self._offsets))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._offsets[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in which `offset` was written: the entry with the largest start <= offset."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch, exactly like Kafka's `endOffsetFor`.

        - requested == UNDEFINED_EPOCH, or larger than every known epoch: (-1, -1)
        - requested == latest epoch: (requested, log_end_offset)
        - requested below every known epoch: (requested, start offset of the first known epoch)
        - otherwise: (largest known epoch <= requested, start offset of the next epoch)
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._epochs and self._epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher >= len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    # ---------------------------------------------------------------- mutations
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns True if the entries changed.

        Entries with an epoch >= `epoch` or a start offset >= `start_offset` are replaced (Kafka).
        """
        if epoch < 0:
            return False
        if self._assign(epoch, start_offset):
            self._flush()
            return True
        return False

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._offsets[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated to it)."""
        if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._offsets, end_offset)
        del self._epochs[keep:]
        del self._offsets[keep:]
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before `start_offset`; the one covering it now starts there."""
        covering = bisect.bisect_right(self._offsets, start_offset) - 1
        if covering < 0 or (covering == 0 and self._offsets[0] == start_offset):
            return
        epoch = self._epochs[covering]
        del self._epochs[: covering + 1]
        del self._offsets[: covering + 1]
        self._epochs.insert(0, epoch)
        self._offsets.insert(0, start_offset)
        self._flush()

    def clear(self) -> None:
        """Remove every entry (truncate_fully_and_start_at)."""
        self._epochs.clear()
        self._offsets.clear()
        self._flush()

    def _flush(self) -> None:
        if not self._persist:
            return
        try:
            self._file.write(self.entries())
        except OSError as exc:
            if not self.dirty:
                log.warning(
                    "leader epoch checkpoint write failed, kept in memory path=%s error=%s",
                    self._file.path, exc,
                )  # fmt: skip
            self.dirty = True
        else:
            self.dirty = False

    def persist(self) -> None:
        """Write the file if an earlier rewrite failed; raises OSError if it still cannot."""
        if self.dirty and self._persist:
            self._file.write(self.entries())
            self.dirty = False
