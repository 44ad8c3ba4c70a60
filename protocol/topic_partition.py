"""`TopicPartition`: the (topic, partition) pair that names one partition everywhere in Samsa."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A topic name and a partition index; `str()` gives Kafka's directory name `topic-partition`."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, name: str) -> TopicPartition:
        """Parse a `topic-partition` directory name (the topic may itself contain '-')."""
        topic, sep, partition = name.rpartition("-")
        if not sep or not topic or not partition.isdigit():
            raise ValueError(f"not a topic-partition name: {name!r}")
        return cls(topic, int(partition))
