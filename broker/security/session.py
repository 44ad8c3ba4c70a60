"""Each connection's authentication: who the client is, and what it may send before it has said so.

`ListenerSecurity` is what one listener serves (TLS context, SASL mechanisms and their credentials,
KIP-368 session lifetimes); `Session` is one connection's state machine, Kafka's
SaslServerAuthenticator with the re-authentication of KafkaChannel:

    HANDSHAKE_OR_VERSIONS  first request on a SASL listener: ApiVersions (-> HANDSHAKE once
                           answered without error; a refused version may be retried) or
                           SaslHandshake (-> AUTHENTICATE)
    HANDSHAKE              after ApiVersions: SaslHandshake only (-> AUTHENTICATE)
    AUTHENTICATE           SaslAuthenticate only (SaslHandshake v1), or raw SASL tokens in frames
                           without Kafka headers (v0); the mechanism completes -> COMPLETE
    COMPLETE               every request is served. A session with a lifetime ends then: any request
                           but SaslHandshake closes the connection. SaslHandshake from a client that
                           used SaslAuthenticate v1+ begins re-authentication -> REAUTHENTICATE
    REAUTHENTICATE         SaslAuthenticate only; the mechanism and principal may not change;
                           completes -> COMPLETE with a new lifetime
    FAILED                 the failure response is written, then the connection closes
    any -> FAILED          an unsupported mechanism, a failed token, a request out of turn

PLAINTEXT and SSL listeners start COMPLETE (principal ANONYMOUS, or the mapped client certificate
name on SSL). Failures log one line (client address, listener, mechanism, reason).
"""

from __future__ import annotations

import enum
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    NoMatchingRule,
    SslPrincipalMapper,
    certificate_dn,
    user,
)
from broker.security.sasl import SaslFailure, SaslServer, generic_failure
from protocol import frames

log = logging.getLogger("samsa.security")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = frames.API_VERSIONS_KEY, 17, 36


class SaslState(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake_or_versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    REAUTHENTICATE = "reauthenticate"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """What the connections of one listener are served with."""

    listener: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    new_server: Callable[[str], SaslServer] | None = None
    """mechanism -> a fresh SASL server for one authentication"""
    reauth_ms: Mapping[str, int] | None = None
    """connections.max.reauth.ms by mechanism (0: no limit)"""
    max_receive_size: int = 524_288
    failed_delay_ms: int = 0
    mapper: SslPrincipalMapper | None = None

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT = ListenerSecurity("PLAINTEXT", "PLAINTEXT")


class Session:
    """One connection's authentication state (see the module docstring)."""

    def __init__(self, security: ListenerSecurity, address: str) -> None:
        self.security = security
        self.address = address
        self.principal: KafkaPrincipal = ANONYMOUS
        self.state = SaslState.HANDSHAKE_OR_VERSIONS if security.sasl else SaslState.COMPLETE
        self.mechanism: str | None = None
        self.raw_tokens = False
        """SaslHandshake v0: tokens come as bare size-prefixed frames"""
        self.supports_reauth = False
        self.expires_at: float | None = None
        """time.monotonic() when the authenticated session ends (None: never)"""
        self._server: SaslServer | None = None
        self._reauth_mechanism_error: str | None = None

    @property
    def client_host(self) -> str:
        return self.address.rsplit(":", 1)[0]

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    def on_tls(self, ssl_object: Any) -> str | None:
        """The TLS handshake is done: on an SSL listener the principal is the client certificate's
        mapped name. Returns why the connection must close (no mapping rule applies)."""
        if self.security.sasl or ssl_object is None:
            return None
        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            return None
        dn = certificate_dn(der)
        try:
            mapper = self.security.mapper or SslPrincipalMapper(None)
            self.principal = user(mapper.name(dn))
        except NoMatchingRule as e:
            self._fail("no principal mapping rule applies", str(e))
            return "no_principal_mapping_rule"
        return None

    def admit(self, api_key: int) -> str | None:
        """Whether a request of `api_key` may be read now (None) or why the connection closes."""
        state = self.state
        if state is SaslState.COMPLETE:
            if (self.expires_at is not None and api_key != SASL_HANDSHAKE
                    and time.monotonic() >= self.expires_at):
                log.info("connection closed reason=session_expired client=%s listener=%s "
                         "mechanism=%s principal=%s", self.address, self.security.listener,
                         self.mechanism, self.principal)
                self.state = SaslState.FAILED
                return "session_expired"
            return None
        if state is SaslState.HANDSHAKE_OR_VERSIONS and api_key == API_VERSIONS:
            return None  # the state moves on once it is answered: see versions_answered
        if state in (SaslState.HANDSHAKE_OR_VERSIONS, SaslState.HANDSHAKE) and api_key == SASL_HANDSHAKE:
            return None
        if state in (SaslState.AUTHENTICATE, SaslState.REAUTHENTICATE) and api_key == SASL_AUTHENTICATE \
                and not self.raw_tokens:
            return None
        if state is not SaslState.FAILED:
            self._fail("request before authentication", f"api_key={api_key} in state {state.value}")
        return "request_before_authentication"

    def versions_answered(self) -> None:
        """An ApiVersions request was answered without error: only SaslHandshake may follow. One
        answered UNSUPPORTED_VERSION (or INVALID_REQUEST) may be retried, as Kafka's
        SaslServerAuthenticator.handleApiVersionsRequest allows (franz-go first asks v5)."""
        if self.state is SaslState.HANDSHAKE_OR_VERSIONS:
            self.state = SaslState.HANDSHAKE

    def _fail(self, reason: str, detail: str = "") -> None:
        self.state = SaslState.FAILED
        log.warning("authentication failed client=%s listener=%s mechanism=%s reason=%s%s",
                    self.address, self.security.listener, self.mechanism, reason,
                    f" detail={detail}" if detail else "")

    # -- SaslHandshake ----------------------------------------------------------------------------

    def handshake(self, mechanism: str, version: int) -> bool | None:
        """A SaslHandshake: True when accepted, False for an unsupported mechanism (the
        connection closes after the answer), None when it is not part of authentication here
        (Kafka's API layer answers ILLEGAL_SASL_STATE)."""
        if self.state is SaslState.COMPLETE:
            if not (self.security.sasl and self.supports_reauth):
                return None
            if mechanism not in self.security.mechanisms:
                self.mechanism = mechanism
                self._fail("unsupported mechanism for re-authentication")
                return False
            if mechanism != self.mechanism:
                self._reauth_mechanism_error = (
                    f"SASL mechanism '{mechanism}' requested by client is not supported for "
                    f"re-authentication of mechanism '{self.mechanism}'")
            assert self.security.new_server is not None
            self._server = self.security.new_server(mechanism)
            self.state = SaslState.REAUTHENTICATE
            return True
        self.mechanism = mechanism
        if mechanism not in self.security.mechanisms:
            self._fail("unsupported mechanism")
            return False
        assert self.security.new_server is not None
        self._server = self.security.new_server(mechanism)
        self.raw_tokens = version == 0
        self.state = SaslState.AUTHENTICATE
        return True

    # -- SaslAuthenticate (and raw tokens) -------------------------------------------------------

    async def authenticate(self, token: bytes, version: int) -> tuple[bytes, int]:
        """One token of the exchange: (the server's answer, the session lifetime in ms once
        complete, else 0). Raises SaslFailure (logged; the session is FAILED), whose
        `client_message` is the message Kafka sends."""
        reauth = self.state is SaslState.REAUTHENTICATE
        if version > 0:
            self.supports_reauth = True
        server = self._server
        assert server is not None
        try:
            if self._reauth_mechanism_error is not None:
                raise SaslFailure("mechanism changed", self._reauth_mechanism_error)
            answer = await server.evaluate(token)
            lifetime = 0
            if server.complete:
                principal = user(server.authorization_id)
                if reauth and principal != self.principal:
                    raise SaslFailure("principal changed", "Cannot change principals during "
                                      f"re-authentication from {self.principal.principal_type}."
                                      f"{self.principal.name}: {principal.principal_type}.{principal.name}")
                self.principal = principal
                lifetime = self._complete(server)
        except SaslFailure as e:
            self._fail(str(e))
            if e.client_message is None:
                e.client_message = generic_failure(self.mechanism or "", reauth)
            raise
        return answer, lifetime

    def _complete(self, server: SaslServer) -> int:
        """KIP-368: the session lifetime, the shorter of connections.max.reauth.ms and what is
        left of the credential (an OAuth token), 0 when neither applies."""
        now_ms = time.time() * 1000
        max_ms = (self.security.reauth_ms or {}).get(server.mechanism, 0)
        candidates = [max_ms] if max_ms > 0 else []
        if server.credential_expiry_ms is not None:
            candidates.append(max(0, int(server.credential_expiry_ms - now_ms)))
        lifetime = min(candidates) if candidates else 0
        self.expires_at = time.monotonic() + lifetime / 1000 if candidates else None
        self.state = SaslState.COMPLETE
        self.raw_tokens = False
        self._server = None
        self._reauth_mechanism_error = None
        log.debug("authenticated client=%s listener=%s mechanism=%s principal=%s lifetime_ms=%d",
                  self.address, self.security.listener, self.mechanism, self.principal, lifetime)
        return lifetime
