"""Transaction bad input against Samsa and Apache Kafka, as raw requests: each answer's error code
must be Kafka's.

One transactional id walks through: a transaction timeout above transaction.max.timeout.ms
(INVALID_TRANSACTION_TIMEOUT), EndTxn with no transaction, AddPartitionsToTxn for a producer id the
coordinator does not know and with a wrong epoch, a transactional batch for a partition the
transaction has not added (KIP-890 verification), a committed transaction, EndTxn retried and
reversed after it, and a zombie: the producer's old epoch after a second InitProducerId, on the
coordinator and on the partition. A read_committed Fetch at the end finds the committed record
alone. tests/integration/test_transactions.py holds real clients to the same rules.

A hanging transaction: with transaction.partition.verification.enable turned off for a moment
(kafka-configs, a dynamic broker default), a transactional batch goes to a partition its
transaction never added; the commit's marker never reaches it, so it holds that partition's LSO
until kafka-transactions.sh find-hanging finds it and abort writes its ABORT marker.

AddPartitionsToTxn v4-5, as a partition leader sends them to the coordinator (KIP-890 part 1):
batches of transactions, verify-only checks (TRANSACTION_ABORTABLE for a partition not added,
PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING), an add, an unknown partition.

EndTxn v5 (transactions v2, KIP-890 part 2): every end bumps the epoch and answers the new one;
an abort with no transaction, a retried commit (the epoch just bumped from), the other result
after it, a commit with no transaction, and the old epoch after the bump on the coordinator
(AddPartitionsToTxn, EndTxn) and on the partition (its leader's verification). Then transactions
v2 as a 4.x client runs them: Produce v12 and TxnOffsetCommit v5 add their partitions themselves
(at the old epoch they are refused), and the commit makes the record and the offset visible.
"""

from __future__ import annotations

import datetime
import re
import time
import uuid
from typing import Any

import pytest
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnRequest as BrokerAddV4
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTopic as BrokerTopicV4
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTransaction as BrokerTxnV4
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnRequest as BrokerAddV5
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnTopic as BrokerTopicV5
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnTransaction as BrokerTxnV5
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.txn_offset_commit.v5.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from compat.jvm import run_tool
from protocol.errors import ErrorCode
from tests.support import fidelity
from tests.support import txn_requests as txn
from tests.support.raw_client import RawClient

TOPIC = "raw-txn-errors"
TXN_ID = "raw-txn-errors-tid"
RETRIABLE = txn.RETRIABLE
_retry = txn.retry


def _name(code: int) -> str:
    return ErrorCode(code).name


def _init(client: RawClient, timeout_ms: int = 60_000, txn_id: str = TXN_ID) -> Any:
    return _retry(lambda: client.request(InitProducerIdRequest(
        transactional_id=TransactionalId(txn_id),
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=timeout_ms)),
    )))  # fmt: skip


def _add(client: RawClient, pid: int, epoch: int, txn_id: str = TXN_ID, topic: str = TOPIC) -> str:
    return _name(txn.add(client, txn_id, pid, epoch, topic, 0))


def _end(client: RawClient, pid: int, epoch: int, commit: bool, txn_id: str = TXN_ID) -> str:
    return _name(txn.end(client, txn_id, pid, epoch, commit)[0])


def _produce(
    client: RawClient, pid: int, epoch: int, sequence: int, value: bytes,
    txn_id: str = TXN_ID, topic: str = TOPIC, partition: int = 0, version: int = 8,
) -> str:  # fmt: skip
    return _name(txn.produce(client, txn_id, topic, partition, pid, epoch, sequence, value, version))


def _find_coordinator(client: RawClient, txn_id: str) -> Any:
    return txn.find_coordinator(client, txn_id)


def observe(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, TOPIC)
        found = _find_coordinator(client, TXN_ID)
        obs.append({"step": "find-coordinator", "error": _name(found.error_code)})
        obs.append({"step": "init-timeout-too-long", "error": _name(_init(client, 900_001).error_code)})
        init = _init(client)
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        obs.append({"step": "init", "error": _name(init.error_code), "epoch": epoch})
        obs.append({"step": "end-without-transaction", "error": _end(client, pid, epoch, commit=True)})
        obs.append({"step": "add-unknown-producer-id", "error": _add(client, pid + 1000, epoch)})
        obs.append({"step": "add-wrong-epoch", "error": _add(client, pid, epoch + 1)})
        obs.append({"step": "produce-partition-not-added", "error": _produce(client, pid, epoch, 0, b"unadded")})
        obs.append({"step": "add", "error": _add(client, pid, epoch)})
        obs.append({"step": "produce", "error": _produce(client, pid, epoch, 0, b"committed")})
        obs.append({"step": "commit", "error": _end(client, pid, epoch, commit=True)})
        obs.append({"step": "commit-retried", "error": _end(client, pid, epoch, commit=True)})
        obs.append({"step": "abort-after-commit", "error": _end(client, pid, epoch, commit=False)})
        again = _init(client)
        obs.append({"step": "init-again", "error": _name(again.error_code),
                    "sameProducer": int(again.producer_id) == pid, "epochBump": int(again.producer_epoch) - epoch})  # fmt: skip
        obs.append({"step": "zombie-add", "error": _add(client, pid, epoch)})
        obs.append({"step": "zombie-produce", "error": _produce(client, pid, epoch, 1, b"zombie")})
        obs.append({"step": "zombie-end", "error": _end(client, pid, epoch, commit=True)})
        answer = fidelity.fetch(client, [(TOPIC, 0, 0)], isolation_level=1)
        (t, p, error, hw, bases, _) = answer.partitions[0]
        obs.append({"step": "read_committed", "error": error, "hw": hw, "batches": list(bases)})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="transaction errors: timeout, no transaction, fencing, verification")
def test_transaction_errors(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-txn-errors", observe)}
    assert obs["init-timeout-too-long"]["error"] == "invalid_transaction_timeout"
    assert obs["end-without-transaction"]["error"] == "invalid_txn_state"
    assert obs["add-unknown-producer-id"]["error"] == "invalid_producer_id_mapping"
    assert obs["add-wrong-epoch"]["error"] == "producer_fenced"
    assert obs["produce-partition-not-added"]["error"] == "invalid_txn_state"  # Produce v8: before TRANSACTION_ABORTABLE
    assert obs["produce"]["error"] == obs["commit"]["error"] == obs["commit-retried"]["error"] == "none"
    assert obs["abort-after-commit"]["error"] == "invalid_txn_state"
    assert obs["init-again"] == {"step": "init-again", "error": "none", "sameProducer": True, "epochBump": 1}
    assert obs["zombie-add"]["error"] == obs["zombie-end"]["error"] == "producer_fenced"
    assert obs["zombie-produce"]["error"] == "invalid_producer_epoch"  # the partition's producer state fences it
    assert (obs["read_committed"]["hw"], obs["read_committed"]["batches"]) == (2, [0, 1])  # the record, its marker


# ------------------------------------------------------------------------------ a hanging transaction

HANG_TOPIC, HANG_ID = "raw-txn-hanging", "raw-txn-hanging-tid"


def _rows(text: str) -> list[dict[str, str]]:
    lines = [re.split(r"\s*\t\s*", line.strip()) for line in text.strip().splitlines() if line.strip()]
    return [dict(zip(lines[0], row)) for row in lines[1:]]


def _read_committed(bootstrap: str, partition: int) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hang-{uuid.uuid4()}", "isolation.level": "read_committed",
                  "enable.auto.commit": False})  # fmt: skip
    try:
        c.assign([TopicPartition(HANG_TOPIC, partition, 0)])
        values = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                values.append(m.value().decode())
        low, high = c.get_watermark_offsets(TopicPartition(HANG_TOPIC, partition), timeout=10)  # read_committed: the LSO
        return {"values": values, "position": c.position([TopicPartition(HANG_TOPIC, partition)])[0].offset, "lso": high}
    finally:
        c.close()


def observe_hanging(target: Any) -> list[dict[str, Any]]:
    """With transaction.partition.verification.enable off (a dynamic broker config), a transactional
    batch written to a partition its transaction never added is never ended by a marker: it hangs,
    holding that partition's LSO, until kafka-transactions.sh finds and aborts it."""
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    bs = ["--bootstrap-server", target.bootstrap_servers]
    verification = ["--entity-type", "brokers", "--entity-default"]
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, HANG_TOPIC, partitions=2)
        _find_coordinator(client, HANG_ID)
        init = _init(client, txn_id=HANG_ID)
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        run_tool("kafka-configs", *bs, "--alter", *verification, "--add-config", "transaction.partition.verification.enable=false")
        try:
            time.sleep(1)  # the dynamic config reaches the broker
            obs.append({"step": "add", "error": _add(client, pid, epoch, HANG_ID, HANG_TOPIC)})  # partition 0 only
            for partition in (0, 1):
                answer = _produce(client, pid, epoch, 0, b"in-%d" % partition, HANG_ID, HANG_TOPIC, partition)
                obs.append({"step": f"produce-{partition}", "error": answer})
            obs.append({"step": "commit", "error": _end(client, pid, epoch, True, HANG_ID)})
        finally:
            run_tool("kafka-configs", *bs, "--alter", *verification, "--delete-config", "transaction.partition.verification.enable")
    time.sleep(1)  # the commit's markers
    for partition in (0, 1):
        obs.append({"step": f"read_committed-{partition}", **_read_committed(target.bootstrap_servers, partition)})
    hanging = _rows(run_tool("kafka-transactions", *bs, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0").stdout)
    obs.append({"step": "find-hanging", "rows": [[r["Topic"], r["Partition"], r["StartOffset"]] for r in hanging
                                                 if r["Topic"] == HANG_TOPIC]})  # fmt: skip
    aborted = run_tool("kafka-transactions", *bs, "abort", "--topic", HANG_TOPIC, "--partition", "1", "--start-offset", "0")
    obs.append({"step": "abort", "rc": aborted.returncode})
    obs.append({"step": "read_committed-after-abort", **_read_committed(target.bootstrap_servers, 1)})
    return obs


@pytest.mark.compat(client="kafka-transactions", scenario="find-hanging and abort a transaction that hangs (no marker)")
def test_hanging_transaction_found_and_aborted(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-txn-hanging", observe_hanging)}
    assert [obs[s]["error"] for s in ("add", "produce-0", "produce-1", "commit")] == ["none"] * 4
    assert obs["read_committed-0"] == {"step": "read_committed-0", "values": ["in-0"], "position": 2, "lso": 2}
    # held at the hanging batch: nothing read (no position yet), the LSO at its offset
    assert obs["read_committed-1"] == {"step": "read_committed-1", "values": [], "position": -1001, "lso": 0}
    assert obs["find-hanging"]["rows"] == [[HANG_TOPIC, "1", "0"]]
    assert obs["read_committed-after-abort"] == {"step": "read_committed-after-abort", "values": [], "position": 2, "lso": 2}


# ------------------------------------------------------------------ AddPartitionsToTxn v4-5 (brokers)

BROKER_TOPIC, BROKER_IDS = "raw-txn-verify", ("raw-txn-verify-a", "raw-txn-verify-b")


def _first_retriable(answer: Any) -> int:
    """A retriable code of a v4-5 answer (the top-level one first), else its top-level code."""
    codes = [p.partition_error_code for t in answer.results_by_transaction for tr in t.topic_results
             for p in tr.results_by_partition]  # fmt: skip
    return next((c for c in [answer.error_code, *codes] if c in RETRIABLE), answer.error_code)


def _broker_add(
    client: RawClient, version: int, txns: list[tuple[str, int, int, bool, str, tuple[int, ...]]]
) -> dict[str, Any]:
    """AddPartitionsToTxn v4/v5 of (transactional id, producer id, epoch, verify only, topic,
    partitions) transactions: the top-level error and {transactional id: {partition: error}}."""
    request, txn_cls, topic_cls = (BrokerAddV4, BrokerTxnV4, BrokerTopicV4) if version == 4 else (
        BrokerAddV5, BrokerTxnV5, BrokerTopicV5)  # fmt: skip
    answer = _retry(lambda: client.request(request(transactions=tuple(
        txn_cls(transactional_id=TransactionalId(tid), producer_id=ProducerId(pid), producer_epoch=i16(epoch),
                verify_only=verify, topics=(topic_cls(name=TopicName(topic), partitions=tuple(i32(p) for p in ps)),))
        for tid, pid, epoch, verify, topic, ps in txns
    ))), _first_retriable)  # fmt: skip
    return {
        "error": _name(answer.error_code),
        "results": {str(t.transactional_id): {f"{tr.name}-{p.partition_index}": _name(p.partition_error_code)
                                              for tr in t.topic_results for p in tr.results_by_partition}
                    for t in answer.results_by_transaction},
    }  # fmt: skip


def observe_broker_requests(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    a, b = BROKER_IDS
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, BROKER_TOPIC, partitions=2)
        for tid in BROKER_IDS:
            _find_coordinator(client, tid)
        ia, ib = _init(client, txn_id=a), _init(client, txn_id=b)
        pa, ea, pb, eb = int(ia.producer_id), int(ia.producer_epoch), int(ib.producer_id), int(ib.producer_epoch)
        t = BROKER_TOPIC
        obs.append({"step": "v4-verify-not-added", **_broker_add(client, 4, [(a, pa, ea, True, t, (0,))])})
        obs.append({"step": "v5-batch-verify", **_broker_add(client, 5, [
            (a, pa, ea, True, t, (0, 1)), (b, pb, eb + 1, True, t, (0,))])})  # fmt: skip
        obs.append({"step": "v4-add", **_broker_add(client, 4, [(a, pa, ea, False, t, (0,))])})
        obs.append({"step": "v5-verify-added", **_broker_add(client, 5, [(a, pa, ea, True, t, (0, 1))])})
        obs.append({"step": "v5-verify-unknown-producer", **_broker_add(client, 5, [(b, pb + 1000, eb, True, t, (0,))])})
        obs.append({"step": "v4-unknown-partition", **_broker_add(client, 4, [(b, pb, eb, False, t, (0, 7))])})
        obs.append({"step": "produce-added", "error": _produce(client, pa, ea, 0, b"added", a, t, 0)})
        obs.append({"step": "produce-not-added", "error": _produce(client, pa, ea, 0, b"not-added", a, t, 1)})
        obs.append({"step": "abort", "error": _end(client, pa, ea, commit=False, txn_id=a)})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="AddPartitionsToTxn v4-5 between brokers: batched, verify-only")
def test_broker_add_partitions_to_txn(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-txn-verify", observe_broker_requests)}
    a, b = BROKER_IDS
    p0, p1, p7 = (f"{BROKER_TOPIC}-{p}" for p in (0, 1, 7))
    assert obs["v4-verify-not-added"]["results"] == {a: {p0: "transaction_abortable"}}
    assert obs["v5-batch-verify"]["results"] == {
        a: {p0: "transaction_abortable", p1: "transaction_abortable"}, b: {p0: "producer_fenced"}}
    assert obs["v4-add"]["results"] == {a: {p0: "none"}}
    assert obs["v5-verify-added"]["results"] == {a: {p0: "none", p1: "transaction_abortable"}}
    assert obs["v5-verify-unknown-producer"]["results"] == {b: {p0: "invalid_producer_id_mapping"}}
    assert obs["v4-unknown-partition"]["results"] == {b: {p0: "operation_not_attempted", p7: "unknown_topic_or_partition"}}
    assert obs["produce-added"]["error"] == obs["abort"]["error"] == "none"
    assert obs["produce-not-added"]["error"] == "invalid_txn_state"  # Produce v8
    assert {o["error"] for o in obs.values() if "results" in o} == {"none"}


# ------------------------------------------------------------------------- EndTxn v5 (transactions v2)

V2_TOPIC, V2_ID = "raw-txn-v2", "raw-txn-v2-tid"


def _end_v5(client: RawClient, pid: int, epoch: int, commit: bool) -> tuple[str, int, int]:
    error, got_pid, got_epoch = txn.end(client, V2_ID, pid, epoch, commit, version=5)
    return _name(error), got_pid, got_epoch


V2_GROUP = "raw-txn-v2-group"


def _produce_v12(client: RawClient, pid: int, epoch: int, sequence: int, value: bytes) -> str:
    """Produce v12 (transactions v2): no AddPartitionsToTxn before it, the leader adds the partition."""
    return _produce(client, pid, epoch, sequence, value, V2_ID, V2_TOPIC, version=12)


def _txn_offsets_v5(client: RawClient, pid: int, epoch: int) -> str:
    """TxnOffsetCommit v5 (transactions v2): no AddOffsetsToTxn before it."""
    answer = _retry(lambda: client.request(TxnOffsetCommitRequest(
        transactional_id=TransactionalId(V2_ID), group_id=GroupId(V2_GROUP), producer_id=ProducerId(pid),
        producer_epoch=i16(epoch), topics=(TxnOffsetCommitRequestTopic(name=TopicName(V2_TOPIC), partitions=(
            TxnOffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(1), committed_metadata=""),)),),
    )), lambda r: r.topics[0].partitions[0].error_code)  # fmt: skip
    return _name(answer.topics[0].partitions[0].error_code)


def observe_end_txn_v5(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, V2_TOPIC)
        _find_coordinator(client, V2_ID)
        init = _init(client, txn_id=V2_ID)
        pid, e = int(init.producer_id), int(init.producer_epoch)

        def end(step: str, epoch: int, commit: bool) -> None:
            error, got_pid, got_epoch = _end_v5(client, pid, epoch, commit)
            obs.append({"step": step, "error": error, "sameProducer": got_pid == pid,
                        "epoch": got_epoch - e if got_epoch >= 0 else got_epoch})  # fmt: skip

        end("abort-empty", e, commit=False)  # allowed in v2: the epoch moves on
        obs.append({"step": "add", "error": _add(client, pid, e + 1, V2_ID, V2_TOPIC)})
        obs.append({"step": "produce", "error": _produce(client, pid, e + 1, 0, b"committed", V2_ID, V2_TOPIC)})
        end("commit", e + 1, commit=True)
        end("commit-retried", e + 1, commit=True)
        end("abort-retried-after-commit", e + 1, commit=False)
        end("commit-without-transaction", e + 2, commit=True)
        end("end-two-epochs-old", e, commit=True)
        obs.append({"step": "stale-add", "error": _add(client, pid, e + 1, V2_ID, V2_TOPIC)})
        obs.append({"step": "stale-produce", "error": _produce(client, pid, e + 1, 1, b"stale", V2_ID, V2_TOPIC)})
        _retry(lambda: client.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(V2_GROUP,))),
               lambda r: r.coordinators[0].error_code)  # fmt: skip
        obs.append({"step": "v12-stale-produce", "error": _produce_v12(client, pid, e + 1, 0, b"stale")})
        obs.append({"step": "v5-stale-offsets", "error": _txn_offsets_v5(client, pid, e + 1)})
        obs.append({"step": "v12-produce", "error": _produce_v12(client, pid, e + 2, 0, b"implicit")})
        obs.append({"step": "v5-offsets", "error": _txn_offsets_v5(client, pid, e + 2)})
        end("v2-commit", e + 2, commit=True)
        deadline = time.monotonic() + 10  # the commit's marker is written after EndTxn answers
        while True:
            answer = fidelity.fetch(client, [(V2_TOPIC, 0, 0)], isolation_level=1)
            (t, p, error, hw, bases, _) = answer.partitions[0]
            if len(bases) >= 4 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        obs.append({"step": "read_committed", "error": error, "hw": hw, "batches": list(bases)})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="EndTxn v5: epoch bump per transaction, retries, stale epochs")
def test_end_txn_v5(differential: Any) -> None:
    obs = {o["step"]: {k: v for k, v in o.items() if k != "step"} for o in differential("raw-txn-v2", observe_end_txn_v5)}
    assert obs["abort-empty"] == {"error": "none", "sameProducer": True, "epoch": 1}
    assert obs["add"]["error"] == obs["produce"]["error"] == "none"
    assert obs["commit"] == obs["commit-retried"] == {"error": "none", "sameProducer": True, "epoch": 2}
    assert obs["abort-retried-after-commit"]["error"] == "invalid_txn_state"
    assert obs["commit-without-transaction"]["error"] == "invalid_txn_state"
    assert obs["end-two-epochs-old"]["error"] == obs["stale-add"]["error"] == "producer_fenced"
    assert obs["stale-produce"]["error"] == obs["v12-stale-produce"]["error"] == "invalid_producer_epoch"
    assert obs["v5-stale-offsets"]["error"] == "invalid_producer_epoch"
    assert obs["v12-produce"]["error"] == obs["v5-offsets"]["error"] == "none"
    assert obs["v2-commit"] == {"error": "none", "sameProducer": True, "epoch": 3}
    # the record and its marker, the implicitly added record and its marker
    assert (obs["read_committed"]["hw"], obs["read_committed"]["batches"]) == (4, [0, 1, 2, 3])
