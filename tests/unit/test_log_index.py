"""Indexes, checkpoint files and the leader-epoch cache."""

from __future__ import annotations

import struct

import pytest

from broker.log.checkpoints import (
    CheckpointError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from broker.log.epoch_cache import LeaderEpochFileCache
from broker.log.index import IndexCorruptError, OffsetIndex, TimeIndex
from protocol.topic_partition import TopicPartition


def test_offset_index_lookup_truncate_and_file_format(tmp_path):
    index = OffsetIndex(tmp_path / "x.index", 100, max_entries=10)
    assert index.lookup(150) == (100, 0)
    index.append(105, 80)
    index.append(110, 200)
    index.append(110, 300)  # not increasing: ignored
    index.append(120, 400)
    assert index.lookup(104) == (100, 0)
    assert index.lookup(105) == (105, 80)
    assert index.lookup(119) == (110, 200)
    assert index.lookup(10**9) == (120, 400)
    assert not (tmp_path / "x.index").exists()  # entries reach the file with the segment's flush
    index.flush()
    assert (tmp_path / "x.index").read_bytes() == struct.pack(">iiiiii", 5, 80, 10, 200, 20, 400)
    index.truncate_to(110)
    assert index.entries() == [(105, 80)]
    assert (tmp_path / "x.index").read_bytes() == struct.pack(">ii", 5, 80)
    index.append(130, 500)
    index.flush()  # only the new entry is written, at its place
    assert (tmp_path / "x.index").read_bytes() == struct.pack(">iiii", 5, 80, 30, 500)
    index.truncate_to(130)
    index.close()
    loaded = OffsetIndex(tmp_path / "x.index", 100, max_entries=10)
    loaded.load(log_size=1000)
    assert loaded.entries() == [(105, 80)]
    assert not loaded.is_full
    with pytest.raises(IndexCorruptError):
        OffsetIndex(tmp_path / "x.index", 100, 10).load(log_size=80)  # points past the log end


def test_offset_index_rejects_bad_files(tmp_path):
    (tmp_path / "a.index").write_bytes(b"\0" * 7)
    with pytest.raises(IndexCorruptError):
        OffsetIndex(tmp_path / "a.index", 0, 10).load(100)
    (tmp_path / "b.index").write_bytes(struct.pack(">iiii", 5, 10, 3, 20))
    with pytest.raises(IndexCorruptError):
        OffsetIndex(tmp_path / "b.index", 0, 10).load(100)
    # a middle entry out of order (one flipped byte): first and last entries look fine
    (tmp_path / "c.index").write_bytes(struct.pack(">iiiiii", 5, 10, 90, 20, 30, 40))
    with pytest.raises(IndexCorruptError):
        OffsetIndex(tmp_path / "c.index", 0, 10).load(100)
    (tmp_path / "d.index").write_bytes(struct.pack(">iiiiii", 5, 10, 6, 95, 30, 40))
    with pytest.raises(IndexCorruptError):
        OffsetIndex(tmp_path / "d.index", 0, 10).load(100)
    (tmp_path / "e.timeindex").write_bytes(struct.pack(">qiqiqi", 10, 1, 5, 2, 30, 3))
    with pytest.raises(IndexCorruptError):
        TimeIndex(tmp_path / "e.timeindex", 0, 10).load()
    (tmp_path / "f.timeindex").write_bytes(struct.pack(">qiqi", 10, 1, 30, 50))
    with pytest.raises(IndexCorruptError):
        TimeIndex(tmp_path / "f.timeindex", 0, 10).load(next_offset_bound=20)
    with pytest.raises(IndexCorruptError):
        OffsetIndex(tmp_path / "missing.index", 0, 10).load(100)


def test_time_index_keeps_strictly_increasing_timestamps(tmp_path):
    index = TimeIndex(tmp_path / "x.timeindex", 0, max_entries=3)
    assert index.lookup(5) == (-1, 0)
    index.maybe_append(1000, 3)
    index.maybe_append(1000, 5)  # same timestamp: ignored
    index.maybe_append(900, 6)  # smaller: ignored
    index.maybe_append(2000, 9)
    assert index.entries() == [(1000, 3), (2000, 9)]
    assert index.lookup(999) == (-1, 0)
    assert index.lookup(1500) == (1000, 3)
    assert index.lookup(2000) == (2000, 9)
    index.flush()
    assert (tmp_path / "x.timeindex").read_bytes() == struct.pack(">qiqi", 1000, 3, 2000, 9)
    index.maybe_append(3000, 12)
    assert index.is_full
    index.maybe_append(4000, 13)
    assert len(index) == 3
    index.maybe_append(4000, 13, skip_full_check=True)
    assert index.last_entry() == (4000, 13)
    index.truncate_to(9)
    assert index.entries() == [(1000, 3)]
    index.flush()
    index.close()
    loaded = TimeIndex(tmp_path / "x.timeindex", 0, 3)
    loaded.load()
    assert loaded.entries() == [(1000, 3)]


def test_offset_checkpoint_round_trip_and_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    cp = OffsetCheckpointFile(path)
    assert cp.read() == {}
    offsets = {TopicPartition("b-topic", 1): 20, TopicPartition("a", 0): 5}
    cp.write(offsets)
    assert path.read_text() == "0\n2\na 0 5\nb-topic 1 20\n"
    assert cp.read() == offsets
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    path.write_text("0\n3\na 0 5\n")
    with pytest.raises(CheckpointError):
        cp.read()
    assert cp.read_or_empty() == {}
    path.write_text("1\n0\n")
    with pytest.raises(CheckpointError):
        cp.read()


def test_leader_epoch_checkpoint_format(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(path).write([(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochCheckpointFile(path).read() == [(0, 0), (3, 120)]


def test_topic_partition_names():
    tp = TopicPartition("my-topic", 12)
    assert str(tp) == "my-topic-12"
    assert TopicPartition.parse("my-topic-12") == tp
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 1)]) == [
        TopicPartition("a", 1),
        TopicPartition("a", 2),
        TopicPartition("b", 0),
    ]
    with pytest.raises(ValueError):
        TopicPartition.parse("nodash")


@pytest.fixture
def cache(tmp_path):
    c = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    c.assign(1, 10)
    c.assign(3, 20)
    c.assign(5, 30)
    return c


def test_epoch_cache_assign_rules(cache, tmp_path):
    assert not cache.assign(5, 35)  # same epoch, later offset: no change
    assert cache.entries() == [(1, 10), (3, 20), (5, 30)]
    assert cache.assign(5, 25)  # same epoch, earlier offset: replaced
    assert cache.entries() == [(1, 10), (3, 20), (5, 25)]
    assert cache.assign(4, 40)  # lower epoch than latest: replaces the later ones
    assert cache.entries() == [(1, 10), (3, 20), (4, 40)]
    assert not cache.assign(-1, 50)
    assert LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint").entries() == cache.entries()


def test_epoch_cache_end_offset_for_matches_kafka(cache):
    leo = 45
    assert cache.end_offset_for(-1, leo) == (-1, -1)  # UNDEFINED_EPOCH
    assert cache.end_offset_for(5, leo) == (5, leo)  # latest epoch: log end offset
    assert cache.end_offset_for(3, leo) == (3, 30)  # known epoch: next epoch's start
    assert cache.end_offset_for(4, leo) == (3, 30)  # unknown in between: floor epoch, next start
    assert cache.end_offset_for(2, leo) == (1, 20)
    assert cache.end_offset_for(0, leo) == (0, 10)  # below earliest: requested epoch, first start
    assert cache.end_offset_for(6, leo) == (-1, -1)  # above latest
    empty = LeaderEpochFileCache(cache._file.path.with_name("other"))
    assert empty.end_offset_for(0, leo) == (-1, -1)


def test_epoch_cache_truncation(cache):
    assert cache.epoch_for_offset(25) == 3 and cache.epoch_for_offset(5) is None
    cache.truncate_from_end(30)
    assert cache.entries() == [(1, 10), (3, 20)]
    cache.truncate_from_end(100)
    assert cache.entries() == [(1, 10), (3, 20)]
    cache.truncate_from_start(15)
    assert cache.entries() == [(1, 15), (3, 20)]
    cache.truncate_from_start(20)
    assert cache.entries() == [(3, 20)]
    cache.truncate_from_start(5)
    assert cache.entries() == [(3, 20)]
    cache.clear()
    assert cache.entries() == [] and cache.latest_epoch is None


def test_corrupt_epoch_checkpoint_starts_empty(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n5\n1 2\n")
    assert LeaderEpochFileCache(path).entries() == []


def test_index_files_match_struct_packing_at_size(tmp_path):
    """The columns are interleaved by strided copies: the bytes must be Kafka's entry by entry, from
    any first unflushed entry, and read back the same."""
    n = 5000
    offsets = OffsetIndex(tmp_path / "big.index", 2**40, max_entries=n)
    times = TimeIndex(tmp_path / "big.timeindex", 2**40, max_entries=n)
    entries = [(2**40 + 7 * i + 3, 4096 * i + 11, 1_700_000_000_000 + 2**33 + 13 * i) for i in range(n)]
    for offset, position, timestamp in entries[: n // 3]:
        offsets.append(offset, position)
        times.maybe_append(timestamp, offset)
    offsets.flush()
    times.flush()
    for offset, position, timestamp in entries[n // 3 :]:
        offsets.append(offset, position)
        times.maybe_append(timestamp, offset)
    offsets.flush()  # the rest written at its place
    times.flush()
    base = 2**40
    assert (tmp_path / "big.index").read_bytes() == b"".join(struct.pack(">ii", o - base, p) for o, p, _ in entries)
    assert (tmp_path / "big.timeindex").read_bytes() == b"".join(struct.pack(">qi", t, o - base) for o, _, t in entries)
    loaded = TimeIndex(tmp_path / "big.timeindex", base, max_entries=n)
    loaded.load(next_offset_bound=entries[-1][0] + 1)
    assert loaded.entries() == [(t, o) for o, _, t in entries]
