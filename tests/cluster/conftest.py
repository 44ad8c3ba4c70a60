"""Fixtures for cluster tests: a real ZooKeeper and real Samsa brokers (broker/testing/cluster.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing.cluster import SamsaCluster


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[Callable[..., SamsaCluster]]:
    made: list[SamsaCluster] = []

    def make(brokers: int = 3, **kwargs: Any) -> SamsaCluster:
        c = SamsaCluster(tmp_path / f"cluster{len(made)}", brokers, **kwargs)
        made.append(c)
        return c.start()

    yield make
    for c in made:
        c.close()


@pytest.fixture
def cluster(cluster_factory: Callable[..., SamsaCluster]) -> SamsaCluster:
    return cluster_factory(3)


def create_topic(
    cluster: SamsaCluster,
    name: str,
    partitions: int = 3,
    replication_factor: int = 3,
    *,
    configs: dict[str, str] | None = None,
    assignments: list[list[int]] | None = None,
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    if assignments is not None:
        topic = NewTopic(name, num_partitions=len(assignments), replica_assignment=assignments, config=configs or {})
    else:
        topic = NewTopic(name, partitions, replication_factor, config=configs or {})
    for f in admin.create_topics([topic], operation_timeout=10).values():
        f.result(20)
    cluster.wait_for(
        lambda: all(name in cluster.metadata(i).topics for i in cluster.live()), 10, f"topic {name} everywhere"
    )


def broker_logs(cluster: SamsaCluster, tail: int = 3000) -> str:
    return "\n".join(f"--- broker {i}\n{s.process.read_log()[-tail:]}" for i, s in cluster.brokers.items())
