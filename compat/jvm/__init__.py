"""Running JVM code for the compat suite: the Java client harness (compiled with javac against a
kafka-clients classpath, cached in compat/target) and Kafka's CLI tools by their main classes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

from compat.kafka import TARGET, classpath, java

HARNESS_SRC = Path(__file__).resolve().parent / "harness"
CLIENT_CLASSPATHS = ("clients-3.9", "clients-4")

# Short-lived JVMs: start fast, stay small.
TOOL_JVM = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Djava.awt.headless=true"]

# Each kafka-*.sh script of Kafka 4.x and the main class it runs (checked in the 4.3.1 jars).
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
}

_TOOLS_LOG4J = TARGET / "tools-log4j2.properties"


def javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    found = shutil.which("javac")
    if not found:
        raise RuntimeError("javac not found: tests/run.sh installs default-jdk-headless")
    return found


_compile_lock = threading.Lock()


def compile_harness(cp_name: str) -> Path:
    """Compiled harness classes for one kafka-clients classpath, cached by source and jar names."""
    with _compile_lock:
        return _compile_harness(cp_name)


SHARED_SOURCES: dict[str, tuple[str, ...]] = {"kafka": ("clients-4",), "streams": ("clients-4",)}
"""Classpaths built on kafka-clients 4.x that also take harness/clients-4's sources."""


def _compile_harness(cp_name: str) -> Path:
    # harness/*.java build against every classpath; harness/<cp_name>/*.java only against theirs
    # (WireSchemas uses classes kafka-clients 4 moved), and against SHARED_SOURCES' classpaths.
    sources = sorted(HARNESS_SRC.glob("*.java"))
    for name in (cp_name, *SHARED_SOURCES.get(cp_name, ())):
        sources += sorted((HARNESS_SRC / name).glob("*.java"))
    cp = classpath(cp_name)
    digest = hashlib.sha256()
    for s in sources:
        digest.update(s.read_bytes())
    digest.update(cp.encode())
    out = TARGET / f"harness-{cp_name}" / digest.hexdigest()[:16]
    if (out / ".compiled").exists():
        return out
    shutil.rmtree(out.parent, ignore_errors=True)
    out.mkdir(parents=True)
    result = subprocess.run(
        [javac(), "-nowarn", "-d", str(out), "-cp", cp, *map(str, sources)],
        capture_output=True, text=True, timeout=180,
    )
    if result.returncode != 0:
        raise RuntimeError(f"javac failed for {cp_name}:\n{result.stdout}\n{result.stderr}")
    (out / ".compiled").touch()
    return out


def run_harness(cp_name: str, bootstrap: str, scenario: str, prefix: str, timeout: float = 180) -> list[dict]:
    """Runs one harness scenario; returns its JSON lines (the "start" line carries the client version)."""
    return run_main(cp_name, "Harness", bootstrap, scenario, prefix, timeout=timeout)


def run_main(cp_name: str, main_class: str, *args: str, timeout: float = 180, run_on: str | None = None,
             extra_jars: Sequence[Path] = ()) -> list[dict]:
    """Runs one class of compat/jvm/harness against a kafka-clients classpath (compiled against
    `cp_name`, run on `run_on`'s jars when given: a broker's classpath; `extra_jars` added, such as
    the jackson-databind an OAUTHBEARER client needs); returns the JSON lines it prints, which must
    end with {"step": "end"}."""
    classes = compile_harness(cp_name)
    jars = os.pathsep.join([classpath(run_on or cp_name), *map(str, extra_jars), str(classes)])
    cmd = [java(), *TOOL_JVM, "-cp", jars, main_class, *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines or lines[-1].get("step") != "end":
        raise RuntimeError(
            f"{main_class} {cp_name} {' '.join(args)} exited {result.returncode}\n--- stdout\n"
            f"{result.stdout[-6000:]}\n--- stderr\n{result.stderr[-6000:]}"
        )
    return lines


def run_tool(
    tool: str,
    *args: str,
    input: str | None = None,
    timeout: float = 120,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Runs a Kafka CLI tool (by the main class its kafka-*.sh script runs) from the Kafka jars."""
    if not _TOOLS_LOG4J.exists():
        _TOOLS_LOG4J.write_text(
            "status = error\nappender.err.type = Console\nappender.err.name = err\nappender.err.target = SYSTEM_ERR\n"
            "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = %p %m (%c)%n\n"
            "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = err\n"
        )
    cmd = [java(), *TOOL_JVM, f"-Dlog4j2.configurationFile={_TOOLS_LOG4J}", "-cp", classpath("kafka"), TOOLS[tool], *args]
    result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"{tool} {' '.join(args)} exited {result.returncode}\n--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}")
    return result
