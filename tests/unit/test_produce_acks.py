"""frames.produce_acks reads a Produce request's acks from its frame without decoding it, for
every version Samsa handles (with and without a transactional id and a client id); a frame cut
before its acks gives None."""

from __future__ import annotations

import dataclasses

import pytest

from protocol import frames, messages
from tests.support.raw_client import encode_request


@pytest.mark.parametrize("version", range(13))
@pytest.mark.parametrize("acks", [-1, 0, 1, 7])
@pytest.mark.parametrize("transactional_id", [None, "", "txn-é"])
def test_acks_of_every_version(version: int, acks: int, transactional_id: str | None) -> None:
    cls = messages.request_class(0, version)
    request = messages._zero_entity(cls)
    changes: dict[str, object] = {"acks": acks}
    if "transactional_id" in {f.name for f in dataclasses.fields(cls)}:
        changes["transactional_id"] = transactional_id
    request = dataclasses.replace(request, **changes)
    for client_id in (None, "a-client"):
        payload = encode_request(request, 5, client_id=client_id)[4:]
        assert frames.produce_acks(payload) == acks
        assert frames.produce_acks(memoryview(payload)) == acks
        header = frames.parse_request_header(payload, frames.request_header_version(0, version, version >= 9))
        assert frames.produce_acks(payload[: header.header_size + 1]) is None
