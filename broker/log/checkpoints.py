"""Kafka's text checkpoint files, written atomically.

Format (Kafka's `CheckpointFile`):

    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- `topic partition offset` (offset checkpoints)
    my-topic 1 99

The leader-epoch checkpoint uses the same framing with `epoch start_offset` lines. A write goes to
`<name>.tmp`, is fsynced, renamed over the old file and the directory is fsynced, so a crash leaves
either the old or the new file, never a torn one; a write that fails (a full disk) removes its
`.tmp` and raises OSError, leaving the old file.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from protocol.topic_partition import TopicPartition

log = logging.getLogger("samsa.log")

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class CheckpointError(Exception):
    """A checkpoint file exists but cannot be parsed."""


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` via tmp file, fsync, rename and directory fsync."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:  # a full disk must not leave a partial .tmp behind
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_path(path.parent)


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (so that a rename or a new file in it is durable) through a
    descriptor of its own; a failure is ignored (the caller's own flush or check reports it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_lines(path: Path, lines: list[str]) -> None:
    body = "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(lines)), *lines])
    atomic_write(path, body.encode())


def _read_lines(path: Path, fields: int) -> list[list[str]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointError(f"{path}: unsupported version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError as exc:
        raise CheckpointError(f"{path}: bad count line {lines[1]!r}") from exc
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    for entry in entries:
        if len(entry) != fields:
            raise CheckpointError(f"{path}: malformed line {' '.join(entry)!r}")
    return entries


class OffsetCheckpointFile:
    """A per-log-dir `topic partition offset` checkpoint (recovery points, HWs, log start offsets)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        """Atomically replace the file with `offsets`."""
        lines = [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
        _write_lines(self.path, lines)

    def read(self) -> dict[TopicPartition, int]:
        """The stored offsets; empty if the file does not exist. Raises CheckpointError if corrupt."""
        result: dict[TopicPartition, int] = {}
        for topic, partition, offset in _read_lines(self.path, 3):
            try:
                result[TopicPartition(topic, int(partition))] = int(offset)
            except ValueError as exc:
                raise CheckpointError(
                    f"{self.path}: bad entry {topic} {partition} {offset}"
                ) from exc
        return result

    def read_or_empty(self) -> dict[TopicPartition, int]:
        """Like read(), but a corrupt file is logged and treated as absent (Kafka does the same)."""
        try:
            return self.read()
        except CheckpointError as exc:
            log.warning("checkpoint unreadable, ignoring path=%s error=%s", self.path, exc)
            return {}


class LeaderEpochCheckpointFile:
    """`leader-epoch-checkpoint` in a partition dir: `epoch start_offset` lines."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        """Atomically replace the file with the given (epoch, start offset) entries."""
        _write_lines(self.path, [f"{epoch} {offset}" for epoch, offset in entries])

    def read(self) -> list[tuple[int, int]]:
        """The stored entries in file order; empty if absent. Raises CheckpointError if corrupt."""
        try:
            return [(int(e), int(o)) for e, o in _read_lines(self.path, 2)]
        except ValueError as exc:
            raise CheckpointError(f"{self.path}: non-numeric entry") from exc
