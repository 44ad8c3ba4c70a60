"""KIP-932 share groups with Kafka's own share consumer, on Kafka 4.3.1 and on Samsa alike.

- Java kafka-clients 4.x (compat/jvm/harness/clients-4/ShareHarness.java): the group's
  share.auto.offset.reset=earliest and share.delivery.count.limit=2 set through the AdminClient;
  two KafkaShareConsumers (explicit acknowledgement) share one partition's records, each accepted
  record accepted once; a record released each time is delivered again until the delivery limit
  archives it, a rejected one is never delivered again; a consumer closed while holding records
  has them delivered to the next one with their delivery count raised.
"""

from __future__ import annotations

from typing import Any

import pytest

from compat.jvm import run_main


def _java(target: Any) -> list[dict]:
    return run_main("clients-4", "ShareHarness", target.bootstrap_servers, "j4-share", timeout=180)[1:]


@pytest.mark.compat(client="java 4.x", scenario="KIP-932 share consumers: shared records, release, reject, redelivery")
def test_java_share_consumers(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("java-clients-4-share-consumers", _java)}
    assert obs["shared"] == {"step": "shared", "accepted": {"r0": 1, "r1": 1, "r2": 1, "r3": 1}, "r4": [1, 2],
                             "r5": [1], "others": ["r0", "r1", "r2", "r3"]}  # fmt: skip
    redelivered = obs["redelivered"]
    assert redelivered["held"] and set(redelivered["held"]) == {1}
    assert len(redelivered["again"]) == len(redelivered["held"]) and set(redelivered["again"].values()) == {2}
