"""Transactions in the log: markers, open transactions, the LSO, the aborted-transaction index,
its rebuild by recovery and its survival across restarts (Kafka's ProducerStateManager,
TransactionIndex and UnifiedLog rules)."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import pytest
from test_log_support import (
    NOW,
    TP,
    batch,
    close_opened_logs,  # noqa: F401  (autouse fixture)
    open_log,
)

from broker.log import LogConfig, UnifiedLog
from broker.log.info import AppendOrigin
from broker.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
from broker.replication.partition import FetchIsolation, Partition
from controller.model import PartitionRegistration
from protocol.control import ControlRecordType, build_end_txn_marker, read_end_txn_marker
from protocol.errors import ErrorCode, KafkaError
from protocol.records import BatchHeader, NewRecord, build_batch
from protocol.types import BrokerId, Offset

COORDINATOR = AppendOrigin.COORDINATOR


def txn_batch(count: int, pid: int, epoch: int = 0, seq: int = 0) -> bytes:
    records = [NewRecord(b"k", b"t%d" % i, timestamp=NOW + i) for i in range(count)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def marker(pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_end_txn_marker(pid, epoch, coordinator_epoch, commit, timestamp=NOW)


def _code(fn) -> ErrorCode:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as err:
        fn()
    return err.value.code


def test_marker_batch_is_kafkas_layout():
    data = marker(42, commit=True, epoch=3, coordinator_epoch=7)
    header = BatchHeader.parse(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.records_count) == (42, 3, -1, 1)
    found = read_end_txn_marker(data, 0, header)
    assert found is not None and found.control_type is ControlRecordType.COMMIT and found.coordinator_epoch == 7
    # key: version 0, type 1; value: version 0, coordinator epoch 7 (EndTxnMarker v0)
    assert b"\x00\x00\x00\x01" in data and b"\x00\x00\x00\x00\x00\x07" in data


def test_clients_may_not_write_markers(tmp_path):
    log = open_log(tmp_path / "p")
    assert _code(lambda: log.append_as_leader(marker(1, True), 0, now_ms=NOW)) == ErrorCode.invalid_record
    assert log.log_end_offset == 0


def test_open_transaction_holds_the_first_unstable_offset(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(2), 0, now_ms=NOW)  # 0-1, not transactional
    log.append_as_leader(txn_batch(3, pid=5), 0, now_ms=NOW)  # 2-4
    log.append_as_leader(txn_batch(1, pid=6), 0, now_ms=NOW)  # 5
    assert log.first_unstable_offset == 2
    log.append_as_leader(marker(5, commit=True), 0, now_ms=NOW, origin=COORDINATOR)  # 6
    assert log.first_unstable_offset == 2  # ended, but its marker is not below the HW yet
    log.on_high_watermark_updated(7)
    assert log.first_unstable_offset == 5
    log.append_as_leader(marker(6, commit=False), 0, now_ms=NOW, origin=COORDINATOR)  # 7
    log.on_high_watermark_updated(8)
    assert log.first_unstable_offset is None
    assert log.segments[-1].txn_index.entries == [AbortedTxn(6, 5, 7, 8)]


def test_aborted_index_records_the_lso_of_the_moment(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(txn_batch(1, pid=1), 0, now_ms=NOW)  # 0
    log.append_as_leader(txn_batch(1, pid=2), 0, now_ms=NOW)  # 1
    log.append_as_leader(marker(1, commit=False), 0, now_ms=NOW, origin=COORDINATOR)  # 2
    # producer 2's transaction (first offset 1) is still open: the entry's LSO is 1
    assert log.segments[-1].txn_index.entries == [AbortedTxn(1, 0, 2, 1)]
    assert [t.producer_id for t in log.collect_aborted_transactions(0, 3)] == [1]
    assert log.collect_aborted_transactions(3, 10) == []


def test_non_transactional_write_inside_a_transaction_is_invalid_txn_state(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(txn_batch(1, pid=1, seq=0), 0, now_ms=NOW)
    code = _code(lambda: log.append_as_leader(batch(1, pid=1, epoch=0, seq=1), 0, now_ms=NOW))
    assert code == ErrorCode.invalid_txn_state


def test_marker_of_an_older_coordinator_is_fenced(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(txn_batch(1, pid=1), 0, now_ms=NOW)
    log.append_as_leader(marker(1, True, coordinator_epoch=5), 0, now_ms=NOW, origin=COORDINATOR)
    log.append_as_leader(txn_batch(1, pid=1, seq=1), 0, now_ms=NOW)
    code = _code(lambda: log.append_as_leader(marker(1, True, coordinator_epoch=4), 0, now_ms=NOW, origin=COORDINATOR))
    assert code == ErrorCode.transaction_coordinator_fenced


def test_marker_without_data_changes_nothing(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(marker(9, commit=False), 0, now_ms=NOW, origin=COORDINATOR)
    assert log.first_unstable_offset is None
    assert log.segments[-1].txn_index.entries == []


def test_open_transaction_survives_a_clean_restart(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(1), 0, now_ms=NOW)
    log.append_as_leader(txn_batch(2, pid=3), 0, now_ms=NOW)  # 1-2
    log.close()
    again = UnifiedLog.open(tmp_path / "p", LogConfig(), TP, now_ms=NOW, recovery_point=3, had_clean_shutdown=True)
    try:
        assert again.first_unstable_offset == 1
        again.append_as_leader(marker(3, commit=False), 0, now_ms=NOW, origin=COORDINATOR)
        assert again.segments[-1].txn_index.entries == [AbortedTxn(3, 1, 3, 4)]
    finally:
        again.close_handles()


def test_recovery_rebuilds_the_aborted_index_and_open_transactions(tmp_path):
    config = dataclasses.replace(LogConfig(), segment_bytes=300)
    log = UnifiedLog.open(tmp_path / "p", config, TP, now_ms=NOW)
    log.append_as_leader(txn_batch(1, pid=1), 0, now_ms=NOW)  # 0
    log.append_as_leader(txn_batch(1, pid=2), 0, now_ms=NOW)  # 1
    log.append_as_leader(marker(1, commit=False), 0, now_ms=NOW, origin=COORDINATOR)  # 2
    for _ in range(4):
        log.append_as_leader(batch(1, value=b"x" * 40), 0, now_ms=NOW)
    log.append_as_leader(marker(2, commit=False), 0, now_ms=NOW, origin=COORDINATOR)
    log.append_as_leader(txn_batch(1, pid=7), 0, now_ms=NOW)  # still open at the crash
    assert len(log.segments) > 2
    expected = [e for s in log.segments for e in s.txn_index.entries]
    assert [e.producer_id for e in expected] == [1, 2]
    last = log.log_end_offset
    open_first = log.first_unstable_offset
    log.close_handles()  # a crash: no snapshot at close, no clean-shutdown marker
    for seg in sorted((tmp_path / "p").glob("*.txnindex")):
        os.unlink(seg)
    for snap in (tmp_path / "p").glob("*.snapshot"):
        os.unlink(snap)
    again = UnifiedLog.open(tmp_path / "p", config, TP, now_ms=NOW, recovery_point=0)
    try:
        assert again.log_end_offset == last
        assert [e for s in again.segments for e in s.txn_index.entries] == expected
        again.on_high_watermark_updated(last)
        assert again.first_unstable_offset == last - 1 != open_first
    finally:
        again.close_handles()


def test_truncation_drops_index_entries_and_reopens_transactions(tmp_path):
    log = open_log(tmp_path / "p")
    log.append_as_leader(txn_batch(2, pid=1), 0, now_ms=NOW)  # 0-1
    log.append_as_leader(marker(1, commit=False), 0, now_ms=NOW, origin=COORDINATOR)  # 2
    assert len(log.segments[-1].txn_index.entries) == 1
    log.truncate_to(2, now_ms=NOW)
    assert log.segments[-1].txn_index.entries == []
    assert log.first_unstable_offset == 0


def test_follower_append_of_markers_builds_the_same_state(tmp_path):
    leader = open_log(tmp_path / "l")
    follower = open_log(tmp_path / "f")
    leader.append_as_leader(txn_batch(2, pid=4), 0, now_ms=NOW)
    leader.append_as_leader(marker(4, commit=False), 0, now_ms=NOW, origin=COORDINATOR)
    info = leader.read(0, 1 << 20)
    assert info.records is not None
    follower.append_as_follower(info.records.read_bytes(), now_ms=NOW)
    assert follower.segments[-1].txn_index.entries == leader.segments[-1].txn_index.entries
    assert follower.first_unstable_offset == 0


def test_txn_index_cuts_a_partial_entry(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(AbortedTxn(1, 2, 3, 4).to_bytes() + b"\x00" * 5)
    index = TransactionIndex(path)
    assert index.entries == [AbortedTxn(1, 2, 3, 4)]
    assert path.stat().st_size == ENTRY_SIZE


def test_partition_reads_committed_below_the_lso_with_aborted_transactions(tmp_path):
    async def main() -> None:
        log = open_log(tmp_path / "p")
        partition = Partition(TP, BrokerId(1), log)
        partition.make_leader(PartitionRegistration(replicas=(BrokerId(1),), isr=(BrokerId(1),), leader=BrokerId(1), leader_epoch=0, partition_epoch=0))
        await partition.append_records_to_leader(batch(1), 1)  # 0
        await partition.append_records_to_leader(txn_batch(2, pid=8), 1)  # 1-2
        assert partition.high_watermark == 3 and partition.last_stable_offset == 1
        read = partition.read_records(Offset(0), 1 << 20, FetchIsolation.TXN_COMMITTED)
        assert read.last_stable_offset == 1 and read.aborted_transactions == ()
        assert read.info is not None and read.info.records is not None
        found = partition.fetch_offset_for_timestamp(-1, FetchIsolation.TXN_COMMITTED)
        assert found is not None and found.offset == 1
        # what a waiting read_committed fetch measures: the LSO, not the HW
        snapshot = partition.fetch_offset_snapshot()
        assert snapshot.end_offset(FetchIsolation.TXN_COMMITTED).message_offset == 1
        assert snapshot.end_offset(FetchIsolation.HIGH_WATERMARK).message_offset == 3
        await partition.append_records_to_leader(marker(8, commit=False), -1, COORDINATOR)  # 3
        assert partition.last_stable_offset == 4
        assert partition.fetch_offset_snapshot().end_offset(FetchIsolation.TXN_COMMITTED).message_offset == 4
        read = partition.read_records(Offset(1), 1 << 20, FetchIsolation.TXN_COMMITTED)
        assert read.aborted_transactions is not None
        assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions] == [(8, 1)]
        uncommitted = partition.read_records(Offset(1), 1 << 20, FetchIsolation.HIGH_WATERMARK)
        assert uncommitted.aborted_transactions is None

    asyncio.run(main())
