"""A topic deleted while its broker was down, or re-created under the same name, never inherits
the old topic's log: stray partition directories are deleted at start-up, and a directory whose
recorded topic id is not the topic's current id is replaced by an empty log."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.testing import SamsaProcess


def _produce(bootstrap: str, topic: str, n: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(n):
        producer.send(topic, f"v{i}".encode())
    producer.flush(30)
    producer.close()


def _read_all(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=2000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = [m.value for m in consumer]
    consumer.close()
    return values


def _edit_metadata(data_dir: Path, edit) -> None:  # type: ignore[no-untyped-def]
    path = data_dir / "cluster-metadata.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def test_stray_partition_directory_is_deleted_at_startup(tmp_path: Path) -> None:
    broker = SamsaProcess(tmp_path / "data").start()
    try:
        _produce(broker.bootstrap_servers, "gone", 5)
        assert (tmp_path / "data" / "gone-0").is_dir()
        broker.kill()
        # The controller persisted the deletion, the broker died before removing the directory.
        _edit_metadata(tmp_path / "data", lambda doc: doc["topics"].pop("gone"))
        broker.start()
        assert "deleting stray log topic=gone partition=0" in broker.read_log()
        assert not (tmp_path / "data" / "gone-0").exists()
    finally:
        broker.close()


def test_recreated_topic_does_not_adopt_the_old_log(tmp_path: Path) -> None:
    broker = SamsaProcess(tmp_path / "data").start()
    try:
        _produce(broker.bootstrap_servers, "again", 5)
        assert len(_read_all(broker.bootstrap_servers, "again")) == 5
        broker.kill()
        # Deleted and re-created under the same name while the old directory stayed on disk.
        _edit_metadata(
            tmp_path / "data",
            lambda doc: doc["topics"]["again"].__setitem__("topic_id", str(uuid.uuid4())),
        )
        broker.start()
        assert _read_all(broker.bootstrap_servers, "again") == []
        _produce(broker.bootstrap_servers, "again", 2)
        assert _read_all(broker.bootstrap_servers, "again") == [b"v0", b"v1"]
    finally:
        broker.close()
