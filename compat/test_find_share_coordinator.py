"""FindCoordinator v5-6 over raw requests, differential against Apache Kafka 4.3.1: key type 2
(KIP-932 share coordinators; the key `group:topicId:partition`) at v6 for keys Kafka reads as
valid (a group id with a colon, a negative partition, a topic id no topic has: the coordinator of
the key's `__share_group_state` partition, created on first use) and invalid (empty, no topic id,
a topic id not in Kafka's Uuid form, an empty group, a partition that is not an int32:
INVALID_REQUEST), key type 2 at v5 (INVALID_REQUEST), an unknown key type (the whole request
refused with Kafka's message) and a group key at v5 and v6."""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import pytest
from kio.schema.find_coordinator.v5.request import FindCoordinatorRequest as RequestV5
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest as RequestV6
from kio.static.primitive import i8

from protocol.errors import ErrorCode
from tests.support import fidelity
from tests.support.raw_client import RawClient

TOPIC = "find-share-coordinator"
SHARE = 2


def _uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _answers(client: RawClient, port: int, request: Any, names: dict[str, str]) -> list[list[Any]]:
    """(key as named in the scenario, error, message, whether the node is this broker)."""
    return [
        [names.get(str(c.key), str(c.key)), ErrorCode(c.error_code).name, c.error_message,
         int(c.node_id) >= 0 and int(c.port) == port]
        for c in client.request(request).coordinators
    ]  # fmt: skip


def _scenario(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, TOPIC)
        topic_id = _uuid_string(fidelity.topic_id(client, TOPIC))
        other = _uuid_string(uuid.UUID("6a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"))
        keys = {
            f"queue:{topic_id}:0": "valid", f"team:queue:{topic_id}:0": "group-with-colon",
            f"queue:{topic_id}:-1": "negative-partition", f"queue:{other}:3": "unknown-topic-id",
            "": "empty", "queue": "no-topic-id", f"queue:{fidelity.topic_id(client, TOPIC)}:0": "dashed-topic-id",
            f":{topic_id}:0": "empty-group", f"queue:{topic_id}:x": "partition-not-a-number",
            f"queue:{topic_id}:99999999999": "partition-over-int32",
        }  # fmt: skip
        request = RequestV6(key_type=i8(SHARE), coordinator_keys=tuple(keys))
        deadline = time.monotonic() + 60
        # the first share key creates __share_group_state (Kafka answers COORDINATOR_NOT_AVAILABLE
        # until its leaders are elected)
        while (answers := _answers(client, port, request, keys))[0][1] != "none":
            assert time.monotonic() < deadline, answers
            time.sleep(0.2)
        obs.append({"step": "share-v6", "answers": answers})
        obs.append({"step": "share-v5", "answers": _answers(
            client, port, RequestV5(key_type=i8(SHARE), coordinator_keys=(f"queue:{topic_id}:0",)), keys)})
        obs.append({"step": "unknown-key-type", "answers": _answers(
            client, port, RequestV6(key_type=i8(3), coordinator_keys=("queue", "other")), {})})
        for version, schema in ((5, RequestV5), (6, RequestV6)):
            group = schema(key_type=i8(0), coordinator_keys=("find-share-coordinator-group",))
            while (answers := _answers(client, port, group, {}))[0][1] != "none":
                assert time.monotonic() < deadline, answers
                time.sleep(0.2)
            obs.append({"step": f"group-v{version}", "answers": answers})
    return obs


@pytest.mark.compat(client="raw requests", scenario="FindCoordinator v5-6: share coordinator keys (KIP-932)")
def test_find_share_coordinator(differential: Any) -> None:
    obs = {o["step"]: o["answers"] for o in differential("find-share-coordinator", _scenario)}
    share = {name: (error, here) for name, error, _message, here in obs["share-v6"]}
    assert share == {
        "valid": ("none", True), "group-with-colon": ("none", True), "negative-partition": ("none", True),
        "unknown-topic-id": ("none", True), "empty": ("invalid_request", False), "no-topic-id": ("invalid_request", False),
        "dashed-topic-id": ("invalid_request", False), "empty-group": ("invalid_request", False),
        "partition-not-a-number": ("invalid_request", False), "partition-over-int32": ("invalid_request", False),
    }  # fmt: skip
    assert obs["share-v5"] == [["valid", "invalid_request", "", False]]
    assert [(key, error) for key, error, _m, _h in obs["unknown-key-type"]] == [
        ("queue", "invalid_request"), ("other", "invalid_request")]
    assert obs["group-v5"] == obs["group-v6"] == [["find-share-coordinator-group", "none", "", True]]
