"""A real ZooKeeper and N Samsa brokers on loopback, with faults, for tests and for users.

    with SamsaCluster(tmp_path, brokers=3) as cluster:
        cluster.bootstrap_servers            # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        cluster.kill(2); cluster.restart(2)  # SIGKILL, start again on the same data dir and ports
        cluster.pause(1); cluster.resume(1)  # SIGSTOP / SIGCONT
        cluster.stop(3)                      # SIGTERM: controlled shutdown
        cluster.cut(1, 2); cluster.heal(1, 2)              # the network between two brokers
        cluster.cut_zookeeper(1); cluster.heal_zookeeper(1)  # between a broker and ZooKeeper
        cluster.stop_zookeeper(); cluster.start_zookeeper()  # ZooKeeper itself down, then back
        cluster.slow_disk(1, write_ms=50)    # with SamsaCluster(..., slow_disk=True): writes slowed
        cluster.metadata(1)                  # Metadata v12 as broker 1 answers it
        cluster.brokers[1].metrics_port      # with SamsaCluster(..., metrics=True): /metrics there

    python -m broker.testing.cluster --brokers 3      # a local cluster until Ctrl-C

ZooKeeper is Debian's `zookeeper` package (ZooKeeperServerMain from /usr/share/java), tickTime
500 ms so that sessions from 1 s to 60 s are allowed; `stop_zookeeper` kills it and
`start_zookeeper` starts it again on the same port and data (its sessions survive, as they do a
ZooKeeper restart). A slow disk is an LD_PRELOAD library (broker/testing/slowdisk.c) whose write and
fsync delays a control file switches while the broker runs.

Addressing, so that every link a fault may cut passes through a proxy the harness controls:

- broker i has a client listener PLAINTEXT (Metadata answers with these, clients connect directly),
  an inter-broker listener REPLICATION and a UDP heartbeat port, all fixed before start;
- broker i's `zookeeper.connect` is its own TCP proxy to ZooKeeper (`cut_zookeeper(i)`);
- for every ordered pair (i, j) there is a TCP proxy to j's REPLICATION listener and a UDP proxy to
  j's heartbeat port; broker i is told, through `samsa.peer.address.overrides`, to reach j's
  REPLICATION listener and heartbeats at these proxies (`cut(i, j)` cuts both directions).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.testing.ports import free_port
from broker.testing.process import SamsaProcess
from broker.testing.proxy import ProxyLoop, TcpProxy, UdpProxy
from broker.testing.slowdisk import SlowDisk
from protocol.types import TopicName

ZK_JARS = (
    "zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple", "netty-handler", "netty-common",
    "netty-buffer", "netty-transport", "netty-codec", "netty-resolver", "netty-transport-native-epoll",
    "netty-transport-native-unix-common", "metrics-core", "commons-cli", "snappy-java",
)  # fmt: skip


def zookeeper_classpath() -> str:
    jars = [Path("/usr/share/java") / f"{name}.jar" for name in ZK_JARS]
    missing = [str(j) for j in jars[:2] if not j.exists()]
    if missing:
        raise RuntimeError(f"ZooKeeper jars missing ({missing}): apt-get install zookeeper")
    return ":".join(str(j) for j in jars if j.exists())


class ZooKeeperServer:
    """A standalone ZooKeeper server process on 127.0.0.1."""

    def __init__(self, data_dir: Path, port: int = 0, *, tls: tuple[Path, Path] | None = None) -> None:
        """`tls`: (a PEM key and certificate chain, a PEM CA) to also listen with TLS on
        `secure_port` (Netty's connection factory, as ZooKeeper requires for TLS)."""
        self.data_dir = data_dir
        self.port = port or free_port()
        self.tls = tls
        self.secure_port = free_port() if tls else 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir / "zookeeper.log"

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime=500\nminSessionTimeout=1000\nmaxSessionTimeout=60000\n"
            f"dataDir={self.data_dir / 'data'}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\nmaxClientCnxns=0\n"
            + (f"secureClientPort={self.secure_port}\nssl.keyStore.location={self.tls[0]}\n"
               f"ssl.keyStore.type=PEM\nssl.trustStore.location={self.tls[1]}\nssl.trustStore.type=PEM\n"
               "ssl.clientAuth=none\n" if self.tls else "")
        )
        java = shutil.which("java") or "/usr/bin/java"
        netty = ["-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory"] if self.tls else []
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [java, "-Xmx256m", *netty, "-cp", zookeeper_classpath(),
                 "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.5) as s:
                    s.sendall(b"ruok")
                    if s.recv(4) == b"imok":
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"ZooKeeper did not start within {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@dataclass
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    error: int
    offline: list[int] = field(default_factory=list)


@dataclass
class MetadataView:
    controller_id: int
    brokers: dict[int, tuple[str, int, str | None]]
    topics: dict[str, dict[int, PartitionView]]
    cluster_id: str | None


def fetch_metadata(host: str, port: int, topics: Sequence[str] | None = None, timeout: float = 5.0) -> MetadataView:
    """Metadata v12 from one broker (the whole cluster unless `topics` is given)."""
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    from broker.replication.leader_client import LeaderClient

    async def ask() -> Any:
        client = LeaderClient(host, port, client_id="samsa-cluster-harness", timeout_s=timeout)
        try:
            wanted = None if topics is None else tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics)
            return await client.request(
                MetadataRequest(topics=wanted, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
            )
        finally:
            client.close()

    resp = asyncio.run(ask())
    return MetadataView(
        controller_id=int(resp.controller_id),
        brokers={int(b.node_id): (b.host, int(b.port), b.rack) for b in resp.brokers},
        topics={
            t.name: {
                int(p.partition_index): PartitionView(
                    int(p.leader_id), int(p.leader_epoch), [int(r) for r in p.replica_nodes],
                    [int(r) for r in p.isr_nodes], int(p.error_code), [int(r) for r in p.offline_replicas],
                )
                for p in t.partitions
            }
            for t in resp.topics
        },
        cluster_id=resp.cluster_id,
    )


@dataclass
class BrokerSlot:
    broker_id: int
    client_port: int
    replication_port: int
    heartbeat_port: int
    process: SamsaProcess
    zk_proxy: TcpProxy | None
    """its link to ZooKeeper (None in a cluster without proxies)"""
    metrics_port: int = 0
    """its Prometheus endpoint on 127.0.0.1 (0: none)"""


class SamsaCluster:
    def __init__(
        self,
        base_dir: str | Path | None = None,
        brokers: int = 3,
        *,
        overrides: Mapping[str, str] | None = None,
        broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
        racks: Mapping[int, str] | None = None,
        log_level: str = "INFO",
        slow_disk: bool = False,
        metrics: bool = False,
        proxied: bool = True,
    ) -> None:
        """`metrics`: each broker serves Prometheus metrics on a port of its own
        (`brokers[i].metrics_port`). `proxied=False`: brokers reach each other and ZooKeeper
        directly, as in production, without the proxies that let a test cut links (`cut`,
        `isolate`, `cut_zookeeper` then raise); the benchmarks' clusters, where a proxy in the
        middle of every replication round trip would be measured too."""
        self._proxied = proxied
        self._metrics = metrics
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if base_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samsa-cluster-")
            base_dir = self._tmp.name
        self.base_dir = Path(base_dir)
        self.n = brokers
        self.overrides = {"zookeeper.session.timeout.ms": "6000", **(overrides or {})}
        self.broker_overrides = {k: dict(v) for k, v in (broker_overrides or {}).items()}
        self.racks = dict(racks or {})
        self.log_level = log_level
        self.slow_disks: dict[int, SlowDisk] = {}
        self._slow_disk = slow_disk
        self.zookeeper = ZooKeeperServer(self.base_dir / "zookeeper")
        self.proxies = ProxyLoop()
        self.brokers: dict[int, BrokerSlot] = {}
        self.peer_tcp: dict[tuple[int, int], TcpProxy] = {}
        self.peer_udp: dict[tuple[int, int], UdpProxy] = {}

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> SamsaCluster:
        self.zookeeper.start()
        ids = list(range(1, self.n + 1))
        ports = {i: (free_port(), free_port(), free_port(socket.SOCK_DGRAM)) for i in ids}
        peer_ports = {(i, j): ports[j][1:] for i in ids for j in ids if i != j}
        if self._proxied:
            for (i, j), (repl_port, hb_port) in peer_ports.items():
                self.peer_tcp[(i, j)] = TcpProxy(self.proxies, _constant(("127.0.0.1", repl_port))).start()
                self.peer_udp[(i, j)] = UdpProxy(self.proxies, _constant(("127.0.0.1", hb_port))).start()
                peer_ports[(i, j)] = (self.peer_tcp[(i, j)].port, self.peer_udp[(i, j)].port)
        for i in ids:
            client, repl, hb = ports[i]
            metrics_port = free_port() if self._metrics else 0
            zk_proxy = None
            zk_port = self.zookeeper.port
            if self._proxied:
                zk_proxy = TcpProxy(self.proxies, lambda: ("127.0.0.1", self.zookeeper.port)).start()
                zk_port = zk_proxy.port
            peers = ",".join(f"{j}=127.0.0.1:{peer_ports[(i, j)][0]}:{peer_ports[(i, j)][1]}" for j in ids if j != i)
            props = {
                "broker.id": str(i),
                "listeners": f"PLAINTEXT://127.0.0.1:{client},REPLICATION://127.0.0.1:{repl}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
                "inter.broker.listener.name": "REPLICATION",
                "zookeeper.connect": f"127.0.0.1:{zk_port}",
                "samsa.heartbeat.port": str(hb),
                "samsa.peer.address.overrides": peers,
                "default.replication.factor": str(min(3, self.n)),
                "offsets.topic.replication.factor": str(min(3, self.n)),
                **({"broker.rack": self.racks[i]} if i in self.racks else {}),
                **({"metrics.prometheus.port": str(metrics_port), "metrics.prometheus.host": "127.0.0.1"}
                   if metrics_port else {}),
                **self.overrides,
                **self.broker_overrides.get(i, {}),
            }
            data_dir = self.base_dir / f"broker-{i}"
            env: dict[str, str] = {}
            if self._slow_disk:
                self.slow_disks[i] = SlowDisk(self.base_dir / f"broker-{i}.slowdisk", data_dir)
                env = self.slow_disks[i].environment()
            process = SamsaProcess(data_dir, props, port=client, log_level=self.log_level, env=env)
            self.brokers[i] = BrokerSlot(i, client, repl, hb, process, zk_proxy, metrics_port)
        self._start_all([slot.process for slot in self.brokers.values()])
        self.wait_for(lambda: len(self.metadata(1).brokers) == self.n, 30, "all brokers registered")
        return self

    @staticmethod
    def _start_all(processes: Sequence[SamsaProcess]) -> None:
        """Start brokers in parallel (each start waits for its listening line)."""
        errors: list[BaseException] = []

        def run(p: SamsaProcess) -> None:
            try:
                p.start()
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                errors.append(e)

        threads = [threading.Thread(target=run, args=(p,)) for p in processes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def close(self) -> None:
        for slot in self.brokers.values():
            slot.process.kill()
        self.zookeeper.stop()
        proxies: list[TcpProxy | UdpProxy] = [
            *self.peer_tcp.values(), *self.peer_udp.values(),
            *(s.zk_proxy for s in self.brokers.values() if s.zk_proxy is not None),
        ]
        for p in proxies:
            p.close()
        self.proxies.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> SamsaCluster:  # noqa: PYI034 - not subclassed
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- access ---------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{s.client_port}" for s in self.brokers.values() if s.process.running)

    def process(self, i: int) -> SamsaProcess:
        return self.brokers[i].process

    def live(self) -> list[int]:
        return [i for i, s in self.brokers.items() if s.process.running]

    def metadata(self, i: int | None = None, topics: Sequence[str] | None = None) -> MetadataView:
        i = i if i is not None else self.live()[0]
        return fetch_metadata("127.0.0.1", self.brokers[i].client_port, topics)

    def wait_for(self, cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
        """Poll `cond` until it returns something truthy (errors count as not yet)."""
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                value = cond()
                if value:
                    return value
            except Exception as e:  # noqa: BLE001 - a broker restarting, a connection refused
                last = e
            time.sleep(interval)
        raise TimeoutError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last!r})" if last else ""))

    def controller(self, via: int | None = None) -> int:
        return self.metadata(via).controller_id

    # -- faults ---------------------------------------------------------------------------------

    def kill(self, i: int) -> None:
        self.brokers[i].process.kill()

    def stop(self, i: int, timeout: float = 30.0) -> int | None:
        return self.brokers[i].process.stop(timeout)

    def pause(self, i: int) -> None:
        self.brokers[i].process.pause()

    def resume(self, i: int) -> None:
        self.brokers[i].process.resume()

    def restart(self, i: int) -> None:
        p = self.brokers[i].process
        if p.running:
            p.stop()
        p.start()

    def _require_proxies(self) -> None:
        if not self._proxied:
            raise RuntimeError("this cluster was started without proxies (proxied=False): links cannot be cut")

    def cut(self, i: int, j: int) -> None:
        """Cut the network between brokers i and j (replication TCP and heartbeats, both ways)."""
        self._require_proxies()
        for key in ((i, j), (j, i)):
            self.peer_tcp[key].cut()
            self.peer_udp[key].cut()

    def heal(self, i: int, j: int) -> None:
        self._require_proxies()
        for key in ((i, j), (j, i)):
            self.peer_tcp[key].heal()
            self.peer_udp[key].heal()

    def isolate(self, i: int) -> None:
        """Cut broker i from every other broker and from ZooKeeper."""
        for j in self.brokers:
            if j != i:
                self.cut(i, j)
        self.cut_zookeeper(i)

    def rejoin(self, i: int) -> None:
        for j in self.brokers:
            if j != i:
                self.heal(i, j)
        self.heal_zookeeper(i)

    def _zk_proxy(self, i: int) -> TcpProxy:
        proxy = self.brokers[i].zk_proxy
        if proxy is None:
            self._require_proxies()
        assert proxy is not None
        return proxy

    def cut_zookeeper(self, i: int) -> None:
        self._zk_proxy(i).cut()

    def heal_zookeeper(self, i: int) -> None:
        self._zk_proxy(i).heal()

    def stop_zookeeper(self) -> None:
        """Kill ZooKeeper itself (every broker loses its connection, no session expires)."""
        self.zookeeper.stop()

    def start_zookeeper(self) -> None:
        self.zookeeper.start()

    def slow_disk(self, i: int, write_ms: int = 0, fsync_ms: int = 0, fail_errno: int = 0) -> None:
        """Slow every write (and fsync) broker i makes to its data directory, or with `fail_errno`
        make them fail (errno.EIO: a failed disk); 0 heals."""
        if i not in self.slow_disks:
            raise RuntimeError("start the cluster with SamsaCluster(..., slow_disk=True)")
        self.slow_disks[i].set(write_ms, fsync_ms, fail_errno)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="samsa cluster", description="a local ZooKeeper + Samsa cluster")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--dir", help="data directory (default: a temporary one)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a config of every broker (repeatable): a secured inter-broker listener, ...")
    args = parser.parse_args(argv)
    overrides = dict(o.split("=", 1) for o in args.override)
    # no proxies: a cluster to use, not to cut links in
    with SamsaCluster(args.dir, brokers=args.brokers, metrics=True, overrides=overrides, proxied=False) as cluster:
        print(f"zookeeper 127.0.0.1:{cluster.zookeeper.port}", flush=True)
        for i, slot in cluster.brokers.items():
            print(f"broker {i} PLAINTEXT://127.0.0.1:{slot.client_port} metrics http://127.0.0.1:{slot.metrics_port}/metrics "
                  f"log {slot.process.log_path}", flush=True)
        print(f"bootstrap.servers={cluster.bootstrap_servers}  (Ctrl-C stops the cluster)", flush=True)
        stop = False

        def on_signal(*_: object) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, on_signal)
        try:
            while not stop:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        for i in cluster.live():
            cluster.stop(i)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def _constant(address: tuple[str, int]) -> Callable[[], tuple[str, int]]:
    """A proxy target that never moves."""
    return lambda: address
