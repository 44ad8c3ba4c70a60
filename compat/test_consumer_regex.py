"""KIP-848 subscriptions by regular expression, resolved as Kafka 4.3.1 resolves them: off the
heartbeat, when a regular expression is first seen and then at most every 10 s
(REGEX_BATCH_REFRESH_MIN_INTERVAL_MS) when topics were created or
group.consumer.regex.refresh.interval.ms has passed. Raw ConsumerGroupHeartbeat v1 requests, so
that each step's answer is observed exactly: the member's first answer has no topic of its
regular expression yet, the next one has; a topic created right after is not picked up before
10 s from that resolution, and is from the heartbeat after the one that finds it due. Internal
topics match as any other (`__consumer_offsets` is assigned).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from tests.support import fidelity
from tests.support.consumer_protocol import describe, heartbeat, join
from tests.support.raw_client import RawClient

PREFIX = "regex-refresh"
GROUP = "regex-refresh-group"
MIN_REFRESH_S = 10.0
"""Kafka's REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: a group's regular expressions are resolved again
no sooner than this after their last resolution (group.consumer.regex.refresh.interval.ms may not
be lower)."""


def _names(client: RawClient) -> dict[uuid.UUID, str]:
    answer = client.request(MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t))
                     for t in (f"{PREFIX}-a", f"{PREFIX}-b", "__consumer_offsets")),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    ))  # fmt: skip
    return {t.topic_id: str(t.name) for t in answer.topics if t.error_code == 0}


def _obs(step: str, answer: Any, names: dict[uuid.UUID, str]) -> dict[str, Any]:
    o: dict[str, Any] = {"step": step, "error": int(answer.error_code), "epoch": int(answer.member_epoch)}
    if answer.assignment is not None:
        o["topics"] = sorted(names.get(t.topic_id, "?") for t in answer.assignment.topic_partitions)
    return o


def _scenario(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, f"{PREFIX}-a")
        fidelity.await_coordinator(client, GROUP)
        member = uuid.uuid4().hex[:22]
        joined = time.monotonic()
        answer = join(client, member, group=GROUP, regex=f"{PREFIX}-.*|__consumer_offsets")  # internal ones match too
        obs.append(_obs("join", answer, _names(client)))  # resolution under way: nothing yet
        epoch = int(answer.member_epoch)
        time.sleep(1.5)  # the resolution has landed; past group.consumer.assignment.interval.ms (1 s)
        answer = heartbeat(client, member, epoch, group=GROUP)
        obs.append(_obs("resolved", answer, _names(client)))
        epoch = int(answer.member_epoch)
        fidelity.create_topic(client, f"{PREFIX}-b")
        time.sleep(1.5)
        answer = heartbeat(client, member, epoch, group=GROUP)
        obs.append(_obs("created-within-10s", answer, _names(client)))  # not due: a's resolution is recent
        epoch = int(answer.member_epoch)
        time.sleep(max(0.0, joined + MIN_REFRESH_S + 1.5 - time.monotonic()))
        answer = heartbeat(client, member, epoch, group=GROUP)
        obs.append(_obs("due", answer, _names(client)))  # starts the refresh: its answer is the old one
        epoch = int(answer.member_epoch)
        time.sleep(1.5)
        answer = heartbeat(client, member, epoch, group=GROUP)
        obs.append(_obs("refreshed", answer, _names(client)))
        d = describe(client, GROUP)
        obs.append({"step": "describe", "epoch": d["epoch"], "assignmentEpoch": d["assignmentEpoch"]})
        obs.append(_obs("leave", heartbeat(client, member, -1, group=GROUP), {}))
    return obs


@pytest.mark.compat(client="raw", scenario="KIP-848 regular expressions resolved off the heartbeat and refreshed")
def test_regex_resolution_timing(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("consumer-regex-refresh", _scenario)}
    assert obs["join"]["topics"] == []
    assert obs["resolved"]["topics"] == ["__consumer_offsets", f"{PREFIX}-a"]
    assert "topics" not in obs["created-within-10s"] and "topics" not in obs["due"]  # unchanged
    assert obs["refreshed"]["topics"] == ["__consumer_offsets", f"{PREFIX}-a", f"{PREFIX}-b"]
