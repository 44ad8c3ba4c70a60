"""`partition.metadata`: the topic id a partition directory belongs to (Kafka's format).

    version: 0
    topic_id: <topic id, URL-safe base64 without padding>

A directory whose topic id differs from the topic's current id is a leftover of a deleted topic of
the same name (the broker died between the controller's delete and the directory's removal) and
must not be adopted by the new topic.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from broker.log.checkpoints import atomic_write

PARTITION_METADATA_FILE = "partition.metadata"


def _encode(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def _decode(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def write_topic_id(log_dir: Path, topic_id: uuid.UUID) -> None:
    atomic_write(log_dir / PARTITION_METADATA_FILE, f"version: 0\ntopic_id: {_encode(topic_id)}\n".encode())


def read_topic_id(log_dir: Path) -> uuid.UUID | None:
    """The recorded topic id, or None if the file is missing or unreadable."""
    try:
        lines = (log_dir / PARTITION_METADATA_FILE).read_text().splitlines()
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        return _decode(fields["topic_id"].strip())
    except (OSError, KeyError, ValueError):
        return None
