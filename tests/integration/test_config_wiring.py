"""Broker configs that reach the code that obeys them, on a broker running in this process (on a
loop thread, so its objects can be inspected while raw clients talk to it)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from broker.server import Broker
from broker.testing.inprocess import SamsaInProcess
from controller.embedded import load_or_create_cluster_id
from protocol.records import BatchHeader, iter_batch_headers
from protocol.types import BrokerId
from tests.integration.test_protocol import batch, create_topic, fetch_request, produce
from tests.support.raw_client import RawClient

StartBroker = Callable[..., Broker]


@pytest.fixture
def start_broker(samsa_inprocess_broker_factory: Callable[..., SamsaInProcess]) -> StartBroker:
    """`start_broker(**props)` starts a broker with these server.properties (underscores in the
    keyword names become dots) in this process; it is stopped at the end of the test."""
    return lambda **props: samsa_inprocess_broker_factory(**props).broker


def test_checkpoint_intervals_reach_the_log_manager(start_broker: StartBroker) -> None:
    broker = start_broker(log_flush_offset_checkpoint_interval_ms="1234",
                          log_flush_start_offset_checkpoint_interval_ms="2345",
                          replica_high_watermark_checkpoint_interval_ms="345")
    manager = broker.log_manager
    assert manager is not None
    assert manager.checkpoint_interval_ms == 1234
    assert manager.log_start_offset_checkpoint_interval_ms == 2345
    assert manager.high_watermark_checkpoint_interval_ms == 345


def _api_versions(client: RawClient, client_id: str) -> None:
    response = client.request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        client_id=client_id)
    assert response.error_code == 0


def test_idle_connections_are_closed_after_connections_max_idle_ms(
        start_broker: StartBroker, caplog: pytest.LogCaptureFixture) -> None:
    broker = start_broker(connections_max_idle_ms="300")
    port = broker.bound_port("PLAINTEXT")
    with caplog.at_level(logging.INFO, logger="samsa.network"), \
            RawClient(port) as idle, RawClient(port) as busy, RawClient(port) as silent:
        _api_versions(idle, "idle-client")
        idle_from = time.monotonic()
        # a connection that keeps sending requests stays open however long it lives
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            _api_versions(busy, "busy-client")
            time.sleep(0.1)
        assert idle.closed_by_peer(timeout=5)
        assert time.monotonic() - idle_from >= 0.3
        assert silent.closed_by_peer(timeout=5)  # connected, never sent a byte
        _api_versions(busy, "busy-client")
    closes = [r.getMessage() for r in caplog.records if "reason=idle" in r.getMessage()]
    assert any("client_id=idle-client" in m and "listener=PLAINTEXT" in m
               and "connections_max_idle_ms=300" in m for m in closes), closes
    assert any("client_id=None" in m for m in closes), closes
    assert not any("busy-client" in m for m in closes), closes


def test_a_connection_with_a_request_in_flight_is_not_idle(start_broker: StartBroker) -> None:
    """A fetch long-polling for longer than connections.max.idle.ms is answered, not cut off."""
    broker = start_broker(connections_max_idle_ms="200")
    with RawClient(broker.bound_port("PLAINTEXT")) as client:
        create_topic(client, "quiet")
        started = time.monotonic()
        response = client.request(fetch_request([("quiet", 0, 0)], max_wait_ms=1000))
        assert time.monotonic() - started >= 0.9
        assert response.error_code == 0
        assert client.closed_by_peer(timeout=5)


def test_negative_connections_max_idle_ms_keeps_idle_connections(
        start_broker: StartBroker) -> None:
    broker = start_broker(connections_max_idle_ms="-1")
    with RawClient(broker.bound_port("PLAINTEXT")) as client:
        _api_versions(client, "kept")
        assert not client.closed_by_peer(timeout=0.5)
        _api_versions(client, "kept")


def test_fetch_max_bytes_caps_the_fetch_response(start_broker: StartBroker) -> None:
    """fetch.max.bytes caps the request's max_bytes: beyond the first batch (which always goes
    out whole), a response holds no more than fetch.max.bytes (the tail may be a partial batch,
    as in Kafka; clients drop it)."""
    one = len(batch([b"x" * 600]))
    assert 1024 < 2 * one
    broker = start_broker(fetch_max_bytes="1024")
    with RawClient(broker.bound_port("PLAINTEXT")) as client:
        create_topic(client, "capped")
        for _ in range(3):
            assert produce(client, "capped", batch([b"x" * 600])).error_code == 0
        response = client.request(fetch_request([("capped", 0, 0)]))  # asks for 16 MiB
        ((t,),) = [response.responses]
        (p,) = t.partitions
        assert len(p.records) == 1024
        assert BatchHeader.parse(p.records, 0).size == one
    broker = start_broker(fetch_max_bytes="4096")
    with RawClient(broker.bound_port("PLAINTEXT")) as client:
        create_topic(client, "capped")
        for _ in range(3):
            assert produce(client, "capped", batch([b"x" * 600])).error_code == 0
        response = client.request(fetch_request([("capped", 0, 0)]))
        ((t,),) = [response.responses]
        (p,) = t.partitions
        assert len(p.records) == 3 * one
        assert len(list(iter_batch_headers(p.records))) == 3


def test_cluster_id_is_used_and_checked(start_broker: StartBroker, tmp_path: Path) -> None:
    broker = start_broker(cluster_id="samsa-wiring-test")
    assert broker.controller.image.cluster_id == "samsa-wiring-test"
    meta = tmp_path / "broker-0" / "meta.properties"
    assert "cluster.id=samsa-wiring-test\n" in meta.read_text()
    assert load_or_create_cluster_id(tmp_path / "broker-0", BrokerId(0)) == "samsa-wiring-test"
    assert load_or_create_cluster_id(
        tmp_path / "broker-0", BrokerId(0), "samsa-wiring-test") == "samsa-wiring-test"
    with pytest.raises(RuntimeError, match="cluster.id is other but .*meta.properties holds "
                                           "cluster id samsa-wiring-test"):
        load_or_create_cluster_id(tmp_path / "broker-0", BrokerId(0), "other")
