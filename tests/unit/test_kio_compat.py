"""The contract with kio's internals (protocol/kio_compat.py): each assumption Samsa makes beyond
kio's public API, checked on its own, so a kio upgrade that breaks one fails here by name."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
from pathlib import Path

from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.fetch.v12 import response as fetch
from kio.schema.metadata.v12.request import MetadataRequest

from protocol import kio_compat, messages

ROOT = Path(__file__).resolve().parents[2]


def test_kio_is_the_pinned_version() -> None:
    pinned = re.search(r'"kio==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert pinned is not None
    assert importlib.metadata.version("kio") == pinned.group(1)


def test_api_names_are_kios_snake_case() -> None:
    assert kio_compat.api_name(18) == "api_versions"
    assert kio_compat.api_name(0) == "produce"
    assert kio_compat.api_name(75) == "describe_topic_partitions"


def test_fields_classify_as_prescan_and_convert_expect() -> None:
    fields = {f.name: f for f in dataclasses.fields(MetadataRequest)}
    topics = kio_compat.classify_field(fields["topics"])
    assert isinstance(topics, kio_compat.EntityTupleField)
    flag = kio_compat.classify_field(fields["allow_auto_topic_creation"])
    assert not isinstance(flag, (kio_compat.EntityField, kio_compat.EntityTupleField))
    assert kio_compat.get_schema_field_type(fields["allow_auto_topic_creation"]) == "bool"
    versions = {f.name: f for f in dataclasses.fields(ApiVersionsResponse)}
    assert kio_compat.get_field_tag(versions["supported_features"]) == 0  # a tagged field
    assert kio_compat.get_field_tag(versions["api_keys"]) is None


class _Region:
    """Stands where record bytes go; records every use kio's writer makes of it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.uses: list[str] = []

    def __len__(self) -> int:
        self.uses.append("len")
        return self.size

    def __getattribute__(self, name: str) -> object:
        if name not in ("size", "uses", "__len__", "__class__"):
            object.__getattribute__(self, "uses").append(name)
        return object.__getattribute__(self, name)


def test_the_records_writer_only_measures_and_writes_the_value() -> None:
    """Zero-copy fetch: a FileRecords region stands in a records field; kio must only take its
    len() and pass it to the output's write(), which FrameBuffer keeps as a chunk of its own."""
    region = _Region(1234)
    partition = dataclasses.replace(messages._zero_entity(fetch.PartitionData), records=region)
    topic = dataclasses.replace(messages._zero_entity(fetch.FetchableTopicResponse), partitions=(partition,))
    response = dataclasses.replace(messages._zero_entity(fetch.FetchResponse), responses=(topic,))
    out = messages.FrameBuffer()
    kio_compat.write_entity(out, response)  # kio's writer: the fallback of protocol.compiled
    chunks = out.finish()
    assert region in chunks  # the region itself, not a copy of bytes
    assert set(region.uses) <= {"len"}, region.uses
    assert out.size == sum(len(c) for c in chunks if isinstance(c, bytes)) + 1234
