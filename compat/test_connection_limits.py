"""Connection limits as a client sees them, on Samsa and on Apache Kafka with the same settings.

`max.connections.per.ip.overrides=127.0.0.3:2` on both (a dedicated broker of each, so the
session's shared targets keep their settings): from 127.0.0.3, a third connection is accepted and
closed at once (Kafka's ConnectionQuotas), and once one of the first two closes a new one is
served again. Connections from 127.0.0.1 (every other test) are not limited.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.testing import SamsaProcess
from compat.kafka import COMMON_SETTINGS, start_kafka
from protocol import messages
from tests.support.raw_client import encode_request

LIMITED = "127.0.0.3"
SETTINGS = {"max.connections.per.ip.overrides": f"{LIMITED}:2"}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    samsa = SamsaProcess(Path(tmp_path_factory.mktemp("limits")) / "samsa",
                         {**COMMON_SETTINGS, "broker.id": "1", **SETTINGS}).start()
    kafka = start_kafka(SETTINGS)
    try:
        yield {"samsa": samsa.bootstrap_servers, "kafka": kafka.bootstrap_servers}
    finally:
        samsa.close()
        kafka.close()


def _probe(sock: socket.socket) -> str:
    """ApiVersions v0: "answered", or "closed" (EOF or reset) within 5 s."""
    try:
        sock.sendall(encode_request(messages.request_class(18, 0)(), 1, "limits"))
        sock.settimeout(5)
        return "answered" if sock.recv(4) else "closed"
    except TimeoutError:
        return "silent"
    except OSError:
        return "closed"


def _observe(bootstrap: str) -> list[dict[str, object]]:
    host, port = bootstrap.rsplit(":", 1)

    def connect(source: str) -> socket.socket:
        return socket.create_connection((host, int(port)), 5, source_address=(source, 0))

    observations: list[dict[str, object]] = []
    socks = [connect(LIMITED) for _ in range(3)]
    for i, s in enumerate(socks):
        observations.append({"step": "limited address", "connection": i, "result": _probe(s)})
    with connect("127.0.0.1") as other:
        observations.append({"step": "other address", "result": _probe(other)})
    socks[0].close()
    deadline = time.monotonic() + 10  # the broker notices the close on its own schedule
    while True:
        with connect(LIMITED) as again:
            result = _probe(again)
        if result == "answered" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    observations.append({"step": "after one closed", "result": result})
    for s in socks:
        s.close()
    return observations


def test_connections_beyond_max_connections_per_ip_are_closed(limited: dict[str, str]) -> None:
    kafka = _observe(limited["kafka"])
    assert kafka == [
        {"step": "limited address", "connection": 0, "result": "answered"},
        {"step": "limited address", "connection": 1, "result": "answered"},
        {"step": "limited address", "connection": 2, "result": "closed"},
        {"step": "other address", "result": "answered"},
        {"step": "after one closed", "result": "answered"},
    ], kafka
    assert _observe(limited["samsa"]) == kafka, "Samsa (left) differs from Apache Kafka (right)"
