"""Replication throttles (broker/replication/throttle.py): which replicas a topic's list names for
a broker, and when the measured rate is over the limit (Kafka's ReplicationQuotaManager)."""

from __future__ import annotations

from broker.replication.throttle import UNLIMITED, ReplicationQuota, throttled


def test_a_list_names_partitions_for_one_broker_or_all_with_a_star() -> None:
    assert throttled("0:1, 2:3", 0, 1) and throttled("0:1, 2:3", 2, 3)
    assert not throttled("0:1,2:3", 0, 3) and not throttled("0:1", 1, 1)
    assert throttled("*", 7, 9) and not throttled("", 0, 1)


def test_exceeded_once_the_rate_over_the_windows_passes_the_limit() -> None:
    quota = ReplicationQuota(limit=1000, samples=2, window_ms=1000)
    quota.record(900, 0)  # 900 bytes over at least one window (1 s): 900 B/s
    assert not quota.exceeded(0)
    quota.record(300, 100)  # 1200 bytes over 1.1 s (one window and the 100 ms into the next)
    assert quota.exceeded(100)
    assert not quota.exceeded(2100)  # both samples expired


def test_the_default_limit_measures_nothing_and_never_throttles() -> None:
    quota = ReplicationQuota()
    assert quota.limit == UNLIMITED
    quota.record(10**12, 0)
    assert not quota.exceeded(0)
    quota.configure(1, 2, 1000)
    assert not quota.exceeded(0)  # nothing was measured while unlimited
    quota.record(10, 0)
    assert quota.exceeded(0)
