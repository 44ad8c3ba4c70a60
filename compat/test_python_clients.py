"""kafka-python, aiokafka, confluent-kafka (librdkafka) and kcat against Samsa and Apache Kafka:
each produces keyed records with headers and explicit timestamps to a topic of its own and reads
them back from offset 0 (tests/support/clients.py drives them); what it observes must match."""

from __future__ import annotations

import time

import pytest

from tests.support.clients import CLIENTS, Rec, consume, create_topic, produce

RECORDS = [
    Rec(b"k0", b"v0", (("h1", b"a"), ("h2", b""))),
    Rec(None, b"v1", ()),
    Rec(b"k2", None, (("h", b"x"),)),
    Rec(b"k3", b"v" * 2000, ()),
]


@pytest.mark.parametrize(
    "client",
    [pytest.param(c, marks=pytest.mark.compat(client=c, scenario="produce, consume (assign)"), id=c) for c in CLIENTS],
)
def test_produce_consume(client, differential):
    topic = f"py-{client}"

    def run(target):
        create_topic(target.bootstrap_servers, topic)
        produced = produce(client, target.bootstrap_servers, topic, RECORDS)
        got = consume(client, target.bootstrap_servers, topic, len(RECORDS))
        obs = [{"step": "produced", "offsets": produced.offsets}]
        for g in got:
            obs.append({
                "step": "consumed", "offset": g.offset, "key": None if g.key is None else g.key.decode(),
                "value": None if g.value is None else g.value.decode()[:20], "valueLen": len(g.value or b""),
                "headers": [[k, None if v is None else v.decode()] for k, v in g.headers], "timestamp": "now" if abs(g.timestamp - time.time() * 1000) < 600_000 else g.timestamp,
                "type": g.timestamp_type,
            })
        return obs

    obs = differential(f"python-{client}", run)
    assert obs[0]["offsets"] == [0, 1, 2, 3]
    assert [(o["key"], o["timestamp"], o["type"]) for o in obs[1:]] == [
        ("k0", "now", "create"), (None, "now", "create"), ("k2", "now", "create"), ("k3", "now", "create")]
