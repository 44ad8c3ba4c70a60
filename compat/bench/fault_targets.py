"""Three-broker clusters with the same faults, for the fault benchmark (compat/bench/faults.py):
Samsa (ZooKeeper + three brokers, broker/testing/cluster.py) and Apache Kafka (three combined
broker+controller KRaft nodes from the Maven jars, with fault-injecting proxies).

Both are started with their product defaults for everything the faults touch (Samsa:
zookeeper.session.timeout.ms 18 s, heartbeats 100/500 ms; Kafka: broker.session.timeout.ms 9 s,
broker.heartbeat.interval.ms 2 s; both replica.lag.time.max.ms 30 s, controlled shutdown on), plus
the same topic and group settings; every broker gets the slow-disk preload library
(broker/testing/slowdisk.c), idle until a fault switches it on.

The faults, for broker i:

    kill(i) / start_broker(i)      SIGKILL, then start again on the same data
    stop(i)                        SIGTERM (controlled shutdown), returns the exit code
    pause(i) / resume(i)           SIGSTOP / SIGCONT
    cut_brokers(i) / heal...       the network between broker i and the other brokers
    cut_metadata(i) / heal...      Samsa: broker i's link to ZooKeeper; Kafka: broker i's links to
                                   the other members of the KRaft quorum (its own controller stays)
    stop_metadata / start_metadata Samsa: ZooKeeper itself; Kafka has no separate metadata service
                                   (the quorum lives in the three nodes): not available
    slow_disk(i, write_ms)         every write to broker i's data directory takes write_ms longer

Kafka's per-pair links: each node has one inter-broker listener per peer (FROM1, FROM2, FROM3) and
uses its own (`inter.broker.listener.name=FROM<i>`), so node i's fetches from node j reach j's FROMi
listener, advertised at the address of a proxy for the pair (i, j); each node's
controller.quorum.voters names the other voters at proxies for the pair too. Clients connect to a
CLIENT listener directly, as Samsa's clients do.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from confluent_kafka.admin import AdminClient

from broker.coordinator.records import partition_for
from broker.testing.cluster import SamsaCluster
from broker.testing.ports import free_port
from broker.testing.proxy import ProxyLoop, TcpProxy
from broker.testing.slowdisk import SlowDisk
from compat.bench.targets import KafkaNode
from compat.jvm import TOOL_JVM
from compat.kafka import classpath, java, new_cluster_id

BROKERS = (1, 2, 3)

# Both: the group starts at once; internal topics replicated like the data.
COMMON: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "3",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "auto.create.topics.enable": "false",
}


class FaultCluster(Protocol):
    name: str

    @property
    def bootstrap_servers(self) -> str: ...

    def client_port(self, i: int) -> int: ...
    def start(self) -> None: ...
    def close(self) -> None: ...
    def kill(self, i: int) -> None: ...
    def start_broker(self, i: int) -> None: ...
    def stop(self, i: int) -> int | None: ...
    def pause(self, i: int) -> None: ...
    def resume(self, i: int) -> None: ...
    def cut_brokers(self, i: int) -> None: ...
    def heal_brokers(self, i: int) -> None: ...
    def cut_metadata(self, i: int) -> None: ...
    def heal_metadata(self, i: int) -> None: ...
    def stop_metadata(self) -> None: ...
    def start_metadata(self) -> None: ...
    def slow_disk(self, i: int, write_ms: int) -> None: ...
    def controller(self) -> int: ...




def leaders_and_isrs(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, ISR) as the cluster's Metadata says."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics.get(topic)
    if md is None or md.error is not None:
        return {}
    return {p: (m.leader, list(m.isrs)) for p, m in md.partitions.items()}


def coordinator(bootstrap: str, group: str) -> int:
    """The group's coordinator: the leader of its __consumer_offsets partition (Kafka's rule, which
    Samsa follows: abs(Java hashCode of the group id) modulo the partition count)."""
    offsets = leaders_and_isrs(bootstrap, "__consumer_offsets")
    return offsets[partition_for(group, len(offsets))][0]


# -- Samsa ----------------------------------------------------------------------------------------


class SamsaFaults:
    name = "samsa"

    def __init__(self, base_dir: Path, overrides: Mapping[str, str] | None = None) -> None:
        self.cluster = SamsaCluster(
            base_dir,
            3,
            overrides={"zookeeper.session.timeout.ms": "18000", **COMMON, **(overrides or {})},
            log_level="INFO",
            slow_disk=True,
        )

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{s.client_port}" for s in self.cluster.brokers.values())

    def client_port(self, i: int) -> int:
        return self.cluster.brokers[i].client_port

    def start(self) -> None:
        self.cluster.start()

    def close(self) -> None:
        self.cluster.close()

    def kill(self, i: int) -> None:
        self.cluster.kill(i)

    def start_broker(self, i: int) -> None:
        self.cluster.process(i).start()

    def stop(self, i: int) -> int | None:
        return self.cluster.stop(i, timeout=60)

    def pause(self, i: int) -> None:
        self.cluster.pause(i)

    def resume(self, i: int) -> None:
        self.cluster.resume(i)

    def cut_brokers(self, i: int) -> None:
        for j in BROKERS:
            if j != i:
                self.cluster.cut(i, j)

    def heal_brokers(self, i: int) -> None:
        for j in BROKERS:
            if j != i:
                self.cluster.heal(i, j)

    def cut_metadata(self, i: int) -> None:
        self.cluster.cut_zookeeper(i)

    def heal_metadata(self, i: int) -> None:
        self.cluster.heal_zookeeper(i)

    def stop_metadata(self) -> None:
        self.cluster.stop_zookeeper()

    def start_metadata(self) -> None:
        self.cluster.start_zookeeper()

    def slow_disk(self, i: int, write_ms: int) -> None:
        self.cluster.slow_disk(i, write_ms)

    def controller(self) -> int:
        return self.cluster.controller()


# -- Kafka ----------------------------------------------------------------------------------------


class _Node(KafkaNode):
    """One KRaft node of `KafkaFaults`: a CLIENT listener, one inter-broker listener per peer, and
    the quorum's other voters reached through proxies."""

    def __init__(self, owner: KafkaFaults, node_id: int, settings: Mapping[str, str]) -> None:
        super().__init__(node_id, owner.quorum_ports, owner.client_ports[node_id], settings)
        self.owner = owner

    def _properties(self) -> dict[str, str]:
        props = super()._properties()
        o, me = self.owner, self.node_id
        listeners = [f"CLIENT://127.0.0.1:{o.client_ports[me]}"]
        advertised = [f"CLIENT://127.0.0.1:{o.client_ports[me]}"]
        for i in BROKERS:
            listeners.append(f"FROM{i}://127.0.0.1:{o.repl_ports[(i, me)]}")
            port = o.repl_ports[(i, me)] if i == me else o.repl_proxies[(i, me)].port
            advertised.append(f"FROM{i}://127.0.0.1:{port}")
        listeners.append(f"CONTROLLER://127.0.0.1:{o.quorum_ports[me]}")
        props.update({
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(
                f"{n}:PLAINTEXT" for n in ("CLIENT", *(f"FROM{i}" for i in BROKERS), "CONTROLLER")
            ),
            "inter.broker.listener.name": f"FROM{me}",
            "controller.quorum.voters": ",".join(
                f"{k}@127.0.0.1:{o.quorum_ports[k] if k == me else o.quorum_proxies[(me, k)].port}" for k in BROKERS
            ),
        })  # fmt: skip
        return props


class KafkaFaults:
    name = "kafka"

    def __init__(self, base_dir: Path, overrides: Mapping[str, str] | None = None) -> None:
        self.base_dir = base_dir
        self.proxies = ProxyLoop()
        ports = iter([free_port() for _ in range(2 * len(BROKERS) + len(BROKERS) ** 2)])
        self.client_ports = {i: next(ports) for i in BROKERS}
        self.quorum_ports = {i: next(ports) for i in BROKERS}
        self.repl_ports = {(i, j): next(ports) for i in BROKERS for j in BROKERS}
        self.repl_proxies = {
            (i, j): self._proxy(self.repl_ports[(i, j)]) for i in BROKERS for j in BROKERS if i != j
        }
        self.quorum_proxies = {(i, k): self._proxy(self.quorum_ports[k]) for i in BROKERS for k in BROKERS if i != k}
        settings = {**COMMON, **(overrides or {})}
        self.nodes = {i: _Node(self, i, settings) for i in BROKERS}
        self.disks: dict[int, SlowDisk] = {}
        for i, node in self.nodes.items():
            node.root = base_dir / f"kafka-{i}"
            node.log_path = node.root / "server.log"
            self.disks[i] = SlowDisk(base_dir / f"kafka-{i}.slowdisk", node.root / "data")
            node.env = self.disks[i].environment()

    def _proxy(self, port: int) -> TcpProxy:
        def target() -> tuple[str, int]:
            return ("127.0.0.1", port)

        return TcpProxy(self.proxies, target).start()

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports.values())

    def client_port(self, i: int) -> int:
        return self.client_ports[i]

    def start(self) -> None:
        cid = new_cluster_id()
        errors: list[BaseException] = []

        def format_node(node: _Node) -> None:
            try:
                node.format(cid)
            except BaseException as e:  # noqa: BLE001 - re-raised below
                errors.append(e)

        threads = [threading.Thread(target=format_node, args=(n,)) for n in self.nodes.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        for n in self.nodes.values():
            n.launch()
        for n in self.nodes.values():
            n.wait_ready()
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        deadline = time.monotonic() + 60
        while len(admin.list_topics(timeout=10).brokers) < len(BROKERS):
            if time.monotonic() > deadline:
                raise TimeoutError("kafka brokers did not all register")
            time.sleep(0.2)

    def close(self) -> None:
        for n in self.nodes.values():
            if n.proc is not None and n.proc.poll() is None:
                n.proc.kill()
                n.proc.wait()
        for p in [*self.repl_proxies.values(), *self.quorum_proxies.values()]:
            p.close()
        self.proxies.close()

    def kill(self, i: int) -> None:
        proc = self.nodes[i].proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def start_broker(self, i: int) -> None:
        self.nodes[i].launch()
        self.nodes[i].wait_ready()

    def stop(self, i: int) -> int | None:
        return self.nodes[i].stop(timeout=120)

    def _signal(self, i: int, sig: signal.Signals) -> None:
        proc = self.nodes[i].proc
        assert proc is not None
        os.kill(proc.pid, sig)

    def pause(self, i: int) -> None:
        self._signal(i, signal.SIGSTOP)

    def resume(self, i: int) -> None:
        self._signal(i, signal.SIGCONT)

    def _links(self, proxies: Mapping[tuple[int, int], TcpProxy], i: int) -> list[TcpProxy]:
        return [p for (a, b), p in proxies.items() if i in (a, b)]

    def cut_brokers(self, i: int) -> None:
        for p in self._links(self.repl_proxies, i):
            p.cut()

    def heal_brokers(self, i: int) -> None:
        for p in self._links(self.repl_proxies, i):
            p.heal()

    def cut_metadata(self, i: int) -> None:
        for p in self._links(self.quorum_proxies, i):
            p.cut()

    def heal_metadata(self, i: int) -> None:
        for p in self._links(self.quorum_proxies, i):
            p.heal()

    def stop_metadata(self) -> None:
        raise NotImplementedError("KRaft has no metadata service apart from the brokers")

    start_metadata = stop_metadata

    def slow_disk(self, i: int, write_ms: int) -> None:
        self.disks[i].set(write_ms)

    def controller(self) -> int:
        """The active controller, as kafka-metadata-quorum describes it."""
        out = subprocess.run(
            [java(), *TOOL_JVM, "-cp", classpath("kafka"), "org.apache.kafka.tools.MetadataQuorumCommand",
             "--bootstrap-server", self.bootstrap_servers, "describe", "--status"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        m = re.search(r"LeaderId:\s*(\d+)", out.stdout)
        if m is None:
            raise RuntimeError(f"kafka-metadata-quorum: {out.stdout[-500:]} {out.stderr[-1000:]}")
        return int(m.group(1))


def start_cluster(name: str, base_dir: Path | None = None) -> FaultCluster:
    base = base_dir or Path(tempfile.mkdtemp(prefix=f"faults-{name}-"))
    cluster: FaultCluster = SamsaFaults(base) if name == "samsa" else KafkaFaults(base)
    try:
        cluster.start()
    except BaseException:
        cluster.close()
        raise
    return cluster
