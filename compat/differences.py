"""Every way Samsa is allowed to differ from Apache Kafka in the differential suite, with the reason.

An observation (a JSON-able dict, one step of a scenario) is compared after the normalisers below
are applied to both sides. Each entry is either "explained" (a deliberate, harmless difference of
deployment or scope) or "defect" (a Samsa bug or gap being fixed: the normaliser lets the rest of
the scenario be compared meanwhile). docs/compat.md lists them all, generated from this table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Obs = dict[str, Any]


@dataclass(frozen=True)
class Difference:
    name: str
    kind: str  # "explained" or "defect"
    where: str  # scenario keys (prefix match) and step it applies to, for the docs
    text: str
    applies: Callable[[str, Obs], bool]
    normalise: Callable[[Obs], Obs]


DIFFERENCES: list[Difference] = []


def _sweep_step(api_key: int, step: str, below: int | None = None, **fields: Any) -> Callable[[str, Obs], bool]:
    """An observation of the franz-go version sweep (compat/test_go_versions.py) of one API key."""
    return lambda k, o: (
        k == f"go-versions-{api_key}"
        and o.get("step") == step
        and (below is None or o["v"] < below)
        and all(o.get(f) == v for f, v in fields.items())
    )


def _keep(*fields: str, **replace: Any) -> Callable[[Obs], Obs]:
    return lambda o: {**{f: o[f] for f in fields if f in o}, **replace}


DIFFERENCES += [
    Difference(
        name="topic id of a validate-only CreateTopics",
        kind="explained",
        where="franz-go version sweep: CreateTopics v7 with validate_only",
        text=(
            "For a topic that validate_only checks but does not create, Kafka's controller returns a freshly "
            "generated topic id that identifies nothing; Samsa returns the zero id. Whether an id is returned is "
            "not compared for that step (it is for the topics actually created)."
        ),
        applies=_sweep_step(19, "validate-only"),
        normalise=lambda o: {f: v for f, v in o.items() if f != "hasId"},
    ),
]


DIFFERENCES += [
    Difference(
        name="a request other than SaslAuthenticate after SaslHandshake v1",
        kind="defect",
        where="compat/test_security.py: bad SASL clients, metadata-before-authenticate",
        text=(
            "Kafka's SaslServerAuthenticator answers it with that request's own error response "
            "(ILLEGAL_SASL_STATE) and then closes the connection; Samsa closes it without answering. "
            "Whether the connection closes is compared."
        ),
        applies=lambda k, o: k == "security-bad-clients" and o.get("step") == "metadata-before-authenticate",
        normalise=_keep("step", "closed"),
    ),
]


def normalise(key: str, observations: list[Obs]) -> list[Obs]:
    out = []
    for o in observations:
        for d in DIFFERENCES:
            if d.applies(key, o):
                o = d.normalise(o)
        out.append(o)
    return out


def _malformed(*cases: str) -> Callable[[str, Obs], bool]:
    """Cases of the malformed-batch scenario (compat/test_malformed_records.py)."""
    return lambda k, o: k == "raw-produce-malformed" and o.get("case") in cases


DIFFERENCES += [
    Difference(
        name="unknown compression codec ids",
        kind="explained",
        where="raw Produce: a batch naming codec 5, 6 or 7",
        text=(
            "Kafka's CompressionType.forId throws an IllegalArgumentException, which escapes as "
            "UNKNOWN_SERVER_ERROR; Samsa answers UNSUPPORTED_COMPRESSION_TYPE, the code Kafka has for a "
            "codec it does not take. Neither appends anything."
        ),
        applies=_malformed("codec id 5", "codec id 6", "codec id 7"),
        normalise=_keep("step", "case", answer="<differs>"),
    ),
    Difference(
        name="records that do not decompress",
        kind="explained",
        where="raw Produce: gzip, snappy, lz4 or zstd data that does not decompress",
        text=(
            "Kafka's decompressing stream throws a KafkaException that escapes as UNKNOWN_SERVER_ERROR; "
            "Samsa answers INVALID_RECORD, as both answer for a malformed uncompressed records section "
            "(and not CORRUPT_MESSAGE, which the Java producer retries: the same bytes fail again). Neither "
            "appends anything."
        ),
        applies=_malformed(
            "gzip garbage", "gzip truncated", "gzip empty", "snappy garbage", "lz4 garbage", "zstd garbage"
        ),
        normalise=_keep("step", "case", answer="<differs>"),
    ),
    Difference(
        name="an overlong record length varint",
        kind="explained",
        where="raw Produce: a record length varint longer than 5 bytes",
        text=(
            "Kafka reads a record's length varint outside the try block that turns malformed fields into "
            "InvalidRecordException, so its IllegalArgumentException escapes as UNKNOWN_SERVER_ERROR; Samsa "
            "answers INVALID_RECORD as for every other malformed field. Neither appends anything."
        ),
        applies=_malformed("overlong length varint"),
        normalise=_keep("step", "case", answer="<differs>"),
    ),
    Difference(
        name="offset deltas other than 0, 1, 2, ...",
        kind="explained",
        where="raw Produce: uncompressed records with repeated or too large offset deltas",
        text=(
            "Kafka stores an uncompressed batch's offset deltas as the producer wrote them, so the records "
            "of the acknowledged batch read back at wrong offsets: consumers skip the records whose offset "
            "repeats, or see an offset past the batch's last one. Samsa refuses such a batch with "
            "INVALID_RECORD (no client writes one; Kafka itself renumbers the records of a compressed batch)."
        ),
        applies=_malformed("repeated offset deltas", "offset delta past lastOffsetDelta"),
        normalise=_keep("step", "case", answer="<differs>"),
    ),
    Difference(
        name="a compressed record running past the stream",
        kind="explained",
        where="raw Produce: a gzip batch whose record length runs past the decompressed data",
        text=(
            "Kafka checks a compressed batch with an iterator that skips keys and values without reading "
            "them, so a record whose length runs past the end of the stream is acknowledged, and every "
            "consumer then fails on it; Samsa reads the whole record and answers INVALID_RECORD."
        ),
        applies=_malformed("gzip record length past the stream"),
        normalise=_keep("step", "case", answer="<differs>"),
    ),
]


DIFFERENCES += [
    Difference(
        name="no incremental fetch sessions",
        kind="explained",
        where="raw Fetch: a full fetch with epoch 0 (INITIAL_EPOCH)",
        text=(
            "Kafka creates an incremental fetch session (KIP-227) for a full fetch with epoch 0 and answers "
            "its id; Samsa keeps no fetch sessions and answers session id 0, which is Kafka's own answer when "
            "its session cache is full, and on which every client goes on with full fetches. The rest of the "
            "answer (error, partitions, records) is compared, and so are the sessionless (epoch -1) and "
            "incremental cases."
        ),
        applies=lambda k, o: k == "raw-fetch-sessions" and o.get("epoch") == 0,
        normalise=lambda o: {**o, "sessionCreated": "<differs>"},
    ),
]

DIFFERENCES += [
    Difference(
        name="Samsa's own topic config replication.pipeline.enable",
        kind="explained",
        where="raw CreateTopics with replication.pipeline.enable=true",
        text=(
            "Samsa's pipelined (chain) replication is turned on per topic by replication.pipeline.enable, a "
            "config Kafka does not know: Kafka rejects it as an unknown config (INVALID_CONFIG), Samsa accepts "
            "and describes it. Samsa's acceptance (error 0) is compared as Kafka's INVALID_CONFIG (any other "
            "answer still differs), the message and description are not compared."
        ),
        applies=lambda k, o: k == "raw-samsa-configs",
        normalise=lambda o: {"step": o["step"], "error": 40 if o["error"] in (0, 40) else o["error"]},
    ),
]

GAPS: list[tuple[str, str]] = [
    (
        "KIP-848 regular expressions",
        "resolved off the heartbeat at Kafka's times (compat/test_consumer_regex.py), to the topics the "
        "member's principal may describe (compat/test_security.py), but a resolution's "
        "version in its record is Samsa's topic-creation mark (wall-clock ms), not a metadata offset.",
    ),
    (
        "KIP-848 uniform assignor",
        "balanced and sticky as Kafka's; when several balanced answers exist, which member gets which moved "
        "partition may differ (the suite compares its balance; the range assignor's answer is compared whole).",
    ),
    (
        "KIP-848 group configs",
        "GROUP config resources are served (compat/test_group_configs.py), but the streams.* group configs "
        "and share.renew.acknowledge.enable are stored, validated and described but change nothing (no streams "
        "groups; RENEW acknowledgements are always accepted); share.auto.offset.reset=by_duration with no "
        "record that recent starts at the high watermark (not compared with Kafka); Samsa cannot change the "
        "group coordinator configs at runtime; "
        "assignor offload is not served.",
    ),
    (
        "KIP-848 records",
        "the group's records are Kafka's (Kafka 4.3.1's classes read them back, compat/test_consumer_protocol.py), "
        "per-partition assignment epochs (KIP-1251) included, but carry no metadata hash (KIP-1101).",
    ),
]
"""Behaviour of Kafka 4.3.1 that Samsa does not serve yet and no scenario compares (docs/compat.md)."""
