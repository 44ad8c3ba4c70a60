"""Idempotent producer state: dedupe, sequence gaps, fencing, persistence, expiration."""

from __future__ import annotations

import os

import pytest
from test_log_support import (
    NOW,
    batch,
    close_opened_logs,  # noqa: F401  (autouse fixture)
    open_log,
)

from broker.log.producer_state import ProducerStateManager, in_sequence
from protocol.errors import ErrorCode, KafkaError

INT_MAX = (1 << 31) - 1


def _code(fn) -> ErrorCode:
    with pytest.raises(KafkaError) as err:
        fn()
    return err.value.code


def test_retried_duplicate_returns_original_offsets(tmp_path):
    log = open_log(tmp_path / "p")
    first = log.append_as_leader(batch(3, pid=7, epoch=0, seq=0), 0, now_ms=NOW)
    log.append_as_leader(batch(1), 0, now_ms=NOW)  # another producer's write in between
    log.append_as_leader(batch(2, pid=7, epoch=0, seq=3), 0, now_ms=NOW)
    retry = log.append_as_leader(batch(3, pid=7, epoch=0, seq=0), 0, now_ms=NOW)
    assert retry.duplicate
    assert (
        (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset) == (0, 2)
    )
    assert log.log_end_offset == 6  # nothing appended


def test_only_last_five_batches_are_remembered(tmp_path):
    log = open_log(tmp_path / "p")
    for seq in range(6):
        log.append_as_leader(batch(1, pid=1, epoch=0, seq=seq), 0, now_ms=NOW)
    assert log.append_as_leader(batch(1, pid=1, epoch=0, seq=1), 0, now_ms=NOW).duplicate
    assert _code(lambda: log.append_as_leader(batch(1, pid=1, epoch=0, seq=0), 0, now_ms=NOW)) == (
        ErrorCode.out_of_order_sequence_number
    )


def test_sequence_gap_is_out_of_order(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(2, pid=1, epoch=0, seq=0), 0, now_ms=NOW)
    code = _code(lambda: log.append_as_leader(batch(1, pid=1, epoch=0, seq=3), 0, now_ms=NOW))
    assert code == ErrorCode.out_of_order_sequence_number
    assert log.append_as_leader(batch(1, pid=1, epoch=0, seq=2), 0, now_ms=NOW).first_offset == 2


def test_epoch_fencing_and_bump(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(1, pid=1, epoch=3, seq=0), 0, now_ms=NOW)
    assert _code(lambda: log.append_as_leader(batch(1, pid=1, epoch=2, seq=1), 0, now_ms=NOW)) == (
        ErrorCode.invalid_producer_epoch
    )
    assert _code(lambda: log.append_as_leader(batch(1, pid=1, epoch=4, seq=5), 0, now_ms=NOW)) == (
        ErrorCode.out_of_order_sequence_number
    )
    assert log.append_as_leader(batch(1, pid=1, epoch=4, seq=0), 0, now_ms=NOW).first_offset == 1
    # old epoch's batch is no longer a duplicate after the bump, and is fenced
    assert _code(lambda: log.append_as_leader(batch(1, pid=1, epoch=3, seq=0), 0, now_ms=NOW)) == (
        ErrorCode.invalid_producer_epoch
    )


def test_unknown_producer_accepts_any_sequence(tmp_path):
    log = open_log(tmp_path / "p")
    assert log.append_as_leader(batch(1, pid=9, epoch=2, seq=1234), 0, now_ms=NOW).first_offset == 0
    assert log.append_as_leader(batch(1, pid=9, epoch=2, seq=1235), 0, now_ms=NOW).first_offset == 1


def test_sequence_wraps_at_int_max(tmp_path):
    assert in_sequence(INT_MAX, 0) and in_sequence(5, 6) and not in_sequence(5, 7)
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(2, pid=1, epoch=0, seq=INT_MAX - 1), 0, now_ms=NOW)
    assert log.append_as_leader(batch(1, pid=1, epoch=0, seq=0), 0, now_ms=NOW).first_offset == 2


def test_rejected_multi_batch_append_leaves_no_state(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(1, pid=1, epoch=0, seq=0), 0, now_ms=NOW)
    good_then_gap = batch(1, pid=1, epoch=0, seq=1) + batch(1, pid=1, epoch=0, seq=5)
    assert (
        _code(lambda: log.append_as_leader(good_then_gap, 0, now_ms=NOW))
        == ErrorCode.out_of_order_sequence_number
    )
    assert log.log_end_offset == 1
    assert log.producer_state.last_entry(1).last_seq == 0


def test_state_survives_clean_close_and_reopen(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(2, pid=1, epoch=0, seq=0), 0, now_ms=NOW)
    log.close()
    log = open_log(tmp_path / "p")
    assert log.append_as_leader(batch(2, pid=1, epoch=0, seq=0), 0, now_ms=NOW).duplicate
    assert _code(lambda: log.append_as_leader(batch(1, pid=1, epoch=0, seq=4), 0, now_ms=NOW)) == (
        ErrorCode.out_of_order_sequence_number
    )


def test_state_rebuilt_by_replay_without_snapshot(tmp_path):
    """A kill -9: no close, no snapshot; replaying the log rebuilds the producers."""
    log = open_log(tmp_path / "p", segment_bytes=len(batch(1, pid=1, epoch=0, seq=0)) * 2)
    for seq in range(5):
        log.append_as_leader(batch(1, pid=1, epoch=0, seq=seq), 0, now_ms=NOW)
    # the roll snapshots exist; remove them all to force a full replay
    for snap in (tmp_path / "p").glob("*.snapshot"):
        os.unlink(snap)
    reopened = open_log(tmp_path / "p", segment_bytes=len(batch(1, pid=1, epoch=0, seq=0)) * 2)
    dup = reopened.append_as_leader(batch(1, pid=1, epoch=0, seq=4), 0, now_ms=NOW)
    assert dup.duplicate and dup.first_offset == 4
    assert (
        reopened.append_as_leader(batch(1, pid=1, epoch=0, seq=5), 0, now_ms=NOW).first_offset == 5
    )


def test_state_from_older_snapshot_plus_replay_after_unclean_stop(tmp_path):
    one = len(batch(1, pid=1, epoch=0, seq=0))
    log = open_log(tmp_path / "p", segment_bytes=one * 2)
    for seq in range(5):
        log.append_as_leader(batch(1, pid=1, epoch=0, seq=seq), 0, now_ms=NOW)
    assert sorted(p.name[:20] for p in (tmp_path / "p").glob("*.snapshot")) == [
        f"{2:020d}",
        f"{4:020d}",
    ]
    reopened = open_log(tmp_path / "p", segment_bytes=one * 2)
    assert reopened.append_as_leader(batch(1, pid=1, epoch=0, seq=4), 0, now_ms=NOW).duplicate


def test_corrupt_snapshot_is_ignored_and_state_replayed(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(1, pid=1, epoch=0, seq=0), 0, now_ms=NOW)
    log.close()
    [snap] = list((tmp_path / "p").glob("*.snapshot"))
    data = bytearray(snap.read_bytes())
    data[-2] ^= 0x01
    snap.write_bytes(bytes(data))
    log = open_log(tmp_path / "p")
    assert not snap.exists()
    assert log.append_as_leader(batch(1, pid=1, epoch=0, seq=0), 0, now_ms=NOW).duplicate


def test_truncation_rewinds_producer_state(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(1, pid=1, epoch=0, seq=0), 0, now_ms=NOW)
    log.append_as_leader(batch(1, pid=1, epoch=0, seq=1), 0, now_ms=NOW)
    log.truncate_to(1, now_ms=NOW)
    assert log.producer_state.last_entry(1).last_seq == 0
    assert log.append_as_leader(batch(1, pid=1, epoch=0, seq=1), 0, now_ms=NOW).first_offset == 1


def test_producers_expire_after_idle_time(tmp_path):
    manager = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    log = open_log(tmp_path / "p")
    log.producer_state.producer_id_expiration_ms = 1000
    log.append_as_leader(batch(1, pid=1, epoch=0, seq=0, ts=NOW), 0, now_ms=NOW)
    assert log.remove_expired_producers(NOW + 999) == 0
    assert log.remove_expired_producers(NOW + 1000) == 1
    # forgotten: any sequence is accepted again
    assert log.append_as_leader(batch(1, pid=1, epoch=0, seq=77), 0, now_ms=NOW).first_offset == 1
    assert manager.producers == {}


def test_follower_append_updates_state_without_checks(tmp_path):
    leader = open_log(tmp_path / "leader")
    leader.append_as_leader(batch(1, pid=1, epoch=0, seq=0), 0, now_ms=NOW)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read(0, 1 << 20).records.read_bytes(), now_ms=NOW)
    assert follower.producer_state.last_entry(1).last_seq == 0
    # once this follower leads, the retry is detected as a duplicate
    assert follower.append_as_leader(batch(1, pid=1, epoch=0, seq=0), 1, now_ms=NOW).duplicate
