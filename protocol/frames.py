"""Kafka frames and headers.

A frame is a big-endian int32 size followed by that many bytes. Requests open with a header:

    v0: api_key int16, api_version int16, correlation_id int32
    v1: + client_id nullable string (int16 length)
    v2: + tagged fields (flexible requests)

Responses open with correlation_id (v0) plus tagged fields (v1, flexible responses), except that the
ApiVersions response header is always v0 (KIP-511).

The header is parsed by hand, not by kio, because the broker must decide what to do with a frame
(unknown key, unknown version, garbage) before it knows which body schema to use.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7

_SIZE = struct.Struct(">i")
_HEADER_V0 = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")


class MalformedFrameError(KafkaError):
    """The frame cannot be parsed; the connection that sent it is closed."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_request, message)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_size: int
    """Bytes the header occupies at the start of the frame payload."""


def read_size(prefix: bytes) -> int:
    return _SIZE.unpack(prefix)[0]


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint at `pos`: (value, position after it); MalformedFrameError if cut or too long."""
    value = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedFrameError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedFrameError("varint too long")


def skip_tagged_fields(buf: bytes | memoryview, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedFrameError("truncated tagged field")
    return pos


def request_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if flexible else 1


def parse_request_key_version(payload: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from the first 8 bytes of a request."""
    if len(payload) < _HEADER_V0.size:
        raise MalformedFrameError(f"request of {len(payload)} bytes is too short for a header")
    return _HEADER_V0.unpack_from(payload, 0)


def produce_acks(payload: bytes | memoryview) -> int | None:
    """The acks of a Produce request frame, read without decoding it (None when the frame is too
    short or malformed there: decoding it properly then says what is wrong). v0-2 bodies open
    with acks; v3+ with transactional_id (compact from v9, when the header is flexible too)."""
    try:
        _, api_version, _ = parse_request_key_version(payload)
        flexible = api_version >= 9
        header = parse_request_header(payload, 2 if flexible else 1)
        pos = header.header_size
        if api_version >= 3:
            if flexible:
                length, pos = read_uvarint(payload, pos)
                pos += max(length - 1, 0)
            else:
                (length,) = _INT16.unpack_from(payload, pos)
                pos += 2 + max(length, 0)
        (acks,) = _INT16.unpack_from(payload, pos)
    except (MalformedFrameError, struct.error):
        return None
    return int(acks)


def is_api_key(payload: bytes | memoryview, api_key: int) -> bool:
    """Whether a request frame names `api_key` (False for one too short to name any)."""
    return len(payload) >= 2 and payload[0] == (api_key >> 8) & 0xFF and payload[1] == api_key & 0xFF


def parse_request_header(payload: bytes | memoryview, header_version: int) -> RequestHeader:
    api_key, api_version, correlation_id = parse_request_key_version(payload)
    pos = _HEADER_V0.size
    client_id: str | None = None
    if header_version >= 1:
        if len(payload) < pos + 2:
            raise MalformedFrameError("truncated client_id in request header")
        (length,) = _INT16.unpack_from(payload, pos)
        pos += 2
        if length >= 0:
            if len(payload) < pos + length:
                raise MalformedFrameError("truncated client_id in request header")
            try:
                client_id = bytes(payload[pos : pos + length]).decode()
            except UnicodeDecodeError as e:
                raise MalformedFrameError("client_id is not UTF-8") from e
            pos += length
        elif length != -1:
            raise MalformedFrameError(f"invalid client_id length {length}")
    if header_version >= 2:
        pos = skip_tagged_fields(payload, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def parse_response_header(payload: bytes | memoryview, api_key: int, flexible: bool) -> tuple[int, int]:
    """(correlation_id, position of the body) of a response frame's payload (client side)."""
    if len(payload) < 4:
        raise MalformedFrameError("response too short for a header")
    (correlation_id,) = _SIZE.unpack_from(payload, 0)
    pos = 4
    if flexible and api_key != API_VERSIONS_KEY:
        pos = skip_tagged_fields(payload, pos)
    return correlation_id, pos


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """The response header bytes: correlation id, plus an empty tagged-field section if flexible."""
    head = _SIZE.pack(correlation_id)
    return head + b"\x00" if flexible else head


def size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)
