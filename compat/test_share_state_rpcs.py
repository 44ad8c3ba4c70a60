"""The share coordinator's state RPCs (KIP-932; keys 83-87, which share partition leaders send the
share coordinator) over raw requests, differential against Apache Kafka 4.3.1: the coordinator of
a share partition found with FindCoordinator v6 key type 2, then its state read before it exists
(ReadShareGroupState, ReadShareGroupStateSummary v0-1), initialized (InitializeShareGroupState;
again at the same and at an older state epoch), read, written (WriteShareGroupState v0 with a batch
of acknowledged records, v1 with the delivery complete count; at an older leader epoch and an older
state epoch, fenced), read at an older leader epoch, summarized, deleted
(DeleteShareGroupState) and read after the deletion."""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import pytest
from kio.schema.delete_share_group_state.v0 import request as delete_req
from kio.schema.initialize_share_group_state.v0 import request as init_req
from kio.schema.read_share_group_state.v0 import request as read_req
from kio.schema.read_share_group_state_summary.v0 import request as summary_v0
from kio.schema.read_share_group_state_summary.v1 import request as summary_v1
from kio.schema.write_share_group_state.v0 import request as write_v0
from kio.schema.write_share_group_state.v1 import request as write_v1
from kio.static.primitive import i8, i16, i32, i64

from protocol.errors import ErrorCode
from tests.support import fidelity
from tests.support.raw_client import RawClient

GROUP = "state-rpcs"
TOPIC = "state-rpcs"
ACKNOWLEDGED = 2


def _partition(response: Any, *fields: str) -> dict[str, Any]:
    """The one partition result of a state RPC response: its error, message and `fields`."""
    (result,) = response.results
    (p,) = result.partitions
    out = {"error": ErrorCode(p.error_code).name, "message": p.error_message}
    for f in fields:
        value = getattr(p, f)
        out[f] = [[int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count)]
                  for b in value] if f == "state_batches" else int(value)  # fmt: skip
    return out


def _scenario(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, TOPIC)
        topic_id = fidelity.topic_id(client, TOPIC)
        key = f"{GROUP}:{base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip('=')}:0"
        fidelity.await_coordinator(client, key, key_type=2)
        deadline = time.monotonic() + 60

        def read(leader_epoch: int, tid: uuid.UUID = topic_id) -> dict[str, Any]:
            return _partition(client.request(read_req.ReadShareGroupStateRequest(group_id=GROUP, topics=(
                read_req.ReadStateData(topic_id=tid, partitions=(
                    read_req.PartitionData(partition=i32(0), leader_epoch=i32(leader_epoch)),)),))),
                "state_epoch", "start_offset", "state_batches")  # fmt: skip

        def summary(version: int, leader_epoch: int) -> dict[str, Any]:
            schema: Any = summary_v1 if version == 1 else summary_v0
            fields = ("state_epoch", "leader_epoch", "start_offset") + (("delivery_complete_count",) if version else ())
            return _partition(client.request(schema.ReadShareGroupStateSummaryRequest(group_id=GROUP, topics=(
                schema.ReadStateSummaryData(topic_id=topic_id, partitions=(
                    schema.PartitionData(partition=i32(0), leader_epoch=i32(leader_epoch)),)),))), *fields)  # fmt: skip

        def initialize(state_epoch: int, start_offset: int) -> dict[str, Any]:
            return _partition(client.request(init_req.InitializeShareGroupStateRequest(group_id=GROUP, topics=(
                init_req.InitializeStateData(topic_id=topic_id, partitions=(init_req.PartitionData(
                    partition=i32(0), state_epoch=i32(state_epoch), start_offset=i64(start_offset)),)),))))  # fmt: skip

        def write(version: int, state_epoch: int, leader_epoch: int, start: int, batches: list[tuple[int, int]],
                  complete: int = 0) -> dict[str, Any]:  # fmt: skip
            schema: Any = write_v1 if version == 1 else write_v0
            extra = {"delivery_complete_count": i32(complete)} if version == 1 else {}
            return _partition(client.request(schema.WriteShareGroupStateRequest(group_id=GROUP, topics=(
                schema.WriteStateData(topic_id=topic_id, partitions=(schema.PartitionData(
                    partition=i32(0), state_epoch=i32(state_epoch), leader_epoch=i32(leader_epoch),
                    start_offset=i64(start), **extra, state_batches=tuple(
                        schema.StateBatch(first_offset=i64(a), last_offset=i64(b), delivery_state=i8(ACKNOWLEDGED),
                                          delivery_count=i16(1)) for a, b in batches)),)),))))  # fmt: skip

        # the coordinator answers once it has loaded the key's state partition
        while (before := read(0))["error"] in ("not_coordinator", "coordinator_load_in_progress",
                                               "coordinator_not_available"):  # fmt: skip
            assert time.monotonic() < deadline, before
            time.sleep(0.2)
        obs.append({"step": "read-before", **before})
        obs.append({"step": "summary-v0-before", **summary(0, 0)})
        obs.append({"step": "summary-v1-before", **summary(1, 0)})
        obs.append({"step": "initialize", **initialize(1, 0)})
        obs.append({"step": "initialize-same-epoch", **initialize(1, 0)})
        obs.append({"step": "initialize-older-epoch", **initialize(0, 0)})
        obs.append({"step": "read-initialized", **read(1)})
        obs.append({"step": "write-v0", **write(0, 1, 1, 0, [(0, 4)])})
        obs.append({"step": "read-written", **read(1)})
        obs.append({"step": "write-v1", **write(1, 1, 1, 5, [(5, 6)], complete=2)})
        obs.append({"step": "write-older-leader-epoch", **write(1, 1, 0, 5, [])})
        obs.append({"step": "write-older-state-epoch", **write(1, 0, 1, 5, [])})
        obs.append({"step": "read-older-leader-epoch", **read(0)})
        obs.append({"step": "read-unknown-topic", **read(1, uuid.UUID("6a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"))})
        obs.append({"step": "summary-v0", **summary(0, 1)})
        obs.append({"step": "summary-v1", **summary(1, 1)})
        obs.append({"step": "delete", **_partition(client.request(delete_req.DeleteShareGroupStateRequest(
            group_id=GROUP, topics=(delete_req.DeleteStateData(topic_id=topic_id, partitions=(
                delete_req.PartitionData(partition=i32(0)),)),))))})  # fmt: skip
        obs.append({"step": "read-deleted", **read(1)})
        obs.append({"step": "summary-deleted", **summary(1, 1)})
    return obs


@pytest.mark.compat(client="raw requests", scenario="share coordinator state RPCs (keys 83-87), brokers' own")
def test_share_state_rpcs(differential: Any) -> None:
    obs = {o.pop("step"): o for o in differential("share-state-rpcs", _scenario)}
    assert obs["initialize"]["error"] == "none"
    assert obs["read-written"] == {"error": "none", "message": None, "state_epoch": 1, "start_offset": 0,
                                   "state_batches": [[0, 4, ACKNOWLEDGED, 1]]}  # fmt: skip
    assert obs["write-v1"]["error"] == "none"
