"""The log cleaner on real files: retention rules, codecs, delete horizons, producer batches,
bounded offset maps, conflicting changes, interrupted swaps, and a Hypothesis model check."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import LogConfig, UnifiedLog
from broker.log.checkpoints import OffsetCheckpointFile
from broker.log.cleaner import CLEANER_CHECKPOINT, CleanerConfig, LogCleaner
from broker.log.compaction import OffsetMap, clean_log
from broker.log.log import Scheduler, run_now
from protocol.compression import CompressionType
from protocol.records import (
    ATTR_DELETE_HORIZON,
    BatchHeader,
    NewRecord,
    Record,
    build_batch,
    decode_records,
    iter_batch_headers,
    verify_crc,
)
from protocol.topic_partition import TopicPartition

TP = TopicPartition("compacted", 0)
DAY = 86_400_000

_opened: list[UnifiedLog] = []


@pytest.fixture(autouse=True)
def _close_logs() -> Iterator[None]:
    yield
    while _opened:
        _opened.pop().close_handles()


def open_log(path: Path, scheduler: Scheduler = run_now, **overrides: object) -> UnifiedLog:
    settings_ = {
        "cleanup_policy": "compact",
        "segment_bytes": 1500,
        "min_cleanable_dirty_ratio": 0.01,
        "delete_retention_ms": DAY,
        "file_delete_delay_ms": 0,
    }
    settings_.update(overrides)
    config = dataclasses.replace(LogConfig(), **settings_)  # type: ignore[arg-type]
    the_log = UnifiedLog.open(path / str(TP), config, TP, scheduler=scheduler)
    _opened.append(the_log)
    return the_log


def cleaner_for(the_log: UnifiedLog, **overrides: object) -> LogCleaner:
    return LogCleaner(
        lambda: {TP: the_log} if not the_log.closed else {},
        [the_log.dir.parent],
        dataclasses.replace(CleanerConfig(), **overrides),  # type: ignore[arg-type]
    )


def produce(
    the_log: UnifiedLog,
    pairs: list[tuple[bytes, bytes | None]],
    *,
    compression: CompressionType = CompressionType.NONE,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    leader_epoch: int = 0,
) -> int:
    """Append one batch; returns its base offset."""
    data = build_batch(
        [NewRecord(k, v) for k, v in pairs],
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    return the_log.append_as_leader(data, leader_epoch).first_offset


def batches(the_log: UnifiedLog) -> list[tuple[BatchHeader, bytes]]:
    """Every batch a consumer reading from the log start would get, via `UnifiedLog.read`."""
    out: list[tuple[BatchHeader, bytes]] = []
    offset = the_log.log_start_offset
    while offset < the_log.log_end_offset:
        info = the_log.read(offset, 1 << 20)
        if info.records is None:
            break
        data = info.records.read_bytes()
        for pos, header in iter_batch_headers(data, check_crc=True):
            out.append((header, data[pos : pos + header.size]))
            offset = header.next_offset
    return out


def records(the_log: UnifiedLog) -> list[Record]:
    return [r for h, b in batches(the_log) for r in decode_records(b, 0, h)]


def live_view(recs: list[Record]) -> dict[bytes, bytes]:
    """Replaying the log as a table: the latest value of every key, tombstones deleting."""
    table: dict[bytes, bytes] = {}
    for r in recs:
        assert r.key is not None
        if r.value is None:
            table.pop(r.key, None)
        else:
            table[r.key] = r.value
    return table


def disk_bytes(the_log: UnifiedLog) -> int:
    return sum(p.stat().st_size for p in the_log.dir.glob("*.log"))


def write_versions(the_log: UnifiedLog, keys: int, versions: int) -> dict[int, Record]:
    """`versions` rounds over `keys` keys, one record per batch; returns offset -> record."""
    written: dict[int, Record] = {}
    for v in range(versions):
        for k in range(keys):
            key, value = f"key-{k}".encode(), f"value-{k}-{v}".encode()
            offset = produce(the_log, [(key, value)])
            written[offset] = Record(offset, 0, key, value)  # type: ignore[arg-type]
    the_log.roll()
    return written


def assert_offsets_preserved(the_log: UnifiedLog, written: dict[int, Record]) -> None:
    seen = records(the_log)
    offsets = [r.offset for r in seen]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    for r in seen:
        assert (r.key, r.value) == (written[r.offset].key, written[r.offset].value)


# ------------------------------------------------------------------------ basic rules
def test_keeps_latest_value_of_every_key_at_its_original_offset(tmp_path: Path) -> None:
    the_log = open_log(tmp_path)
    written = write_versions(the_log, keys=20, versions=10)
    before = disk_bytes(the_log)
    cleaner = cleaner_for(the_log)
    outcome = cleaner.clean_once()
    assert outcome is not None and outcome.swapped
    seen = records(the_log)
    assert len(seen) == 20
    expected = {f"key-{k}".encode(): f"value-{k}-9".encode() for k in range(20)}
    assert live_view(seen) == expected
    assert_offsets_preserved(the_log, written)
    assert [r.offset for r in seen] == list(range(180, 200))
    after = disk_bytes(the_log)
    assert after < before / 5, (before, after)
    assert outcome.bytes_after < outcome.bytes_before
    assert not list(the_log.dir.glob("*.cleaned")) and not list(the_log.dir.glob("*.swap"))
    ckpt = OffsetCheckpointFile(tmp_path / CLEANER_CHECKPOINT).read()
    assert ckpt == {TP: the_log.active_segment.base_offset}
    # the log still takes appends and a fresh cleaner resumes from the checkpoint
    assert cleaner_for(the_log).grab_filthiest_log() is None
    produce(the_log, [(b"key-0", b"newest")])
    assert records(the_log)[-1].offset == 200


def test_cleaned_log_reopens_and_active_segment_is_untouched(tmp_path: Path) -> None:
    the_log = open_log(tmp_path)
    write_versions(the_log, keys=5, versions=6)
    produce(the_log, [(b"key-1", b"in-active-1")])
    produce(the_log, [(b"key-1", b"in-active-2")])
    assert cleaner_for(the_log).clean_once() is not None
    values = [r.value for r in records(the_log) if r.key == b"key-1"]
    assert values == [b"value-1-5", b"in-active-1", b"in-active-2"]
    expected = live_view(records(the_log))
    the_log.close()
    reopened = open_log(tmp_path)
    assert live_view(records(reopened)) == expected
    assert reopened.log_end_offset == 32


def test_dirty_ratio_and_min_compaction_lag(tmp_path: Path) -> None:
    the_log = open_log(tmp_path, min_cleanable_dirty_ratio=0.9)
    write_versions(the_log, keys=10, versions=3)
    cleaner = cleaner_for(the_log)
    assert cleaner.clean_once() is not None  # all dirty: ratio 1.0
    write_versions(the_log, keys=1, versions=1)  # a little new dirt: ratio far below 0.9
    target = cleaner.log_to_clean(TP, the_log, int(time.time() * 1000), None)
    assert target is not None and 0 < target.dirty_ratio < 0.9
    assert cleaner.grab_filthiest_log() is None

    lagged = open_log(tmp_path / "lag", min_compaction_lag_ms=DAY)
    write_versions(lagged, keys=10, versions=3)
    assert cleaner_for(lagged).grab_filthiest_log() is None  # records are younger than a day
    later = int(time.time() * 1000) + DAY + 1000
    assert cleaner_for(lagged).grab_filthiest_log(later) is not None


def test_never_cleans_at_or_above_the_high_watermark(tmp_path: Path) -> None:
    the_log = open_log(tmp_path)
    written = write_versions(the_log, keys=4, versions=20)
    hw = 40
    cleaner = LogCleaner(lambda: {TP: the_log}, [tmp_path], CleanerConfig(),
                         high_watermarks=lambda: {TP: hw})  # fmt: skip
    outcome = cleaner.clean_once()
    assert outcome is not None and outcome.swapped and outcome.result is not None
    assert outcome.result.end_offset <= hw
    seen = records(the_log)
    assert [r.offset for r in seen if r.offset >= outcome.result.end_offset] == list(
        range(outcome.result.end_offset, 80)
    )
    assert_offsets_preserved(the_log, written)


def test_keyless_records_in_compacted_topic_are_rejected(tmp_path: Path) -> None:
    from protocol.errors import ErrorCode, KafkaError

    the_log = open_log(tmp_path)
    with pytest.raises(KafkaError) as err:
        the_log.append_as_leader(build_batch([NewRecord(None, b"v")]), 0)
    assert err.value.code == ErrorCode.invalid_record


# --------------------------------------------------------------------- tombstones
def test_tombstones_get_a_delete_horizon_and_go_after_it(tmp_path: Path) -> None:
    the_log = open_log(tmp_path, delete_retention_ms=60_000)
    for k in range(6):
        produce(the_log, [(f"k{k}".encode(), b"v1"), (f"k{k}".encode(), b"v2")])
    produce(the_log, [(b"k1", None), (b"k2", None)])
    the_log.roll()
    now = int(time.time() * 1000)
    cleaner = cleaner_for(the_log)
    assert cleaner.clean_once(now) is not None
    seen = records(the_log)
    assert {r.key for r in seen if r.value is None} == {b"k1", b"k2"}
    assert live_view(seen) == {f"k{k}".encode(): b"v2" for k in (0, 3, 4, 5)}
    tomb_batches = [h for h, _ in batches(the_log) if h.attributes & ATTR_DELETE_HORIZON]
    assert len(tomb_batches) == 1 and tomb_batches[0].base_timestamp == now + 60_000
    plain = [h for h, _ in batches(the_log) if not h.attributes & ATTR_DELETE_HORIZON]
    assert len(plain) == 4
    # record timestamps read back unchanged although baseTimestamp now holds the horizon
    assert all(abs(r.timestamp - now) < 60_000 for r in seen)
    # before the horizon nothing is due; after it the tombstones go without new writes
    assert cleaner.clean_once(now + 59_000) is None
    outcome = cleaner.clean_once(now + 60_001)
    assert outcome is not None and outcome.swapped and outcome.result is not None
    assert outcome.result.stats.tombstones_removed == 2
    seen = records(the_log)
    assert all(r.value is not None for r in seen)
    assert live_view(seen) == {f"k{k}".encode(): b"v2" for k in (0, 3, 4, 5)}
    assert cleaner.clean_once(now + 120_000) is None


# ------------------------------------------------------------------------- codecs
@pytest.mark.parametrize(
    "codec",
    [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD],
)
def test_compressed_batches_are_rewritten_with_the_same_codec(
    tmp_path: Path, codec: CompressionType
) -> None:
    the_log = open_log(tmp_path, segment_bytes=4000)
    written: dict[int, tuple[bytes, bytes | None]] = {}
    for round_ in range(8):
        pairs: list[tuple[bytes, bytes | None]] = [
            (f"key-{k}".encode(), f"value-{round_}-{k}-".encode() * 5) for k in range(12)
        ]
        if round_ == 7:
            pairs.append((b"key-3", None))
        base = produce(the_log, pairs, compression=codec, pid=7, epoch=2, seq=round_ * 12,
                       leader_epoch=3)  # fmt: skip
        for i, pair in enumerate(pairs):
            written[base + i] = pair
    produce(the_log, [(b"other", b"x")])  # not the producer's: its last batch is data anyway
    the_log.roll()
    originals = {h.base_offset: h for h, _ in batches(the_log)}
    before = disk_bytes(the_log)
    assert cleaner_for(the_log).clean_once() is not None
    assert disk_bytes(the_log) < before
    seen = batches(the_log)
    for header, data in seen:
        original = originals[header.base_offset]
        assert verify_crc(data, 0, header)
        assert header.compression == original.compression
        assert header.last_offset_delta == original.last_offset_delta
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
            original.producer_id, original.producer_epoch, original.base_sequence)  # fmt: skip
        assert header.partition_leader_epoch == original.partition_leader_epoch
        for r in decode_records(data, 0, header):
            assert (r.key, r.value) == written[r.offset] if r.key != b"other" else True
    table = live_view(records(the_log))
    expected = {f"key-{k}".encode(): f"value-7-{k}-".encode() * 5 for k in range(12) if k != 3}
    assert table == {**expected, b"other": b"x"}


# ----------------------------------------------------------------- producer state
def test_last_batch_of_a_producer_stays_as_an_empty_batch(tmp_path: Path) -> None:
    the_log = open_log(tmp_path)
    produce(the_log, [(b"a", b"1"), (b"b", b"1")], pid=42, epoch=0, seq=0)
    produce(the_log, [(b"a", b"2"), (b"b", b"2")], pid=42, epoch=0, seq=2)
    produce(the_log, [(b"a", b"3"), (b"b", b"3")])  # supersedes the producer's records
    the_log.roll()
    assert cleaner_for(the_log).clean_once() is not None
    seen = batches(the_log)
    assert [(h.base_offset, h.records_count, h.producer_id) for h, _ in seen] == [
        (2, 0, 42),
        (4, 2, -1),
    ]
    empty = seen[0][0]
    assert (empty.last_offset, empty.base_sequence, empty.last_sequence) == (3, 2, 3)
    the_log.close()
    reopened = open_log(tmp_path)
    entry = reopened.producer_state.last_entry(42)
    assert entry is not None and entry.last_seq == 3
    # the producer continues in sequence after a reload
    assert produce(reopened, [(b"a", b"4")], pid=42, epoch=0, seq=4) == 6


# ----------------------------------------------------------------- bounded map
def test_a_full_offset_map_cleans_a_prefix_and_the_next_pass_the_rest(tmp_path: Path) -> None:
    the_log = open_log(tmp_path)
    written = write_versions(the_log, keys=30, versions=4)
    # 720 bytes / 24 * 0.9 = 27 keys per pass: fewer than the 30 keys of the dirty section
    cleaner = cleaner_for(the_log, dedupe_buffer_size=720)
    assert cleaner.config.max_map_entries == 27
    first = cleaner.clean_once()
    assert first is not None and first.result is not None
    assert first.result.end_offset < 120
    passes = 1
    while cleaner.clean_once() is not None:
        passes += 1
        assert passes < 20
    assert passes > 1
    expected = {f"key-{k}".encode(): f"value-{k}-3".encode() for k in range(30)}
    assert live_view(records(the_log)) == expected
    assert_offsets_preserved(the_log, written)


def test_offset_map_hashes_long_keys() -> None:
    m = OffsetMap(10)
    long_key = b"x" * 100
    m.put(long_key, 5)
    m.put(b"short", 6)
    assert (m.get(long_key), m.get(b"short"), m.get(b"y" * 100), len(m)) == (5, 6, -1, 2)


# ------------------------------------------------------------- conflicts and readers
def test_conflicting_changes_during_a_pass_abort_the_swap(tmp_path: Path) -> None:
    the_log = open_log(tmp_path)
    write_versions(the_log, keys=10, versions=5)
    cleaner = cleaner_for(the_log)
    target = cleaner.grab_filthiest_log()
    assert target is not None
    plan = cleaner._begin(target, None)
    result = clean_log(plan)
    assert list(the_log.dir.glob("*.log.cleaned"))
    before = records(the_log)
    the_log.truncate_to(25)  # a follower truncation while the worker ran
    outcome = cleaner._swap_in(the_log, plan, result)
    assert not outcome.swapped and outcome.reason == "log truncated"
    assert not list(the_log.dir.glob("*.cleaned"))
    assert records(the_log) == before[:25]
    # the truncation lowered the checkpoint; the next pass cleans normally
    the_log.roll()
    assert cleaner.clean_once() is not None
    expected = {f"key-{k}".encode(): f"value-{k}-{2 if k < 5 else 1}".encode() for k in range(10)}
    assert live_view(records(the_log)) == expected and len(records(the_log)) == 10


def test_segment_deleted_by_retention_during_a_pass_aborts(tmp_path: Path) -> None:
    the_log = open_log(tmp_path)
    write_versions(the_log, keys=10, versions=5)
    cleaner = cleaner_for(the_log)
    target = cleaner.grab_filthiest_log()
    assert target is not None
    plan = cleaner._begin(target, None)
    result = clean_log(plan)
    the_log.maybe_increment_log_start_offset(the_log.segments[1].base_offset)
    the_log.delete_retention_segments()
    outcome = cleaner._swap_in(the_log, plan, result)
    assert not outcome.swapped and outcome.reason == "segments deleted"


def test_readers_of_a_replaced_segment_keep_their_bytes(tmp_path: Path) -> None:
    later: list[tuple[int, Callable[[], None]]] = []
    the_log = open_log(
        tmp_path, lambda delay, fn: later.append((delay, fn)), file_delete_delay_ms=60_000
    )
    write_versions(the_log, keys=5, versions=8)
    held = the_log.read(0, 1 << 20)
    assert held.records is not None
    old_bytes = held.records.read_bytes()
    later.clear()
    assert cleaner_for(the_log).clean_once() is not None
    assert held.records.read_bytes() == old_bytes
    assert list(the_log.dir.glob("*.log.deleted"))
    assert records(the_log)[0].offset >= 35
    assert [delay for delay, _ in later] == [60_000]
    later[0][1]()  # file.delete.delay.ms later
    assert not list(the_log.dir.glob("*.deleted"))


def test_cleaner_aborts_when_asked(tmp_path: Path) -> None:
    the_log = open_log(tmp_path)
    write_versions(the_log, keys=10, versions=5)
    cleaner = cleaner_for(the_log)
    target = cleaner.grab_filthiest_log()
    assert target is not None
    plan = cleaner._begin(target, None)
    cleaner.forget(TP)
    from broker.log.compaction import CleaningAborted

    with pytest.raises(CleaningAborted):
        clean_log(plan)
    assert not list(the_log.dir.glob("*.cleaned"))


# ------------------------------------------------------------------ crash recovery
def _cleaned_outputs(tmp_path: Path, **overrides: object):  # type: ignore[no-untyped-def]
    """A log, its model, and a finished pass whose output has not been swapped in yet."""
    the_log = open_log(tmp_path, **overrides)
    written = write_versions(the_log, keys=8, versions=12)
    expected = live_view(records(the_log))
    cleaner = cleaner_for(the_log)
    target = cleaner.grab_filthiest_log()
    assert target is not None
    result = clean_log(cleaner._begin(target, None))
    assert result.groups
    return the_log, written, expected, result


def _reopen_after_crash(tmp_path: Path, the_log: UnifiedLog) -> UnifiedLog:
    the_log.close_handles()
    reopened = UnifiedLog.open(the_log.dir, the_log.config, TP, had_clean_shutdown=False)
    _opened.append(reopened)
    names = os.listdir(reopened.dir)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    return reopened


def _rename(path_stem: Path, old: str, new: str) -> None:
    for suffix in (".log", ".index", ".timeindex"):
        src = path_stem.with_name(path_stem.name + suffix + old)
        if src.exists():
            os.replace(src, path_stem.with_name(path_stem.name + suffix + new))


@pytest.mark.parametrize(
    "step",
    ["cleaned_written", "renamed_to_swap", "old_partly_deleted", "old_deleted",
     "first_group_only", "all_done_deleted_left"],
)  # fmt: skip
def test_interrupted_swap_recovers_at_every_step(tmp_path: Path, step: str) -> None:
    the_log, written, expected, result = _cleaned_outputs(tmp_path)
    uncleaned_count = len(records(the_log))
    assert len(result.groups) >= 2
    for group in result.groups:
        group.output.close_handles()
    stems = [g.output.log_path.with_name(f"{g.output.base_offset:020d}") for g in result.groups]
    old_stems = [
        [s.segment.log_path.with_name(f"{s.base_offset:020d}") for s in g.sources]
        for g in result.groups
    ]
    if step != "cleaned_written":
        swapped = stems[:1] if step == "first_group_only" else stems
        for stem in swapped:
            _rename(stem, ".cleaned", ".swap")
        if step in ("old_partly_deleted", "old_deleted", "all_done_deleted_left"):
            doomed = [s for g in old_stems for s in g]
            if step == "old_partly_deleted":
                doomed = doomed[: len(doomed) // 2]
            for stem in doomed:
                _rename(stem, "", ".deleted")
        if step == "all_done_deleted_left":
            for stem in stems:
                _rename(stem, ".swap", "")
    reopened = _reopen_after_crash(tmp_path, the_log)
    seen = records(reopened)
    assert live_view(seen) == expected
    assert_offsets_preserved(reopened, written)
    assert reopened.log_end_offset == 96
    if step == "cleaned_written":
        assert len(seen) == uncleaned_count
    elif step != "first_group_only":
        assert len(seen) == 8
    # whatever state recovery produced, the next pass finishes the job
    cleaner = cleaner_for(reopened)
    while cleaner.clean_once() is not None:
        pass
    assert len(records(reopened)) == 8 and live_view(records(reopened)) == expected


# --------------------------------------------------------------------- property
ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("write"),
            st.lists(
                st.tuples(st.integers(0, 7), st.one_of(st.none(), st.binary(max_size=6))),
                min_size=1,
                max_size=5,
            ),
            st.sampled_from(list(CompressionType)),
        ),
        st.tuples(st.just("roll"), st.just([]), st.just(CompressionType.NONE)),
        st.tuples(st.just("clean"), st.just([]), st.just(CompressionType.NONE)),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, map_bytes=st.sampled_from([48, 240, 1 << 20]), expire=st.booleans())
def test_property_cleaning_preserves_the_latest_value_and_offsets(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[str, list[tuple[int, bytes | None]], CompressionType]],
    map_bytes: int,
    expire: bool,
) -> None:
    path = tmp_path_factory.mktemp("prop")
    the_log = open_log(path, segment_bytes=400, delete_retention_ms=1000)
    cleaner = cleaner_for(the_log, dedupe_buffer_size=map_bytes)
    written: dict[int, Record] = {}
    now = int(time.time() * 1000)
    clock = [now]

    def clean() -> None:
        while cleaner.clean_once(clock[0]) is not None:
            pass
        clock[0] += 2000 if expire else 0

    for op, pairs, codec in ops:
        if op == "write":
            kvs = [(f"k{k}".encode(), v) for k, v in pairs]
            base = produce(the_log, kvs, compression=codec)
            for i, (k, v) in enumerate(kvs):
                written[base + i] = Record(base + i, 0, k, v)  # type: ignore[arg-type]
        elif op == "roll":
            the_log.roll()
        else:
            clean()
    the_log.roll()
    clean()
    clean()
    model = live_view([written[o] for o in sorted(written)])
    seen = records(the_log)
    assert live_view(seen) == model
    assert_offsets_preserved(the_log, written)
    # every live key's latest record is there, at the offset it was written at
    latest = {r.key: o for o, r in written.items()}
    assert {r.offset for r in seen} >= {o for k, o in latest.items() if k in model}
    if expire:  # two passes past every horizon: no tombstone is left behind
        assert all(r.value is not None for r in seen)


# ------------------------------------------------------------------------ transactions
def test_aborted_transactions_are_removed_and_markers_kept_until_their_horizon(tmp_path: Path) -> None:
    from broker.log.info import AppendOrigin
    from protocol.control import build_end_txn_marker

    the_log = open_log(tmp_path, delete_retention_ms=1000)

    def txn(pid: int, seq: int, pairs: list[tuple[bytes, bytes]]) -> None:
        data = build_batch([NewRecord(k, v) for k, v in pairs], producer_id=pid, producer_epoch=0,
                           base_sequence=seq, is_transactional=True)
        the_log.append_as_leader(data, 0)

    def end(pid: int, commit: bool) -> None:
        marker = build_end_txn_marker(pid, 0, 0, commit, timestamp=int(time.time() * 1000))
        the_log.append_as_leader(marker, 0, origin=AppendOrigin.COORDINATOR)

    produce(the_log, [(b"a", b"committed-plain")])
    txn(1, 0, [(b"a", b"committed-txn"), (b"b", b"b1")])
    end(1, commit=True)
    txn(2, 0, [(b"a", b"aborted"), (b"b", b"aborted")])  # must not shadow the committed values
    end(2, commit=False)
    txn(3, 0, [(b"c", b"open")])  # still open: the LSO holds the cleaner back
    the_log.roll()
    the_log.on_high_watermark_updated(the_log.log_end_offset)
    cleaner = cleaner_for(the_log)
    outcome = cleaner.clean_once()
    assert outcome is not None and outcome.swapped
    values = [(r.key, r.value) for r in records(the_log)]
    assert (b"a", b"aborted") not in values and (b"b", b"aborted") not in values
    assert (b"a", b"committed-txn") in values and (b"b", b"b1") in values
    assert (b"c", b"open") in values  # past the first unstable offset: untouched
    controls = [h for h, _ in batches(the_log) if h.is_control]
    assert [h.producer_id for h in controls] == [1, 2]  # both markers stay (data removed this pass)
    # the kept ABORT marker's entry is in the cleaned segment's index
    entries = [e for s in the_log.segments for e in s.txn_index.entries]
    assert [e.producer_id for e in entries] == [2]
