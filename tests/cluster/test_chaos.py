# Over 700 lines: one seeded chaos run (its fault catalogue, traffic and end-state checks share one cluster and one record log).
"""Chaos on a real cluster (ZooKeeper + 3 brokers, broker.testing.cluster): RF=3,
min.insync.replicas=2, acks=all, while three producers (confluent-kafka, kafka-python, and the Java
producer: Kafka's own VerifiableProducer from the kafka-clients jars in compat/target/kafka) and a
two-member consumer group run, rounds of faults chosen from a seed:

- kill_leader:    kill -9 the leader of a partition, restart it a moment later;
- kill_follower:  kill -9 a follower of a partition, restart it a moment later;
- pause_follower: SIGSTOP a follower of a partition until it leaves that partition's ISR, then
                  SIGCONT;
- partition:      cut a broker from both others (replication TCP and heartbeats, through the
                  harness proxies; its ZooKeeper link stays), then heal;
- zk_expire:      cut a broker from ZooKeeper only, past its session timeout (6 s here), then heal;
- zk_stop:        stop ZooKeeper itself for 4-8 s, then start it again;
- restart:        restart the broker that coordinates the consumer group cleanly (SIGTERM:
                  controlled shutdown), so the coordinator fails over;
- kill_txn_coordinator: kill -9 the transactional producer's transaction coordinator (the leader
                  of its __transaction_state partition), restart it a moment later.

A transactional producer (confluent-kafka, transactions of 10 records over the three partitions of
its own topic, chaos-txn) runs throughout; at the end a read_committed reader of that topic finds
every transaction whose commit returned whole, exactly once and in order, nothing of one whose
abort returned, and any other (its commit or abort failed) whole or absent.

Each round reports, per partition, the longest time the confluent-kafka producer went without an
acknowledgement from the fault until the group consumed again after the round's member restart
(`CHAOS round ...`, and the worst per kind in `CHAOS GAPS`).

Between rounds the test waits until every partition has a leader and its full ISR again (bounded).
At the end the producers stop, the group drains, and a checker reads every partition from offset 0
and asserts: every acknowledged record is in the log exactly once, at the offset it was
acknowledged with, in acknowledgement order per producer and partition (confluent-kafka and
kafka-python are idempotent; the Java one never retries, so none may write a record twice); a
record librdkafka acknowledged without an offset (an implicit acknowledgement, see
compat/bench/traffic.py) is held to the same by its position among the others; every
record a group member saw is in the final log at that offset (consumers only read below the high
watermark); the group saw every offset of the final log; whenever a member was
assigned a partition it resumed at or after the offset the group had committed for it, and the
group's final committed offsets are the highest ones it committed.

    CHAOS_SEED=20261122 CHAOS_ROUNDS=8 .venv/bin/python -m pytest tests/cluster/test_chaos.py -s

The `chain` variant runs the same with pipelined replication on for both topics
(replication.pipeline.enable=true: broker/replication/chain.py), for CHAOS_CHAIN_ROUNDS rounds (4).

The `sasl_ssl` variant runs the same with the brokers' inter-broker listener over SASL_SSL (PLAIN,
PEM stores made at test time), for CHAOS_SECURED_ROUNDS rounds (2): replication and its
reconnections after every fault go through TLS and SASL.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from broker.coordinator.records import partition_for
from broker.testing.cluster import SamsaCluster
from compat.bench.traffic import AckLog
from tests.cluster.conftest import broker_logs

TOPIC = "chaos"
PARTITIONS = 3
GROUP = "chaos-group"
OFFSETS_PARTITIONS = 3
LAG_MS = 3000
SEED = int(os.environ.get("CHAOS_SEED", "20261122"))
ROUNDS = int(os.environ.get("CHAOS_ROUNDS", "8"))
SECURED_ROUNDS = int(os.environ.get("CHAOS_SECURED_ROUNDS", "2"))
CHAIN_ROUNDS = int(os.environ.get("CHAOS_CHAIN_ROUNDS", "4"))
KINDS = ("kill_leader", "kill_follower", "pause_follower", "partition", "zk_expire", "zk_stop", "restart",
         "kill_txn_coordinator")  # fmt: skip
TXN_TOPIC = "chaos-txn"
TXN_ID = "chaos-txn-tid"
TXN_STATE_PARTITIONS = 3
ZK_SESSION_MS = 6000
JAVA_PREFIX = 7  # VerifiableProducer values are "<prefix>.<counter>"


def _sasl_ssl_inter_broker(directory: Path) -> dict[str, str]:
    from broker.testing.certs import CertificateAuthority

    ca = CertificateAuthority(directory)
    server = ca.issue("broker")
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:SASL_SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.pem),
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.replication.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
            'password="broker-secret" user_broker="broker-secret";',
    }


@pytest.fixture(params=["plaintext", "sasl_ssl", "chain"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SamsaCluster]:
    overrides = {
        "min.insync.replicas": "2",
        "replica.lag.time.max.ms": str(LAG_MS),
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "transaction.state.log.num.partitions": str(TXN_STATE_PARTITIONS),
        "group.initial.rebalance.delay.ms": "0",
        # preferred leaders move back every few seconds, between and during the faults, once a
        # restarted broker has been back for 4 s (clients' reconnect backoff, see election.py)
        "leader.imbalance.check.interval.seconds": "3",
        "samsa.preferred.leader.settle.ms": "4000",
        "zookeeper.session.timeout.ms": str(ZK_SESSION_MS),
        **(_sasl_ssl_inter_broker(tmp_path / "tls") if request.param == "sasl_ssl" else {}),
    }
    with SamsaCluster(tmp_path, brokers=3, overrides=overrides) as c:
        yield c


# -- the cluster's state ----------------------------------------------------------------------------


def partition_views(c: SamsaCluster) -> dict[str, dict[int, Any]]:
    """The chaos topic and __consumer_offsets as the first live, unpaused broker answers."""
    md = c.metadata(topics=[TOPIC, "__consumer_offsets"])
    return {t: md.topics.get(t, {}) for t in (TOPIC, "__consumer_offsets")}


def healthy(c: SamsaCluster, min_isr: int) -> bool:
    views = partition_views(c)
    parts = [p for t in views.values() for p in t.values()]
    return (
        len(views[TOPIC]) == PARTITIONS
        and len(views["__consumer_offsets"]) == OFFSETS_PARTITIONS
        and all(p.leader >= 0 and p.error == 0 and len(p.isr) >= min_isr for p in parts)
    )


def wait_recovered(c: SamsaCluster, timeout: float) -> float:
    """Wait for every partition to have a leader and a full ISR (falling back to ISR >= 2 for the
    last part of the timeout); returns the seconds it took."""
    start = time.monotonic()
    try:
        c.wait_for(lambda: healthy(c, 3), timeout * 0.75, "full ISR everywhere", interval=0.25)
    except TimeoutError:
        c.wait_for(lambda: healthy(c, 2), timeout * 0.25, "a leader and ISR >= 2 everywhere", interval=0.25)
    return time.monotonic() - start


def coordinator(c: SamsaCluster) -> int:
    return partition_views(c)["__consumer_offsets"][partition_for(GROUP, OFFSETS_PARTITIONS)].leader


def txn_coordinator(c: SamsaCluster) -> int:
    state = c.metadata(topics=["__transaction_state"]).topics["__transaction_state"]
    return state[partition_for(TXN_ID, TXN_STATE_PARTITIONS)].leader


# -- producers ------------------------------------------------------------------------------------


@dataclass
class Acks(AckLog):
    """Acknowledged records of one producer, in the order the client reported them."""

    name: str = ""


def run_confluent(bootstrap: str, acks: Acks, stop: threading.Event, rate: float) -> None:
    p = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000,
    })  # fmt: skip

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acks.ack(msg.partition(), msg.offset(), msg.value(), time.monotonic())
        else:
            acks.error(err)

    n = 0
    while not stop.is_set():
        p.produce(TOPIC, value=f"ck-{n}".encode(), partition=n % PARTITIONS, on_delivery=on_delivery)
        n += 1
        p.poll(1 / rate)
    assert p.flush(150) == 0, "confluent-kafka producer could not deliver or fail its records"


@dataclass
class TxnLog:
    """Transaction numbers by outcome: commit returned, abort returned, or either failed."""

    committed: list[int] = field(default_factory=list)
    aborted: list[int] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


def _txn_producer(bootstrap: str, stop: threading.Event) -> Any:
    while True:  # init_transactions may time out while the coordinator moves
        p = Producer({
            "bootstrap.servers": bootstrap, "transactional.id": TXN_ID, "linger.ms": 5,
            "transaction.timeout.ms": 60000, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000,
        })  # fmt: skip
        try:
            p.init_transactions(60)
            return p
        except KafkaException:
            if stop.is_set():
                raise


def run_transactional(bootstrap: str, txns: TxnLog, stop: threading.Event) -> None:
    p = _txn_producer(bootstrap, stop)
    n = 0
    while not stop.is_set():
        try:
            p.begin_transaction()
            for i in range(10):
                p.produce(TXN_TOPIC, value=f"t{n}.{i}".encode(), partition=i % PARTITIONS)
            if n % 7 == 6:
                p.abort_transaction(60)
                txns.aborted.append(n)
            else:
                p.commit_transaction(60)
                txns.committed.append(n)
        except KafkaException as exc:
            error = exc.args[0]
            txns.errors[error.name()] += 1
            txns.unknown.append(n)
            if error.txn_requires_abort():
                try:
                    p.abort_transaction(60)
                except KafkaException:
                    p = _txn_producer(bootstrap, stop)
            elif not error.retriable():
                p = _txn_producer(bootstrap, stop)  # fatal: a new producer fences this one
        n += 1
        time.sleep(0.05)


def read_committed_txns(c: SamsaCluster) -> dict[int, list[tuple[int, int]]]:
    """chaos-txn read_committed to its end, by partition: (transaction, record) in log order."""
    out: dict[int, list[tuple[int, int]]] = {}
    for q in range(PARTITIONS):
        consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "chaos-txn-checker",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})  # fmt: skip
        try:
            probe = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "chaos-txn-checker",
                              "isolation.level": "read_uncommitted"})  # fmt: skip
            try:  # the HW, not the LSO
                high = probe.get_watermark_offsets(CKTopicPartition(TXN_TOPIC, q), timeout=30)[1]
            finally:
                probe.close()
            consumer.assign([CKTopicPartition(TXN_TOPIC, q, 0)])
            got: list[tuple[int, int]] = []
            deadline = time.monotonic() + 60
            # the position passes the last marker once every transaction has ended (LSO = HW)
            while time.monotonic() < deadline and consumer.position([CKTopicPartition(TXN_TOPIC, q)])[0].offset < high:
                m = consumer.poll(0.2)
                if m is not None and m.error() is None:
                    t, i = m.value().decode()[1:].split(".")
                    got.append((int(t), int(i)))
            position = consumer.position([CKTopicPartition(TXN_TOPIC, q)])[0].offset
            assert position >= high, f"{TXN_TOPIC}-{q}: read_committed stuck at {position}, HW {high} (a transaction never ended)"
            out[q] = got
        finally:
            consumer.close()
    return out


def check_transactions(txns: TxnLog, log: dict[int, list[tuple[int, int]]]) -> None:
    """Committed transactions whole, once, in order; aborted ones absent; failed ones whole or absent."""
    by_txn: dict[int, list[int]] = {}
    for q, recs in log.items():
        order = [t for t, _ in recs]
        assert order == sorted(order), f"{TXN_TOPIC}-{q}: transactions out of order"
        for t, i in recs:
            assert i % PARTITIONS == q, f"transaction {t} record {i} in partition {q}"
            by_txn.setdefault(t, []).append(i)
    whole = list(range(10))
    broken = [t for t in txns.committed if sorted(by_txn.get(t, [])) != whole]
    assert not broken, f"committed transactions not read whole and once: {[(t, by_txn.get(t)) for t in broken[:5]]}"
    leaked = [t for t in txns.aborted if t in by_txn]
    assert not leaked, f"records of aborted transactions read with read_committed: {leaked[:5]}"
    partial = [t for t in txns.unknown if t in by_txn and sorted(by_txn[t]) != whole]
    assert not partial, f"failed transactions read in part: {[(t, by_txn[t]) for t in partial[:5]]}"
    strays = set(by_txn) - set(txns.committed) - set(txns.unknown)
    assert not strays, f"records of transactions never sent: {sorted(strays)[:5]}"


def run_kafka_python(bootstrap: str, acks: Acks, stop: threading.Event, rate: float) -> None:
    p = KafkaProducer(
        bootstrap_servers=bootstrap.split(","), acks="all", enable_idempotence=True, linger_ms=5,
        retries=2**31 - 1, delivery_timeout_ms=120000, request_timeout_ms=10000, max_block_ms=60000,
        metadata_max_age_ms=2000, retry_backoff_ms=100,
    )  # fmt: skip
    n = 0
    try:
        while not stop.is_set():
            value = f"kp-{n}".encode()
            try:
                fut = p.send(TOPIC, value=value, partition=n % PARTITIONS)
            except Exception as e:  # noqa: BLE001 - counted; the record was not acknowledged
                acks.error(repr(e))
            else:
                fut.add_callback(lambda md, v=value: acks.ack(md.partition, md.offset, v, time.monotonic()))
                fut.add_errback(acks.error)
            n += 1
            time.sleep(1 / rate)
        p.flush(150)
    finally:
        p.close(timeout=30)


class JavaProducer:
    """Kafka's VerifiableProducer (kafka-clients 4.x, compat/target/kafka): prints one JSON line per
    acknowledged record (partition, offset, value) in callback order; SIGTERM closes the producer,
    which completes what is in flight first. The tool forces retries=0, which the idempotent
    producer refuses, so it runs acks=all without idempotence and without retries: a record it sends
    once is acknowledged at most once, and a failed send is reported, never resent. Without
    idempotence only max.in.flight.requests.per.connection=1 makes Kafka's producer keep acks in
    offset order: with 5 in flight, a leader paused with a committed batch in flight acknowledges it
    when it resumes, after the new leader has acknowledged the batches sent to it meanwhile (seen in
    this test: offset 678 acknowledged after 744)."""

    def __init__(self, bootstrap: str, workdir: Path, rate: int) -> None:
        from compat.jvm import TOOL_JVM, TOOLS
        from compat.kafka import classpath, java

        cfg = workdir / "java-producer.properties"
        cfg.write_text(
            "enable.idempotence=false\nacks=all\nmax.in.flight.requests.per.connection=1\nlinger.ms=5\n"
            "delivery.timeout.ms=120000\n"
            "request.timeout.ms=10000\nmetadata.max.age.ms=2000\nretry.backoff.ms=100\n"
        )
        self.out_path = workdir / "java-producer.out"
        self.err_path = workdir / "java-producer.err"
        cmd = [java(), *TOOL_JVM, "-cp", classpath("kafka"), TOOLS["kafka-verifiable-producer"],
               "--bootstrap-server", bootstrap, "--topic", TOPIC, "--acks", "-1", "--throughput", str(rate),
               "--max-messages", "-1", "--value-prefix", str(JAVA_PREFIX), "--command-config", str(cfg)]  # fmt: skip
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err)

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.out_path.read_text().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by the read racing the writer
        return out

    def started(self) -> bool:
        return any(e.get("name") == "producer_send_success" for e in self.lines())

    def stop(self, acks: Acks) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(150)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        events = self.lines()
        assert any(e.get("name") == "shutdown_complete" for e in events), self.err_path.read_text()[-3000:]
        for e in events:
            if e.get("name") == "producer_send_success":
                acks.ack(int(e["partition"]), int(e["offset"]), e["value"].encode())
            elif e.get("name") == "producer_send_error":
                acks.error(e.get("exception"))


# -- the consumer group ---------------------------------------------------------------------------


@dataclass
class GroupLog:
    seen: list[tuple[int, int, bytes]] = field(default_factory=list)
    committed: dict[int, int] = field(default_factory=dict)  # highest offset the group committed
    resumes: list[tuple[int, int, int]] = field(default_factory=list)  # (partition, committed at assignment, first offset read)
    commit_failures: Counter[str] = field(default_factory=Counter)
    assignments: int = 0
    bounces: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def run_member(bootstrap: str, log: GroupLog, stop: threading.Event, bounce: threading.Event, member: int) -> None:
    # partition -> group committed offset when this member was assigned it; cleared by its first record
    awaiting_first: dict[int, int] = {}

    def on_assign(consumer: Any, parts: list[Any]) -> None:
        with log.lock:
            log.assignments += 1
            for tp in parts:
                awaiting_first[tp.partition] = log.committed.get(tp.partition, 0)

    def on_revoke(consumer: Any, parts: list[Any]) -> None:
        for tp in parts:
            awaiting_first.pop(tp.partition, None)

    def consume_and_commit(c: Any) -> None:
        msgs = c.consume(200, 0.5)
        nxt: dict[int, int] = {}
        with log.lock:
            for m in msgs:
                if m.error() is not None:
                    continue
                q, off = m.partition(), m.offset()
                log.seen.append((q, off, m.value()))
                if q in awaiting_first:
                    log.resumes.append((q, awaiting_first.pop(q), off))
                nxt[q] = off + 1
        if not nxt:
            return
        try:
            done = c.commit(offsets=[CKTopicPartition(TOPIC, q, o) for q, o in nxt.items()], asynchronous=False)
        except KafkaException as e:
            with log.lock:
                log.commit_failures[str(e.args[0].name() if e.args else e)] += 1
            return
        with log.lock:
            for tp in done or []:
                if tp.error is None and tp.offset >= 0:
                    log.committed[tp.partition] = max(log.committed.get(tp.partition, 0), tp.offset)
                elif tp.error is not None:
                    log.commit_failures[tp.error.name()] += 1

    config = {
        "bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": f"member-{member}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 120000, "topic.metadata.refresh.interval.ms": 1000,
    }  # fmt: skip
    while not stop.is_set():
        # a bounce closes this member and starts a new one: a rebalance, after which every
        # partition is resumed from the offsets the (possibly new) coordinator has committed
        bounce.clear()
        awaiting_first.clear()
        c = Consumer(config)
        c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        try:
            while not stop.is_set() and not bounce.is_set():
                consume_and_commit(c)
        finally:
            c.close()
            if bounce.is_set():
                with log.lock:
                    log.bounces += 1


# -- the checker ----------------------------------------------------------------------------------


def read_partition(c: SamsaCluster, q: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "chaos-checker", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(CKTopicPartition(TOPIC, q), timeout=30)
        assert low == 0, f"partition {q} starts at {low}"
        consumer.assign([CKTopicPartition(TOPIC, q, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while (not out or out[-1][0] < high - 1) and high > 0 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.value()))
        assert out and out[-1][0] == high - 1 or high == 0, f"partition {q}: read {len(out)} records, HW {high}"
        return out
    finally:
        consumer.close()


def group_committed(c: SamsaCluster) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": GROUP, "enable.auto.commit": False})
    try:
        got = consumer.committed([CKTopicPartition(TOPIC, q) for q in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in got if tp.offset != OFFSET_INVALID}
    finally:
        consumer.close()


# -- the test -------------------------------------------------------------------------------------


def plan(rng: random.Random, rounds: int) -> list[str]:
    """Every kind at least once (when rounds allow), the rest drawn from the seed, in seeded order."""
    kinds = list(KINDS)[:rounds] + [rng.choice(KINDS) for _ in range(rounds - len(KINDS))]
    rng.shuffle(kinds)
    return kinds


def test_chaos_keeps_every_acknowledged_record(cluster: SamsaCluster, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    variant = request.node.callspec.params["cluster"]
    rounds = {"sasl_ssl": SECURED_ROUNDS, "chain": CHAIN_ROUNDS}.get(variant, ROUNDS)
    started = time.monotonic()
    rng = random.Random(SEED)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    config = {"min.insync.replicas": "2", **({"replication.pipeline.enable": "true"} if variant == "chain" else {})}
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=config)])[TOPIC].result(30)
    admin.create_topics([NewTopic(TXN_TOPIC, PARTITIONS, 3, config=config)])[TXN_TOPIC].result(30)
    cluster.wait_for(lambda: len(partition_views(cluster)[TOPIC]) == PARTITIONS, 30, "topic created")

    bootstrap = cluster.bootstrap_servers  # every broker: clients survive any one being down
    stop_producers, stop_group = threading.Event(), threading.Event()
    ck, kp, jv = Acks(name="confluent-kafka"), Acks(name="kafka-python"), Acks(name="java")
    round_gaps: list[tuple[str, list[float]]] = []
    group = GroupLog()
    txns = TxnLog()
    failures: list[BaseException] = []

    def guarded(fn: Any, *args: Any) -> threading.Thread:
        def run() -> None:
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 - re-raised by the test
                failures.append(e)

        t = threading.Thread(target=run, name=getattr(fn, "__name__", "worker"), daemon=True)
        t.start()
        return t

    java = JavaProducer(bootstrap, tmp_path, rate=20)
    producers = [guarded(run_confluent, bootstrap, ck, stop_producers, 40.0),
                 guarded(run_kafka_python, bootstrap, kp, stop_producers, 20.0),
                 guarded(run_transactional, bootstrap, txns, stop_producers)]  # fmt: skip
    bounces = {m: threading.Event() for m in (1, 2)}
    members = [guarded(run_member, bootstrap, group, stop_group, bounces[m], m) for m in (1, 2)]
    try:
        # the group has a coordinator (so __consumer_offsets exists) and everyone is producing
        cluster.wait_for(lambda: group.committed and ck.records and kp.records and java.started() and txns.committed,
                         90, "traffic")  # fmt: skip
        wait_recovered(cluster, 60)

        faults: Counter[str] = Counter()
        coordinators = [coordinator(cluster)]
        for rnd, kind in enumerate(plan(rng, rounds), 1):
            views = partition_views(cluster)[TOPIC]
            q = rng.randrange(PARTITIONS)
            leader = views[q].leader
            fault_at = time.monotonic()
            if kind in ("kill_leader", "kill_follower"):
                target = leader if kind == "kill_leader" else rng.choice([b for b in views[q].replicas if b != leader])
                cluster.kill(target)
                time.sleep(rng.uniform(1.5, 4.0))  # producers and the group run against the others
                cluster.restart(target)
            elif kind == "pause_follower":
                target = rng.choice([b for b in views[q].replicas if b != leader])
                watcher = leader
                cluster.pause(target)
                try:
                    # past replica.lag.time.max.ms: the leader drops it from the ISR
                    cluster.wait_for(
                        lambda t=target, w=watcher, q=q: t not in cluster.metadata(w, topics=[TOPIC]).topics[TOPIC][q].isr,
                        LAG_MS / 1000 * 4, f"paused follower {target} out of the ISR of {TOPIC}-{q}", interval=0.25,
                    )
                except TimeoutError:
                    if cluster.metadata(watcher, topics=[TOPIC]).topics[TOPIC][q].leader == watcher:
                        raise
                    # the watcher lost leadership meanwhile (a paused controller's partitions move)
                finally:
                    cluster.resume(target)
            elif kind == "partition":
                target = rng.choice([1, 2, 3])
                others = [j for j in (1, 2, 3) if j != target]
                for j in others:
                    cluster.cut(target, j)
                time.sleep(rng.uniform(3.0, 5.0))
                for j in others:
                    cluster.heal(target, j)
            elif kind == "zk_expire":
                target = rng.choice([1, 2, 3])
                cluster.cut_zookeeper(target)
                # past the session timeout: its registration goes, its leaderships move
                time.sleep(ZK_SESSION_MS / 1000 + rng.uniform(1.0, 3.0))
                cluster.heal_zookeeper(target)
            elif kind == "zk_stop":
                target = 0
                cluster.stop_zookeeper()
                time.sleep(rng.uniform(4.0, 8.0))
                cluster.start_zookeeper()
            elif kind == "kill_txn_coordinator":
                target = txn_coordinator(cluster)
                cluster.kill(target)
                time.sleep(rng.uniform(1.5, 4.0))
                cluster.restart(target)
            else:  # restart: the group's coordinator, cleanly
                target = coordinators[-1]
                code = cluster.stop(target, timeout=30)  # SIGKILL after 30 s: then it was no clean stop
                assert code == 0, f"broker {target} did not stop cleanly (exit {code})"
                cluster.process(target).start()
            faults[kind] += 1
            round_started = time.monotonic()
            wait_recovered(cluster, 60)
            coordinators.append(coordinator(cluster))
            # one member restarts: the group rebalances and must resume from its commits
            resumed = len(group.resumes)
            bounces[rnd % 2 + 1].set()
            cluster.wait_for(lambda n=resumed: len(group.resumes) > n, 60, "the group consuming again after a rebalance")
            took = time.monotonic() - round_started
            # from the fault until the group consumes again after the bounce that follows it
            gaps = [ck.longest_gap(p, fault_at, time.monotonic()) for p in range(PARTITIONS)]
            round_gaps.append((kind, gaps))
            print(f"\nCHAOS round {rnd}/{rounds}: {kind} broker {target} (partition {q}, leader {leader}); "
                  f"recovered (ISR, group consuming) in {took:.1f}s; longest ack gaps (confluent-kafka) "
                  + " ".join(f"p{p} {g:.2f}s" for p, g in enumerate(gaps))
                  + f"; acked ck={len(ck.records)} kp={len(kp.records)} txns={len(txns.committed)}; seen={len(group.seen)}; "
                  f"coordinator {coordinators[-1]}", flush=True)  # fmt: skip
            assert not failures, failures

        # stop the producers, let the group catch up with the log, stop it
        stop_producers.set()
        java.stop(jv)
        for t in producers:
            t.join(180)
            assert not t.is_alive(), "a producer did not stop"
        assert not failures, failures
        wait_recovered(cluster, 60)
        ends = {}
        for q in range(PARTITIONS):
            probe = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "chaos-probe"})
            try:
                ends[q] = probe.get_watermark_offsets(CKTopicPartition(TOPIC, q), timeout=30)[1]
            finally:
                probe.close()
        cluster.wait_for(
            lambda: all(group.committed.get(q, 0) >= ends[q] for q in range(PARTITIONS)), 90, "the group drained the log"
        )
    except BaseException:
        print(broker_logs(cluster, 6000))
        raise
    finally:
        stop_producers.set()
        stop_group.set()
        if java.proc.poll() is None:
            java.proc.kill()
            java.proc.wait()
        for t in members:
            t.join(60)
    assert not failures, failures

    # -- the checker: every partition from offset 0 -------------------------------------------------
    log = {q: read_partition(cluster, q) for q in range(PARTITIONS)}
    at = {(q, off): v for q, recs in log.items() for off, v in recs}
    for q, recs in log.items():
        assert [off for off, _ in recs] == list(range(len(recs))), f"partition {q} has offset gaps"
    copies = Counter(v for recs in log.values() for _, v in recs)

    for acks in (ck, kp, jv):
        assert acks.records, f"{acks.name} had no acknowledged record: {acks.errors}"
        problems = acks.check_against(at)
        assert not problems, f"{acks.name}: {len(problems)} acknowledged records lost or misplaced, first {problems[:5]}"
    implicit = sum(1 for acks in (ck, kp, jv) for _, off, _ in acks.records if off is None)
    # idempotent producers and one that never retries: not even an unacknowledged record is written twice
    twice = [v for v, n in copies.items() if n > 1]
    assert not twice, f"records written more than once: {twice[:5]}"

    # consumers only ever saw committed records (below the HW), and the group saw the whole log
    phantom = [(q, off, v) for q, off, v in group.seen if at.get((q, off)) != v]
    assert not phantom, f"the group saw {len(phantom)} records that are not in the final log, first {phantom[:5]}"
    seen_offsets = {(q, off) for q, off, _ in group.seen}
    missed = sorted(set(at) - seen_offsets)
    assert not missed, f"the group never saw {len(missed)} records, first {missed[:5]}"
    # committed offsets survived coordinator failovers: every resume at or after the commit
    assert len(group.resumes) > PARTITIONS, f"the group never resumed a partition after a rebalance: {group.resumes}"
    backwards = [(q, c, first) for q, c, first in group.resumes if first < c]
    assert not backwards, f"the group resumed before its committed offset (partition, committed, first read): {backwards}"
    final = group_committed(cluster)
    assert final == {q: group.committed[q] for q in range(PARTITIONS)} == {q: len(log[q]) for q in range(PARTITIONS)}
    check_transactions(txns, read_committed_txns(cluster))
    if variant == "chain":  # the chain was used: some follower fetched the chaos topic from another follower
        chained = [m for i in cluster.brokers for m in re.finditer(
            r"follower assigned topic=chaos partition=\d+ leader=(\d+) leader_epoch=\d+ fetcher=(\d+)/",
            cluster.process(i).read_log()) if m[1] != m[2]]  # fmt: skip
        assert chained, "no follower ever fetched from its chain predecessor"

    acked = len(ck.records) + len(kp.records) + len(jv.records)
    moved = sum(1 for a, b in itertools.pairwise(coordinators) if a != b)
    print(
        f"\nCHAOS REPORT seed={SEED} rounds={rounds} faults={dict(sorted(faults.items()))} "
        f"acknowledged={acked} (confluent-kafka {len(ck.records)}, kafka-python {len(kp.records)}, java {len(jv.records)}) "
        f"log={len(at)} consumed={len(group.seen)} (redelivered {len(group.seen) - len(seen_offsets)}) "
        f"commits-failed={sum(group.commit_failures.values())} assignments={group.assignments} bounces={group.bounces} "
        f"coordinator-moves={moved} producer-errors={dict(ck.errors + kp.errors + jv.errors)} "
        f"acknowledged-without-offset={implicit} transactions committed={len(txns.committed)} "
        f"aborted={len(txns.aborted)} failed={len(txns.unknown)} {dict(txns.errors)} "
        f"time={time.monotonic() - started:.0f}s",
        flush=True,
    )
    worst: dict[str, float] = {}
    for kind, gaps in round_gaps:
        worst[kind] = max(worst.get(kind, 0.0), *gaps)
    print("CHAOS GAPS longest ack gap per fault kind (confluent-kafka, any partition): "
          + ", ".join(f"{k} {g:.2f}s" for k, g in sorted(worst.items())), flush=True)  # fmt: skip
