"""The Prometheus endpoint: prometheus-client's HTTP server, in its own thread, on
metrics.prometheus.port (imported only when that port is set, so a broker without it loads
nothing of the library).

A scrape asks the event loop for the families (`BrokerCollector.families`, a consistent
reading without locks, a few milliseconds for thousands of partitions) and formats them in
the server's thread, so the loop never waits on an HTTP client. The process's CPU, memory and
file descriptors come from the library's process collector (`process_*`).

States: STOPPED --start()--> SERVING (thread accepting scrapes) --stop()--> STOPPED.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker.metrics.stats import QUANTILES, Family

log = logging.getLogger("samsa.metrics")

SCRAPE_TIMEOUT_S = 10.0
"""How long a scrape waits for the event loop; past it the scrape gets the process metrics only."""


def to_metrics(family: Family) -> list[Metric]:
    """prometheus-client metrics with exactly the sample names the JMX exporter writes."""
    if family.kind == "counter":
        counter = Metric(family.name, family.doc, "counter")
        for labels, value in family.samples:
            counter.add_sample(f"{family.name}_total", dict(labels), value)
        return [counter]
    if family.kind == "gauge":
        gauge = Metric(family.name, family.doc, "gauge")
        for labels, value in family.samples:
            gauge.add_sample(family.name, dict(labels), value)
        return [gauge]
    # a summary: Strimzi's `..._count` counter rule, which the JMX exporter 1.x names `..._count_total`
    quantiles = Metric(family.name, family.doc, "gauge")
    count = Metric(f"{family.name}_count", family.doc, "counter")
    for labels, values, n in family.summaries:
        for (_, quantile), value in zip(QUANTILES, values):
            quantiles.add_sample(family.name, {**dict(labels), "quantile": quantile}, value)
        count.add_sample(f"{family.name}_count_total", dict(labels), n)
    return [quantiles, count]


class _LoopCollector(Collector):
    """Runs `families` on the event loop for each scrape."""

    def __init__(self, loop: asyncio.AbstractEventLoop, families: Callable[[], list[Family]]) -> None:
        self._loop = loop
        self._families = families

    def collect(self) -> Iterator[Metric]:
        result: concurrent.futures.Future[list[Family]] = concurrent.futures.Future()

        def run() -> None:
            try:
                result.set_result(self._families())
            except BaseException as e:  # noqa: BLE001 - handed to the scraping thread
                result.set_exception(e)

        try:
            self._loop.call_soon_threadsafe(run)
            families = result.result(SCRAPE_TIMEOUT_S)
        except RuntimeError:  # the loop is closed: the broker is stopping
            return
        except Exception:
            log.exception("metrics collection failed")
            return
        for family in families:
            yield from to_metrics(family)


class PrometheusEndpoint:
    def __init__(self, host: str, port: int, families: Callable[[], list[Family]]) -> None:
        self.host = host
        self.port = port
        self._families = families
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Listen (raises OSError when the port is taken) and serve from a daemon thread."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_LoopCollector(asyncio.get_running_loop(), self._families))
        ProcessCollector(registry=registry)
        self._server, self._thread = start_http_server(self.port, self.host, registry)
        self.port = self._server.server_port
        log.info("metrics endpoint started address=%s:%d path=/metrics", self.host, self.port)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        log.info("metrics endpoint stopped address=%s:%d", self.host, self.port)
