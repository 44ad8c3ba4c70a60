"""Every version of every API key Samsa advertises, sent by a real client and compared with Kafka
(but for the versions only brokers send, `BROKER_ONLY`, which raw differential tests send, and those
franz-go does not send, `CLIENT_CANNOT`, which another client's differential test sends).

compat/go/versions.go pins franz-go (kgo.MinVersions and kgo.MaxVersions: that version or nothing)
to one version of one API key at a time and drives the client's ordinary API for that key: the
producer, the consumer, the group consumer, the idempotent producer, connection set-up, kadm. One
program run per API key sweeps all of the key's versions concurrently and prints what the client
observed, version by version.

- `test_version_sweep[<key>-<target>]` sweeps the versions both brokers serve: each runs on Kafka
  4.x and on Samsa, Samsa's observations must equal Kafka's (after compat/differences.py), and the
  assertions below check each version's observations against what that version can carry (no
  headers before Produce v3, no timestamps before v2, no leader epochs before ListOffsets v4, ...)
  on both brokers, so a sweep that did nothing fails on Kafka too.
- `test_version_sweep_kafka_removed[<target>]` sweeps, on Samsa only, the versions Samsa advertises
  that Kafka no longer serves (KIP-896: Kafka 4.x still advertises Produce v0-2, for librdkafka's
  sake, but closes the connection on them), with the same assertions. Which versions those are is
  asked of the running Kafka (a request of each version, `served` in versions.go), not written here.
- `test_samsa_served_every_swept_version` closes the loop: the sweeps run against a Samsa of their
  own whose SAMSA_API_STATS must show that each swept (key, version) was served, so a pin that
  silently sent another version fails.

compat/test_zz_api_coverage.py then requires every advertised (key, version) to have been served.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.handlers import registry
from compat.conftest import Targets
from compat.kafka import COMPAT
from compat.matrix import _versions
from compat.test_go_node_clients import CLIENT_NAMES, run_program

Obs = dict[str, Any]

HANDLERS = registry.load_handlers()
BROKER_ONLY: dict[int, set[int]] = {24: {4, 5}, 83: {0}, 84: {0}, 85: {0, 1}, 86: {0}, 87: {0, 1}}
"""Versions only brokers send, which franz-go's client API cannot: AddPartitionsToTxn v4-5 (KIP-890,
a partition leader to the transaction coordinator; compat/test_txn_errors.py sends them raw) and
the share coordinator's state RPCs 83-87 (KIP-932, a share partition leader to the share
coordinator; compat/test_share_state_rpcs.py sends them raw)."""
CLIENT_CANNOT: dict[int, set[int]] = {68: {0}}
"""Versions franz-go does not send: it runs KIP-848 groups at ConsumerGroupHeartbeat v1 only (kgo's
supportsKIP848v1); compat/test_consumer_protocol.py has Java 3.9 send v0 and compares it with Kafka."""
ADVERTISED: dict[int, list[int]] = {
    k: vs for k, h in HANDLERS.items()
    if (vs := [v for v in range(h.min_version, h.max_version + 1)
               if v not in BROKER_ONLY.get(k, set()) | CLIENT_CANNOT.get(k, set())])
}  # fmt: skip
"""The versions of each key franz-go sweeps (a key only brokers send has none and no sweep)."""
CLIENT = CLIENT_NAMES["go"]
KAFKA_VERSION = _versions(COMPAT / "pom.xml").get("kafka", "4.x")
SWEEP_SAMSA = "samsa-sweep"  # the dedicated Samsa the sweeps run against (its own API stats)

SWEPT_ON_SAMSA: dict[int, set[int]] = {}  # what the sweeps sent to SWEEP_SAMSA this session
SWEEP_SECONDS: dict[str, float] = {}  # wall time of the sweeps per target (printed at the end)


@pytest.fixture(scope="session")
def kafka_served(go_binary: Path, targets: Targets) -> dict[int, set[int]]:
    """The versions of each API key Samsa advertises that the session's Kafka actually serves."""
    kafka = targets.get("kafka")
    probes = [f"{k}:{','.join(map(str, vs))}" for k, vs in ADVERTISED.items()]
    served: dict[int, set[int]] = {}
    for o in run_program([str(go_binary)], kafka.bootstrap_servers, "served", "-", *probes):
        if o["served"]:
            served.setdefault(o["key"], set()).add(o["v"])
    return served


@pytest.fixture(scope="session")
def kafka_advertised(go_binary: Path, targets: Targets) -> dict[int, tuple[int, int]]:
    kafka = targets.get("kafka")
    return {o["key"]: (o["min"], o["max"]) for o in run_program([str(go_binary)], kafka.bootstrap_servers, "apiversions", "-")}


def sweep(go_binary: Path, targets: Targets, target: Any, key: int, versions: list[int], prefix: str) -> list[Obs]:
    """One program run: `key` pinned to each of `versions` in turn, against `target` (for Samsa:
    the sweep's own Samsa)."""
    broker = targets.get(SWEEP_SAMSA) if target.name == "samsa" else target
    start = time.monotonic()
    obs = run_program([str(go_binary)], broker.bootstrap_servers, "versions", prefix, str(key), ",".join(map(str, versions)))
    SWEEP_SECONDS[target.name] = SWEEP_SECONDS.get(target.name, 0.0) + time.monotonic() - start
    if target.name == "samsa":
        SWEPT_ON_SAMSA.setdefault(key, set()).update(versions)
    return obs


def _sweep_params() -> Iterator[Any]:
    for key in ADVERTISED:
        h = HANDLERS[key]
        yield pytest.param(
            key, id=f"{key}-{h.name}",
            marks=pytest.mark.compat(client=CLIENT, scenario=f"version sweep: every version of {h.name} (key {key}) both serve"),
        )  # fmt: skip


@pytest.mark.parametrize("key", list(_sweep_params()))
def test_version_sweep(
    key: int, kafka_target: Any, differential: Callable[..., Any], go_binary: Path, targets: Targets,
    kafka_served: dict[int, set[int]],
) -> None:  # fmt: skip
    versions = [v for v in ADVERTISED[key] if v in kafka_served.get(key, set())]
    assert versions, f"Kafka serves none of the versions of key {key} Samsa advertises ({ADVERTISED[key]})"
    obs = differential(f"go-versions-{key}", lambda t: sweep(go_binary, targets, t, key, versions, f"gv{key}"))
    check(key, versions, obs)


def _removed(kafka_served: dict[int, set[int]]) -> dict[int, list[int]]:
    """Versions Samsa advertises that Kafka does not serve, by key."""
    removed = {k: [v for v in vs if v not in kafka_served.get(k, set())] for k, vs in ADVERTISED.items()}
    return {k: vs for k, vs in removed.items() if vs}


def _ranges(versions: list[int]) -> str:
    runs: list[list[int]] = []
    for v in versions:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"v{r[0]}" if len(r) == 1 else f"v{r[0]}-{r[-1]}" for r in runs)


@pytest.mark.compat(client=CLIENT, scenario="version sweep: versions Kafka 4.x no longer serves (KIP-896), Samsa alone")
def test_version_sweep_kafka_removed(
    kafka_target: Any, go_binary: Path, targets: Targets, kafka_served: dict[int, set[int]],
    kafka_advertised: dict[int, tuple[int, int]],
) -> None:  # fmt: skip
    removed = _removed(kafka_served)
    if kafka_target.name == "kafka":
        if not removed:
            pytest.skip(f"Kafka {KAFKA_VERSION} serves every version Samsa advertises")
        described = []
        for k, vs in removed.items():
            lo, hi = kafka_advertised.get(k, (1, 0))
            still = [v for v in vs if lo <= v <= hi]
            described.append(f"{HANDLERS[k].name} {_ranges(vs)}" + (
                f" ({'' if still == vs else _ranges(still) + ' '}still advertised in ApiVersions)" if still else ""))
        pytest.skip(f"Kafka {KAFKA_VERSION} closes the connection on {'; '.join(described)}: removed by KIP-896")
    if not removed:
        pytest.skip(f"Kafka {KAFKA_VERSION} serves every version Samsa advertises")
    for key, versions in removed.items():
        check(key, versions, sweep(go_binary, targets, kafka_target, key, versions, f"gv{key}-old"))


def test_samsa_served_every_swept_version(targets: Targets) -> None:
    """The sweep's Samsa recorded every (key, version) the sweeps pinned (it runs after them)."""
    if not SWEPT_ON_SAMSA:
        pytest.skip("no version sweep ran against Samsa in this session")
    seen = targets.get(SWEEP_SAMSA).api_versions_seen()
    missing = sorted((k, v) for k, vs in SWEPT_ON_SAMSA.items() for v in vs if v not in seen.get(k, set()))
    assert not missing, f"pinned in the sweep but not served by Samsa (key, version): {missing}"
    print(f"\nversion sweep wall time per target: { {t: round(s, 1) for t, s in SWEEP_SECONDS.items()} } s")


# ---------------------------------------------------------------- what each version must show

BASE = 1_600_000_000_000  # the sweep's explicit record timestamps
TOPIC_OPS = ["ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"]
CLUSTER_OPS = ["ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"]
GROUP_OPS = ["ALTER_CONFIGS", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ"]
MEMBER = "client=kgo host=/127.0.0.1 instance=<nil> member=kgo-<uuid>"


def check(key: int, versions: list[int], obs: list[Obs]) -> None:
    by_v: dict[int, list[Obs]] = {}
    for o in obs:
        by_v.setdefault(o["v"], []).append(o)
    assert sorted(by_v) == sorted(versions), f"key {key}: versions observed {sorted(by_v)}, swept {versions}"
    for v, vo in sorted(by_v.items()):
        assert steps(vo, "pinned") == [{"step": "pinned", "key": key, "sent": True, "v": v}], f"key {key} v{v} not sent"
        try:
            CHECKS[key](v, vo)
        except AssertionError as e:
            raise AssertionError(f"key {key} v{v}: {e}") from e


def steps(obs: list[Obs], *names: str) -> list[Obs]:
    return [o for o in obs if o["step"] in names]


def rows(obs: list[Obs], step: str, *fields: str) -> list[tuple[Any, ...]]:
    return [tuple(o[f] for f in fields) for o in steps(obs, step)]


def _records(obs: list[Obs], step: str) -> list[tuple[Any, ...]]:
    return rows(obs, step, "offset", "key", "value", "valueLen", "headers", "timestamp", "timestampType", "compression")


PRODUCED = [  # (offset, key, value, value length, headers, timestamp, timestamp type, codec)
    (0, "k0", "v0", 2, [["h1", "a"], ["h2", ""]], BASE, 0, 2),
    (1, None, "v1", 2, [], BASE + 1, 0, 2),
    (2, "k2", None, 0, [["h", None]], BASE - 5, 0, 2),
    (3, "k3", "abcdefgabcdefgabcdef", 3000, [], BASE + 2, 0, 2),
    (4, "k4", "v4", 2, [], BASE + 3, 0, 0),  # a one-record batch is not compressed
]


def check_produce(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "produced", "partition", "offset") == [(0, i) for i in range(5)]
    want = PRODUCED
    if v < 3:  # message sets (magic 0 for v0-1, 1 for v2): no headers
        want = [(*r[:4], [], *r[5:]) for r in want]
    if v < 2:  # magic 0: no timestamps
        want = [(*r[:5], -1, *r[6:]) for r in want]
    assert _records(obs, "consumed") == want
    # idempotence needs Produce v3+ (record batches carry the producer id)
    assert {(o["idempotent"], o["producerEpoch"]) for o in steps(obs, "consumed")} == ({(True, 0)} if v >= 3 else {(False, -1)})


def check_fetch(v: int, obs: list[Obs]) -> None:
    assert _records(obs, "consumed") == PRODUCED
    assert _records(obs, "consumed-from-2") == PRODUCED[2:]  # read_committed, from inside the first batch
    assert {(o["idempotent"], o["leaderEpoch"]) for o in steps(obs, "consumed", "consumed-from-2")} == {(True, 0)}


def check_init_producer_id(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "produced", "offset") == [(0,), (1,), (2,)]
    assert rows(obs, "consumed", "offset", "key", "idempotent", "producerEpoch") == [
        (0, "k0", True, 0), (1, None, True, 0), (2, "k2", True, 0)]


def check_api_versions(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "consumed", "offset", "key", "value") == [(0, "k0", "v0")]
    assert rows(obs, "apiversions", "node", "hasKeys", "pinnedAdvertised") == [(1, [0, 1, 3, 18], True)]


def check_list_offsets(v: int, obs: list[Obs]) -> None:
    epoch = 0 if v >= 4 else -1  # leader epochs in the response from v4
    listed = {s: rows(obs, s, "partition", "offset", "timestamp", "leaderEpoch", "err") for s in
              ("start", "end", "after-1500", "after-future", "committed", "max-timestamp", "local-start", "latest-tiered")}
    assert listed["start"] == [(0, 0, -1, epoch, ""), (1, 0, -1, epoch, "")]
    assert listed["end"] == [(0, 3, -1, epoch, ""), (1, 1, -1, epoch, "")]
    # the first record at or after the time; none in partition 1 (kadm then lists the end offset)
    assert listed["after-1500"] == [(0, 1, BASE + 3000, epoch, ""), (1, 1, -1, epoch, "")]
    assert listed["after-future"] == [(0, 3, -1, epoch, ""), (1, 1, -1, epoch, "")]
    assert listed["committed"] == (listed["end"] if v >= 2 else [])  # read_committed from v2
    assert listed["max-timestamp"] == ([(0, 1, BASE + 3000, 0, ""), (1, 0, BASE + 500, 0, "")] if v >= 7 else [])
    assert listed["local-start"] == (listed["start"] if v >= 8 else [])
    assert listed["latest-tiered"] == ([(0, -1, -1, -1, ""), (1, -1, -1, -1, "")] if v >= 9 else [])


def check_metadata(v: int, obs: list[Obs]) -> None:
    epoch = 0 if v >= 7 else -1  # leader epochs from v7
    ops = TOPIC_OPS if v >= 8 else []  # topic authorized operations from v8
    (topic, missing) = steps(obs, "described")
    assert {k: topic[k] for k in ("present", "err", "internal", "hasId", "authorizedOps")} == {
        "present": True, "err": "", "internal": False, "hasId": v >= 10, "authorizedOps": ops}
    assert topic["partitions"] == [f"p{p} leader=1 epoch={epoch} replicas=[1] isr=[1] offline=[] err=" for p in (0, 1)]
    # v0-3 always allow auto-creation: the request that creates the topic is answered as v4+'s
    # (Kafka 4.x's AutoTopicCreationManager), and the topic is listed by the next requests
    assert (missing["err"], missing["partitions"], missing["authorizedOps"]) == ("UNKNOWN_TOPIC_OR_PARTITION", None, ops)
    controller = 1 if v >= 1 else -1
    assert rows(obs, "cluster", "controller", "hasCluster", "brokers", "authorizedOps") == [
        (controller, v >= 2, ["1 127.0.0.1 rack=<nil>"], CLUSTER_OPS if 8 <= v <= 10 else [])]
    own = ["m", "missing"] if v < 4 else ["m"]
    assert rows(obs, "all-topics", "own") == [(own,)]
    # "no topics": an empty list, which v0 reads as "all topics"
    assert rows(obs, "no-topics", "own", "controller") == [(own if v == 0 else [], controller)]


def _epochs(key: int, v: int) -> int:
    """The leader epoch read back for a commit: carried by OffsetCommit v6+, returned by
    OffsetFetch v5+."""
    return 0 if (key != 8 or v >= 6) and (key != 9 or v >= 5) else -1


def check_group(key: int) -> Callable[[int, list[Obs]], None]:
    def check_one(v: int, obs: list[Obs]) -> None:
        assert rows(obs, "consumed", "partition", "offset", "key") == [(0, 0, "g0"), (0, 1, "g2"), (1, 0, "g1"), (1, 1, "g3")]
        assert rows(obs, "consumed-fetched", "partition", "offset", "err") == [(0, -1, ""), (1, -1, "")]  # no commits yet
        assert rows(obs, "described-active", "state", "protocolType", "protocol", "members", "assigned", "authorizedOps") == [
            ("Stable", "consumer", "cooperative-sticky", [MEMBER], ["g/0", "g/1"], GROUP_OPS)]
        assert rows(obs, "left", "err") == [("",), ("",)]
        assert rows(obs, "described-left", "state", "members") == [("Empty", [])]
        epoch, meta = _epochs(key, v), "kgo-<member-id>"
        # the second member resumes from the commits, read by its own OffsetFetch when it joins
        assert rows(obs, "consumed-again-fetched", "partition", "offset", "leaderEpoch", "metadata", "err") == [
            (0, 2, epoch, meta, ""), (1, 2, epoch, meta, "")]
        assert rows(obs, "consumed-again", "partition", "offset", "key") == [(0, 2, "g4"), (1, 2, "g5")]
        if key == 9 and v < 2:  # kadm asks for all the group's topics, which OffsetFetch can from v2
            assert steps(obs, "committed", "committed-again") == [
                {"step": "committed", "none": True, "v": v}, {"step": "committed-again", "none": True, "v": v}]
        else:
            fields = ("partition", "offset", "leaderEpoch", "metadata", "err")
            assert rows(obs, "committed", *fields) == [(0, 2, epoch, meta, ""), (1, 2, epoch, meta, "")]
            assert rows(obs, "committed-again", *fields) == [(0, 3, epoch, meta, ""), (1, 3, epoch, meta, "")]

    return check_one


def check_describe_groups(v: int, obs: list[Obs]) -> None:
    ops = GROUP_OPS if v >= 3 else []  # authorized operations from v3
    assert rows(obs, "described", "group", "err", "state", "protocolType", "protocol", "members", "assigned", "authorizedOps") == [
        ("active", "", "Stable", "consumer", "cooperative-sticky", [MEMBER], ["ga/0"], ops),
        ("empty", "", "Empty", "", "", [], [], ops),
        ("missing", "", "Dead", "", "", [], [], ops),  # an unknown group up to v5: Dead, no error
    ]


def check_list_groups(v: int, obs: list[Obs]) -> None:
    stable, empty = ("Stable", "Empty") if v >= 4 else ("", "")  # states from v4
    assert rows(obs, "listed", "groups") == [([f'active type="consumer" state="{stable}"', f'empty type="" state="{empty}"'],)]
    assert rows(obs, "listed-stable", "groups") == ([(['active type="consumer" state="Stable"'],)] if v >= 4 else [])


def check_create_topics(v: int, obs: list[Obs]) -> None:
    sent_back = v >= 5  # partitions, replication factor and configs in the response from v5
    created = steps(obs, "create", "create-again", "create-zero", "create-bad-name", "validate-only", "create-defaults")
    assert [(o["step"], o["topic"], o["err"]) for o in created] == [
        ("create", "ct", ""), ("create-again", "ct", "TOPIC_ALREADY_EXISTS"), ("create-zero", "zero", "INVALID_PARTITIONS"),
        ("create-bad-name", "bad name!", "INVALID_TOPIC_EXCEPTION"), ("validate-only", "dry", ""),
    ] + ([("create-defaults", "defaults", "")] if v >= 4 else [])  # -1 for the broker's defaults from v4
    (create,) = steps(obs, "create")
    assert (create["partitions"], create["replicationFactor"], create["hasId"], create.get("retention.ms")) == (
        (2, 1, v >= 7, "3600000 DYNAMIC_TOPIC_CONFIG") if sent_back else (-1, -1, False, None))
    (dry,) = steps(obs, "validate-only")
    assert dry["partitions"] == (3 if sent_back else -1)
    for d in steps(obs, "create-defaults"):
        assert (d["partitions"], d["replicationFactor"]) == ((1, 1) if sent_back else (-1, -1))
    assert rows(obs, "listed", "topic", "exists", "partitions") == [("ct", True, 2), ("dry", False, 0)] + (
        [("defaults", True, 1)] if v >= 4 else [])


def check_delete_topics(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "deleted", "topic", "err") == [("dt-a", ""), ("dt-b", ""), ("missing", "UNKNOWN_TOPIC_OR_PARTITION")]
    assert rows(obs, "remaining", "own") == [([],)]


def check_delete_records(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "deleted", "partition", "lowWatermark", "err") == [(0, 2, ""), (1, -1, "OFFSET_OUT_OF_RANGE")]
    assert rows(obs, "start", "partition", "offset") == [(0, 2), (1, 0)]
    assert rows(obs, "consumed", "partition", "offset", "value") == [(0, 2, "c"), (1, 0, "d")]


def check_offset_for_leader_epoch(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "epoch-end", "partition", "leaderEpoch", "endOffset", "err") == [(0, 0, 3, ""), (1, 0, 0, "")]


CONFIGS = {  # the sweep's topic "cfg" as each config API leaves it
    "described": [
        "retention.ms=3600000 DYNAMIC_TOPIC_CONFIG sensitive=false synonyms=[retention.ms=3600000 DYNAMIC_TOPIC_CONFIG]",
        (
            "cleanup.policy=compact DYNAMIC_TOPIC_CONFIG sensitive=false synonyms=[cleanup.policy=compact DYNAMIC_TOPIC_CONFIG "
            "log.cleanup.policy=delete DEFAULT_CONFIG]"
        ),
        "segment.ms=604800000 DEFAULT_CONFIG sensitive=false synonyms=[]",
        "max.message.bytes=1048588 DEFAULT_CONFIG sensitive=false synonyms=[message.max.bytes=1048588 DEFAULT_CONFIG]",
    ],
    "altered": [  # the whole set replaced: segment.ms set at creation is gone
        "retention.ms=7200000 DYNAMIC_TOPIC_CONFIG sensitive=false synonyms=[retention.ms=7200000 DYNAMIC_TOPIC_CONFIG]",
        (
            "cleanup.policy=compact DYNAMIC_TOPIC_CONFIG sensitive=false synonyms=[cleanup.policy=compact DYNAMIC_TOPIC_CONFIG "
            "log.cleanup.policy=delete DEFAULT_CONFIG]"
        ),
        "segment.ms=604800000 DEFAULT_CONFIG sensitive=false synonyms=[]",
        "max.message.bytes=1048588 DEFAULT_CONFIG sensitive=false synonyms=[message.max.bytes=1048588 DEFAULT_CONFIG]",
    ],
    "incremental": [  # retention.ms deleted, compact appended, segment.ms set
        "retention.ms=604800000 DEFAULT_CONFIG sensitive=false synonyms=[]",
        (
            "cleanup.policy=delete,compact DYNAMIC_TOPIC_CONFIG sensitive=false synonyms=[cleanup.policy=delete,compact "
            "DYNAMIC_TOPIC_CONFIG log.cleanup.policy=delete DEFAULT_CONFIG]"
        ),
        "segment.ms=600000 DYNAMIC_TOPIC_CONFIG sensitive=false synonyms=[segment.ms=600000 DYNAMIC_TOPIC_CONFIG]",
        "max.message.bytes=1048588 DEFAULT_CONFIG sensitive=false synonyms=[message.max.bytes=1048588 DEFAULT_CONFIG]",
    ],
}
MISSING_CONFIGS = ("missing", "UNKNOWN_TOPIC_OR_PARTITION",
                   ["retention.ms absent", "cleanup.policy absent", "segment.ms absent", "max.message.bytes absent"])


def check_describe_configs(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "described", "resource", "err", "entries") == [("cfg", "", CONFIGS["described"]), MISSING_CONFIGS]
    assert rows(obs, "broker", "resource", "err", "entries") == [("1", "", [
        "auto.create.topics.enable=true STATIC_BROKER_CONFIG", "log.retention.hours=168 DEFAULT_CONFIG",
        "num.partitions=1 STATIC_BROKER_CONFIG"])]


def check_alter_configs(v: int, obs: list[Obs]) -> None:
    assert [(o["step"], o["results"]) for o in steps(obs, "altered", "validate-only", "invalid-value", "missing-topic")] == [
        ("altered", ["cfg "]), ("validate-only", ["cfg "]), ("invalid-value", ["cfg INVALID_CONFIG"]),
        ("missing-topic", ["missing UNKNOWN_TOPIC_OR_PARTITION"])]
    assert rows(obs, "read-back", "resource", "err", "entries") == [("cfg", "", CONFIGS["altered"]), MISSING_CONFIGS]


def check_incremental_alter_configs(v: int, obs: list[Obs]) -> None:
    assert [(o["step"], o["results"]) for o in steps(obs, "altered", "validate-only", "invalid-value")] == [
        ("altered", ["cfg "]), ("validate-only", ["cfg "]), ("invalid-value", ["cfg INVALID_CONFIG"])]
    assert rows(obs, "read-back", "resource", "err", "entries") == [("cfg", "", CONFIGS["incremental"]), MISSING_CONFIGS]


def check_create_partitions(v: int, obs: list[Obs]) -> None:
    assert [(o["step"], o["err"]) for o in steps(obs, "add-2", "validate-set-4", "set-2", "set-missing")] == [
        ("add-2", ""), ("validate-set-4", ""), ("set-2", "INVALID_PARTITIONS"), ("set-missing", "UNKNOWN_TOPIC_OR_PARTITION")]
    assert rows(obs, "partitions", "count") == [(3,)]  # two added, none by validate-only
    assert rows(obs, "produced", "partition", "offset") == [(2, 0)]


def check_delete_groups(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "deleted", "group", "err") == [("doomed", ""), ("active", "NON_EMPTY_GROUP"), ("missing", "GROUP_ID_NOT_FOUND")]
    assert steps(obs, "committed-after") == [{"step": "committed-after", "none": True, "v": v}]
    assert rows(obs, "listed-after", "groups") == [(['active type="consumer" state="Stable"'],)]


def check_elect_leaders(v: int, obs: list[Obs]) -> None:
    def answers(how: int) -> list[str]:
        not_needed = f'how={how} err=ELECTION_NOT_NEEDED msg="Leader election not needed for topic partition."'
        return [f"el-0 {not_needed}", f"el-1 {not_needed}",
                f'el-5 how={how} err=UNKNOWN_TOPIC_OR_PARTITION msg="No such partition as el-5"',
                f'missing-0 how={how} err=UNKNOWN_TOPIC_OR_PARTITION msg="No such topic as missing"']

    assert rows(obs, "preferred", "results") == [(answers(0),)]
    assert rows(obs, "unclean", "results") == [(answers(0 if v == 0 else 1),)]  # v0: always preferred
    assert rows(obs, "all", "results") == [(["el none"],)]


def check_alter_replica_log_dirs(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "current-dir", "found", "results") == [(True, ["ard-0 err="])]
    assert rows(obs, "unknown-dir", "results") == [(["ard-0 err=LOG_DIR_NOT_FOUND"],)]
    # kadm shards by the topic's partitions in Metadata: none, so the request fails as a whole
    assert rows(obs, "unknown-topic", "results") == [(["request err=UNKNOWN_TOPIC_OR_PARTITION"],)]


def check_describe_log_dirs(v: int, obs: list[Obs]) -> None:
    parts = ["ld-0 size=70 lag=0 future=false", "ld-1 size=0 lag=0 future=false"]  # one 70-byte batch
    for step in ("named", "all"):  # (the volume's sizes come with v4, KIP-827)
        assert rows(obs, step, "broker", "hasDir", "err", "volume", "cordoned", "partitions") == [
            (1, True, "", v >= 4, False, parts)]


def check_reassignments(v: int, obs: list[Obs]) -> None:
    """On one broker: its own replica is accepted (and done at once), the rest refused."""
    assert rows(obs, "same", "results") == [(["ra-0 err="],)]
    for step in ("unknown-broker", "duplicate", "empty"):
        assert rows(obs, step, "results") == [(["ra-0 err=INVALID_REPLICA_ASSIGNMENT"],)], step
    assert rows(obs, "unknown", "results") == [(
        ["missing-0 err=UNKNOWN_TOPIC_OR_PARTITION", "ra-7 err=UNKNOWN_TOPIC_OR_PARTITION"],)]
    assert rows(obs, "cancel", "results") == [(["ra-0 err=NO_REASSIGNMENT_IN_PROGRESS"],)]
    assert rows(obs, "listed", "ongoing") == [([],)]


def check_consumer_protocol(v: int, obs: list[Obs]) -> None:
    """A KIP-848 member consumes both partitions, is described with its assignment, commits and
    leaves; the next member resumes after the commits."""
    assert [(o["partition"], o["offset"]) for o in steps(obs, "consumed")] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [(o["partition"], o["offset"]) for o in steps(obs, "consumed-again")] == [(0, 2), (1, 2)]
    assert rows(obs, "consumed-committed", "partition", "offset") == [(0, 2), (1, 2)]
    assert rows(obs, "consumed-again-committed", "partition", "offset") == [(0, 3), (1, 3)]
    assert rows(obs, "consumed-left", "err") == rows(obs, "consumed-again-left", "err") == [("",)]
    described = {o["group"]: o for o in steps(obs, "described")}
    active = described["grp"]
    assert (active["err"], active["state"], active["assignor"]) == ("", "Stable", "range")
    assert active["members"] == [
        f"epoch={active['epoch']} client=kgo type={1 if v >= 1 else -1} topics=[cp] assigned=[cp/0 cp/1] target=[cp/0 cp/1]"]
    for name in ("classic", "missing"):
        assert described[name]["err"] == "GROUP_ID_NOT_FOUND", described[name]


def check_client_quotas(v: int, obs: list[Obs]) -> None:
    ok = ['{client-id=c, user=u} err= msg=""', '{client-id=c} err= msg=""']
    assert rows(obs, "validate-only", "results") == [(['{client-id=c} err= msg=""'],)]
    assert rows(obs, "altered", "results") == [([
        '{client-id=bad} err=INVALID_REQUEST msg="producer_byte_rate cannot be a fractional value."', *ok],)]
    assert rows(obs, "described", "quotas") == [([
        "{client-id=c, user=u} [consumer_byte_rate=2048 request_percentage=12.5]",
        "{client-id=c} [producer_byte_rate=1024]"],)]  # fmt: skip
    assert rows(obs, "removed", "results") == [(ok,)]
    assert rows(obs, "described-after", "quotas") == [([],)]


def check_offset_delete(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "deleted", "present", "err") == [(True, "")]
    assert rows(obs, "committed-after", "partition", "offset") == [(1, 2)]


def check_describe_cluster(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "cluster", "err", "controller", "hasCluster", "brokers", "endpointType", "authorizedOps") == [
        ("", 1, True, ["1 127.0.0.1 rack=<nil> fenced=false"], 1, CLUSTER_OPS)]


def check_list_config_resources(v: int, obs: list[Obs]) -> None:
    """The run's topic (type 2) and the group given a config (type 32) are listed, by type and
    with no type; with no type the broker itself (type 4) is listed too."""
    assert rows(obs, "group-config", "err") == [("",)]
    assert rows(obs, "listed", "types", "err", "own", "brokers") == [
        ("[2 32]", "", ["2 lcr", "32 lcr-group"], 0), ("[]", "", ["2 lcr", "32 lcr-group"], 1)]


def check_describe_topic_partitions(v: int, obs: list[Obs]) -> None:
    parts = [f"p{p} leader=1 epoch=0 replicas=[1] isr=[1] elr=[] lastKnownElr=[] offline=[] err=0" for p in (0, 1)]
    assert rows(obs, "described", "topic", "err", "internal", "hasId", "partitions") == [
        ("dtp", "", False, True, parts), ("missing", "UNKNOWN_TOPIC_OR_PARTITION", False, False, None)]


def check_share(v: int, obs: list[Obs]) -> None:
    """A share group starting at the earliest offset: franz-go's share consumer gets the four
    records, accepts them, and the group is described Stable with its member assigned the partition."""
    assert rows(obs, "group-config", "err") == [("",)]
    assert [(o["partition"], o["offset"]) for o in steps(obs, "consumed")] == [(0, i) for i in range(4)]
    assert rows(obs, "described", "err", "state", "assignor", "members") == [
        ("", "Stable", "simple", ["assigned=[sh/0]"])]


def check_share_offsets(key: int) -> Callable[[int, list[Obs]], None]:
    """A share group accepted the four records of a partition that then got two more: its state
    reads start offset 0 with four records delivered, so lag 2 (6 - 0 - 4); altered to offset 1
    (lag 5: 6 - 1 - 0), the topic that does not exist refused; its offsets deleted, the missing
    group's refused, nothing left to describe. DescribeShareGroupOffsets v0 carries no lag
    (franz-go reads -1) when it is the key pinned."""

    def check(v: int, obs: list[Obs]) -> None:
        lag = (lambda n: -1) if key == 90 and v == 0 else (lambda n: n)
        assert rows(obs, "group-config", "err") == [("",)]
        assert [(o["partition"], o["offset"]) for o in steps(obs, "consumed")] == [(0, i) for i in range(4)]
        assert rows(obs, "described", "group", "err", "partitions") == [
            ("grp", "", [f"so/0 start=0 epoch=0 lag={lag(2)} err="]), ("missing", "", [])]
        assert rows(obs, "altered", "err", "results") == [("", ["nope/0 err=UNKNOWN_TOPIC_OR_PARTITION", "so/0 err="])]
        assert rows(obs, "described-altered", "partitions") == [([f"so/0 start=1 epoch=0 lag={lag(5)} err="],)]
        assert rows(obs, "deleted", "group", "err", "results") == [
            ("grp", "", ["nope err=UNKNOWN_TOPIC_OR_PARTITION", "so err="]), ("missing", "GROUP_ID_NOT_FOUND", [])]
        assert rows(obs, "described-deleted", "partitions") == [([],)]

    return check


def check_sasl(v: int, obs: list[Obs]) -> None:
    # on a PLAINTEXT listener (Kafka's KafkaApis answers both so); the flows: compat/test_security.py
    assert rows(obs, "handshake", "err", "mechanisms") + rows(obs, "authenticate", "err") in (
        [("ILLEGAL_SASL_STATE", 0)], [("ILLEGAL_SASL_STATE",)])


def check_acls(v: int, obs: list[Obs]) -> None:
    # no authorizer on the suite's brokers: every ACL API answers SECURITY_DISABLED
    assert rows(obs, "create", "err") == rows(obs, "describe", "err") == rows(obs, "delete", "err") == [
        ("SECURITY_DISABLED",)]


def check_scram(v: int, obs: list[Obs]) -> None:
    assert rows(obs, "altered", "user", "err") == [
        ("user", ""), ("few", ""), ("missing", "RESOURCE_NOT_FOUND")]
    assert rows(obs, "described", "user", "err", "credentials") == [
        ("user", "", ["SCRAM-SHA-256/8192"]), ("few", "", ["SCRAM-SHA-512/4096"]), ("missing", "RESOURCE_NOT_FOUND", None)]


def check_txn(v: int, obs: list[Obs]) -> None:
    """AddPartitionsToTxn / EndTxn: commit over two partitions, abort, commit; each marker takes an
    offset."""
    assert rows(obs, "produced", "partition", "offset") == [(0, 0), (1, 0), (0, 4)]
    assert rows(obs, "produced-aborted", "partition", "offset") == [(0, 2)]
    assert rows(obs, "committed", "err") == [("",), ("",)] and rows(obs, "aborted", "err") == [("",)]
    assert rows(obs, "read_committed", "partition", "offset", "key") == [(0, 0, "k0"), (0, 4, "k3"), (1, 0, "k1")]
    assert rows(obs, "read_uncommitted", "partition", "offset") == [(0, 0), (0, 2), (0, 4), (1, 0)]


def check_group_txn(v: int, obs: list[Obs]) -> None:
    """AddOffsetsToTxn / TxnOffsetCommit: three records moved, their offsets committed with them."""
    assert rows(obs, "moved", "n") == [(3,)]
    assert rows(obs, "output", "key", "value") == [("a", "X"), ("b", "Y"), ("c", "Z")]
    assert rows(obs, "committed", "partition", "offset", "err") == [(0, 3, "")]


def check_txn_admin(v: int, obs: list[Obs]) -> None:
    """DescribeTransactions, ListTransactions, DescribeProducers and WriteTxnMarkers around an open
    transaction (first offset 2, after one committed record and its marker)."""
    assert rows(obs, "described", "state", "partitions", "timeoutMs", "started", "err") == [
        ("Ongoing", ["ta-0"], 60000, True, "")]
    assert rows(obs, "described-missing", "err") == [("TRANSACTIONAL_ID_NOT_FOUND",)]
    assert rows(obs, "listed", "id", "state") == [("tid", "Ongoing")]
    assert rows(obs, "producers", "partition", "n", "err") == [(0, 1, "")]
    assert rows(obs, "producer", "lastSequence", "txnStart", "coordinatorEpoch", "lastTimestamp") == [(2, 2, True, BASE + 2)]
    assert rows(obs, "marker", "partition", "err") == [(0, "")]
    assert rows(obs, "read_committed", "offset", "key") == [(0, "k0")]
    assert rows(obs, "end", "offset") == [(5,)]

CHECKS: dict[int, Callable[[int, list[Obs]], None]] = {
    0: check_produce, 1: check_fetch, 2: check_list_offsets, 3: check_metadata,
    **{k: check_group(k) for k in (8, 9, 10, 11, 12, 13, 14)},
    15: check_describe_groups, 16: check_list_groups, 18: check_api_versions, 19: check_create_topics,
    20: check_delete_topics, 21: check_delete_records, 22: check_init_producer_id, 23: check_offset_for_leader_epoch,
    32: check_describe_configs, 33: check_alter_configs, 34: check_alter_replica_log_dirs, 35: check_describe_log_dirs, 37: check_create_partitions, 42: check_delete_groups, 43: check_elect_leaders,
    44: check_incremental_alter_configs, 45: check_reassignments, 46: check_reassignments, 47: check_offset_delete, 48: check_client_quotas, 49: check_client_quotas, 60: check_describe_cluster, 74: check_list_config_resources, 68: check_consumer_protocol, 69: check_consumer_protocol,
    75: check_describe_topic_partitions,
    **{k: check_share for k in (76, 77, 78, 79)},
    **{k: check_share_offsets(k) for k in (90, 91, 92)},
    17: check_sasl, 36: check_sasl, 29: check_acls, 30: check_acls, 31: check_acls, 50: check_scram, 51: check_scram,
    24: check_txn, 26: check_txn, 25: check_group_txn, 28: check_group_txn,
    **{k: check_txn_admin for k in (27, 61, 65, 66)},
}
