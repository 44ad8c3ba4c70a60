"""A raw Kafka protocol client for tests: frames and headers by hand, bodies with kio.

It exists so tests can say exactly what goes on the wire (any API key and version, malformed
frames, truncated frames, wrong sizes) and see exactly what comes back (the raw response bytes as
well as the decoded body). Real client libraries hide both.

    with RawClient(port) as c:
        resp = c.request(ApiVersionsRequest(...))          # decoded response entity
        raw = c.request_raw(18, 3, body_bytes)              # response payload after correlation id
        c.send_bytes(b"\\x00\\x00\\x00\\x05garbage")         # anything at all
        assert c.closed_by_peer()                           # EOF within the timeout
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from protocol import frames, messages

_I32 = struct.Struct(">i")


class ConnectionClosedByPeer(Exception):
    """The broker closed the connection (EOF or reset) before a full frame arrived."""


def request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    flexible: bool,
) -> bytes:
    """Request header v1 (v2 with an empty tagged-field section when `flexible`)."""
    head = struct.pack(">hhi", api_key, api_version, correlation_id)
    if client_id is None:
        head += struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        head += struct.pack(">h", len(raw)) + raw
    if flexible:
        head += b"\x00"
    return head


def encode_body(entity: Any) -> bytes:
    return messages.encode_bytes(entity)


def frame(payload: bytes) -> bytes:
    return _I32.pack(len(payload)) + payload


def encode_request(
    entity: Any,
    correlation_id: int,
    client_id: str | None = "raw-client",
    api_version: int | None = None,
) -> bytes:
    """A complete frame (size prefix included) for a kio request entity."""
    cls = type(entity)
    key = int(cls.__api_key__)
    version = int(cls.__version__) if api_version is None else api_version
    flexible = messages.is_flexible(key, version)
    return frame(
        request_header(key, version, correlation_id, client_id, flexible)
        + encode_body(entity)
    )


class RawClient:
    def __init__(
        self, port: int, host: str = "127.0.0.1", timeout: float = 10.0
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next_correlation_id = 1

    # -- plumbing ------------------------------------------------------------------------------

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> RawClient:  # noqa: PYI034 - not subclassed
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_correlation_id(self) -> int:
        cid = self._next_correlation_id
        self._next_correlation_id += 1
        return cid

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exactly(self, n: int) -> bytes:
        parts: list[bytes] = []
        remaining = n
        while remaining:
            try:
                chunk = self.sock.recv(min(remaining, 1 << 20))
            except (ConnectionResetError, BrokenPipeError) as e:
                raise ConnectionClosedByPeer(str(e)) from e
            if not chunk:
                raise ConnectionClosedByPeer(
                    f"EOF with {remaining} of {n} bytes missing"
                )
            parts.append(chunk)
            remaining -= len(chunk)
        return b"".join(parts)

    def recv_frame(self) -> bytes:
        """The payload of the next response frame (correlation id first). Raises socket.timeout if
        nothing arrives within the timeout, ConnectionClosedByPeer on EOF."""
        (size,) = _I32.unpack(self._recv_exactly(4))
        if size < 4:
            raise AssertionError(f"response frame of size {size}")
        return self._recv_exactly(size)

    def closed_by_peer(self, timeout: float | None = None) -> bool:
        """True if the broker closes the connection within `timeout` seconds without sending
        anything more; False if data arrives or the timeout passes with the connection open."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.sock.settimeout(left)
                try:
                    data = self.sock.recv(65536)
                except (ConnectionResetError, BrokenPipeError):
                    return True
                return not data
        except TimeoutError:
            return False
        finally:
            self.sock.settimeout(self.timeout)

    # -- requests ------------------------------------------------------------------------------

    def send_request(
        self,
        entity: Any,
        *,
        client_id: str | None = "raw-client",
        api_version: int | None = None,
    ) -> int:
        cid = self.next_correlation_id()
        self.send_bytes(encode_request(entity, cid, client_id, api_version))
        return cid

    def request_raw(
        self,
        api_key: int,
        api_version: int,
        body: bytes,
        *,
        client_id: str | None = "raw-client",
    ) -> bytes:
        """Send a body with a correct header for (api_key, api_version); return the response
        payload after the correlation id (header tagged fields, if any, NOT stripped)."""
        cid = self.next_correlation_id()
        flexible = messages.is_flexible(api_key, api_version)
        self.send_bytes(
            frame(request_header(api_key, api_version, cid, client_id, flexible) + body)
        )
        payload = self.recv_frame()
        (got,) = _I32.unpack_from(payload, 0)
        assert got == cid, f"correlation id {got}, expected {cid}"
        return payload[4:]

    def request(
        self,
        entity: Any,
        *,
        client_id: str | None = "raw-client",
        api_version: int | None = None,
        response_class: type | None = None,
    ) -> Any:
        """Send a kio request entity and decode the response with the matching response class
        (header v1 for flexible versions, except ApiVersions whose response header is v0).
        `api_version` is needed where one class serves several versions (Produce v0-2)."""
        cls = type(entity)
        key = int(cls.__api_key__)
        version = int(cls.__version__) if api_version is None else api_version
        cid = self.send_request(entity, client_id=client_id, api_version=version)
        payload = self.recv_frame()
        got, pos = frames.parse_response_header(payload, key, messages.is_flexible(key, version))
        assert got == cid, f"correlation id {got}, expected {cid}"
        entity_out, used = messages.decode_response(key, version, payload, pos, response_class)
        if pos + used != len(payload):
            raise AssertionError(
                f"response to api_key={key} v{version} has {len(payload) - pos - used} bytes "
                f"after the {type(entity_out).__name__} body"
            )
        return entity_out
