"""Produce v0-2, which kio cannot give (Kafka 4.x's specs dropped them), are served from Samsa's own
schemas (protocol/schemas/produce_v0_2.py). Held here against kafka-clients 3.9, the last release
whose generated ProduceRequestData and ProduceResponseData write them (compat/jvm/harness/clients-3.9/
WireSchemas.java): each version's request decodes to what Kafka's classes wrote and encodes back to
the same bytes, and the response the Produce handler builds, converted down to each version as
the network layer does, is byte for byte the one Kafka's classes write."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.errors import ErrorCode

from broker.handlers.api_00_produce import ProduceResponse, TopicProduceResponse, _partition_response
from compat.jvm import run_main
from protocol import messages


@pytest.fixture(scope="module")
def kafka_wire() -> dict[tuple[str, int], bytes]:
    lines = run_main("clients-3.9", "WireSchemas")
    assert lines[0]["clientVersion"].startswith("3.9.")
    return {(line["step"], line["version"]): bytes.fromhex(line["hex"]) for line in lines if "hex" in line}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_request_decodes_and_encodes_as_kafka_writes_it(kafka_wire: dict[tuple[str, int], bytes], version: int) -> None:
    wire = kafka_wire[("produce-request", version)]
    request, used = messages.decode_request(0, version, wire, 0)
    assert used == len(wire)
    assert request.acks == -1
    assert request.timeout == datetime.timedelta(milliseconds=1500)
    assert [(t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
            for t in request.topic_data] == [("orders", [(0, b"\x01\x02\x03\x04\x05"), (7, None)]), ("z", [(2, b"\x09")])]
    assert messages.encode_bytes(request) == wire


@pytest.mark.parametrize("version", [0, 1, 2])
def test_response_is_written_as_kafka_writes_it(kafka_wire: dict[tuple[str, int], bytes], version: int) -> None:
    response = ProduceResponse(
        responses=(
            TopicProduceResponse(name="orders", partition_responses=(
                _partition_response(0, ErrorCode.none, base_offset=42, log_append_time=1_700_000_000_123),
                _partition_response(7, ErrorCode.not_leader_or_follower),
            )),
        ),
        throttle_time=datetime.timedelta(milliseconds=250),
    )
    ours = messages.convert(response, messages.response_class(0, version))
    wire = kafka_wire[("produce-response", version)]
    assert messages.encode_bytes(ours) == wire
    decoded, used = messages.decode_response(0, version, wire, 0)
    assert used == len(wire)
    assert decoded == ours
