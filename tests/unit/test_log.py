"""UnifiedLog: append/read, bounds, roll, retention, DeleteRecords, truncation, timestamps."""

from __future__ import annotations

import os
import struct

import pytest
from test_log_support import (
    NOW,
    TP,
    batch,
    close_opened_logs,  # noqa: F401  (autouse fixture)
    headers_of,
    open_log,
    read_all,
)

from broker.log import LogConfig, UnifiedLog
from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    BatchHeader,
    CompressionType,
    NewRecord,
    TimestampType,
    build_batch,
    decode_batch,
    verify_crc,
)
from protocol.types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP


def test_append_assigns_contiguous_offsets_and_epoch(tmp_path):
    log = open_log(tmp_path / "p")
    first = log.append_as_leader(batch(3), 7, now_ms=NOW)
    second = log.append_as_leader(batch(2) + batch(4), 7, now_ms=NOW)
    assert (first.first_offset, first.last_offset, first.num_messages) == (0, 2, 3)
    assert (second.first_offset, second.last_offset, second.num_messages) == (3, 8, 6)
    assert log.log_end_offset == 9
    data = log.read(0, 1 << 20).records.read_bytes()
    hs = headers_of(data)
    assert [h.base_offset for h in hs] == [0, 3, 5]
    assert all(h.partition_leader_epoch == 7 for h in hs)
    pos = 0
    for h in hs:
        assert verify_crc(data, pos, h)  # patching offsets left the CRC valid
        pos += h.size
    assert [o for o, _ in read_all(log)] == list(range(9))


def test_append_of_memoryview_and_compressed_batches(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(memoryview(batch(5, compression=CompressionType.GZIP)), 0, now_ms=NOW)
    log.append_as_leader(bytearray(batch(2, compression=CompressionType.ZSTD)), 0, now_ms=NOW)
    assert [v for _, v in read_all(log)] == [b"v0", b"v1", b"v2", b"v3", b"v4", b"v0", b"v1"]


def test_read_inside_a_batch_returns_whole_batch(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(5), 0, now_ms=NOW)
    log.append_as_leader(batch(5), 0, now_ms=NOW)
    info = log.read(7, 1 << 20)
    hs = headers_of(info.records.read_bytes())
    assert [h.base_offset for h in hs] == [5]
    assert info.first_offset == 7
    assert (
        info.fetch_offset_metadata.relative_position
        == headers_of(log.read(0, 1 << 20).records.read_bytes())[0].size
    )


def test_read_at_log_end_is_empty_and_beyond_is_out_of_range(tmp_path):
    log = open_log(tmp_path / "p")
    assert log.read(0, 100).records is None
    log.append_as_leader(batch(2), 0, now_ms=NOW)
    assert log.read(2, 100).records is None
    with pytest.raises(KafkaError) as err:
        log.read(3, 100)
    assert err.value.code == ErrorCode.offset_out_of_range
    with pytest.raises(KafkaError) as err:
        log.read(-1, 100)
    assert err.value.code == ErrorCode.offset_out_of_range


def test_max_offset_is_exclusive_at_batch_boundaries(tmp_path):
    log = open_log(tmp_path / "p")
    for _ in range(4):
        log.append_as_leader(batch(3), 0, now_ms=NOW)  # batches 0-2, 3-5, 6-8, 9-11
    assert [o for o, _ in read_all(log, 0, 6)] == [0, 1, 2, 3, 4, 5]
    info = log.read(0, 1 << 20, 6)
    assert [h.base_offset for h in headers_of(info.records.read_bytes())] == [0, 3]
    assert len(info.records) == sum(h.size for h in headers_of(info.records.read_bytes()))
    # a bound inside a batch excludes that batch
    assert [h.base_offset for h in headers_of(log.read(0, 1 << 20, 7).records.read_bytes())] == [
        0,
        3,
    ]
    # reading at or past the bound (but within the log) is empty, not an error
    assert log.read(6, 1 << 20, 6).records is None
    assert log.read(9, 1 << 20, 6).records is None
    assert log.read(7, 1 << 20, 7).records is None


def test_min_one_message_returns_first_batch_even_if_larger(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(10, value=b"x" * 100), 0, now_ms=NOW)
    log.append_as_leader(batch(1), 0, now_ms=NOW)
    first_size = headers_of(log.read(0, 1 << 20).records.read_bytes())[0].size
    info = log.read(0, 10, min_one_message=True)
    assert len(info.records) == first_size
    assert [h.base_offset for h in headers_of(info.records.read_bytes())] == [0]
    refused = log.read(0, 10, min_one_message=False)
    assert refused.records is None and refused.first_entry_incomplete


def test_max_bytes_may_cut_a_trailing_batch_like_kafka(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(1), 0, now_ms=NOW)
    log.append_as_leader(batch(1), 0, now_ms=NOW)
    size = headers_of(log.read(0, 1 << 20).records.read_bytes())[0].size
    info = log.read(0, size + 10)
    assert len(info.records) == size + 10
    assert len(headers_of(info.records.read_bytes())) == 1


def test_file_records_support_sendfile_and_reads_do_not_move_writer(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(2), 0, now_ms=NOW)
    region = log.read(0, 1 << 20).records
    out = tmp_path / "out"
    with open(out, "wb") as f:
        sent = os.sendfile(f.fileno(), region.fileno(), region.position, len(region))
    assert sent == len(region)
    assert out.read_bytes() == region.read_bytes()
    log.append_as_leader(batch(1), 0, now_ms=NOW)
    assert [o for o, _ in read_all(log)] == [0, 1, 2]


def test_roll_by_segment_bytes_and_reads_across_segments(tmp_path):
    one = len(batch(1))
    log = open_log(tmp_path / "p", segment_bytes=one * 3)
    for _ in range(10):
        log.append_as_leader(batch(1), 0, now_ms=NOW)
    bases = [s.base_offset for s in log.segments]
    assert bases == [0, 3, 6, 9]
    assert all(s.size <= one * 3 for s in log.segments)
    assert sorted(p.name for p in (tmp_path / "p").glob("*.log")) == [
        f"{b:020d}.log" for b in bases
    ]
    assert [o for o, _ in read_all(log)] == list(range(10))
    # reading from a segment boundary returns data of one segment only
    info = log.read(3, 1 << 20)
    assert [h.base_offset for h in headers_of(info.records.read_bytes())] == [3, 4, 5]
    # a producer snapshot is taken at every roll
    assert (tmp_path / "p" / f"{3:020d}.snapshot").exists()


def test_record_list_larger_than_segment_is_rejected(tmp_path):
    data = batch(1) * 3
    log = open_log(tmp_path / "p", segment_bytes=len(data) - 1)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(data, 0, now_ms=NOW)
    assert err.value.code == ErrorCode.record_list_too_large


def test_roll_by_segment_ms_uses_record_timestamps(tmp_path):
    log = open_log(tmp_path / "p", segment_ms=1000)
    log.append_as_leader(batch(1, ts=NOW), 0, now_ms=NOW)
    log.append_as_leader(batch(1, ts=NOW + 1000), 0, now_ms=NOW + 1000)
    assert len(log.segments) == 1  # not more than segment.ms yet
    log.append_as_leader(batch(1, ts=NOW + 1001), 0, now_ms=NOW + 1001)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_compacted_topic_rolls_by_max_compaction_lag_when_shorter(tmp_path):
    """KIP-354: the active segment of a compacted log closes within max.compaction.lag.ms."""
    log = open_log(
        tmp_path / "p",
        segment_ms=1_000_000,
        cleanup_policy="compact",
        max_compaction_lag_ms=1000,
    )
    log.append_as_leader(batch(1, ts=NOW, key=b"k"), 0, now_ms=NOW)
    log.append_as_leader(batch(1, ts=NOW + 1001, key=b"k"), 0, now_ms=NOW + 1001)
    assert [s.base_offset for s in log.segments] == [0, 1]

    plain = open_log(tmp_path / "q", segment_ms=1_000_000, max_compaction_lag_ms=1000)
    plain.append_as_leader(batch(1, ts=NOW), 0, now_ms=NOW)
    plain.append_as_leader(batch(1, ts=NOW + 1001), 0, now_ms=NOW + 1001)
    assert len(plain.segments) == 1  # not compacted: segment.ms alone decides


def test_roll_when_offset_index_is_full(tmp_path):
    log = open_log(tmp_path / "p", segment_index_bytes=16, index_interval_bytes=1)
    for _ in range(8):
        log.append_as_leader(batch(1), 0, now_ms=NOW)
    assert len(log.segments) > 1
    assert all(len(s.index) <= 2 for s in log.segments)
    assert [o for o, _ in read_all(log)] == list(range(8))


def test_explicit_roll_of_empty_active_segment_is_a_no_op(tmp_path):
    log = open_log(tmp_path / "p")
    assert log.roll(now_ms=NOW) is log.active_segment
    log.append_as_leader(batch(1), 0, now_ms=NOW)
    log.roll(now_ms=NOW)
    log.roll(now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_retention_by_time_deletes_old_segments_and_rolls_active(tmp_path):
    one = len(batch(1))
    log = open_log(
        tmp_path / "p", segment_bytes=one * 2, retention_ms=10_000, file_delete_delay_ms=0
    )
    for i in range(6):
        log.append_as_leader(batch(1, ts=NOW + i * 1000), 0, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    # segment [0,2) has largest timestamp NOW+1000; [2,4) NOW+3000
    assert log.delete_retention_segments(NOW + 11_000) == 0
    assert log.delete_retention_segments(NOW + 11_001) == 1
    assert log.log_start_offset == 2
    assert not (tmp_path / "p" / f"{0:020d}.log").exists()
    with pytest.raises(KafkaError):
        log.read(1, 100)
    # everything expired: the active segment is rolled first, then deleted on the next pass
    assert log.delete_retention_segments(NOW + 100_000) == 1
    assert [s.base_offset for s in log.segments] == [4, 6]
    assert log.delete_retention_segments(NOW + 100_000) == 1
    assert [s.base_offset for s in log.segments] == [6]
    assert log.log_start_offset == log.log_end_offset == 6


def test_retention_by_size_keeps_the_newest_bytes(tmp_path):
    one = len(batch(1))
    log = open_log(
        tmp_path / "p", segment_bytes=one * 2, retention_bytes=one * 3, file_delete_delay_ms=0
    )
    for _ in range(7):
        log.append_as_leader(batch(1), 0, now_ms=NOW)
    assert log.size == one * 7
    assert log.delete_retention_segments(NOW) == 2
    assert log.size == one * 3
    assert log.log_start_offset == 4
    assert [o for o, _ in read_all(log)] == [4, 5, 6]


def test_retention_never_deletes_at_or_above_high_watermark(tmp_path):
    one = len(batch(1))
    log = open_log(tmp_path / "p", segment_bytes=one * 2, retention_ms=0, file_delete_delay_ms=0)
    for _ in range(6):
        log.append_as_leader(batch(1), 0, now_ms=NOW)
    assert log.delete_retention_segments(NOW + 10, high_watermark=3) == 1
    assert log.log_start_offset == 2


def test_deleted_segment_files_survive_until_delay_for_readers(tmp_path):
    scheduled = []
    one = len(batch(1))
    log = UnifiedLog.open(
        tmp_path / "p",
        LogConfig(segment_bytes=one * 2, retention_bytes=0),
        TP,
        now_ms=NOW,
        scheduler=lambda delay, fn: scheduled.append((delay, fn)),
    )
    for _ in range(4):
        log.append_as_leader(batch(1), 0, now_ms=NOW)
    region = log.read(0, 1 << 20).records
    scheduled.clear()
    assert log.delete_retention_segments(NOW) == 1
    assert (tmp_path / "p" / f"{0:020d}.log.deleted").exists()
    assert len(region.read_bytes()) == len(region)  # an in-flight reader still works
    [(_, fn)] = [s for s in scheduled if s[0] == 60_000]
    fn()
    assert not (tmp_path / "p" / f"{0:020d}.log.deleted").exists()
    log.close()


def test_delete_records_moves_log_start_offset(tmp_path):
    one = len(batch(1))
    log = open_log(tmp_path / "p", segment_bytes=one * 2, file_delete_delay_ms=0)
    for _ in range(6):
        log.append_as_leader(batch(1), 0, now_ms=NOW)
    assert log.maybe_increment_log_start_offset(3)
    assert not log.maybe_increment_log_start_offset(2)
    assert log.log_start_offset == 3
    with pytest.raises(KafkaError) as err:
        log.read(2, 100)
    assert err.value.code == ErrorCode.offset_out_of_range
    assert [o for o, _ in read_all(log)] == [3, 4, 5]
    with pytest.raises(KafkaError):
        log.maybe_increment_log_start_offset(7)
    # the segment wholly below the new start is removed by the next retention pass
    assert log.delete_retention_segments(NOW) == 1
    assert [s.base_offset for s in log.segments] == [2, 4]
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 3


def test_truncate_to_removes_suffix_and_later_segments(tmp_path):
    one = len(batch(2))
    log = open_log(tmp_path / "p", segment_bytes=one * 2, file_delete_delay_ms=0)
    for epoch in (0, 0, 1, 1, 2):
        log.append_as_leader(batch(2), epoch, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    assert log.leader_epoch_cache.entries() == [(0, 0), (1, 4), (2, 8)]
    assert log.truncate_to(5)  # inside batch 4-5: cut at its start
    assert log.log_end_offset == 4
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert log.leader_epoch_cache.entries() == [(0, 0)]
    assert not (tmp_path / "p" / f"{8:020d}.log").exists()
    assert not log.truncate_to(10)
    info = log.append_as_leader(batch(1), 3, now_ms=NOW)
    assert info.first_offset == 4
    assert [o for o, _ in read_all(log)] == [0, 1, 2, 3, 4]


def test_truncate_fully_and_start_at(tmp_path):
    log = open_log(tmp_path / "p", file_delete_delay_ms=0)
    log.append_as_leader(batch(3), 1, now_ms=NOW)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.leader_epoch_cache.entries() == []
    assert log.append_as_leader(batch(1), 2, now_ms=NOW).first_offset == 100
    assert [s.base_offset for s in log.segments] == [100]
    log.close()
    reopened = open_log(tmp_path / "p")
    assert (reopened.log_start_offset, reopened.log_end_offset) == (100, 101)


def test_truncate_below_log_start(tmp_path):
    one = len(batch(5))
    log = open_log(tmp_path / "p", file_delete_delay_ms=0, segment_bytes=one)
    log.append_as_leader(batch(5), 0, now_ms=NOW)
    log.maybe_increment_log_start_offset(3)
    assert log.truncate_to(2)  # cut at the start of batch 0-4: the log start follows the end down
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    for _ in range(3):
        log.append_as_leader(batch(5), 0, now_ms=NOW)
    log.maybe_increment_log_start_offset(10)
    log.delete_retention_segments(NOW)
    assert log.segments[0].base_offset == 10
    assert log.truncate_to(7)  # before the first segment: restart empty at the target
    assert (log.log_start_offset, log.log_end_offset) == (7, 7)
    assert [s.base_offset for s in log.segments] == [7]


def test_end_offset_for_epoch_through_the_log(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(2), 1, now_ms=NOW)
    log.append_as_leader(batch(3), 3, now_ms=NOW)
    assert log.latest_epoch == 3
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(4) == (-1, -1)


def test_fetch_offset_by_timestamp(tmp_path):
    log = open_log(tmp_path / "p", index_interval_bytes=1, segment_bytes=len(batch(3)) * 2)
    log.append_as_leader(batch(3, ts=1000), 4, now_ms=1000)  # offsets 0-2, ts 1000-1002
    log.append_as_leader(batch(3, ts=2000), 5, now_ms=1000)  # offsets 3-5, ts 2000-2002
    log.append_as_leader(batch(3, ts=1500), 5, now_ms=1000)  # offsets 6-8, ts 1500-1502
    log.append_as_leader(batch(2, ts=3000), 6, now_ms=1000)  # offsets 9-10
    found = log.fetch_offset_by_timestamp(1001)
    assert (found.offset, found.timestamp, found.leader_epoch) == (1, 1001, 4)
    assert log.fetch_offset_by_timestamp(1003).offset == 3
    assert log.fetch_offset_by_timestamp(2001).offset == 4
    assert log.fetch_offset_by_timestamp(2500).offset == 9
    assert log.fetch_offset_by_timestamp(0).offset == 0
    assert log.fetch_offset_by_timestamp(3002) is None
    latest = log.fetch_offset_by_timestamp(LATEST_TIMESTAMP)
    assert (latest.offset, latest.leader_epoch) == (11, 6)
    earliest = log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
    assert (earliest.offset, earliest.leader_epoch) == (0, 4)
    biggest = log.fetch_offset_by_timestamp(MAX_TIMESTAMP)
    assert (biggest.offset, biggest.timestamp, biggest.leader_epoch) == (10, 3001, 6)
    log.close()
    reopened = open_log(tmp_path / "p", index_interval_bytes=1, segment_bytes=len(batch(3)) * 2)
    assert reopened.fetch_offset_by_timestamp(2001).offset == 4
    assert reopened.fetch_offset_by_timestamp(MAX_TIMESTAMP).offset == 10


def test_max_timestamp_on_empty_log_is_none(tmp_path):
    log = open_log(tmp_path / "p")
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) is None
    assert log.fetch_offset_by_timestamp(5) is None
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP).offset == 0


def test_log_append_time_rewrites_timestamp_and_crc(tmp_path):
    log = open_log(tmp_path / "p", message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(batch(3, ts=5), 0, now_ms=NOW + 42)
    assert info.log_append_time == NOW + 42
    assert info.max_timestamp == NOW + 42
    data = log.read(0, 1 << 20).records.read_bytes()
    header = BatchHeader.parse(data)
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert verify_crc(data, 0, header)
    assert {r.timestamp for r in decode_batch(data)} == {NOW + 42}


def test_validation_errors(tmp_path):
    log = open_log(tmp_path / "p", max_message_bytes=200)

    def code_of(data: bytes) -> ErrorCode:
        with pytest.raises(KafkaError) as err:
            log.append_as_leader(data, 0, now_ms=NOW)
        return err.value.code

    assert code_of(batch(1, value=b"x" * 300)) == ErrorCode.message_too_large
    flipped = bytearray(batch(2))
    flipped[-1] ^= 0xFF
    assert code_of(bytes(flipped)) == ErrorCode.corrupt_message
    assert code_of(batch(2)[:-3]) == ErrorCode.corrupt_message
    legacy = bytearray(batch(1))
    legacy[16] = 1
    assert code_of(bytes(legacy)) == ErrorCode.corrupt_message
    assert code_of(batch(1, ts=NOW + 3_600_001)) == ErrorCode.invalid_timestamp
    control = build_batch(
        [NewRecord(b"k", b"v", timestamp=NOW)], is_control=True, producer_id=1, producer_epoch=0
    )
    assert code_of(control) == ErrorCode.invalid_record
    no_seq = batch(1, pid=5, epoch=0, seq=-1)
    assert code_of(no_seq) == ErrorCode.invalid_record
    inconsistent = bytearray(batch(2))
    struct.pack_into(">i", inconsistent, 23, 5)  # lastOffsetDelta 5 with 2 records
    assert code_of(bytes(inconsistent)) in (ErrorCode.invalid_record, ErrorCode.corrupt_message)
    assert log.log_end_offset == 0  # nothing was written by any rejected append


def test_compacted_topic_rejects_null_keys(tmp_path):
    log = open_log(tmp_path / "p", cleanup_policy="compact")
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(batch(2, key=None), 0, now_ms=NOW)
    assert err.value.code == ErrorCode.invalid_record
    assert log.append_as_leader(batch(2, key=b"k"), 0, now_ms=NOW).last_offset == 1


def test_timestamp_before_max_ms(tmp_path):
    log = open_log(tmp_path / "p", message_timestamp_before_max_ms=1000)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(batch(1, ts=NOW - 1001), 0, now_ms=NOW)
    assert err.value.code == ErrorCode.invalid_timestamp
    assert log.append_as_leader(batch(1, ts=NOW - 1000), 0, now_ms=NOW).first_offset == 0


def test_append_as_follower_keeps_offsets_and_ignores_partial_tail(tmp_path):
    leader = open_log(tmp_path / "leader")
    leader.append_as_leader(batch(2), 3, now_ms=NOW)
    leader.append_as_leader(batch(2), 4, now_ms=NOW)
    data = leader.read(0, 1 << 20).records.read_bytes()
    follower = open_log(tmp_path / "follower")
    info = follower.append_as_follower(data[:-5], now_ms=NOW)
    assert (info.first_offset, info.last_offset) == (0, 1)
    assert follower.log_end_offset == 2
    info = follower.append_as_follower(
        follower_tail := leader.read(2, 1 << 20).records.read_bytes(), now_ms=NOW
    )
    assert (info.first_offset, info.last_offset) == (2, 3)
    assert follower.leader_epoch_cache.entries() == [(3, 0), (4, 2)]
    assert follower.read(0, 1 << 20).records.read_bytes() == data
    with pytest.raises(KafkaError):
        follower.append_as_follower(follower_tail, now_ms=NOW)  # offsets behind the log end


def test_flush_advances_recovery_point_and_flush_messages(tmp_path):
    log = open_log(tmp_path / "p", flush_messages=5)
    log.append_as_leader(batch(3), 0, now_ms=NOW)
    assert log.recovery_point == 0
    log.append_as_leader(batch(3), 0, now_ms=NOW)
    assert log.recovery_point == 6
    log.append_as_leader(batch(1), 0, now_ms=NOW)
    log.flush(up_to=6)
    assert log.recovery_point == 6
    log.flush()
    assert log.recovery_point == 7


def test_closed_log_refuses_work(tmp_path):
    log = open_log(tmp_path / "p")
    log.close()
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(batch(1), 0, now_ms=NOW)
    assert err.value.code == ErrorCode.kafka_storage_error


def test_empty_append_writes_nothing(tmp_path):
    log = open_log(tmp_path / "p")
    info = log.append_as_leader(b"", 0, now_ms=NOW)
    assert info.num_messages == 0 and log.log_end_offset == 0
