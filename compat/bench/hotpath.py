"""The broker's CPU per request on the hot paths, for Samsa source trees side by side.

    .venv/bin/python -m compat.bench.hotpath [--rounds 4] [--produces 3000] [TREE ...]

Each TREE is a checkout of Samsa (default: this one; to compare a change with its parent, add a
worktree of the parent, `git worktree add /tmp/base HEAD~1`, copy the built
protocol/_recordwalk*.so into it, and pass both). Each round starts every tree's broker in turn
(`python -m broker serve`, the tree as working directory, byte-compiled first) and drives it from
this process with a raw client, one request at a time, so that only the broker's work is timed:

- **produce**: `--produces` Produce v9 requests (acks=1) of one 64 KiB batch (63 records of 1 KiB,
  uncompressed), the requests ProducerPerformance sends with batch.size=65536;
- **fetch**: Fetch v11 requests of 1 MiB (max_partition_bytes) over what was produced, from a
  socket whose receive buffer is 64 KiB (the Java consumer's receive.buffer.bytes), as
  ConsumerPerformance fetches.

The broker's CPU (user and system, from /proc/<pid>/stat) is read before and after each phase:
printed per tree, median (min-max) over the rounds, in µs per request and s per GB. CPU time is
what the machine's load distorts least; rounds alternate the trees so drift falls on all alike.
"""

from __future__ import annotations

import argparse
import datetime
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from broker.testing.ports import free_port
from compat.bench.targets import compile_sources, cpu_times, create_topic
from protocol.records import NewRecord, build_batch
from tests.support.raw_client import RawClient

ROOT = Path(__file__).resolve().parents[2]
RECORDS_PER_BATCH = 63
RECORD_SIZE = 1024
FETCH_BYTES = 1 << 20


def _produce_request(batch: bytes) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=i16(1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(TopicProduceData(name=TopicName("hot"), partition_data=(
            PartitionProduceData(index=i32(0), records=batch),)),),
    )  # fmt: skip


def _fetch_request(offset: int) -> FetchRequest:
    return FetchRequest(
        replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500)),
        min_bytes=i32(1), max_bytes=i32(50 << 20), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1), topics=(FetchTopic(topic=TopicName("hot"), partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(offset), log_start_offset=i64(-1),
            partition_max_bytes=i32(FETCH_BYTES)),)),),
        forgotten_topics_data=(), rack_id="",
    )  # fmt: skip


def one_round(tree: Path, produces: int, spy: Callable[[int], None] | None = None) -> dict[str, tuple[float, float]]:
    """{phase: (user, system) broker CPU seconds per request} for one fresh broker of `tree`."""
    port = free_port()
    batch = build_batch([NewRecord(None, b"x" * RECORD_SIZE, (), None) for _ in range(RECORDS_PER_BATCH)])
    produce = _produce_request(batch)
    with tempfile.TemporaryDirectory(prefix="samsa-hotpath-") as tmp:
        cmd = [sys.executable, "-m", "broker", "serve", "--log-level", "WARNING",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp}/data",
               "--override", "log.segment.bytes=1073741824"]  # fmt: skip
        proc = subprocess.Popen(cmd, cwd=tree, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # "samsa listening on ..."
            if spy is not None:
                spy(proc.pid)
            create_topic(f"127.0.0.1:{port}", "hot")
            out: dict[str, tuple[float, float]] = {}
            with RawClient(port, timeout=30) as client:
                for _ in range(200):  # warm-up: imports, first segment pages
                    client.send_request(produce)
                    client.recv_frame()
                before = cpu_times(proc.pid)
                for _ in range(produces):
                    client.send_request(produce)
                    client.recv_frame()
                after = cpu_times(proc.pid)
                out["produce"] = ((after[0] - before[0]) / produces, (after[1] - before[1]) / produces)
            with RawClient(port, timeout=30) as client:
                client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
                last = (produces + 200) * RECORDS_PER_BATCH
                client.send_request(_fetch_request(0))
                client.recv_frame()
                before = cpu_times(proc.pid)
                fetches = 0
                for _ in range(3):
                    for offset in range(0, last - 1000, 1000):  # each reads 1 MiB
                        client.send_request(_fetch_request(offset))
                        client.recv_frame()
                        fetches += 1
                after = cpu_times(proc.pid)
                out["fetch"] = ((after[0] - before[0]) / fetches, (after[1] - before[1]) / fetches)
            return out
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


BYTES_PER_REQUEST = {"produce": RECORDS_PER_BATCH * (RECORD_SIZE + 10) + 61, "fetch": FETCH_BYTES}
"""Record bytes per request (a produce's batch, a fetch's MiB), for s/GB."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", type=Path, default=[ROOT])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--produces", type=int, default=3000)
    args = parser.parse_args(argv)
    runs: dict[Path, list[dict[str, tuple[float, float]]]] = {t: [] for t in args.trees}
    for tree in args.trees:
        compile_sources(tree)
    for i in range(args.rounds):
        for tree in args.trees:
            runs[tree].append(one_round(tree, args.produces))
        print(f"[hotpath] {i + 1}/{args.rounds} rounds", file=sys.stderr)
    for tree, rounds in runs.items():
        print(f"{tree}:")
        for phase in ("produce", "fetch"):
            user = [1e6 * r[phase][0] for r in rounds]
            system = [1e6 * r[phase][1] for r in rounds]
            total = [u + s for u, s in zip(user, system)]
            per_gb = [t / 1e6 / (BYTES_PER_REQUEST[phase] / 1e9) for t in total]
            print(f"  {phase}: {_summary(total)} µs per request (user {_summary(user)}, system "
                  f"{_summary(system)}); {statistics.median(per_gb):.2f} s/GB")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
