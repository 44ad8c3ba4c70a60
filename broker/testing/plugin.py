"""pytest plugin: a fresh Samsa broker for any test suite (entry point `samsa`).

    def test_roundtrip(samsa_broker):
        producer = KafkaProducer(bootstrap_servers=samsa_broker.bootstrap_servers)

`samsa_broker` is a new broker per test, on a free loopback port, with its own data directory,
stopped and removed afterwards. `samsa_broker_factory(**overrides)` starts more, with config keys
(Kafka's names) given as keyword arguments with dots replaced by underscores or as a dict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.testing.process import SamsaProcess


@pytest.fixture
def samsa_broker_factory(tmp_path: Path) -> Iterator[Callable[..., SamsaProcess]]:
    started: list[SamsaProcess] = []

    def start(overrides: dict[str, str] | None = None, **kwargs: str) -> SamsaProcess:
        props = dict(overrides or {})
        props.update({k.replace("_", "."): str(v) for k, v in kwargs.items()})
        broker = SamsaProcess(tmp_path / f"broker-{len(started)}", props)
        started.append(broker)
        return broker.start()

    yield start
    for broker in started:
        broker.close()


@pytest.fixture
def samsa_broker(samsa_broker_factory: Callable[..., SamsaProcess]) -> SamsaProcess:
    return samsa_broker_factory()
