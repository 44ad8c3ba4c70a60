"""Chain (pipelined) replication: the pure planning and fall-back rules (broker/replication/chain.py),
the carrier (protocol/schemas/fetch_v12_chain.py) and how the leader and a chain member apply
reports (Partition)."""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import replace
from pathlib import Path

import pytest
from kio.schema.fetch.v12.request import FetchRequest as KioFetchRequest
from kio.static.primitive import i32, i32Timedelta, i64
from test_log_support import TP, batch, close_opened_logs, open_log  # noqa: F401 - fixture

from broker.replication.chain import (
    ChainHealth,
    apply_report,
    chain_order,
    fetch_source,
    report_of,
    successor,
)
from broker.replication.partition import FetchIsolation, Partition, ReplicaState
from controller.model import PartitionRegistration
from protocol import messages
from protocol.errors import ErrorCode, KafkaError
from protocol.schemas.fetch_v12_chain import (
    CHAIN_REPORTS_TAG,
    ChainReport,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    decode_chain_reports,
    encode_chain_reports,
)
from protocol.types import BrokerId, LeaderEpoch, Offset

B = BrokerId


def src(local: int, *, replicas: tuple[int, ...] = (1, 2, 3), leader: int = 1, isr: tuple[int, ...] = (1, 2, 3),
        enabled: bool = True, broken: tuple[int, ...] = ()) -> int:
    return fetch_source(B(local), tuple(B(r) for r in replicas), B(leader), {B(i) for i in isr},
                        enabled=enabled, broken={B(b) for b in broken})


def test_chain_is_the_replica_list_without_the_leader() -> None:
    assert chain_order((B(3), B(1), B(2)), B(1)) == (3, 2)


def test_star_when_off_or_too_few_replicas() -> None:
    assert src(3, enabled=False) == 1
    assert src(2, replicas=(1, 2), isr=(1, 2)) == 1


def test_first_follower_fetches_from_leader_the_next_from_it() -> None:
    assert src(2) == 1
    assert src(3) == 2
    assert src(4, replicas=(1, 2, 3, 4), isr=(1, 2, 3, 4)) == 3
    assert src(2, replicas=(3, 1, 2), leader=1) == 3  # replica-list order, leader left out
    assert src(3, replicas=(3, 1, 2), leader=1) == 1


def test_predecessor_out_of_isr_or_broken_sends_to_leader() -> None:
    assert src(3, isr=(1, 3)) == 1
    assert src(3, broken=(2,)) == 1


def test_follower_outside_isr_catches_up_from_leader() -> None:
    assert src(3, isr=(1, 2)) == 1


def test_successor() -> None:
    assert successor(B(2), (B(1), B(2), B(3)), B(1), enabled=True) == 3
    assert successor(B(3), (B(1), B(2), B(3)), B(1), enabled=True) is None
    assert successor(B(2), (B(1), B(2), B(3)), B(1), enabled=False) is None
    assert successor(B(1), (B(1), B(2), B(3)), B(1), enabled=True) is None


def test_health_expires() -> None:
    h = ChainHealth(retry_ms=100)
    h.failed(B(2), now_ms=1000)
    assert h.broken(now_ms=1050) == {2}
    assert h.broken(now_ms=1100) == frozenset()


def test_reports_round_trip_and_reject_malformed() -> None:
    reports = (ChainReport(3, 10, 5, 7), ChainReport(4, 1 << 40, 0, 1 << 40))
    decoded = decode_chain_reports(encode_chain_reports(reports))
    assert decoded[0] == reports[0]
    assert decoded[1].caught_up_age_ms == 0x7FFFFFFF  # ages saturate
    with pytest.raises(ValueError):
        decode_chain_reports(b"\x00" * 7)
    with pytest.raises(ValueError):
        decode_chain_reports(encode_chain_reports([reports[0]] * 65))


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(0x80 | (n & 0x7F))
        n >>= 7
    return bytes([*out, n])


def _request(chain: bytes | None) -> FetchRequest:
    p = FetchPartition(partition=i32(0), current_leader_epoch=i32(1), fetch_offset=i64(5),
                       partition_max_bytes=i32(100), chain_reports=chain)
    return FetchRequest(replica_id=B(2), max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=5)),
                        min_bytes=i32(1), max_bytes=i32(1000), isolation_level=0,  # type: ignore[arg-type]
                        session_id=i32(0), session_epoch=i32(-1), topics=(FetchTopic(topic="t", partitions=(p,)),),  # type: ignore[arg-type]
                        forgotten_topics_data=(), rack_id="")


def test_carrier_is_a_tagged_field_of_fetch_v12() -> None:
    """Without reports the bytes are kio's own v12; with them, one more tagged field (Samsa's tag),
    which Samsa decodes and which is the only difference."""
    plain = messages.encode_bytes(_request(None))
    base = _request(None)
    kio_bytes = messages.encode_bytes(messages.convert(base, KioFetchRequest))
    assert plain == kio_bytes
    data = encode_chain_reports([ChainReport(3, 10, 5, 7)])
    tagged = messages.encode_bytes(_request(data))
    # tag (unsigned varint), the field's size, then the field: compact bytes (length + 1, bytes)
    field = bytes([len(data) + 1]) + data
    assert _uvarint(CHAIN_REPORTS_TAG) + _uvarint(len(field)) + field in tagged
    decoded, used = messages.decode_request(1, 12, tagged, 0)
    assert used == len(tagged)
    assert decode_chain_reports(decoded.topics[0].partitions[0].chain_reports) == (ChainReport(3, 10, 5, 7),)


def test_apply_report_newest_observation_wins() -> None:
    state = ReplicaState(log_end_offset=Offset(5), last_caught_up_time_ms=900, last_fetch_time_ms=950)
    stale = ChainReport(3, 8, fetch_age_ms=100, caught_up_age_ms=100)  # observed at 900 < 950
    assert not apply_report(state, stale, 1000, reporter_log_end_offset=20, reporter_caught_up_ms=1000,
                            leader_end_offset=20)
    assert state.log_end_offset == 5
    fresh = ChainReport(3, 8, fetch_age_ms=10, caught_up_age_ms=20)
    assert apply_report(state, fresh, 1000, reporter_log_end_offset=20, reporter_caught_up_ms=970,
                        leader_end_offset=20)
    assert state.log_end_offset == 8 and state.last_fetch_time_ms == 990
    assert state.last_caught_up_time_ms == 970  # the earlier of its own (980) and the reporter's


def test_apply_report_caps_at_reporter_and_counts_caught_up_at_leader_end() -> None:
    state = ReplicaState()
    report = ChainReport(3, 30, fetch_age_ms=0, caught_up_age_ms=500)
    apply_report(state, report, 1000, reporter_log_end_offset=20, reporter_caught_up_ms=100, leader_end_offset=20)
    assert state.log_end_offset == 20 and state.last_caught_up_time_ms == 1000


def test_report_of_uses_ages() -> None:
    state = ReplicaState(log_end_offset=Offset(7), last_caught_up_time_ms=400, last_fetch_time_ms=900)
    assert report_of(B(3), state, 1000) == ChainReport(3, 7, 100, 600)


# -- a Partition with a real log: the leader applying reports, a follower serving its successor ------


def _leader(tmp_path: Path) -> Partition:
    p = Partition(TP, B(1), open_log(tmp_path / "orders-0"))
    assert p.make_leader(PartitionRegistration((B(1), B(2), B(3)), (B(1), B(2), B(3)), B(1), LeaderEpoch(3), 7))
    return p


def _follower(tmp_path: Path, local: int, *, chain: bool) -> Partition:
    log_ = open_log(tmp_path / f"orders-0-{local}")
    if chain:
        log_.config = replace(log_.config, replication_pipeline_enable=True)
    p = Partition(TP, B(local), log_)
    assert p.make_follower(PartitionRegistration((B(1), B(2), B(3)), (B(1), B(2), B(3)), B(1), LeaderEpoch(3), 7))
    return p


def test_leader_hw_waits_for_the_tail_reported_by_the_middle(tmp_path: Path) -> None:
    p = _leader(tmp_path)
    end = asyncio.run(p.append_records_to_leader(batch(5), -1)).last_offset + 1
    p.update_follower_fetch_state(B(2), Offset(5), 1000, Offset(end))
    assert p.high_watermark == 0  # the tail's LEO unknown
    p.update_chain_fetch_states(B(2), [ChainReport(3, 4, fetch_age_ms=10, caught_up_age_ms=10)], 1000)
    assert p.high_watermark == 4
    p.update_chain_fetch_states(B(2), [ChainReport(3, 9, fetch_age_ms=5, caught_up_age_ms=5)], 1010)
    assert p.high_watermark == 5  # capped at the reporter's LEO
    p.update_chain_fetch_states(B(2), [ChainReport(1, 0, 0, 0), ChainReport(9, 0, 0, 0)], 1020)  # ignored
    assert p.high_watermark == 5


def test_follower_serves_only_its_successor_after_truncating(tmp_path: Path) -> None:
    middle = _follower(tmp_path, 2, chain=True)

    def code(replica: int, epoch: int) -> ErrorCode | None:
        try:
            middle.check_serves_chain(B(replica), epoch)
        except KafkaError as e:
            return e.code
        return None

    assert code(3, 3) == ErrorCode.not_leader_or_follower  # not truncated for epoch 3 yet
    middle.chain_follower_truncated(LeaderEpoch(3))
    assert code(3, 3) is None
    assert code(1, 3) == ErrorCode.not_leader_or_follower  # not its successor
    assert code(3, 2) == ErrorCode.fenced_leader_epoch
    assert code(3, 4) == ErrorCode.unknown_leader_epoch
    star = _follower(tmp_path, 2, chain=False)
    star.chain_follower_truncated(LeaderEpoch(3))
    with pytest.raises(KafkaError) as e:
        star.check_serves_chain(B(3), 3)
    assert e.value.code == ErrorCode.not_leader_or_follower


def test_middle_relays_successor_state_and_report_pending(tmp_path: Path) -> None:
    middle = _follower(tmp_path, 2, chain=True)
    asyncio.run(middle.append_records_to_follower(_leader_batch(tmp_path)))
    assert middle.log_end_offset == 3
    middle.update_chain_successor_fetch_state(B(3), Offset(0), 1000, ())
    assert middle.chain_report_pending(1000, 500)  # unreported
    assert middle.chain_reports(1005) == (ChainReport(3, 0, 5, 5),)
    assert middle.chain_report_pending(1005, 500)  # reported, but the active tail is behind
    assert not middle.chain_report_pending(2000, 500)  # the tail went quiet: long-poll again
    middle.update_chain_successor_fetch_state(B(3), Offset(3), 2000, ())
    middle.chain_reports(2000)
    assert not middle.chain_report_pending(2000, 500)  # caught up and reported
    # a new leader epoch forgets the chain
    middle.make_follower(PartitionRegistration((B(1), B(2), B(3)), (B(1), B(2), B(3)), B(1), LeaderEpoch(4), 8))
    assert middle.chain_reports(2000) == ()


def _leader_batch(tmp_path: Path) -> bytes:
    """Three records as a leader wrote them (offsets and epoch assigned)."""
    leader = _leader(tmp_path / "source")
    asyncio.run(leader.append_records_to_leader(batch(3), 1))
    read = leader.read_records(Offset(0), 1 << 20, FetchIsolation.LOG_END)
    assert read.info is not None and read.info.records is not None
    records = read.info.records
    return records.read_bytes() if hasattr(records, "read_bytes") else bytes(records)
