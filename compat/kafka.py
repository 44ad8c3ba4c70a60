"""Real Apache Kafka for the differential suite, and the two targets the suite runs against.

`KafkaJarProcess` runs Apache Kafka 4.x in KRaft mode, one node that is broker and controller at
once, straight from the Maven Central jars that compat/jvm/fetch.sh copies into
compat/target/kafka (no tarball, no Docker): it formats a fresh storage directory with
`kafka.tools.StorageTool format`, starts `kafka.Kafka server.properties` on free 127.0.0.1 ports,
waits until the broker answers ApiVersions and Metadata lists it, and on `close()` stops it
(SIGTERM, then SIGKILL) and deletes its data.

`KafkaContainer` is the same interface over testcontainers' Kafka module, used by `start_kafka()`
only where a Docker engine answers `docker info`.

Both targets get the settings in `COMMON_SETTINGS` (Samsa's test defaults: auto topic creation,
one partition, internal topics with replication factor 1, no initial rebalance delay), so that
a difference the suite sees is a difference in the broker, not in its configuration.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from broker.testing.ports import free_port
from broker.testing.process import terminate

COMPAT = Path(__file__).resolve().parent
TARGET = COMPAT / "target"
KAFKA_CLASSPATH = TARGET / "kafka"

# Settings both targets run with (Kafka's key names; Samsa reads the same ones).
COMMON_SETTINGS: dict[str, str] = {
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "10",
    "group.initial.rebalance.delay.ms": "0",
    # KIP-848 members heartbeat every 500 ms (Kafka's default 5 s makes each rebalance seconds long)
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",  # allows that 500 ms interval (and as a group config)
    # The suite's records carry fixed 2020 timestamps (deterministic observations), which the
    # default 7-day retention deletes at its next check, mid-test (a sweep read 0 of 4 records
    # once Kafka had rolled and deleted them): no retention check during a session, on either broker
    "log.retention.check.interval.ms": "86400000",
    "log.initial.task.delay.ms": "86400000",
}

# Kafka-only settings: its own internal topics (share groups) and a quiet, fast single node.
_KAFKA_ONLY: dict[str, str] = {
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "num.network.threads": "2",
    "num.io.threads": "4",
}

JVM_HEAP = "-Xmx512m"


class Target(Protocol):
    """What the suite needs from a broker under test."""

    name: str

    @property
    def bootstrap_servers(self) -> str: ...

    def close(self) -> None: ...


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise RuntimeError("java not found: tests/run.sh installs default-jdk-headless")
    return found


def classpath(name: str) -> str:
    """The jars of one classpath under compat/target (fetched by compat/jvm/fetch.sh)."""
    d = TARGET / name
    jars = sorted(d.glob("*.jar"))
    if not jars:
        raise RuntimeError(f"{d} holds no jars: run bash compat/jvm/fetch.sh {name}")
    return os.pathsep.join(str(j) for j in jars)


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (as Uuid.toString)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


def api_versions_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when something on host:port answers an ApiVersions v0 request without error."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            client_id = b"samsa-compat"
            body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", _recv_exactly(s, 4))[0]
            data = _recv_exactly(s, size)
            correlation, error = struct.unpack(">ih", data[:6])
            return correlation == 1 and error == 0
    except OSError:
        return False


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


class KafkaJarProcess:
    """Apache Kafka (KRaft, combined broker+controller) from the Maven jars, in a child JVM."""

    name = "kafka"

    def __init__(
        self,
        overrides: Mapping[str, str] | None = None,
        *,
        data_dir: str | Path | None = None,
        startup_timeout: float = 90.0,
        jvm_args: Sequence[str] = (),
        listeners: Mapping[str, int] | None = None,
    ) -> None:
        """`jvm_args` go to the broker's JVM only (a java agent: compat/test_metrics_names.py);
        `listeners` are listeners besides PLAINTEXT, named by their security protocol, with their
        ports (compat/test_security.py: SSL, SASL_SSL)."""
        self.extra_listeners = dict(listeners or {})
        self._tmp: str | None = None
        self.jvm_args = tuple(jvm_args)
        if data_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="kafka-compat-")
            data_dir = self._tmp
        self.root = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.startup_timeout = startup_timeout
        self.host = "127.0.0.1"
        self.port = 0
        self.controller_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.root / "server.log"
        self.cluster_id = new_cluster_id()

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def _properties(self) -> dict[str, str]:
        extra = "".join(f",{name}://127.0.0.1:{port}" for name, port in self.extra_listeners.items())
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}{extra}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}{extra}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
            + "".join(f",{name}:{name}" for name in self.extra_listeners),
            "log.dirs": str(self.root / "data"),
            **COMMON_SETTINGS,
            **_KAFKA_ONLY,
            **self.overrides,
        }

    def _jvm(self, main: str, *args: str, heap: str = JVM_HEAP, extra: Sequence[str] = ()) -> list[str]:
        return [
            java(),
            heap,
            *extra,
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
            "-cp",
            classpath("kafka"),
            main,
            *args,
        ]

    def start(self) -> KafkaJarProcess:
        self.root.mkdir(parents=True, exist_ok=True)
        self.port, self.controller_port = free_port(), free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        props = self.root / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self._properties().items()))
        (self.root / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_path))
        fmt = subprocess.run(
            self._jvm(
                # "=": a random id may start with "-", which the option parser would take for an option
                "kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}", "-c", str(props),
                "--ignore-formatted", heap="-Xmx256m",
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka storage format failed ({fmt.returncode}):\n{fmt.stdout}\n{fmt.stderr}")
        out = open(self.root / "stdout.log", "ab")
        try:
            self.proc = subprocess.Popen(
                self._jvm("kafka.Kafka", str(props), extra=self.jvm_args),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            out.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafka exited with {self.proc.returncode} during start-up:\n{self.read_log()[-4000:]}")
            if "Kafka Server started" in self.read_log() and api_versions_ok(self.host, self.port):
                return self
            time.sleep(0.2)
        self.close()
        raise TimeoutError(f"kafka did not start within {self.startup_timeout}s:\n{self.read_log()[-4000:]}")

    def read_log(self) -> str:
        parts = []
        for p in (self.root / "stdout.log", self.log_path):
            try:
                parts.append(p.read_text(errors="replace"))
            except FileNotFoundError:
                pass
        return "\n".join(parts)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        return terminate(self.proc, timeout)

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> KafkaJarProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class KafkaContainer:
    """The same target through testcontainers' Kafka module (only where a Docker engine runs)."""

    name = "kafka"
    image = "apache/kafka:4.3.1"

    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        self.overrides = dict(overrides or {})
        self._container = None

    def start(self) -> KafkaContainer:
        from testcontainers.kafka import KafkaContainer as _TC

        container = _TC(image=self.image).with_kraft()
        for k, v in {**COMMON_SETTINGS, **self.overrides}.items():
            container = container.with_env("KAFKA_" + k.upper().replace(".", "_"), v)
        self._container = container.start()
        return self

    @property
    def bootstrap_servers(self) -> str:
        assert self._container is not None
        return self._container.get_bootstrap_server()

    def close(self) -> None:
        if self._container is not None:
            self._container.stop()
            self._container = None


def docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def start_kafka(overrides: Mapping[str, str] | None = None, *, prefer_docker: bool | None = None) -> Target:
    """A started real Kafka: the jar launcher, or testcontainers where a Docker engine answers and
    SAMSA_COMPAT_KAFKA=docker asks for it (the jars are the default: same versions everywhere)."""
    if prefer_docker is None:
        prefer_docker = os.environ.get("SAMSA_COMPAT_KAFKA") == "docker"
    if prefer_docker and docker_available():
        return KafkaContainer(overrides).start()
    return KafkaJarProcess(overrides).start()
