"""Metrics: Kafka's broker metrics for Prometheus, under the JMX exporter's names (Strimzi's rules).

  stats.py      what the broker counts as it works (per request, per append; no locks, no library)
  histogram.py  the request-time histograms (log-linear buckets over the last few minutes)
  collector.py  every metric family at scrape time, on the event loop
  endpoint.py   the HTTP endpoint (prometheus-client, its own thread), on metrics.prometheus.port
  loop.py       the event loop's idle time (NetworkProcessorAvgIdlePercent)

docs/operations.md lists the metrics, what each counts, and the alerts to set.
"""
