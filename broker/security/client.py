"""The inter-broker client's side of security: how a broker connects to another broker's
inter-broker listener (the replica fetcher's `LeaderClient`).

`ClientSecurity.from_config` takes the inter-broker listener's security protocol: SSL and SASL_SSL
connect with TLS (this broker's trust store, its key store as client certificate, host name checked
when ssl.endpoint.identification.algorithm is https); SASL_PLAINTEXT and SASL_SSL then
authenticate with sasl.mechanism.inter.broker.protocol, as the username and password (PLAIN,
SCRAM) or `unsecuredLoginStringClaim_sub` (OAUTHBEARER) of that mechanism's JAAS config on the
inter-broker listener, as Kafka's brokers do. `SaslClient` produces the client's tokens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import ssl
import time
from dataclasses import dataclass

from broker.config import BrokerConfig, ConfigError
from broker.security.sasl import SCRAM_HASHES, SaslFailure, parse_jaas, scram_from_salted

_OAUTH_LIFETIME_S = 3600
"""unsecuredLoginLifetimeSeconds' default: how long a self-made unsecured token lasts"""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ClientSecurity | None:
        """The inter-broker client's security (None for a PLAINTEXT inter-broker listener)."""
        from broker.security.tls import client_context

        listener = config.inter_broker_listener_name
        protocol = next((lst.security_protocol for lst in config.listeners if lst.name == listener),
                        config.listener_security_protocol_map.get(listener, "PLAINTEXT"))
        if protocol == "PLAINTEXT":
            return None
        context = client_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
        if protocol == "SSL":
            return cls(context)
        mechanism = str(config.sasl_mechanism_inter_broker_protocol)
        text = config.listener_value(listener, "sasl.jaas.config", mechanism)
        options = dict(parse_jaas(str(text)).options) if text else {}
        if mechanism == "OAUTHBEARER":
            username = options.get("unsecuredLoginStringClaim_sub", "")
            password = ""
        else:
            username, password = options.get("username", ""), options.get("password", "")
        if mechanism not in ("PLAIN", "OAUTHBEARER", *SCRAM_HASHES) or not username:
            raise ConfigError(
                f"the inter-broker listener {listener} is {protocol}: sasl.mechanism.inter.broker.protocol "
                f"({mechanism}) must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, and "
                f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config must give the "
                "broker's own username and password (OAUTHBEARER: unsecuredLoginStringClaim_sub)",
                "sasl.mechanism.inter.broker.protocol")
        return cls(context, mechanism, username, password)


class SaslClient:
    """One authentication's client tokens: `first()`, then `next(server_token)` until it returns
    None (done); raises SaslFailure when the server's answer is wrong (a bad SCRAM signature)."""

    def __init__(self, security: ClientSecurity) -> None:
        self.security = security
        self._mechanism = security.mechanism or ""
        self._nonce = secrets.token_urlsafe(18)
        self._client_first_bare = ""
        self._server_signature = b""
        self._step = 0

    def first(self) -> bytes:
        s = self.security
        if self._mechanism == "PLAIN":
            return f"\0{s.username}\0{s.password}".encode()
        if self._mechanism == "OAUTHBEARER":
            now = int(time.time())
            claims = {"sub": s.username, "iat": now, "exp": now + _OAUTH_LIFETIME_S}

            def b64(d: dict[str, object]) -> str:
                return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

            return f"n,,\x01auth=Bearer {b64({'alg': 'none'})}.{b64(claims)}.\x01\x01".encode()
        name = s.username.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={name},r={self._nonce}"
        return f"n,,{self._client_first_bare}".encode()

    def next(self, server: bytes) -> bytes | None:
        """The answer to the server's token, or None when the exchange is over."""
        if not self._mechanism.startswith("SCRAM"):
            return None
        self._step += 1
        if self._step == 1:
            return self._client_final(server.decode())
        fields = dict(p.split("=", 1) for p in server.decode().split(",") if "=" in p)
        if not hmac.compare_digest(base64.b64decode(fields.get("v", "")), self._server_signature):
            raise SaslFailure("the server's SCRAM signature does not match")
        return None

    def _client_final(self, server_first: str) -> bytes:
        fields = dict(p.split("=", 1) for p in server_first.split(",") if "=" in p)
        nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        if not nonce.startswith(self._nonce):
            raise SaslFailure("the server's SCRAM nonce does not extend ours")
        hf = SCRAM_HASHES[self._mechanism]
        salted = hashlib.pbkdf2_hmac(hf().name, self.security.password.encode(), salt, iterations)
        credential = scram_from_salted(self._mechanism, salted, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", hf)
        signature = hmac.digest(credential.stored_key, auth_message, hf)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = hmac.digest(credential.server_key, auth_message, hf)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
