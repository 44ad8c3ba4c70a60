"""Protocol fidelity (issue 13, part A), each case as the exact request on the wire.

Fetch sessions by every session id and epoch (Kafka's FetchManager.newContext), a delayed fetch
that completes as soon as Kafka's DelayedFetch.tryComplete would. compat/test_fidelity.py sends
the same requests to Apache Kafka.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.testing import SamsaProcess
from protocol.records import NewRecord, build_batch
from tests.support import fidelity
from tests.support.raw_client import RawClient

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
FETCH_SESSION_ID_NOT_FOUND = 70
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 5
INVALID_CONFIG, INVALID_REQUEST, MESSAGE_TOO_LARGE = 40, 42, 10


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaProcess]:
    b = SamsaProcess(tmp_path_factory.mktemp("fidelity") / "data", {"num.partitions": "1"}).start()
    yield b
    b.close()


@pytest.fixture
def client(broker: SamsaProcess) -> Iterator[RawClient]:
    with RawClient(broker.port) as c:
        yield c


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# -- A1: fetch sessions --------------------------------------------------------------------------

FULL = [(0, -1), (-1, -1), (12345, -1), (0, 0), (-1, 0), (12345, 0)]
"""(session id, epoch) of full fetches: epoch -1 (FINAL_EPOCH, sessionless) or 0 (INITIAL_EPOCH)."""
INCREMENTAL = [(0, 1), (-1, 1), (12345, 1), (12345, 7), (0, -2)]
"""Incremental epochs: each names a session this broker does not have."""


@pytest.mark.parametrize(("session_id", "epoch"), FULL)
def test_full_fetch_is_served_with_any_session_id(client: RawClient, session_id: int, epoch: int) -> None:
    topic = unique()
    fidelity.create_topic(client, topic)
    assert fidelity.produce(client, topic, 0, fidelity.batch_of(3)).error == NONE
    answer = fidelity.fetch(client, [(topic, 0, 0)], session_id=session_id, session_epoch=epoch)
    assert answer.error == NONE
    assert answer.session_id == 0  # sessionless (-1), or no session created (0)
    assert answer.partitions == ((topic, 0, NONE, 3, (0,), answer.partitions[0][5]),)


@pytest.mark.parametrize(("session_id", "epoch"), INCREMENTAL)
def test_incremental_fetch_without_a_session_is_session_id_not_found(
    client: RawClient, session_id: int, epoch: int
) -> None:
    topic = unique()
    fidelity.create_topic(client, topic)
    answer = fidelity.fetch(client, [(topic, 0, 0)], session_id=session_id, session_epoch=epoch)
    assert (answer.error, answer.session_id, answer.partitions) == (FETCH_SESSION_ID_NOT_FOUND, 0, ())


# -- A2: delayed fetch ---------------------------------------------------------------------------


def rolled_topic(client: RawClient, segments: int, records_per_segment: int, configs: dict[str, str] | None = None) -> str:
    """A topic whose log has `segments` segments (segment.ms rolls the next append), each of one
    batch of `records_per_segment` records."""
    topic = unique("rolled")
    fidelity.create_topic(client, topic, {"segment.ms": "100", **(configs or {})})
    for _ in range(segments):
        assert fidelity.produce(client, topic, 0, fidelity.batch_of(records_per_segment)).error == NONE
        time.sleep(0.15)
    return topic


def test_fetch_on_an_older_segment_completes_at_once(client: RawClient) -> None:
    """The issue's case: min_bytes=200, max_wait 2 s, an offset on an older segment with hundreds
    of records after it. Kafka's case F answers at once with what that segment holds."""
    topic = rolled_topic(client, 3, 100)
    answer = fidelity.fetch(client, [(topic, 0, 50)], min_bytes=200_000, max_wait_ms=2000)
    assert answer.seconds < 1.0, answer
    ((_, _, error, hw, bases, size),) = answer.partitions
    assert (error, hw, bases) == (NONE, 300, (0,))
    assert size < 200_000  # less than min_bytes: only that segment's batch


def test_fetch_on_the_active_segment_waits_for_min_bytes(broker: SamsaProcess, client: RawClient) -> None:
    """On the active segment the bytes between the fetch offset and the high watermark count
    (case G): one small batch is not enough, the second is."""
    topic = unique()
    fidelity.create_topic(client, topic)
    assert fidelity.produce(client, topic, 0, fidelity.batch_of(1)).error == NONE
    one = len(fidelity.batch_of(20, value_size=20))
    result: dict[str, fidelity.FetchAnswer] = {}

    def long_poll() -> None:
        with RawClient(broker.port) as c:
            result["answer"] = fidelity.fetch(c, [(topic, 0, 1)], min_bytes=one + 1, max_wait_ms=8000)

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(0.3)
    assert fidelity.produce(client, topic, 0, fidelity.batch_of(20, value_size=20)).error == NONE
    time.sleep(0.5)
    assert poller.is_alive(), "completed with fewer than min_bytes"
    produced = time.monotonic()
    assert fidelity.produce(client, topic, 0, fidelity.batch_of(20, value_size=20)).error == NONE
    poller.join(10)
    assert not poller.is_alive()
    assert time.monotonic() - produced < 1.0
    ((_, _, error, hw, bases, _),) = result["answer"].partitions
    assert (error, hw, bases) == (NONE, 41, (1, 21))


def test_compacted_topic_with_small_sparse_batches_is_read_without_stalls(client: RawClient) -> None:
    """A reader with a large min_bytes goes through a compacted topic's small batches, one
    segment per fetch, without waiting max_wait on any segment before the active one."""
    topic = rolled_topic(client, 5, 2, {"cleanup.policy": "compact"})
    offset, slow = 0, []
    while offset < 8:  # the four segments before the active one
        answer = fidelity.fetch(client, [(topic, 0, offset)], min_bytes=1 << 20, max_wait_ms=3000)
        ((_, _, error, hw, bases, _),) = answer.partitions
        assert error == NONE and hw == 10 and bases == (offset,), answer
        if answer.seconds >= 1.0:
            slow.append((offset, answer.seconds))
        offset += 2
    assert not slow, slow


def test_unsatisfied_fetch_still_waits_max_wait(client: RawClient) -> None:
    topic = rolled_topic(client, 1, 5)
    answer = fidelity.fetch(client, [(topic, 0, 5)], min_bytes=1, max_wait_ms=700)
    assert 0.6 <= answer.seconds < 3, answer
    assert answer.partitions[0][4] == ()



# -- A5: Metadata auto-creation ----------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 4, 12])
def test_metadata_auto_creation_answers_as_kafka_4(client: RawClient, version: int) -> None:
    """The request that creates a topic gets UNKNOWN_TOPIC_OR_PARTITION and no partitions (Kafka
    4.x's AutoTopicCreationManager); the next request finds the topic with its partitions."""
    topic = unique("auto")
    first = fidelity.metadata(client, [topic], version)
    assert first == [(topic, UNKNOWN_TOPIC_OR_PARTITION, 0)]
    assert fidelity.metadata(client, [topic], version) == [(topic, NONE, 1)]


def test_metadata_without_auto_creation_leaves_the_topic_unknown(client: RawClient) -> None:
    topic = unique("auto")
    assert fidelity.metadata(client, [topic], 12, allow_auto_creation=False) == [(topic, UNKNOWN_TOPIC_OR_PARTITION, 0)]
    assert fidelity.metadata(client, [topic], 12, allow_auto_creation=False) == [(topic, UNKNOWN_TOPIC_OR_PARTITION, 0)]


# -- A4: the config names Kafka 3.9 or 4.x accepts (compat/test_config_names.py compares the lists) --

TOPIC_CONFIG, STATIC_BROKER_CONFIG = 1, 4
DEPRECATED = {"message.format.version": "2.8", "message.timestamp.difference.max.ms": "1000",
              "message.downconversion.enable": "false"}
"""Topic configs Kafka 3.9 accepts and 4.0 removed, with values that would matter if they had an effect."""


def test_deprecated_topic_configs_are_accepted_with_kafkas_warning(broker: SamsaProcess, client: RawClient) -> None:
    topic = unique("deprecated")
    assert fidelity.create_topics(client, topic, DEPRECATED) == (NONE, None)
    fidelity.wait_for_leader(client, topic)
    assert fidelity.describe_configs(client, fidelity.TOPIC, topic, list(DEPRECATED)) == {
        k: (v, TOPIC_CONFIG, False) for k, v in DEPRECATED.items()
    }
    assert fidelity.incremental_alter_configs(client, fidelity.TOPIC, topic, [("message.format.version", fidelity.SET, "3.0")]) == (NONE, None)
    log = broker.read_log()
    for name, value in (("message.format.version", "2.8"), ("message.timestamp.difference.max.ms", "1000"),
                        ("message.format.version", "3.0")):
        assert f"deprecated topic config accepted with no effect topic={topic} config={name} value={value} " in log
    assert f"topic={topic} config=message.downconversion.enable" not in log  # Kafka 3.9 does not call it deprecated
    # no effect: an hour-old timestamp passes (message.timestamp.before.max.ms alone decides, as in 4.x)
    old = build_batch([NewRecord(key=b"k", value=b"v", timestamp=int(time.time() * 1000) - 3_600_000)])
    assert fidelity.produce(client, topic, 0, old).error == NONE


@pytest.mark.parametrize(("configs", "answer"), [
    ({"compression.gzip.level": "5", "compression.lz4.level": "17", "compression.zstd.level": "-5",
      "leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "*",
      "local.retention.ms": "-2", "local.retention.bytes": "1000", "remote.log.copy.disable": "true",
      "remote.log.delete.on.disable": "false", "remote.storage.enable": "false"}, (NONE, None)),
    ({"remote.storage.enable": "true"}, (INVALID_CONFIG, "Tiered Storage functionality is disabled in the "
                                         "broker. Topic cannot be configured with remote log storage.")),
    ({"compression.gzip.level": "0"}, (INVALID_CONFIG, "Invalid value 0 for configuration compression.gzip.level: "
                                       "Value must be between 1 and 9 or equal to -1")),
    ({"leader.replication.throttled.replicas": "0:1, 1-2"}, (INVALID_CONFIG, "Invalid value [0:1, 1-2] for configuration "
        "leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a "
        "list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")),
])
def test_topic_configs_kafka_4_accepts(client: RawClient, configs: dict[str, str], answer: tuple[int, str | None]) -> None:
    assert fidelity.create_topics(client, unique("names"), configs) == answer


def test_deprecated_broker_configs_start_the_broker_with_kafkas_warning(tmp_path: Path) -> None:
    overrides = {"log.message.format.version": "2.8", "log.message.timestamp.difference.max.ms": "1000",
                 "offsets.commit.required.acks": "-1"}  # the last one: deprecated in 3.9, unknown to Samsa
    with SamsaProcess(tmp_path / "data", overrides) as broker, RawClient(broker.port) as c:
        described = fidelity.describe_configs(c, fidelity.BROKER, "0", ["log.message.format.version"])
        assert described == {"log.message.format.version": ("2.8", STATIC_BROKER_CONFIG, True)}
        log = broker.read_log()
        assert "deprecated broker config accepted with no effect config=log.message.format.version value=2.8 " in log
        assert "unknown config keys ignored keys=offsets.commit.required.acks" in log


# -- A6: dynamic broker configs ----------------------------------------------------------------



def test_dynamic_broker_configs_apply_without_restart_and_persist(tmp_path: Path) -> None:
    b, d = fidelity.BROKER, fidelity.describe_configs
    with SamsaProcess(tmp_path / "data") as broker:
        with RawClient(broker.port) as c:
            # the cluster-wide min.insync.replicas Kafka 4.x writes when a cluster is created
            assert d(c, b, "") == {"min.insync.replicas": ("1", DYNAMIC_DEFAULT_BROKER_CONFIG, False)}
            topic = unique()
            fidelity.create_topic(c, topic)
            topic_configs = d(c, fidelity.TOPIC, topic)
            assert topic_configs["min.insync.replicas"] == ("1", DYNAMIC_DEFAULT_BROKER_CONFIG, False)

            # the cluster default applies at once to every topic without its own setting
            assert fidelity.incremental_alter_configs(c, b, "", [("message.max.bytes", fidelity.SET, "2000")]) == (0, None)
            assert d(c, b, "0", ["message.max.bytes"]) == {"message.max.bytes": ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG, False)}
            assert d(c, fidelity.TOPIC, topic, ["max.message.bytes"]) == {
                "max.message.bytes": ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG, False)
            }
            big = fidelity.batch_of(1, value_size=3000)
            assert fidelity.produce(c, topic, 0, big).error == MESSAGE_TOO_LARGE
            # this broker's own value wins over the default
            assert fidelity.incremental_alter_configs(c, b, "0", [("message.max.bytes", fidelity.SET, "5000")]) == (0, None)
            assert d(c, b, "0", ["message.max.bytes"]) == {"message.max.bytes": ("5000", DYNAMIC_BROKER_CONFIG, False)}
            assert fidelity.produce(c, topic, 0, big).error == NONE
            # what cannot change, and Kafka 4.x's rules for min.insync.replicas
            assert fidelity.incremental_alter_configs(c, b, "0", [("num.partitions", fidelity.SET, "3")]) == (
                INVALID_REQUEST, "Cannot update these configs dynamically: [num.partitions]")
            assert fidelity.incremental_alter_configs(c, b, "0", [("message.max.bytes", fidelity.SET, "abc")]) == (
                INVALID_REQUEST, "Invalid value abc for configuration message.max.bytes: Not a number of type INT")
            assert fidelity.incremental_alter_configs(c, b, "0", [("min.insync.replicas", fidelity.SET, "2")]) == (
                INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
            assert fidelity.incremental_alter_configs(c, b, "", [("min.insync.replicas", fidelity.DELETE, None)]) == (
                INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
            assert fidelity.incremental_alter_configs(c, b, "", [("min.insync.replicas", fidelity.SET, "1")]) == (0, None)
        broker.restart()
        with RawClient(broker.port) as c:
            assert d(c, b, "0", ["message.max.bytes"]) == {"message.max.bytes": ("5000", DYNAMIC_BROKER_CONFIG, False)}
            assert fidelity.produce(c, topic, 0, fidelity.batch_of(1, value_size=6000)).error == MESSAGE_TOO_LARGE
            assert fidelity.incremental_alter_configs(c, b, "0", [("message.max.bytes", fidelity.DELETE, None)]) == (0, None)
            assert fidelity.incremental_alter_configs(c, b, "", [("message.max.bytes", fidelity.DELETE, None)]) == (0, None)
            assert d(c, b, "0", ["message.max.bytes"]) == {"message.max.bytes": ("1048588", DEFAULT_CONFIG, False)}
            assert fidelity.produce(c, topic, 0, fidelity.batch_of(1, value_size=6000)).error == NONE
