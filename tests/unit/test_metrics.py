"""The metrics' parts: the histogram, Kafka's error counts of a response, BrokerTopicMetrics'
rules for failed requests, and the endpoint of a broker running in this process (its families,
their rendering, a scrape while the loop serves)."""

from __future__ import annotations

import asyncio
import socket
import struct
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.produce.v11.response import (
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.static.primitive import i32, i64
from prometheus_client.parser import text_string_to_metric_families

from broker.config import BrokerConfig
from broker.metrics.histogram import Histogram, bucket_of, bucket_upper
from broker.metrics.loop import IdleTrackingEventLoop
from broker.metrics.stats import BrokerTopicStats, Family, camel_case, error_counts
from broker.server import Broker
from broker.testing.loop_thread import LoopThread
from broker.testing.ports import free_port
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE, BrokerId, TopicName


def test_buckets_cover_every_value_once_and_stay_within_an_eighth() -> None:
    previous = -1
    for value in list(range(5000)) + [2**20 + 7, 2**31 - 1]:
        index = bucket_of(value)
        assert index >= previous or value > 5000
        assert bucket_upper(index) >= value
        assert index == 0 or bucket_upper(index - 1) < value
        assert bucket_upper(index) <= max(15, value * 1.125)
        previous = index


def test_quantiles_of_a_known_distribution() -> None:
    h = Histogram()
    for value in range(1, 101):  # 1..100 ms
        h.update(value, 0.0)
    p50, p99, p999 = h.quantiles([0.5, 0.99, 0.999], 0.0)
    assert 50 <= p50 <= 50 * 1.125
    assert 99 <= p99 <= 99 * 1.125
    assert p999 >= 100
    assert h.count == 100
    assert Histogram().quantiles([0.5], 0.0) == [0.0]


def test_quantiles_forget_windows_older_than_about_five_minutes() -> None:
    h = Histogram()
    h.update(1000, 1.0)
    assert h.quantiles([0.5], 2.0) == [float(bucket_upper(bucket_of(1000)))]
    for minute in range(1, 7):
        h.update(1, 1.0 + 61 * minute)
    assert h.quantiles([0.99], 1.0 + 61 * 7) == [1.0]
    assert h.count == 7


def _partition(index: int, error: ErrorCode) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=i32(index), error_code=error, base_offset=i64(0), log_append_time=None, log_start_offset=i64(0),
        record_errors=(), error_message=None, current_leader=LeaderIdAndEpoch(leader_id=BrokerId(-1), leader_epoch=i32(-1)),
    )  # fmt: skip


def test_error_counts_count_every_partition_as_kafka_does() -> None:
    response = ProduceResponse(
        responses=(
            TopicProduceResponse(name=TopicName("a"), partition_responses=(
                _partition(0, ErrorCode.none), _partition(1, ErrorCode.not_leader_or_follower))),
            TopicProduceResponse(name=TopicName("b"), partition_responses=(_partition(0, ErrorCode.none),)),
        ),
        throttle_time=NO_THROTTLE,
        node_endpoints=(),
    )  # fmt: skip
    assert error_counts(response) == {ErrorCode.none: 2, ErrorCode.not_leader_or_follower: 1}
    assert error_counts(None) == {}


def test_failed_produce_and_fetch_follow_kafkas_exceptions() -> None:
    stats = BrokerTopicStats()
    stats.produced("t", ErrorCode.none, 100, 3)
    stats.produced("t", ErrorCode.not_leader_or_follower, 50, 0)  # expected: not failed
    stats.produced("t", ErrorCode.message_too_large, 70, 0)  # expected, and rejected bytes
    stats.produced("t", ErrorCode.invalid_record, 20, 0)  # record validation: failed
    stats.produced("t", ErrorCode.not_enough_replicas, 10, 0)  # failed
    t = stats.topic("t")
    assert (t.total_produce_requests, t.failed_produce_requests, t.messages_in, t.bytes_in, t.bytes_rejected) == (
        5, 2, 3, 100, 70)
    stats.fetched("t", ErrorCode.none, 1000, follower=False)
    stats.fetched("t", ErrorCode.none, 400, follower=True)
    stats.fetched("t", ErrorCode.offset_out_of_range, 0, follower=False)
    stats.fetched("t", ErrorCode.unknown_server_error, 0, follower=False)
    assert (t.total_fetch_requests, t.failed_fetch_requests, t.bytes_out) == (4, 1, 1000)
    assert stats.replication_bytes_out == 400 and stats.all_topics.bytes_out == 1000


def test_request_names_are_kafkas() -> None:
    assert [camel_case(n) for n in ("produce", "api_versions", "offset_for_leader_epoch")] == [
        "Produce", "ApiVersions", "OffsetForLeaderEpoch"]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[Broker, LoopThread, int]]:
    """A broker with its endpoint on, on the loop `samsa serve` runs it on (measuring idle time)."""
    loop = LoopThread(IdleTrackingEventLoop)
    port = free_port()
    config, unknown = BrokerConfig.from_properties({
        "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
        "metrics.prometheus.port": str(port), "metrics.prometheus.host": "127.0.0.1",
    })  # fmt: skip
    assert unknown == []
    b = Broker(config)
    loop.run(b.start())
    try:
        yield b, loop, port
    finally:
        loop.run(b.stop())
        loop.stop()


def exported_names(broker: Broker, loop: LoopThread) -> set[str]:
    """Every sample name the broker's families can have (empty families too), as rendered."""
    from broker.metrics.endpoint import to_metrics

    async def families() -> list[Family]:
        endpoint = broker._metrics_endpoint
        assert endpoint is not None
        return endpoint._families()  # the collector's bound method

    names: set[str] = set()
    for family in loop.run(families()):
        if family.kind == "counter":
            names.add(f"{family.name}_total")
        elif family.kind == "summary":
            names |= {family.name, f"{family.name}_count_total"}
        else:
            names.add(family.name)
        assert to_metrics(family)
    return names


def test_a_scrape_is_served_while_the_loop_runs(broker: tuple[Broker, LoopThread, int]) -> None:
    b, loop, port = broker
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    samples = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["kafka_controller_kafkacontroller_activecontrollercount"].value == 1
    assert samples["kafka_server_kafkaserver_brokerstate"].value == 3
    assert samples["kafka_server_brokertopicmetrics_messagesin_total"].value == 0
    assert "process_cpu_seconds_total" in samples
    assert 0 <= samples["kafka_network_socketserver_networkprocessoravgidle_percent"].value <= 1
    assert {"kafka_consumergroup_lag", "kafka_network_requestmetrics_totaltimems"} <= exported_names(b, loop)


def _api_versions(port: int) -> None:
    """One ApiVersions v0 request over TCP, and its whole response."""
    header = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(header)) + header)
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        assert len(s.recv(size, socket.MSG_WAITALL)) == size


async def _requests_counted(b: Broker, name: str) -> int:
    for _ in range(100):  # counted just after the response is written
        if stats := b.metrics.requests.by_name.get(name):
            return sum(stats.requests.values())
        await asyncio.sleep(0.01)
    return 0


def test_requests_are_counted_only_with_the_endpoint_on(
    broker: tuple[Broker, LoopThread, int], tmp_path: Path
) -> None:
    b, loop, _ = broker
    _api_versions(b.bound[0][1])
    assert loop.run(_requests_counted(b, "ApiVersions")) == 1

    config, _ = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "off")})
    off = Broker(config)
    loop.run(off.start())
    try:
        _api_versions(off.bound[0][1])
        assert loop.run(_requests_counted(off, "ApiVersions")) == 0
    finally:
        loop.run(off.stop())
