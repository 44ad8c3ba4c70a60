"""Protocol fidelity (issue 13, part A) against Samsa and Apache Kafka, as raw requests.

Fetch sessions: a Fetch v12 with every combination of session id (0, -1, an unknown one) and
epoch (-1 FINAL_EPOCH, 0 INITIAL_EPOCH, incremental ones), observed as the top-level error, the
partitions answered and whether a session id came back. Delayed fetches: how soon a fetch with a
large min_bytes completes when its offset lies on an older segment, on the active segment, and
on a compacted topic's small batches. tests/integration/test_fidelity.py holds Samsa to the same
requests with exact assertions.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
import uuid
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v5.request import CreatableTopic, CreateTopicsRequest
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from protocol import messages
from tests.support import fidelity
from tests.support.raw_client import RawClient, encode_body

SESSIONS = [(0, -1), (-1, -1), (12345, -1), (0, 0), (-1, 0), (12345, 0), (0, 1), (-1, 1), (12345, 1), (0, -2)]


def _port(target: Any) -> int:
    return int(target.bootstrap_servers.rsplit(":", 1)[1])


def _partitions(answer: fidelity.FetchAnswer) -> list[list[Any]]:
    """(topic, partition, error, high watermark, [base offsets of the batches]) per partition."""
    return [[t, p, error, hw, list(bases)] for t, p, error, hw, bases, _ in answer.partitions]


def observe_sessions(target: Any) -> list[dict[str, Any]]:
    obs: list[dict[str, Any]] = []
    with RawClient(_port(target)) as client:
        topic = "fidelity-sessions"
        fidelity.create_topic(client, topic)
        assert fidelity.produce(client, topic, 0, fidelity.batch_of(3)).error == 0
        for session_id, epoch in SESSIONS:
            answer = fidelity.fetch(client, [(topic, 0, 0)], session_id=session_id, session_epoch=epoch)
            obs.append({
                "step": "fetch",
                "sessionId": session_id,
                "epoch": epoch,
                "error": answer.error,
                "sessionCreated": answer.session_id != 0,
                "partitions": _partitions(answer),
            })
    return obs


@pytest.mark.compat(client="raw protocol", scenario="fetch session ids and epochs (FetchManager.newContext)")
def test_fetch_sessions(differential: Any) -> None:
    obs = {(o["sessionId"], o["epoch"]): o for o in differential("raw-fetch-sessions", observe_sessions)}
    for session_id in (0, -1, 12345):
        final = obs[(session_id, -1)]
        assert (final["error"], final["sessionCreated"]) == (0, False), final  # sessionless, served
        assert final["partitions"] == [["fidelity-sessions", 0, 0, 3, [0]]]
        assert obs[(session_id, 0)]["partitions"] == final["partitions"]
    for key in ((0, 1), (-1, 1), (12345, 1), (0, -2)):
        assert (obs[key]["error"], obs[key]["partitions"]) == (70, []), obs[key]  # FETCH_SESSION_ID_NOT_FOUND


def observe_chain_tag(target: Any) -> list[dict[str, Any]]:
    """Fetch v12 with and without Samsa's chain-replication tagged field on the partition
    (protocol/schemas/fetch_v12_chain.py): Kafka keeps a tag it does not know and ignores it, so the
    answers are the same; Samsa ignores it from a consumer."""
    from protocol.schemas.fetch_v12_chain import ChainReport, encode_chain_reports

    obs: list[dict[str, Any]] = []
    with RawClient(_port(target)) as client:
        topic = "fidelity-chain-tag"
        fidelity.create_topic(client, topic)
        assert fidelity.produce(client, topic, 0, fidelity.batch_of(3)).error == 0
        for reports in (None, encode_chain_reports([ChainReport(3, 2, 5, 5)])):
            answer = fidelity.fetch(client, [(topic, 0, 0)], chain_reports=reports)
            obs.append({"step": "fetch", "tagged": reports is not None, "error": answer.error,
                        "partitions": _partitions(answer)})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="Fetch v12 with Samsa's chain replication tagged field")
def test_chain_tag_is_ignored(differential: Any) -> None:
    plain, tagged = differential("raw-fetch-chain-tag", observe_chain_tag)
    assert plain["partitions"] == [["fidelity-chain-tag", 0, 0, 3, [0]]]
    assert {**tagged, "tagged": False} == plain


def observe_fetch_by_id(target: Any) -> list[dict[str, Any]]:
    """Fetch v13 and v17 naming topics by id (KIP-516): a known topic, an id nobody has, the zero
    id, and a known and an unknown id in one request with a partition the topic lacks (Kafka
    answers the partitions read first, then the refused). Not compared: the zero id together with
    a partition a known topic lacks, which Kafka 4.3.1 fails as a whole with UNKNOWN_SERVER_ERROR
    (Samsa answers each partition; clients send no zero id: they fetch by name when they lack ids)."""
    obs: list[dict[str, Any]] = []
    with RawClient(_port(target)) as client:
        topic = "fidelity-fetch-by-id"
        fidelity.create_topic(client, topic, partitions=2)
        assert fidelity.produce(client, topic, 0, fidelity.batch_of(3)).error == 0
        known, unknown, zero = fidelity.topic_id(client, topic), uuid.uuid4(), uuid.UUID(int=0)
        names: dict[uuid.UUID | None, str] = {known: "known", unknown: "unknown", None: "zero"}  # kio decodes the zero id as None
        cases = {
            "known": [(known, 0, 0)],
            "unknown": [(unknown, 0, 0)],
            "zero": [(zero, 0, 0)],
            "mixed": [(unknown, 0, 0), (known, 1, 0), (known, 7, 0), (known, 0, 1)],
        }
        for version in (13, 17):
            for case, parts in cases.items():
                error, partitions = fidelity.fetch_by_id(client, parts, version)
                obs.append({"v": version, "case": case, "error": error,
                            "partitions": [[names.get(t, str(t)), *rest] for t, *rest in partitions]})  # fmt: skip
    return json.loads(json.dumps(obs))


@pytest.mark.compat(client="raw protocol", scenario="Fetch v13+ by topic id, unknown and zero ids (KIP-516)")
def test_fetch_by_topic_id(differential: Any) -> None:
    obs = {(o["v"], o["case"]): o for o in differential("raw-fetch-by-topic-id", observe_fetch_by_id)}
    for v in (13, 17):
        assert obs[(v, "known")]["partitions"] == [["known", 0, 0, 3, [0]]]
        assert obs[(v, "unknown")]["partitions"] == [["unknown", 0, 100, -1, []]]  # UNKNOWN_TOPIC_ID
        assert obs[(v, "zero")]["partitions"] == [["zero", 0, 100, -1, []]]
        assert obs[(v, "mixed")]["partitions"] == [
            ["known", 1, 0, 0, []], ["known", 0, 0, 3, [0]],  # read (offset 1 is inside the batch at 0)
            ["unknown", 0, 100, -1, []], ["known", 7, 3, -1, []],  # refused: unknown ids first
        ]


SENTINELS = [-1, -2, -3, -4, -5, -6, -7, 0]
"""LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD, no
sentinel at all, and a timestamp (before every record)."""


def observe_list_offsets(target: Any) -> list[dict[str, Any]]:
    """ListOffsets of each sentinel in each version from 1 to 11: which versions may ask which."""
    obs: list[dict[str, Any]] = []
    with RawClient(_port(target)) as client:
        topic = "fidelity-list-offsets"
        fidelity.create_topic(client, topic)
        assert fidelity.produce(client, topic, 0, fidelity.batch_of(3)).error == 0
        for version in range(1, 12):
            for timestamp in SENTINELS:
                error, ts, offset, epoch = fidelity.list_offsets(client, topic, timestamp, version)
                # the record timestamps come from each broker's clock: whether one came back
                obs.append({"v": version, "timestamp": timestamp, "error": error, "timestampSet": ts >= 0,
                            "offset": offset, "epoch": epoch})  # fmt: skip
    return obs


@pytest.mark.compat(client="raw protocol", scenario="ListOffsets sentinels per version (v1-11, KIP-734/405/1005/1023)")
def test_list_offsets_sentinels(differential: Any) -> None:
    obs = {(o["v"], o["timestamp"]): o for o in differential("raw-list-offsets-sentinels", observe_list_offsets)}
    assert obs[(6, -3)]["error"] == 35 and obs[(7, -3)]["error"] == 0  # UNSUPPORTED_VERSION before v7
    assert obs[(10, -6)]["error"] == 35 and (obs[(11, -6)]["error"], obs[(11, -6)]["offset"]) == (0, -1)
    assert all(obs[(v, -7)]["error"] == 35 for v in range(1, 12))
    assert obs[(11, 0)]["offset"] == 0 and obs[(11, -1)]["offset"] == 3


def _rolled_topic(client: RawClient, topic: str, segments: int, records: int, configs: dict[str, str] | None = None) -> None:
    """`segments` segments of one batch each: segment.ms rolls the segment at the next append."""
    fidelity.create_topic(client, topic, {"segment.ms": "100", **(configs or {})})
    for _ in range(segments):
        assert fidelity.produce(client, topic, 0, fidelity.batch_of(records)).error == 0
        time.sleep(0.2)


def observe_delayed_fetch(target: Any) -> list[dict[str, Any]]:
    obs: list[dict[str, Any]] = []
    with RawClient(_port(target)) as client:
        # an offset on an older segment, hundreds of records after it (the numbers)
        _rolled_topic(client, "fidelity-older-segment", 3, 100)
        answer = fidelity.fetch(client, [("fidelity-older-segment", 0, 50)], min_bytes=200_000, max_wait_ms=3000)
        obs.append({
            "step": "older segment",
            "atOnce": answer.seconds < 1.5,
            "partitions": _partitions(answer),
        })

        # the active segment: one batch is fewer than min_bytes, the second is enough
        topic = "fidelity-active-segment"
        fidelity.create_topic(client, topic)
        assert fidelity.produce(client, topic, 0, fidelity.batch_of(1)).error == 0
        one = len(fidelity.batch_of(20, value_size=20))
        result: dict[str, fidelity.FetchAnswer] = {}

        def long_poll() -> None:
            with RawClient(_port(target)) as c:
                result["answer"] = fidelity.fetch(c, [(topic, 0, 1)], min_bytes=one + 1, max_wait_ms=8000)

        poller = threading.Thread(target=long_poll)
        poller.start()
        time.sleep(0.5)
        assert fidelity.produce(client, topic, 0, fidelity.batch_of(20, value_size=20)).error == 0
        time.sleep(0.7)
        waiting_after_one = poller.is_alive()
        produced = time.monotonic()
        assert fidelity.produce(client, topic, 0, fidelity.batch_of(20, value_size=20)).error == 0
        poller.join(15)
        obs.append({
            "step": "active segment",
            "waitingAfterOneBatch": waiting_after_one,
            "completedOnTheSecond": time.monotonic() - produced < 1.5,
            "partitions": _partitions(result["answer"]),
        })

        # a compacted topic's small batches, one per segment, read with a large min_bytes
        _rolled_topic(client, "fidelity-compacted", 5, 2, {"cleanup.policy": "compact"})
        for offset in (0, 2, 4, 6):
            answer = fidelity.fetch(client, [("fidelity-compacted", 0, offset)], min_bytes=1 << 20, max_wait_ms=3000)
            obs.append({
                "step": "compacted",
                "offset": offset,
                "atOnce": answer.seconds < 1.5,
                # without the batches' offsets: which are left depends on when each broker's
                # cleaner last ran (Kafka's had removed the first ones in one run, Samsa's not yet)
                "partitions": [row[:4] for row in _partitions(answer)],
            })
    return obs


@pytest.mark.compat(client="raw protocol", scenario="delayed fetch completes as soon as it can (DelayedFetch)")
def test_delayed_fetch(differential: Any) -> None:
    obs = differential("raw-delayed-fetch", observe_delayed_fetch)
    older, active, *compacted = obs
    assert older == {"step": "older segment", "atOnce": True, "partitions": [["fidelity-older-segment", 0, 0, 300, [0]]]}
    assert (active["waitingAfterOneBatch"], active["completedOnTheSecond"]) == (True, True), active
    assert active["partitions"] == [["fidelity-active-segment", 0, 0, 41, [1, 21]]]
    assert [o["atOnce"] for o in compacted] == [True] * 4, compacted


def observe_auto_creation(target: Any) -> list[dict[str, Any]]:
    """Metadata v1 (always allows auto-creation), v4 and v12 naming a topic that does not exist:
    the first answer, and the topic's partitions once it exists."""
    obs: list[dict[str, Any]] = []
    with RawClient(_port(target)) as client:
        for version in (1, 4, 12):
            topic = f"fidelity-auto-created-v{version}"
            ((_, error, partitions),) = fidelity.metadata(client, [topic], version)
            deadline = time.monotonic() + 30
            while (answer := fidelity.metadata(client, [topic], version))[0][1] != 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            obs.append({"step": "metadata", "v": version, "first": [error, partitions], "then": list(answer[0][1:])})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="Metadata auto-creation answer")
def test_metadata_auto_creation(differential: Any) -> None:
    obs = differential("raw-metadata-auto-creation", observe_auto_creation)
    # UNKNOWN_TOPIC_OR_PARTITION, no partitions; then the topic with num.partitions (1)
    assert [(o["v"], o["first"], o["then"]) for o in obs] == [(v, [3, 0], [0, 1]) for v in (1, 4, 12)]


def observe_dynamic_configs(target: Any) -> list[dict[str, Any]]:
    """Dynamic broker configs on node 1 and the cluster default: what is described, what each
    change answers. Every change is undone at the end (the targets are shared by the session)."""
    b, d, alter = fidelity.BROKER, fidelity.describe_configs, fidelity.incremental_alter_configs
    obs: list[dict[str, Any]] = []

    def settle(client: RawClient, name: str, keys: list[str], want: Any) -> dict[str, Any]:
        """Kafka's brokers apply a change when the controller's record reaches them: wait for it."""
        deadline = time.monotonic() + 15
        while (got := d(client, b, name, keys)) != want and time.monotonic() < deadline:
            time.sleep(0.1)
        return got

    with RawClient(_port(target)) as client:
        topic = "fidelity-dynamic-configs"
        fidelity.create_topic(client, topic)
        obs.append({"step": "cluster default", "configs": sorted(d(client, b, "").items())})
        # Kafka's internal broker configs are described only where set
        obs.append({"step": "internal config", "listed": "group.consumer.regex.refresh.interval.ms" in d(client, b, "1")})
        obs.append({"step": "topic min.insync.replicas", "config": d(client, fidelity.TOPIC, topic, ["min.insync.replicas"])})
        for entity, value in (("", "2000"), ("1", "3000")):
            answer = alter(client, b, entity, [("message.max.bytes", fidelity.SET, value)])
            source = 2 if entity else 3
            got = settle(client, "1", ["message.max.bytes"], {"message.max.bytes": (value, source, False)})
            obs.append({"step": f"set message.max.bytes at {entity!r}", "answer": list(answer), "described": got})
        obs.append({"step": "topic max.message.bytes", "config": d(client, fidelity.TOPIC, topic, ["max.message.bytes"])})
        for entity, op, key, value in (
            ("1", fidelity.SET, "num.partitions", "3"),
            ("1", fidelity.SET, "message.max.bytes", "abc"),
            ("1", fidelity.SET, "min.insync.replicas", "2"),
            ("", fidelity.DELETE, "min.insync.replicas", None),
            ("7", fidelity.SET, "message.max.bytes", "1"),
        ):
            obs.append({"step": f"{key} at {entity!r}", "answer": list(alter(client, b, entity, [(key, op, value)]))})
        for entity in ("1", ""):
            assert alter(client, b, entity, [("message.max.bytes", fidelity.DELETE, None)]) == (0, None)
        obs.append({"step": "undone", "described": settle(client, "1", ["message.max.bytes"], {"message.max.bytes": ("1048588", 5, False)})})
    return json.loads(json.dumps(obs))  # tuples as lists, as compared


@pytest.mark.compat(client="raw protocol", scenario="dynamic broker configs (one broker, cluster default)")
def test_dynamic_broker_configs(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-dynamic-broker-configs", observe_dynamic_configs)}
    assert obs["cluster default"]["configs"] == [["min.insync.replicas", ["1", 3, False]]]
    assert obs["internal config"]["listed"] is False
    assert obs["set message.max.bytes at ''"]["described"] == {"message.max.bytes": ["2000", 3, False]}
    assert obs["set message.max.bytes at '1'"]["described"] == {"message.max.bytes": ["3000", 2, False]}
    assert obs["num.partitions at '1'"]["answer"][0] == 42  # INVALID_REQUEST: not dynamic
    assert obs["min.insync.replicas at '1'"]["answer"][0] == 40  # INVALID_CONFIG: ELR
    assert obs["undone"]["described"] == {"message.max.bytes": ["1048588", 5, False]}


CONFIG_CASES: list[dict[str, str]] = [
    {"compression.gzip.level": "5", "compression.lz4.level": "17", "compression.zstd.level": "-5",
     "leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "*",
     "local.retention.ms": "-2", "local.retention.bytes": "1000", "remote.log.copy.disable": "true",
     "remote.log.delete.on.disable": "false", "remote.storage.enable": "false"},
    {"remote.storage.enable": "true"},
    {"compression.gzip.level": "10"},
    {"compression.gzip.level": "0"},
    {"compression.lz4.level": "18"},
    {"compression.zstd.level": "23"},
    {"local.retention.ms": "-3"},
    {"leader.replication.throttled.replicas": "0-1"},
    {"internal.segment.bytes": "1000"},
]
"""CreateTopics configs that Kafka 3.9 and 4.x both know (valid and invalid values)."""


def observe_config_names(target: Any) -> list[dict[str, Any]]:
    """CreateTopics with the topic configs Kafka 3.9 and 4.x both accept (the deprecated ones 4.0
    removed are Samsa's and 3.9's alone: tests/integration/test_fidelity.py), and how a topic
    created with them describes them."""
    obs: list[dict[str, Any]] = []
    with RawClient(_port(target)) as client:
        for i, configs in enumerate(CONFIG_CASES):
            topic = f"fidelity-config-names-{i}"
            error, message = fidelity.create_topics(client, topic, configs)
            step: dict[str, Any] = {"step": "create", "configs": configs, "error": error, "message": message}
            if error == 0:
                fidelity.wait_for_leader(client, topic)
                step["described"] = fidelity.describe_configs(client, fidelity.TOPIC, topic, list(configs))
            obs.append(step)
        # an internal config is described only where it is set
        listed = fidelity.describe_configs(client, fidelity.TOPIC, "fidelity-config-names-0")
        obs.append({"step": "describe all", "internalListed": "internal.segment.bytes" in listed})
    return json.loads(json.dumps(obs))


@pytest.mark.compat(client="raw protocol", scenario="topic configs Kafka 3.9 and 4.x accept (CreateTopics)")
def test_config_names(differential: Any) -> None:
    obs = differential("raw-config-names", observe_config_names)
    assert obs[0]["error"] == 0 and obs[0]["described"]["compression.gzip.level"] == ["5", 1, False]
    assert [o["error"] for o in obs[1:8]] == [40] * 7
    assert obs[-1] == {"step": "describe all", "internalListed": False}


def observe_samsa_topic_configs(target: Any) -> list[dict[str, Any]]:
    """CreateTopics with Samsa's own topic config (replication.pipeline.enable), which Kafka does
    not know, and how the topic created with it describes it."""
    with RawClient(_port(target)) as client:
        topic = "fidelity-samsa-configs"
        error, message = fidelity.create_topics(client, topic, {"replication.pipeline.enable": "true"})
        step: dict[str, Any] = {"step": "create", "error": error, "message": message}
        if error == 0:
            fidelity.wait_for_leader(client, topic)
            step["described"] = fidelity.describe_configs(
                client, fidelity.TOPIC, topic, ["replication.pipeline.enable"])
    return json.loads(json.dumps([step]))


@pytest.mark.compat(client="raw protocol", scenario="Samsa's own topic config replication.pipeline.enable")
def test_samsa_topic_configs(differential: Any) -> None:
    (obs,) = differential("raw-samsa-configs", observe_samsa_topic_configs)
    assert obs == {"step": "create", "error": 40}  # Kafka's INVALID_CONFIG; Samsa's acceptance normalised to it


def observe_unknown_tags(target: Any) -> list[dict[str, Any]]:
    """Requests carrying tagged fields their version does not define (a newer client may send
    them): ApiVersions v3 with two in the request's own section, CreateTopics v5 with one in a
    topic's; Kafka's readers keep such fields aside and answer as without them."""
    obs: list[dict[str, Any]] = []
    with RawClient(_port(target)) as client:
        body = encode_body(ApiVersionsRequest(client_software_name="samsa-fidelity", client_software_version="1"))
        answer, _ = messages.decode_response(18, 3, client.request_raw(18, 3, body[:-1] + bytes([2, 7, 2]) + b"hi" + bytes([40, 0])), 0)
        obs.append({"step": "api-versions", "error": answer.error_code,
                    "produceListed": any(k.api_key == 0 for k in answer.api_keys)})  # fmt: skip
        topic = "fidelity-unknown-tags"
        plain = encode_body(CreateTopicsRequest(
            topics=(CreatableTopic(name=TopicName(topic), num_partitions=i32(2), replication_factor=i16(1),
                                   assignments=(), configs=()),),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)), validate_only=False))  # fmt: skip
        topic_end = plain.index(b"\x01\x01\x00") + 3  # empty assignments and configs, then the topic's tags
        tagged = plain[: topic_end - 1] + bytes([1, 99, 1, 0xAB]) + plain[topic_end:]
        answer, _ = messages.decode_response(19, 5, client.request_raw(19, 5, tagged), 1)  # response header v1: one tag byte
        obs.append({"step": "create-topics", "topics": [(t.name, t.error_code, t.num_partitions) for t in answer.topics]})
    return json.loads(json.dumps(obs))


@pytest.mark.compat(client="raw protocol", scenario="tagged fields a version does not define are skipped (Kafka's unknownTaggedFields)")
def test_unknown_tagged_fields(differential: Any) -> None:
    api_versions, created = differential("raw-unknown-tags", observe_unknown_tags)
    assert api_versions["error"] == 0 and api_versions["produceListed"]
    assert created["topics"] == [["fidelity-unknown-tags", 0, 2]]
