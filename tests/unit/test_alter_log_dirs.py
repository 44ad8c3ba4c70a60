"""Moving a replica between log dirs (AlterReplicaLogDirs) through the replica manager and a real
LogManager over two dirs: the future log is filled from the current one while appends go on and
swapped in once caught up, nothing lost; Kafka's errors; the preferred dir of a partition not
here yet; a copy interrupted by a restart resumes from the reloaded future log. And a log dir
failing (an I/O error injected under the segment writes) takes only its partitions offline."""

from __future__ import annotations

import asyncio
import errno
import os
import uuid
from pathlib import Path
from types import MappingProxyType

import pytest
from test_log_support import TP, batch, close_opened_logs  # noqa: F401 - fixture

from broker.config import LogConfig
from broker.log import segment
from broker.log.manager import FUTURE_DIR_SUFFIX, LogManager
from broker.replication.log_dirs import describe_log_dirs
from broker.replication.partition import FetchIsolation, Partition
from broker.replication.replica_manager import ReplicaManager
from broker.replication.settings import FetcherSettings, IsrSettings
from controller.model import BrokerRegistration, ClusterImage, PartitionRegistration, TopicRegistration
from protocol.errors import ErrorCode, KafkaError
from protocol.records import decode_batch, iter_batch_headers
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId, ControllerEpoch, LeaderEpoch, Offset
from tests.support.controller import SharedController

B1 = BrokerId(1)
B2 = BrokerId(2)


def image_of(**topics: tuple[BrokerId, ...]) -> ClusterImage:
    """Topics of one partition each, with the replicas given, led by the first."""
    regs = {
        name: TopicRegistration(
            name, uuid.UUID(int=i + 1),
            MappingProxyType({0: PartitionRegistration(replicas, replicas, replicas[0], LeaderEpoch(1), 0)}),
        )  # fmt: skip
        for i, (name, replicas) in enumerate(sorted(topics.items()))
    }
    return ClusterImage("c", B1, ControllerEpoch(1), MappingProxyType({}), MappingProxyType(regs))


def replica_manager(lm: LogManager) -> ReplicaManager:
    view = SharedController().attach(BrokerRegistration(B1, (), None))
    return ReplicaManager(
        B1, lm, lambda t: LogConfig(), {}, alter_partition=view.alter_partition,
        isr_settings=IsrSettings(), fetcher_settings=FetcherSettings(B1, "PLAINTEXT"),
    )  # fmt: skip


def values(partition: Partition) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of the partition's log."""
    out: list[tuple[int, bytes | None]] = []
    offset = partition.log_start_offset
    while offset < partition.log_end_offset:
        read = partition.read_records(Offset(offset), 1 << 20, FetchIsolation.LOG_END, fetch_only_from_leader=False)
        assert read.info.records is not None
        data = read.info.records.read_bytes()
        for pos, header in iter_batch_headers(data, check_crc=True):
            out.extend((r.offset, r.value) for r in decode_batch(data, pos))
            offset = header.next_offset
    return out


async def wait_moved(rm: ReplicaManager, tp: TopicPartition = TP) -> None:
    for _ in range(500):
        if not rm.alter_log_dirs_manager.moving(tp):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the copy did not finish")


def test_move_follows_appends_and_swaps(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"

    async def main() -> None:
        lm = LogManager([a, b], LogConfig())
        lm.load_logs()
        rm = replica_manager(lm)
        rm.on_image(None, image_of(orders=(B1,)))
        partition = rm.partitions[TP]
        assert lm.log_dir_of(TP) == a
        for i in range(200):
            await partition.append_records_to_leader(batch(5, value=b"early-%d-" % i), 1)

        assert rm.alter_replica_log_dirs({TP: str(b.absolute())}) == {TP: ErrorCode.none}
        (future_dir,) = [p for p in b.iterdir() if p.name.endswith(FUTURE_DIR_SUFFIX)]
        assert future_dir.name.startswith("orders-0.")
        in_b = {r.tp: r for d in describe_log_dirs(rm, None) if d.path == str(b.absolute()) for r in d.replicas}
        assert in_b[TP].is_future and in_b[TP].offset_lag == 1000  # nothing copied yet
        # asking again, for the same dir, changes nothing
        assert rm.alter_replica_log_dirs({TP: str(b.absolute())}) == {TP: ErrorCode.none}

        for i in range(100):  # appends go on while the copy runs
            await partition.append_records_to_leader(batch(5, value=b"late-%d-" % i), 1)
            await asyncio.sleep(0)
        await wait_moved(rm)

        assert lm.log_dir_of(TP) == b and rm.partitions[TP] is partition
        assert (b / "orders-0").is_dir() and not (a / "orders-0").exists()
        assert not any(p.name.endswith(FUTURE_DIR_SUFFIX) for p in b.iterdir())
        got = values(partition)
        assert [o for o, _ in got] == list(range(1500))
        assert got[0][1] == b"early-0-0" and got[-1][1] == b"late-99-4"
        await partition.append_records_to_leader(batch(1, value=b"after"), 1)
        assert values(partition)[-1] == (1500, b"after0")
        replicas = {r.tp: r for d in describe_log_dirs(rm, None) for r in d.replicas}
        assert not replicas[TP].is_future
        await rm.shutdown()
        await lm.stop()
        lm.close()

        again = LogManager([a, b], LogConfig())  # the moved log is where it went after a restart
        again.load_logs()
        assert again.log_dir_of(TP) == b and again.get_log(TP) is not None
        assert again.get_log(TP).log_end_offset == 1501  # type: ignore[union-attr]
        again.close()

    asyncio.run(main())


def test_errors_and_preferred_dir(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"

    async def main() -> None:
        lm = LogManager([a, b], LogConfig())
        lm.load_logs()
        rm = replica_manager(lm)
        image = image_of(orders=(B1,), elsewhere=(B2,))
        rm.on_image(None, image)
        later = TopicPartition("later", 0)
        assert rm.alter_replica_log_dirs({
            TP: str(tmp_path / "nowhere"),  # not a log dir
            TopicPartition("orders", 1): "b",  # a log dir, but not by its absolute path
            TopicPartition("elsewhere", 0): str(b.absolute()),  # no replica here
            later: str(a.absolute()),  # does not exist (yet)
        }) == {  # fmt: skip
            TP: ErrorCode.log_dir_not_found,
            TopicPartition("orders", 1): ErrorCode.log_dir_not_found,
            TopicPartition("elsewhere", 0): ErrorCode.replica_not_available,
            later: ErrorCode.unknown_topic_or_partition,
        }
        assert lm.log_dir_of(TP) == a
        # the current dir: nothing to move
        assert rm.alter_replica_log_dirs({TP: str(a.absolute())}) == {TP: ErrorCode.none}
        assert not rm.alter_log_dirs_manager.moving(TP) and lm.get_future_log(TP) is None
        # `later` is created in the dir asked for, not in the least loaded one (b)
        rm.on_image(image, image_of(orders=(B1,), elsewhere=(B2,), later=(B1,)))
        assert lm.log_dir_of(later) == a
        await rm.shutdown()
        lm.close()

    asyncio.run(main())


def test_cancel_by_asking_for_the_current_dir(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"

    async def main() -> None:
        lm = LogManager([a, b], LogConfig())
        lm.load_logs()
        rm = replica_manager(lm)
        rm.on_image(None, image_of(orders=(B1,)))
        await rm.partitions[TP].append_records_to_leader(batch(3), 1)
        assert rm.alter_replica_log_dirs({TP: str(b.absolute())}) == {TP: ErrorCode.none}
        assert rm.alter_replica_log_dirs({TP: str(a.absolute())}) == {TP: ErrorCode.none}
        assert lm.get_future_log(TP) is None and not rm.alter_log_dirs_manager.moving(TP)
        (left,) = [p.name for p in b.iterdir() if p.name.startswith("orders-0")]
        assert left.endswith("-delete")  # removed after file.delete.delay.ms
        assert lm.log_dir_of(TP) == a and [o for o, _ in values(rm.partitions[TP])] == [0, 1, 2]
        await rm.shutdown()
        lm.close()

    asyncio.run(main())


def test_copy_interrupted_by_restart_resumes(tmp_path: Path) -> None:
    """Kafka reloads a future log at start-up and its alter-log-dirs fetcher goes on from its
    end; so does Samsa."""
    a, b = tmp_path / "a", tmp_path / "b"

    async def main() -> None:
        lm = LogManager([a, b], LogConfig())
        lm.load_logs()
        rm = replica_manager(lm)
        rm.on_image(None, image_of(orders=(B1,)))
        partition = rm.partitions[TP]
        for i in range(20):
            await partition.append_records_to_leader(batch(5, value=b"r%d-" % i), 1)
        assert rm.alter_replica_log_dirs({TP: str(b.absolute())}) == {TP: ErrorCode.none}
        rm.alter_log_dirs_manager.stop(TP)  # before its first step: the copy is driven by hand
        assert await partition.append_records_to_future_replica(1) > 0  # one batch copied
        assert partition.future_log_end_offset == 5
        await rm.shutdown()
        await lm.stop()
        lm.close()

        lm = LogManager([a, b], LogConfig())
        lm.load_logs()
        assert lm.log_dir_of(TP) == a
        assert lm.get_future_log(TP) is not None and lm.get_future_log(TP).log_end_offset == 5  # type: ignore[union-attr]
        rm = replica_manager(lm)
        rm.on_image(None, image_of(orders=(B1,)))
        assert rm.alter_log_dirs_manager.moving(TP)
        await wait_moved(rm)
        assert lm.log_dir_of(TP) == b
        got = values(rm.partitions[TP])
        assert [o for o, _ in got] == list(range(100)) and got[-1][1] == b"r19-4"
        await rm.shutdown()
        lm.close()

    asyncio.run(main())


def test_truncation_of_the_current_log_truncates_the_future_log(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"

    async def main() -> None:
        lm = LogManager([a, b], LogConfig())
        lm.load_logs()
        rm = replica_manager(lm)
        rm.on_image(None, image_of(orders=(B1,)))
        partition = rm.partitions[TP]
        for _ in range(4):
            await partition.append_records_to_leader(batch(5), 1)
        rm.alter_replica_log_dirs({TP: str(b.absolute())})
        rm.alter_log_dirs_manager.stop(TP)
        while await partition.append_records_to_future_replica(1 << 20):
            pass
        assert partition.future_log_end_offset == 20
        await partition.truncate_to(Offset(10))  # as a follower whose leader diverged
        assert partition.future_log_end_offset == 10
        await partition.truncate_fully_and_start_at(Offset(50))
        assert partition.future_log_end_offset == 50
        assert await partition.maybe_replace_current_with_future_replica(
            lambda: lm.replace_current_with_future_log(TP))
        assert lm.log_dir_of(TP) == b and partition.log_start_offset == partition.log_end_offset == 50
        await rm.shutdown()
        lm.close()

    asyncio.run(main())


def test_a_failed_log_dir_takes_only_its_partitions_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An I/O error (EIO) on a log of dir a takes a offline: its partition answers
    KAFKA_STORAGE_ERROR, the controller is told, b's partition goes on; a full disk (ENOSPC) does
    not fail b; once b fails too the broker is stopped (Kafka's LogDirFailureChannel and
    ReplicaManager.handleLogDirFailure)."""
    a, b = tmp_path / "a", tmp_path / "b"
    failing: dict[Path, int] = {}
    real = segment._pwritev

    def pwritev(fd: int, buffers: list[memoryview], offset: int) -> int:
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        for d, code in failing.items():
            if d in path.parents:
                raise OSError(code, os.strerror(code))
        return real(fd, buffers, offset)

    monkeypatch.setattr(segment, "_pwritev", pwritev)
    x, y = TopicPartition("x", 0), TopicPartition("y", 0)
    reported: list[frozenset[TopicPartition]] = []
    halted: list[bool] = []

    async def report(replicas: frozenset[TopicPartition]) -> None:
        reported.append(replicas)

    async def main() -> None:
        lm = LogManager([a, b], LogConfig())
        lm.load_logs()
        view = SharedController().attach(BrokerRegistration(B1, (), None))
        rm = ReplicaManager(
            B1, lm, lambda t: LogConfig(), {}, alter_partition=view.alter_partition,
            isr_settings=IsrSettings(), fetcher_settings=FetcherSettings(B1, "PLAINTEXT"),
            report_offline_replicas=report, on_all_log_dirs_failed=lambda: halted.append(True),
        )  # fmt: skip
        image = image_of(x=(B1,), y=(B1,))
        rm.on_image(None, image)
        assert (lm.log_dir_of(x), lm.log_dir_of(y)) == (a, b)
        failing[a] = errno.EIO
        with pytest.raises(KafkaError) as e:
            await rm.partitions[x].append_records_to_leader(batch(1), 1)
        assert e.value.code == ErrorCode.kafka_storage_error
        await asyncio.sleep(0.01)
        assert lm.offline_dirs == {a} and x in rm.offline_partitions and x not in rm.partitions
        with pytest.raises(KafkaError) as e:
            rm.get_partition(x)
        assert e.value.code == ErrorCode.kafka_storage_error
        rm.on_image(image, image)  # still a replica here, still offline: not created again
        assert x not in rm.partitions and lm.get_log(x) is None
        assert reported == [frozenset({x})]
        dirs = {d.path: d for d in describe_log_dirs(rm, None)}
        assert dirs[str(a.absolute())].error == ErrorCode.kafka_storage_error
        assert rm.alter_replica_log_dirs({y: str(a.absolute())}) == {y: ErrorCode.kafka_storage_error}
        await rm.partitions[y].append_records_to_leader(batch(2), 1)  # the other dir goes on
        assert rm.partitions[y].log_end_offset == 2

        failing[b] = errno.ENOSPC  # a full disk: the write is refused, the dir stays online
        with pytest.raises(KafkaError):
            await rm.partitions[y].append_records_to_leader(batch(1), 1)
        await asyncio.sleep(0.01)
        assert lm.offline_dirs == {a} and not halted
        failing[b] = errno.EIO
        with pytest.raises(KafkaError):
            await rm.partitions[y].append_records_to_leader(batch(1), 1)
        await asyncio.sleep(0.01)
        assert lm.offline_dirs == {a, b} and halted == [True] and reported == [frozenset({x})]
        failing.clear()
        await rm.shutdown()
        lm.close()

    asyncio.run(main())


def test_a_log_dir_unreadable_at_start_up_is_offline(tmp_path: Path) -> None:
    """Kafka's LogManager starts without a log dir it cannot read: the dir is offline, the
    replicas the broker already had are not created empty elsewhere but offline (reported to the
    controller, KAFKA_STORAGE_ERROR), the other dir's go on, a replica new here is created in a
    live dir; with no dir readable the start fails."""
    a, b = tmp_path / "a", tmp_path / "b"
    x, y, z = TopicPartition("x", 0), TopicPartition("y", 0), TopicPartition("z", 0)
    reported: list[frozenset[TopicPartition]] = []

    async def report(replicas: frozenset[TopicPartition]) -> None:
        reported.append(replicas)

    async def main() -> None:
        lm = LogManager([a, b], LogConfig())
        lm.load_logs()
        rm = replica_manager(lm)
        rm.on_image(None, image_of(x=(B1,), y=(B1,)))
        assert (lm.log_dir_of(x), lm.log_dir_of(y)) == (a, b)
        await rm.partitions[y].append_records_to_leader(batch(3), 1)
        await rm.shutdown()
        lm.close()

        a.rename(tmp_path / "a-unreadable")
        a.write_bytes(b"")  # not a directory: Kafka's "Failed to create or validate data directory"
        lm = LogManager([a, b], LogConfig())
        lm.load_logs()
        assert lm.offline_dirs == {a} and set(lm.all_logs()) == {y}
        view = SharedController().attach(BrokerRegistration(B1, (), None))
        rm = ReplicaManager(
            B1, lm, lambda t: LogConfig(), {}, alter_partition=view.alter_partition,
            isr_settings=IsrSettings(), fetcher_settings=FetcherSettings(B1, "PLAINTEXT"),
            report_offline_replicas=report,
        )  # fmt: skip
        image = image_of(x=(B1,), y=(B1,))
        rm.on_image(None, image)
        await asyncio.sleep(0.01)
        assert x in rm.offline_partitions and lm.get_log(x) is None and reported == [frozenset({x})]
        with pytest.raises(KafkaError) as e:
            rm.get_partition(x)
        assert e.value.code == ErrorCode.kafka_storage_error
        assert rm.partitions[y].log_end_offset == 3
        dirs = {d.path: d for d in describe_log_dirs(rm, None)}
        assert dirs[str(a.absolute())].error == ErrorCode.kafka_storage_error
        assert dirs[str(b.absolute())].error == ErrorCode.none
        rm.on_image(image, image_of(x=(B1,), y=(B1,), z=(B1,)))  # a new topic: created in b
        assert lm.log_dir_of(z) == b and x not in rm.partitions
        await rm.shutdown()
        lm.close()

    asyncio.run(main())
    b.rename(tmp_path / "b-gone")
    b.write_bytes(b"")
    with pytest.raises(RuntimeError, match="none of the log dirs"):
        LogManager([a, b], LogConfig())


def test_a_log_dir_whose_loading_fails_is_offline(tmp_path: Path) -> None:
    """An I/O error while loading a dir's logs (here a segment that is a directory: EISDIR) takes
    that dir offline, its logs dropped; the other dir's logs are served (Kafka's loadLogs)."""
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "x-0" / "00000000000000000000.log").mkdir(parents=True)
    (a / "w-0").mkdir()
    (b / "y-0").mkdir(parents=True)
    lm = LogManager([a, b], LogConfig())
    lm.load_logs()
    try:
        assert lm.offline_dirs == {a} and set(lm.all_logs()) == {TopicPartition("y", 0)}
        assert lm.live_log_dirs == [b]
    finally:
        lm.close()
