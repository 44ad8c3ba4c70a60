"""Transactions against Samsa and Apache Kafka (KIP-98, KIP-447): what each client observes must be
the same on both.

- Java kafka-clients 3.9 and 4.x (compat/jvm/harness/TxnHarness.java): transactions v1 for 3.9,
  v2 for 4.x (KIP-890: the producer epoch bumped by every commit and abort); commit across two
  partitions, abort, an open transaction seen by read_committed and read_uncommitted consumers
  and endOffsets (the LSO), the Admin's describeTransactions, listTransactions and
  describeProducers, consume-transform-produce with sendOffsetsToTransaction, and a zombie fenced
  by a second producer with the same transactional id.
- confluent-kafka (librdkafka) and kafka-python: commit, abort and an open transaction, read with
  both isolation levels; confluent-kafka also sends offsets to a transaction.
- kafka-transactions.sh: list, describe, describe-producers, find-hanging (which finds nothing while
  the coordinator knows the open transaction) and abort of a transaction whose producer went away
  (a WriteTxnMarkers to the partition leader), after which read_committed reads on.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest

from compat.jvm import CLIENT_CLASSPATHS, run_main, run_tool
from compat.test_java_clients import VERSIONS, by_step, one
from tests.support.clients import create_topic


def _java(cp: str):
    def run(target: Any) -> list[dict]:
        prefix = f"{'j39' if cp == 'clients-3.9' else 'j4'}-txn"
        return run_main(cp, "TxnHarness", target.bootstrap_servers, "transactions", prefix, timeout=300)[1:]

    return run


@pytest.mark.parametrize(
    "cp",
    [pytest.param(cp, marks=pytest.mark.compat(client=VERSIONS[cp], scenario="transactions: commit, abort, "
     "read_committed, consume-transform-produce, fencing, admin"), id=cp) for cp in CLIENT_CLASSPATHS],
)
def test_java_transactions(cp: str, differential: Any) -> None:
    obs = differential(f"java-{cp}-transactions", _java(cp))
    p = f"{'j39' if cp == 'clients-3.9' else 'j4'}-txn"
    committed = one(obs, "read_committed-open")["records"]
    assert committed[:8] == [f"0@{i}=c{i}" for i in range(5)] + [f"1@{i}=d{i}" for i in range(3)]
    assert committed[-1] == f"endOffsets {{{p}-txn-0=11, {p}-txn-1=4}}"  # the LSO
    assert len(one(obs, "read_uncommitted-open")["records"]) == 16
    assert one(obs, "describeTransactions-open")["state"].lower() == "ongoing"
    # transactions v2 for 4.x clients (the epoch bumped by the commit and the abort), v1 for 3.9
    epoch = 0 if cp == "clients-3.9" else 2
    assert one(obs, "describeTransactions-open")["epoch"] == epoch
    (producer,) = one(obs, "describeProducers")["producers"]
    assert producer.startswith(f"epoch={epoch} ") and producer.endswith(" txnStart=OptionalLong[11]")
    assert one(obs, "ctp")["moved"] == 10
    assert one(obs, "ctp-committed")["offsets"] == {f"{p}-in-0": "10 '' epoch=Optional.empty"}
    assert one(obs, "fenced")["error"] is not None
    assert "1@6=fresh" in one(obs, "read_committed-final")["records"]


# ------------------------------------------------------------------------------ Python clients


def _confluent(target: Any) -> list[dict]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    bs = target.bootstrap_servers
    topic, src, dst, group = "cf-txn", "cf-txn-in", "cf-txn-out", "cf-txn-group"
    for t in (topic, src, dst):
        create_topic(bs, t)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "cf-txn-tid", "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, f"c{i}".encode(), partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"a{i}".encode(), partition=0)
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(10)
    obs = [
        {"step": "read_committed", "records": _cf_read(bs, topic, "read_committed")},
        {"step": "read_uncommitted", "records": _cf_read(bs, topic, "read_uncommitted")},
    ]
    p.commit_transaction(30)
    obs.append({"step": "read_committed-after", "records": _cf_read(bs, topic, "read_committed")})
    plain = Producer({"bootstrap.servers": bs})
    for i in range(6):
        plain.produce(src, f"m{i}".encode(), partition=0)
    plain.flush(10)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.subscribe([src])
    moved, deadline = 0, time.monotonic() + 30
    while moved < 6 and time.monotonic() < deadline:
        msgs = [m for m in consumer.consume(10, 0.5) if not m.error()]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, m.value().upper(), partition=0)
        moved += len(msgs)
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
        p.commit_transaction(30)
    obs.append({"step": "ctp", "moved": moved, "committed": consumer.committed([TopicPartition(src, 0)], 10)[0].offset})
    consumer.close()
    obs.append({"step": "ctp-output", "records": _cf_read(bs, dst, "read_committed")})
    return obs


def _cf_read(bs: str, topic: str, isolation: str) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": f"cf-read-{uuid.uuid4()}", "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[str] = []
    quiet_since = time.monotonic()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and time.monotonic() - quiet_since < 2:
        msg = c.poll(0.2)
        if msg is None or msg.error():
            continue
        quiet_since = time.monotonic()
        out.append(f"{msg.offset()}={msg.value().decode()}")
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), 10)
    out.append(f"position={c.position([TopicPartition(topic, 0)])[0].offset}")
    c.close()
    return out


@pytest.mark.compat(client="confluent-kafka", scenario="transactions: commit, abort, read_committed, send_offsets_to_transaction")
def test_confluent_transactions(differential: Any) -> None:
    obs = differential("python-confluent-kafka-transactions", _confluent)
    # the open transaction starts at 9 (c0-c3, a marker, a0-a2, a marker): read_committed stops there
    assert by_step(obs, "read_committed")[0]["records"] == [f"{i}=c{i}" for i in range(4)] + ["position=9"]
    assert len(by_step(obs, "read_uncommitted")[0]["records"]) == 9
    assert one(obs, "ctp") == {"step": "ctp", "moved": 6, "committed": 6}


def _kafka_python(target: Any) -> list[dict]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    bs = target.bootstrap_servers
    topic = "kp-txn"
    create_topic(bs, topic)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-txn-tid")
    p.init_transactions()
    p.begin_transaction()
    for i in range(3):
        p.send(topic, f"c{i}".encode(), partition=0)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(2):
        p.send(topic, f"a{i}".encode(), partition=0)
    p.flush()
    p.abort_transaction()
    obs = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = KafkaConsumer(bootstrap_servers=bs, isolation_level=isolation, enable_auto_commit=False,
                          consumer_timeout_ms=3000)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        obs.append({"step": isolation, "records": [f"{m.offset}={m.value.decode()}" for m in c],
                    "end": c.end_offsets([tp])[tp]})
        c.close()
    p.close()
    return obs


@pytest.mark.compat(client="kafka-python", scenario="transactions: commit, abort, read_committed")
def test_kafka_python_transactions(differential: Any) -> None:
    obs = differential("python-kafka-python-transactions", _kafka_python)
    assert one(obs, "read_committed")["records"] == ["0=c0", "1=c1", "2=c2"]
    assert len(one(obs, "read_uncommitted")["records"]) == 5


# ------------------------------------------------------------------------------ kafka-transactions.sh


def _rows(text: str) -> list[list[str]]:
    return [re.split(r"\s*\t\s*", line.strip()) for line in text.strip().splitlines() if line.strip()]


def _cli(target: Any) -> list[dict]:
    from confluent_kafka import Producer

    bs = ["--bootstrap-server", target.bootstrap_servers]
    topic = "cli-txn"
    create_topic(target.bootstrap_servers, topic)
    p = Producer({"bootstrap.servers": target.bootstrap_servers, "transactional.id": "cli-txn-tid"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"committed", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"hanging", partition=0)
    p.flush(10)  # ... and the producer goes away: the transaction hangs until aborted
    obs: list[dict] = []
    listed = _rows(run_tool("kafka-transactions", *bs, "list").stdout)
    obs.append({"step": "list", "header": listed[0], "rows": [[r[0], r[3]] for r in listed[1:] if r[0] == "cli-txn-tid"]})
    described = _rows(run_tool("kafka-transactions", *bs, "describe", "--transactional-id", "cli-txn-tid").stdout)
    row = dict(zip(described[0], described[1]))
    obs.append({"step": "describe", "header": described[0], "state": row["TransactionState"],
                "partitions": row["TopicPartitions"], "timeout": row["TransactionTimeoutMs"]})
    producers = _rows(run_tool("kafka-transactions", *bs, "describe-producers", "--topic", topic, "--partition", "0").stdout)
    row = dict(zip(producers[0], producers[1]))
    obs.append({"step": "describe-producers", "header": producers[0], "start": row["CurrentTransactionStartOffset"],
                "sequence": row["LastSequence"]})
    hanging = _rows(run_tool("kafka-transactions", *bs, "find-hanging", "--broker-id", "1",
                             "--max-transaction-timeout", "0").stdout)
    found = [dict(zip(hanging[0], r)) for r in hanging[1:]]
    obs.append({"step": "find-hanging", "header": hanging[0],
                "rows": [[r["Topic"], r["Partition"], r["StartOffset"]] for r in found if r["Topic"] == topic]})
    r = run_tool("kafka-transactions", *bs, "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")
    obs.append({"step": "abort", "rc": r.returncode})
    del p
    obs.append({"step": "read_committed-after-abort", "records": _cf_read(target.bootstrap_servers, topic, "read_committed")})
    return obs


@pytest.mark.compat(client="kafka-transactions", scenario="list, describe, describe-producers, find-hanging, abort")
def test_kafka_transactions_tool(differential: Any) -> None:
    obs = differential("cli-kafka-transactions", _cli)
    assert one(obs, "list")["rows"] == [["cli-txn-tid", "Ongoing"]]
    assert one(obs, "describe")["state"] == "Ongoing" and one(obs, "describe")["partitions"] == "cli-txn-0"
    assert one(obs, "describe-producers")["start"] == "2"
    # the coordinator still knows the open transaction (Ongoing, this partition in it): not hanging
    assert one(obs, "find-hanging")["rows"] == [] and one(obs, "find-hanging")["header"][:3] == ["Topic", "Partition", "ProducerId"]
    assert one(obs, "read_committed-after-abort")["records"] == ["0=committed", "position=4"]
