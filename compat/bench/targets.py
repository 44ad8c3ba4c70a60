"""The brokers a benchmark runs against: Samsa and Apache Kafka, one node or three, same settings.

Every target gets `BENCH_SETTINGS` (one partition by default, no fsync per message: both brokers
leave flushing to the OS unless log.flush.interval.* is set, and neither is set here; 256 MiB
segments so that no roll happens inside a run). Kafka is the 4.x KRaft broker from the Maven jars
(compat/kafka.py), heap `-Xmx512m -XX:+UseG1GC` as in the compat suite. Samsa is `python -m
broker serve` (broker/testing/process.py), the cluster `broker/testing/cluster.py` (ZooKeeper +
three brokers). Kafka's three-node cluster is three combined broker+controller KRaft nodes.
Samsa's sources are byte-compiled first (`compile_sources`), as `pip install` does for an
installed broker: with PYTHONDONTWRITEBYTECODE set, every start would otherwise compile each
module changed since its .pyc was last written.
"""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing import SamsaProcess
from broker.testing.ports import free_port
from compat.kafka import KafkaJarProcess, api_versions_ok

BENCH_SETTINGS: dict[str, str] = {
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    # KIP-848 members heartbeat every 500 ms on both (Kafka's nodes get it from compat/kafka.py's
    # COMMON_SETTINGS too): with the 5 s default each step of a rebalance waits a heartbeat
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",  # allows it (Kafka refuses to start otherwise)
    "log.segment.bytes": str(256 * 1024 * 1024),
}

CLUSTER_SETTINGS: dict[str, str] = {
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "min.insync.replicas": "2",
}


SOURCE_PACKAGES = ("broker", "protocol", "controller")


def compile_sources(root: Path) -> None:
    """Write the .pyc of Samsa's packages under `root` (py_compile writes them even when
    PYTHONDONTWRITEBYTECODE is set), so that a start measures the broker, not the compiler."""
    for package in SOURCE_PACKAGES:
        if not compileall.compile_dir(root / package, quiet=1):
            raise RuntimeError(f"byte-compiling {root / package} failed")


class Target(Protocol):
    name: str

    @property
    def bootstrap_servers(self) -> str: ...

    def pids(self) -> list[int]: ...

    def close(self) -> None: ...


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a process so far, robust to a busy machine."""
    return sum(cpu_times(pid))


def rss_bytes(pid: int) -> int:
    """VmRSS of a process, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    timeout: float = 120.0,
    *,
    assignment: list[list[int]] | None = None,
    config: dict[str, str] | None = None,
) -> None:
    """Create a topic (with `assignment`, its replica lists, instead of a partition count and
    replication factor) and wait until every partition has a leader in Metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = (NewTopic(name, len(assignment), replica_assignment=assignment, config=config or {})
             if assignment is not None else
             NewTopic(name, num_partitions=partitions, replication_factor=replication, config=config or {}))
    for f in admin.create_topics([topic]).values():
        f.result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader >= 0 and p.error is None for p in md.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise TimeoutError(
        f"topic {name}: not all {partitions} partitions have a leader after {timeout}s"
    )


# -- TLS ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchTls:
    """A test certificate authority's broker key store and trust store (PKCS12), made once per run."""

    keystore: Path
    truststore: Path
    password: str

    @classmethod
    def make(cls, directory: Path) -> BenchTls:
        from broker.testing.certs import PASSWORD, CertificateAuthority

        ca = CertificateAuthority(directory)
        return cls(ca.issue("broker").p12, ca.p12, PASSWORD)

    def broker_settings(self) -> dict[str, str]:
        """Kafka's ssl.* settings, the same on both brokers (no client authentication)."""
        return {
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.keystore),
            "ssl.keystore.password": self.password,
            "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(self.truststore),
            "ssl.truststore.password": self.password,
        }  # fmt: skip

    def client_props(self) -> dict[str, str]:
        return {
            "security.protocol": "SSL", "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(self.truststore), "ssl.truststore.password": self.password,
        }  # fmt: skip


# -- Samsa ---------------------------------------------------------------------------------------

METRICS_SCRAPE_S: float | None = None
"""`--metrics`: Samsa serves its Prometheus endpoint and a scraper reads it every this many
seconds for the whole run (None: no endpoint, the default)."""


class Scraper:
    """GET every endpoint's /metrics every `interval` seconds in a thread, as Prometheus would."""

    def __init__(self, ports: list[int], interval: float) -> None:
        self.ports, self.interval = ports, interval
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for port in self.ports:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
                    self.scrapes += 1
                except OSError:
                    pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(15)


def _metrics_settings(port: int) -> dict[str, str]:
    return {"metrics.prometheus.port": str(port), "metrics.prometheus.host": "127.0.0.1"}


class SamsaTarget:
    name = "samsa"

    def __init__(
        self, overrides: Mapping[str, str] | None = None, port: int = 0, tls: BenchTls | None = None
    ) -> None:
        self._tmp = tempfile.mkdtemp(prefix="samsa-bench-")
        self.ssl_port = free_port() if tls is not None else 0
        if tls is not None:  # an SSL listener besides PLAINTEXT (which the start-up line names first)
            port = port or free_port()
            overrides = {**(overrides or {}), **tls.broker_settings(),
                         "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{self.ssl_port}"}  # fmt: skip
        self.scraper: Scraper | None = None
        metrics: dict[str, str] = {}
        if METRICS_SCRAPE_S is not None:
            metrics_port = free_port()
            metrics = _metrics_settings(metrics_port)
            self.scraper = Scraper([metrics_port], METRICS_SCRAPE_S)
        self.process = SamsaProcess(
            Path(self._tmp) / "data",
            {**BENCH_SETTINGS, **metrics, **(overrides or {})},
            port=port,
            log_level="WARNING",
        )

    def start(self) -> SamsaTarget:
        self.process.start()
        self.start_scraper()
        return self

    def start_scraper(self) -> None:
        """With `--metrics`: scrape the started broker from now on."""
        if self.scraper is not None:
            self.scraper.start()

    @property
    def bootstrap_servers(self) -> str:
        return self.process.bootstrap_servers

    @property
    def ssl_bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def pids(self) -> list[int]:
        assert self.process.proc is not None
        return [self.process.proc.pid]

    def close(self) -> None:
        if self.scraper is not None:
            self.scraper.stop()
        try:
            self.process.close()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)


class SamsaClusterTarget:
    name = "samsa"

    def __init__(self, brokers: int = 3, overrides: Mapping[str, str] | None = None) -> None:
        from broker.testing.cluster import SamsaCluster

        self.cluster = SamsaCluster(
            None,
            brokers,
            overrides={**BENCH_SETTINGS, **CLUSTER_SETTINGS, **(overrides or {})},
            log_level="WARNING",
            metrics=True,  # read at the start and end of the chain runs; scraped only with --metrics
            proxied=False,  # Kafka's nodes talk directly too: no proxy in each replication round trip
        )
        self.scraper: Scraper | None = None

    def start(self) -> SamsaClusterTarget:
        self.cluster.start()
        if METRICS_SCRAPE_S is not None:
            self.scraper = Scraper([s.metrics_port for s in self.cluster.brokers.values()], METRICS_SCRAPE_S)
            self.scraper.start()
        return self

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def pids(self) -> list[int]:
        return [
            slot.process.proc.pid
            for slot in self.cluster.brokers.values()
            if slot.process.proc is not None
        ]

    def pid_of(self, broker_id: int) -> int:
        proc = self.cluster.brokers[broker_id].process.proc
        assert proc is not None
        return proc.pid

    def replication_bytes_out(self, broker_id: int) -> int:
        """The broker's ReplicationBytesOut (bytes its followers fetched from it), from /metrics."""
        port = self.cluster.brokers[broker_id].metrics_port
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        for line in text.splitlines():
            if line.startswith("kafka_server_brokertopicmetrics_replicationbytesout"):
                return int(float(line.split()[-1]))
        raise RuntimeError("no replicationbytesout metric")

    def server_pids(self) -> list[int]:
        """The brokers and their ZooKeeper."""
        zk = self.cluster.zookeeper.proc
        return self.pids() + ([zk.pid] if zk is not None else [])

    def close(self) -> None:
        if self.scraper is not None:
            self.scraper.stop()
        self.cluster.close()


# -- Kafka ---------------------------------------------------------------------------------------


class KafkaNode(KafkaJarProcess):
    """One KRaft node (broker+controller) whose ports and quorum are fixed before start, with the
    storage format apart from the launch (so start-up time counts the server process only)."""

    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, int],
        port: int,
        overrides: Mapping[str, str] | None = None,
        listeners: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(overrides, listeners=listeners)
        self.node_id = node_id
        self.voters = dict(voters)
        self.port = port
        self.controller_port = self.voters[node_id]
        self.env: dict[str, str] = {}
        """Extra environment for the JVM (the fault benchmark's slow disk preloads a library)."""

    def _properties(self) -> dict[str, str]:
        props = super()._properties()
        props["node.id"] = str(self.node_id)
        props["controller.quorum.voters"] = ",".join(
            f"{i}@127.0.0.1:{p}" for i, p in sorted(self.voters.items())
        )
        return props

    def format(self, cluster_id: str) -> None:
        from compat.kafka import _LOG4J2

        self.cluster_id = cluster_id
        self.root.mkdir(parents=True, exist_ok=True)
        props = self.root / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self._properties().items()))
        (self.root / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_path))
        fmt = subprocess.run(
            self._jvm(
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={cluster_id}",  # one argument: an id may begin with "-"
                "-c",
                str(props),
                "--ignore-formatted",
                heap="-Xmx256m",
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if fmt.returncode != 0:
            raise RuntimeError(
                f"kafka storage format failed ({fmt.returncode}):\n{fmt.stdout}\n{fmt.stderr}"
            )

    def launch(self) -> None:
        with open(self.root / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(
                self._jvm("kafka.Kafka", str(self.root / "server.properties")),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **self.env},
            )

    def wait_ready(self, timeout: float = 120.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"kafka node {self.node_id} exited with {self.proc.returncode}:\n{self.read_log()[-3000:]}"
                )
            if "Kafka Server started" in self.read_log() and api_versions_ok(
                self.host, self.port
            ):
                return
            time.sleep(0.1)
        raise TimeoutError(f"kafka node {self.node_id} did not start within {timeout}s")


class KafkaTarget:
    """Apache Kafka: one combined node, or `nodes` combined nodes forming one KRaft quorum."""

    name = "kafka"

    def __init__(
        self, nodes: int = 1, overrides: Mapping[str, str] | None = None, port: int = 0,
        tls: BenchTls | None = None,
    ) -> None:
        settings = {
            **BENCH_SETTINGS,
            **(CLUSTER_SETTINGS if nodes > 1 else {}),
            **(tls.broker_settings() if tls is not None else {}),
            **(overrides or {}),
        }
        voters = {i: free_port() for i in range(1, nodes + 1)}
        self.nodes = [
            KafkaNode(
                i, voters, port if (port and nodes == 1) else free_port(), settings,
                listeners={"SSL": free_port()} if tls is not None else None,
            )
            for i in range(1, nodes + 1)
        ]

    def format(self) -> None:
        from compat.kafka import new_cluster_id

        cid = new_cluster_id()
        threads = [threading.Thread(target=n.format, args=(cid,)) for n in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def launch(self) -> None:
        for n in self.nodes:
            n.launch()

    def wait_ready(self) -> None:
        for n in self.nodes:
            n.wait_ready()
        if len(self.nodes) > 1:
            admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
            deadline = time.monotonic() + 60
            while len(admin.list_topics(timeout=10).brokers) < len(self.nodes):
                if time.monotonic() > deadline:
                    raise TimeoutError("kafka brokers did not all register")
                time.sleep(0.2)

    def start(self) -> KafkaTarget:
        self.format()
        self.launch()
        self.wait_ready()
        return self

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap_servers for n in self.nodes)

    @property
    def ssl_bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.extra_listeners['SSL']}" for n in self.nodes)

    def pids(self) -> list[int]:
        return [n.proc.pid for n in self.nodes if n.proc is not None]

    def close(self) -> None:
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.proc.terminate()
        for n in self.nodes:
            n.close()


def start_target(
    name: str, nodes: int = 1
) -> SamsaTarget | SamsaClusterTarget | KafkaTarget:
    if name == "samsa":
        return (SamsaTarget() if nodes == 1 else SamsaClusterTarget(nodes)).start()
    if name == "kafka":
        return KafkaTarget(nodes).start()
    raise ValueError(name)
