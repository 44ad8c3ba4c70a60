"""What the broker counts as it works, for the Prometheus endpoint (broker/metrics/collector.py).

Counting happens where the work already is, once per request or per append, never per record:
plain integer fields and dicts on the broker's one event loop thread, no locks, nothing
imported from a metrics library. A broker without the endpoint pays a few additions per
produced or fetched partition and no start-up time: its connections are given no
`RequestMetrics`, so the per-request histograms are not kept. Gauges (partition counts, ISR state, log sizes, group lag) are
not counted here: the collector computes them when Prometheus scrapes.

The names follow Kafka's MBeans: `TopicStats` is BrokerTopicMetrics (one per topic and one for
all topics), `RequestStats` is RequestMetrics (one per request name: the API's name, and for
Fetch also FetchConsumer or FetchFollower), `ReplicaStats` the ReplicaManager's ISR meters.
"""

from __future__ import annotations

import contextvars
import dataclasses
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.metrics.histogram import Histogram
from protocol.errors import ErrorCode


class TopicStats:
    """Kafka's BrokerTopicMetrics meters (their counts) for one topic, or for all topics."""

    __slots__ = (
        "messages_in", "bytes_in", "bytes_out", "bytes_rejected", "failed_produce_requests",
        "failed_fetch_requests", "total_produce_requests", "total_fetch_requests",
    )  # fmt: skip

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.bytes_rejected = 0
        self.failed_produce_requests = 0
        self.failed_fetch_requests = 0
        self.total_produce_requests = 0
        self.total_fetch_requests = 0


# Produce errors Kafka's ReplicaManager.appendToLocalLog does not count as failed produce requests
# ("it is supposed to indicate un-expected failures of a broker"), and the fetch errors its
# readFromLocalLog does not count as failed fetch requests.
EXPECTED_PRODUCE_ERRORS = frozenset({
    ErrorCode.none, ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
    ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.corrupt_message,
    ErrorCode.kafka_storage_error,
})  # fmt: skip
EXPECTED_FETCH_ERRORS = frozenset({
    ErrorCode.none, ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_leader_epoch, ErrorCode.fenced_leader_epoch, ErrorCode.replica_not_available,
    ErrorCode.kafka_storage_error, ErrorCode.inconsistent_topic_id, ErrorCode.offset_out_of_range,
})  # fmt: skip
REJECTED_BYTES_ERRORS = frozenset({ErrorCode.message_too_large, ErrorCode.record_list_too_large})
"""Kafka marks BytesRejectedPerSec when a batch is larger than max.message.bytes."""


class BrokerTopicStats:
    """BrokerTopicMetrics of every topic this broker has served, and of all topics together
    (with the replication meters, which Kafka keeps for all topics only)."""

    def __init__(self) -> None:
        self.all_topics = TopicStats()
        self.topics: dict[str, TopicStats] = {}
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def produced(self, topic: str, error: ErrorCode, size: int, messages: int) -> None:
        """One partition's entry of a produce (Kafka's appendToLocalLog, per partition)."""
        t, a = self.topic(topic), self.all_topics
        t.total_produce_requests += 1
        a.total_produce_requests += 1
        if error == ErrorCode.none:
            t.bytes_in += size
            a.bytes_in += size
            t.messages_in += messages
            a.messages_in += messages
        elif error not in EXPECTED_PRODUCE_ERRORS:
            t.failed_produce_requests += 1
            a.failed_produce_requests += 1
        elif error in REJECTED_BYTES_ERRORS:
            t.bytes_rejected += size
            a.bytes_rejected += size

    def fetched(self, topic: str, error: ErrorCode, size: int, follower: bool) -> None:
        """One partition's read of a fetch (Kafka's fetchMessages and updateBytesOut)."""
        t, a = self.topic(topic), self.all_topics
        t.total_fetch_requests += 1
        a.total_fetch_requests += 1
        if error not in EXPECTED_FETCH_ERRORS:
            t.failed_fetch_requests += 1
            a.failed_fetch_requests += 1
        if follower:
            self.replication_bytes_out += size
        else:
            t.bytes_out += size
            a.bytes_out += size


@dataclass(slots=True)
class ReplicaStats:
    """ReplicaManager's IsrExpandsPerSec, IsrShrinksPerSec, FailedIsrUpdatesPerSec (counts),
    marked when the controller's answer comes (as Kafka's Partition does)."""

    isr_expands: int = 0
    isr_shrinks: int = 0
    failed_isr_updates: int = 0


# -- requests --------------------------------------------------------------------------------------


class RequestStats:
    """Kafka's RequestMetrics for one request name: requests per version, errors per code (every
    error code of every response, as AbstractResponse.errorCounts), and the time histograms."""

    __slots__ = (
        "name", "requests", "errors", "request_queue_time", "local_time", "remote_time",
        "throttle_time", "response_queue_time", "response_send_time", "total_time", "request_bytes",
    )  # fmt: skip

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: dict[int, int] = {}
        self.errors: dict[ErrorCode, int] = {}
        self.request_queue_time = Histogram()
        self.local_time = Histogram()
        self.remote_time = Histogram()
        self.throttle_time = Histogram()
        self.response_queue_time = Histogram()
        self.response_send_time = Histogram()
        self.total_time = Histogram()
        self.request_bytes = Histogram()


TIME_HISTOGRAMS: tuple[tuple[str, str], ...] = (
    ("RequestQueueTimeMs", "request_queue_time"),
    ("LocalTimeMs", "local_time"),
    ("RemoteTimeMs", "remote_time"),
    ("ThrottleTimeMs", "throttle_time"),
    ("ResponseQueueTimeMs", "response_queue_time"),
    ("ResponseSendTimeMs", "response_send_time"),
    ("TotalTimeMs", "total_time"),
    ("RequestBytes", "request_bytes"),
)
"""Kafka's RequestMetrics histograms, with the RequestStats attribute of each."""


class RemoteTime:
    """Seconds the request being handled has waited in a purgatory (Kafka's remote time: acks=all
    waiting for the followers, a fetch long-polling for data); one per connection."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0


REMOTE_TIME: contextvars.ContextVar[RemoteTime | None] = contextvars.ContextVar(
    "samsa_remote_time", default=None
)
"""Set once in each connection's task; `Purgatory.wait` adds its waiting time to it."""


def add_remote_time(seconds: float) -> None:
    cell = REMOTE_TIME.get()
    if cell is not None:
        cell.seconds += seconds


def camel_case(snake: str) -> str:
    """kio's API name as Kafka's ApiKeys name ("api_versions" -> "ApiVersions")."""
    return "".join(part[:1].upper() + part[1:] for part in snake.split("_"))


class RequestMetrics:
    """Every request name's `RequestStats`, updated once per request by the connection."""

    def __init__(self) -> None:
        self.by_name: dict[str, RequestStats] = {}

    def stats(self, name: str) -> RequestStats:
        stats = self.by_name.get(name)
        if stats is None:
            stats = self.by_name[name] = RequestStats(name)
        return stats

    def record(
        self,
        names: Sequence[str],
        api_version: int,
        response: object,
        *,
        received: float,
        started: float,
        sending: float,
        done: float,
        remote_s: float,
        request_bytes: int,
    ) -> None:
        """One request under each of `names` (the API's name last; Fetch is also FetchConsumer or
        FetchFollower), in monotonic seconds: its frame `received` whole, its handling `started`,
        its response encoded and `sending`, and written (`done`); `remote_s` of its handling was
        spent waiting in a purgatory. There is no response queue (the connection's own task
        writes the response at once) and no throttling yet: both histograms get 0."""
        queue_ms = round((started - received) * 1000)
        remote_ms = round(remote_s * 1000)
        local_ms = round((sending - started - remote_s) * 1000)
        send_ms = round((done - sending) * 1000)
        total_ms = round((done - received) * 1000)
        errors = error_counts(response) if response is not None else {}
        for name in names:
            s = self.stats(name)
            s.requests[api_version] = s.requests.get(api_version, 0) + 1
            s.request_queue_time.update(queue_ms, done)
            s.local_time.update(local_ms, done)
            s.remote_time.update(remote_ms, done)
            s.throttle_time.update(0, done)
            s.response_queue_time.update(0, done)
            s.response_send_time.update(send_ms, done)
            s.total_time.update(total_ms, done)
            s.request_bytes.update(request_bytes, done)
        api = self.stats(names[-1])  # errors go to the API's own name only (Kafka's updateErrorMetrics)
        for code, n in errors.items():
            api.errors[code] = api.errors.get(code, 0) + n


# -- error counts of a response ---------------------------------------------------------------------

_Plan = tuple[tuple[str, int], ...]
"""(field name, kind) of the fields of a response class that hold error codes: 0 an error code,
1 one nested entity, 2 a tuple of nested entities."""
_plans: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    plan = _plans.get(cls)
    if plan is not None:
        return plan
    _plans[cls] = ()  # recursion guard
    hints = typing.get_type_hints(cls)
    steps: list[tuple[str, int]] = []
    for f in dataclasses.fields(cls):
        hint = hints.get(f.name)
        if hint is ErrorCode:
            steps.append((f.name, 0))
        elif isinstance(hint, type) and dataclasses.is_dataclass(hint) and _plan(hint):
            steps.append((f.name, 1))
        elif typing.get_origin(hint) is tuple:
            args = typing.get_args(hint)
            inner = args[0] if args else None
            if isinstance(inner, type) and dataclasses.is_dataclass(inner) and _plan(inner):
                steps.append((f.name, 2))
    plan = _plans[cls] = tuple(steps)
    return plan


def _count(entity: Any, counts: dict[ErrorCode, int]) -> None:
    for name, kind in _plan(type(entity)):
        value = getattr(entity, name)
        if kind == 0:
            counts[value] = counts.get(value, 0) + 1
        elif kind == 1:
            if value is not None:
                _count(value, counts)
        else:
            for item in value:
                _count(item, counts)


def error_counts(response: object) -> dict[ErrorCode, int]:
    """Every error code in a response (kio entity), counted: Kafka's errorCounts()."""
    counts: dict[ErrorCode, int] = {}
    if dataclasses.is_dataclass(response):
        _count(response, counts)
    return counts


# -- the broker's metrics ----------------------------------------------------------------------------


Labels = tuple[tuple[str, str], ...]
"""A sample's labels as (name, value) pairs, in Kafka's MBean key order."""


@dataclass(slots=True)
class Family:
    """One metric family as the collector renders it. `kind` "counter": samples named
    `<name>_total`; "gauge"; "summary": Strimzi's emulation of a Yammer histogram, a gauge with
    a `quantile` label per percentile and a `<name>_count_total` counter (no `_sum`; Strimzi's
    rule names it `<name>_count`, to which the JMX exporter 1.x adds `_total`)."""

    name: str
    kind: str
    doc: str
    samples: list[tuple[Labels, float]] = field(default_factory=list)
    summaries: list[tuple[Labels, list[float], int]] = field(default_factory=list)
    """summary only: (labels, the value at each of QUANTILES, count)"""

    def add(self, labels: Labels, value: float) -> None:
        self.samples.append((labels, value))


QUANTILES: tuple[tuple[float, str], ...] = (
    (0.50, "0.50"), (0.75, "0.75"), (0.95, "0.95"), (0.98, "0.98"), (0.99, "0.99"), (0.999, "0.999"),
)
"""The Yammer histogram percentiles the JMX exporter reads (50thPercentile ... 999thPercentile),
with the quantile label Strimzi's rules give each ("0.$N")."""


Source = Callable[[], list[Family]]
"""Metric families computed at scrape time, on the event loop (a coordinator's gauges)."""


LOG_FLUSH_MICROS = Histogram()
"""Kafka's LogFlushStats LogFlushRateAndTimeMs, in microseconds: each flush that fsyncs
(`UnifiedLog.flush`). One per process, as Kafka's is one per JVM."""


class BrokerMetrics:
    """The broker's counters and the sources of its scrape-time gauges. One per broker, built in
    `Broker.__init__` and handed to what counts: the connections (requests), the replica manager
    (topics, ISR changes, replica fetchers)."""

    def __init__(self) -> None:
        self.topics = BrokerTopicStats()
        self.replica = ReplicaStats()
        self.requests = RequestMetrics()
        self.sources: list[Source] = []
        self.started = time.monotonic()

    def add_source(self, source: Source) -> None:
        """Register scrape-time metric families (the hook for a coordinator's own metrics)."""
        self.sources.append(source)
