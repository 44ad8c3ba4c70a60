"""Hypothesis state machine over a real on-disk log: append, read, truncate, roll, retention,
reopen (clean and after a crash), torn writes.

Invariants after every step: offsets are contiguous from the log start to the log end, every
record appended and not truncated or retained reads back with its value, and each index entry
points at the batch it claims to (also right after a reopen rebuilt or reloaded the indexes).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from test_log_support import NOW, TP, batch, read_all

from broker.log import LogConfig, UnifiedLog
from protocol.errors import KafkaError
from protocol.records import BatchHeader


class LogMachine(RuleBasedStateMachine):
    """Model: `records` maps offset -> value for [log start, log end); `batches` lists
    (base offset, record count) of every batch appended and not truncated, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="samsa-log-prop-"))
        self.config = LogConfig(segment_bytes=400, index_interval_bytes=90, file_delete_delay_ms=0)
        self.log = UnifiedLog.open(self.tmp / "p", self.config, TP, now_ms=NOW)
        self.records: dict[int, bytes] = {}
        self.batches: list[tuple[int, int]] = []
        self.start = 0
        self.end = 0
        self.epoch = 0
        self.counter = 0

    def teardown(self) -> None:
        self.log.close_handles()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(count=st.integers(1, 5), bump=st.booleans())
    def append(self, count: int, bump: bool) -> None:
        if bump:
            self.epoch += 1
        self.counter += 1
        value = f"r{self.counter}-".encode()
        info = self.log.append_as_leader(
            batch(count, value=value, ts=NOW + self.counter), self.epoch, now_ms=NOW
        )
        assert info.first_offset == self.end
        assert info.last_offset == self.end + count - 1
        self.batches.append((self.end, count))
        for i in range(count):
            self.records[self.end + i] = value + str(i).encode()
        self.end += count

    @rule(data=st.data())
    def read_somewhere(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        info = self.log.read(offset, data.draw(st.integers(0, 300)))
        if offset == self.end:
            assert info.records is None
            return
        raw = info.records.read_bytes()
        header = BatchHeader.parse(raw)
        assert header.base_offset <= offset <= header.last_offset

    @rule()
    def read_out_of_range(self) -> None:
        for bad in (self.end + 1, self.start - 1):
            try:
                self.log.read(bad, 100)
            except KafkaError:
                continue
            raise AssertionError(f"read at {bad} outside [{self.start}, {self.end}] succeeded")

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.start, self.end))
        assert self.log.truncate_to(target, now_ms=NOW) == (target < self.end)
        if target >= self.end:
            return
        # the cut is at the start of the first batch reaching past target
        index = next(i for i, (base, count) in enumerate(self.batches) if base + count > target)
        self.end = self.batches[index][0]
        del self.batches[index:]
        self.start = min(self.start, self.end)
        self.records = {o: v for o, v in self.records.items() if o < self.end}

    @rule()
    def roll(self) -> None:
        self.log.roll(now_ms=NOW)

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        new_start = data.draw(st.integers(self.start, self.end))
        self.log.maybe_increment_log_start_offset(new_start)
        self.log.delete_retention_segments(NOW)
        self.start = new_start
        self.records = {o: v for o, v in self.records.items() if o >= new_start}

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
            self.log = UnifiedLog.open(
                self.tmp / "p",
                self.config,
                TP,
                now_ms=NOW,
                had_clean_shutdown=True,
                log_start_offset=self.start,
                recovery_point=self.end,
            )
        else:  # kill -9: no flush, no snapshot, no final index entries
            recovery_point = self.log.recovery_point
            self.log.close_handles()
            self.log = UnifiedLog.open(
                self.tmp / "p",
                self.config,
                TP,
                now_ms=NOW,
                log_start_offset=self.start,
                recovery_point=recovery_point,
            )

    @precondition(lambda self: self.batches and self.batches[-1][0] >= self.start)
    @rule(cut=st.integers(1, 40))
    def torn_write_then_crash(self, cut: int) -> None:
        active = self.log.active_segment
        last_base, _ = self.batches[-1]
        if active.size == 0 or last_base < active.base_offset:
            return
        recovery_point = min(self.log.recovery_point, last_base)
        self.log.close_handles()
        os.truncate(active.log_path, active.size - cut)
        self.log = UnifiedLog.open(
            self.tmp / "p",
            self.config,
            TP,
            now_ms=NOW,
            log_start_offset=self.start,
            recovery_point=recovery_point,
        )
        self.batches.pop()
        self.end = last_base
        self.records = {o: v for o, v in self.records.items() if o < self.end}

    @invariant()
    def offsets_and_contents(self) -> None:
        assert self.log.log_start_offset == self.start
        assert self.log.log_end_offset == self.end
        assert read_all(self.log) == sorted(self.records.items())

    @invariant()
    def indexes_point_at_their_batches(self) -> None:
        for segment in self.log.segments:
            for offset, position in segment.index.entries():
                header = BatchHeader.parse(os.pread(segment.reader.fileno(), 61, position))
                assert header.last_offset == offset
            for timestamp, offset in segment.time_index.entries():
                found = segment.translate_offset(offset)
                assert found is not None and found[1].max_timestamp == timestamp


LogMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_log_state_machine = LogMachine.TestCase


def test_config_override_via_replace() -> None:
    config = dataclasses.replace(LogConfig(), retention_ms=5)
    assert config.retention_ms == 5 and config.segment_bytes == 1_073_741_824
    assert LogConfig().message_timestamp_after_max_ms == 3_600_000
