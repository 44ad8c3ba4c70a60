"""pytest plugin: Samsa brokers for any test suite (entry point `samsa`).

    def test_roundtrip(samsa_broker):
        producer = KafkaProducer(bootstrap_servers=samsa_broker.bootstrap_servers)

Three ways to get a broker, from the most isolated to the cheapest:

* `samsa_broker`: a new `samsa serve` process per test, on a free loopback port, with its own data
  directory, stopped and removed afterwards. `samsa_broker_factory(**overrides)` starts more, with
  config keys (Kafka's names) as keyword arguments with dots replaced by underscores, or a dict.
* `samsa_inprocess_broker`: a new broker per test inside the test process, on an event loop
  thread of its own (`SamsaInProcess`: milliseconds to start, and its `Broker` is at hand);
  `samsa_inprocess_broker_factory` as above.
* `samsa_session_broker`: one in-process broker for the whole session. Tests that share it keep
  apart through `samsa_namespace`: a prefix unique to the test for its topic, group and
  transactional ids (`samsa_namespace.topic("orders")`), whose topics are deleted when the test ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

from broker.testing.process import SamsaProcess

if TYPE_CHECKING:  # imported by the fixtures that use it: loading the broker on every pytest start is slow
    from broker.testing.inprocess import SamsaInProcess

B = TypeVar("B", SamsaProcess, "SamsaInProcess")


def _factory(kind: type[B], tmp_path: Path) -> Iterator[Callable[..., B]]:
    started: list[B] = []

    def start(overrides: dict[str, str] | None = None, **kwargs: str) -> B:
        props = dict(overrides or {})
        props.update({k.replace("_", "."): str(v) for k, v in kwargs.items()})
        broker = kind(tmp_path / f"broker-{len(started)}", props)
        started.append(broker)
        return broker.start()

    yield start
    for broker in started:
        broker.close()


@pytest.fixture
def samsa_broker_factory(tmp_path: Path) -> Iterator[Callable[..., SamsaProcess]]:
    yield from _factory(SamsaProcess, tmp_path)


@pytest.fixture
def samsa_broker(samsa_broker_factory: Callable[..., SamsaProcess]) -> SamsaProcess:
    return samsa_broker_factory()


@pytest.fixture
def samsa_inprocess_broker_factory(tmp_path: Path) -> Iterator[Callable[..., SamsaInProcess]]:
    from broker.testing.inprocess import SamsaInProcess

    yield from _factory(SamsaInProcess, tmp_path)


@pytest.fixture
def samsa_inprocess_broker(samsa_inprocess_broker_factory: Callable[..., SamsaInProcess]) -> SamsaInProcess:
    return samsa_inprocess_broker_factory()


@pytest.fixture(scope="session")
def samsa_session_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaInProcess]:
    from broker.testing.inprocess import SamsaInProcess

    with SamsaInProcess(tmp_path_factory.mktemp("samsa-session")) as broker:
        yield broker


@dataclass(frozen=True)
class Namespace:
    """Names that belong to one test on a shared broker."""

    prefix: str

    def topic(self, name: str) -> str:
        return self.prefix + name

    def group(self, name: str) -> str:
        return self.prefix + name

    def transactional_id(self, name: str) -> str:
        return self.prefix + name


_namespaces_made = 0


@pytest.fixture
def samsa_namespace(request: pytest.FixtureRequest, samsa_session_broker: SamsaInProcess) -> Iterator[Namespace]:
    global _namespaces_made
    _namespaces_made += 1
    # a topic name allows [a-zA-Z0-9._-] and 249 characters; the counter keeps parametrized
    # tests with long ids apart after the cut
    readable = re.sub(r"[^a-zA-Z0-9_-]+", "-", request.node.name)[:80].strip("-")
    namespace = Namespace(f"{readable}-{_namespaces_made}.")
    yield namespace
    if samsa_session_broker.running:
        controller = samsa_session_broker.broker.controller
        mine = [t for t in controller.image.topics if t.startswith(namespace.prefix)]
        if mine:
            samsa_session_broker.run(controller.delete_topics(mine))
