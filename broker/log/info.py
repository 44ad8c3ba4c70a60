"""Values the log hands back: append results, fetch results and file regions."""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from typing import BinaryIO

from protocol.types import NO_OFFSET, Offset


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's AppendOrigin): a client's records are checked in full and may not
    hold control batches; a coordinator's (transaction markers, group records) may."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """The outcome of one append (Kafka's LogAppendInfo).

    For a retried duplicate (`duplicate=True`) the offsets and timestamp are those the original
    append assigned and nothing was written. `log_append_time` is -1 unless the topic uses
    LogAppendTime.
    """

    first_offset: Offset
    last_offset: Offset
    max_timestamp: int
    offset_of_max_timestamp: Offset
    log_append_time: int
    log_start_offset: Offset
    num_messages: int
    valid_bytes: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class FileRecords:
    """A region of a segment file; `os.sendfile(sock, region.fileno(), region.position, len(region))`.

    `file` is the segment's read-only file object; it stays open until the segment is closed or its
    deletion delay has passed, even after the segment file was renamed to `.deleted`.
    """

    file: BinaryIO
    position: int
    size: int

    def __len__(self) -> int:
        return self.size

    def fileno(self) -> int:
        """The file descriptor for os.sendfile."""
        return self.file.fileno()

    def read_bytes(self) -> bytes:
        """Copy the region into memory (tests, TLS connections, down-conversion)."""
        chunks = []
        pos, remaining = self.position, self.size
        while remaining > 0:
            chunk = os.pread(self.fileno(), remaining, pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """An offset together with where it lies on disk (segment base offset and byte position)."""

    message_offset: Offset
    segment_base_offset: Offset = NO_OFFSET
    relative_position: int = -1

    @property
    def message_offset_only(self) -> bool:
        """Only the offset is known, not where it lies."""
        return self.segment_base_offset == NO_OFFSET

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        """Kafka's onOlderSegment: this offset lies in a segment before `that` one's."""
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        return self.segment_base_offset == that.segment_base_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes from `that` to this position, both on the same segment (Kafka's positionDiff)."""
        return self.relative_position - that.relative_position


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """The answer to `UnifiedLog.read`.

    `records` is None when there is nothing to return. The region may end with a partial batch
    when it was cut at `max_bytes` (exactly like Kafka; clients drop a truncated trailing batch).
    `first_entry_incomplete` is True when min_one_message was off and the first batch alone was
    larger than max_bytes (nothing returned).
    """

    first_offset: Offset
    records: FileRecords | None
    fetch_offset_metadata: LogOffsetMetadata
    first_entry_incomplete: bool = False

    @property
    def size(self) -> int:
        """Bytes in the returned region (0 when empty)."""
        return len(self.records) if self.records is not None else 0


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """A ListOffsets answer: a record's timestamp, offset and the leader epoch it was written in."""

    timestamp: int
    offset: Offset
    leader_epoch: int = -1
