"""Topic compression.type with real clients: the broker stores batches in the topic's codec.

A topic created with compression.type=zstd gets a producer's gzip batches stored as zstd (seen in
a raw Fetch and in the segment file), and the clients read the same records back; a topic
altered from `producer` to lz4 with IncrementalAlterConfigs stores the batches produced after
the change as lz4 and leaves the earlier ones as they were.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from broker.testing.process import SamsaProcess
from protocol.records import (
    BatchHeader,
    CompressionType,
    decode_records,
    iter_batch_headers,
)
from tests.integration.test_protocol import fetch_one, unique_topic
from tests.support import clients
from tests.support.clients import Rec
from tests.support.raw_client import RawClient

TIMEOUT = 30


def _create(admin: AdminClient, topic: str, config: dict[str, str]) -> None:
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1, config=config)],
        request_timeout=TIMEOUT,
    )
    futures[topic].result(TIMEOUT)


def _stored_batches(data: bytes) -> list[tuple[BatchHeader, list[Any]]]:
    return [(h, decode_records(data, pos, h)) for pos, h in iter_batch_headers(data, check_crc=True)]


def _fetched(broker: SamsaProcess, topic: str) -> bytes:
    with RawClient(broker.port) as c:
        partition = fetch_one(c, topic, 0)
        assert partition.error_code == 0
        return bytes(partition.records)


def _segment(broker: SamsaProcess, topic: str) -> bytes:
    return (broker.data_dir / f"{topic}-0" / f"{0:020d}.log").read_bytes()


def test_gzip_from_an_idempotent_producer_is_stored_as_zstd(samsa_broker: SamsaProcess) -> None:
    bootstrap = samsa_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = unique_topic("zstd")
    _create(admin, topic, {"compression.type": "zstd"})

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "compression.type": "gzip",
        "enable.idempotence": True,
        "linger.ms": 50,
    })
    sent = [
        Rec(b"k%d" % i, b"value-%d-" % i * 20, (("n", b"%d" % i), ("none", None)), 1_700_000_000_000 + i)
        for i in range(20)
    ]
    for r in sent:
        producer.produce(topic, key=r.key, value=r.value, headers=list(r.headers),
                         timestamp=r.timestamp, partition=0)
    assert producer.flush(TIMEOUT) == 0

    for client in ("confluent", "kafka-python"):
        got = clients.consume(client, bootstrap, topic, len(sent), timeout=TIMEOUT)
        assert [(g.offset, g.key, g.value, g.timestamp) for g in got] == [
            (i, r.key, r.value, r.timestamp) for i, r in enumerate(sent)
        ], client
        assert [tuple(g.headers) for g in got] == [r.headers for r in sent], client

    for data in (_fetched(samsa_broker, topic), _segment(samsa_broker, topic)):
        batches = _stored_batches(data)
        assert batches
        assert {h.compression for h, _ in batches} == {CompressionType.ZSTD}
        assert all(h.producer_id >= 0 and h.producer_epoch >= 0 for h, _ in batches)
        assert batches[0][0].base_sequence == 0
        records = [r for _, rs in batches for r in rs]
        assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
            (i, s.key, s.value, s.headers) for i, s in enumerate(sent)
        ]


def test_altering_compression_type_applies_to_later_batches(samsa_broker: SamsaProcess) -> None:
    bootstrap = samsa_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = unique_topic("alter")
    _create(admin, topic, {})

    first = [Rec(b"a%d" % i, b"x" * 100) for i in range(5)]
    clients.produce("kafka-python", bootstrap, topic, first, codec="gzip")
    resource = ConfigResource(
        ConfigResource.Type.TOPIC, topic,
        incremental_configs=[ConfigEntry("compression.type", "lz4",
                                         incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource], request_timeout=TIMEOUT)[resource].result(TIMEOUT)
    second = [Rec(b"b%d" % i, b"y" * 100) for i in range(5)]
    clients.produce("kafka-python", bootstrap, topic, second, codec="gzip")

    batches = _stored_batches(_fetched(samsa_broker, topic))
    codecs = [(h.compression, [r.offset for r in rs]) for h, rs in batches]
    assert {c for c, offsets in codecs if offsets[0] < 5} == {CompressionType.GZIP}
    assert {c for c, offsets in codecs if offsets[0] >= 5} == {CompressionType.LZ4}
    got = clients.consume("confluent", bootstrap, topic, 10, timeout=TIMEOUT)
    assert [(g.key, g.value) for g in got] == [(r.key, r.value) for r in first + second]
