"""Chain (pipelined) replication: the pure planning and fall-back rules (broker/replication/chain.py),
the carrier (protocol/schemas/fetch_v12_chain.py) and how the leader and a chain member apply
reports (Partition)."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.fetch.v12.request import FetchRequest as KioFetchRequest
from kio.static.primitive import i32, i32Timedelta, i64

from broker.replication.chain import (
    ChainHealth,
    apply_report,
    chain_order,
    fetch_source,
    report_of,
    successor,
)
from broker.replication.partition import ReplicaState
from protocol import messages
from protocol.schemas.fetch_v12_chain import (
    CHAIN_REPORTS_TAG,
    ChainReport,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    decode_chain_reports,
    encode_chain_reports,
)
from protocol.types import BrokerId, Offset

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
