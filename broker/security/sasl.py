"""SASL mechanisms on the server side, as Kafka's SaslServer implementations answer them.

- PLAIN (PlainSaslServer): `authzid NUL user NUL password`; users are the `user_<name>="<password>"`
  options of the listener's PlainLoginModule JAAS config.
- SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, ScramSaslServer): credentials from the SCRAM credential
  store (salted and hashed: only the stored key and server key are kept). Written here with hmac
  and hashlib rather than a SCRAM library: the protocol is four messages, and scramp, the
  maintained one, refuses salts shorter than 12 bytes that Kafka's stores accept.
- OAUTHBEARER (RFC 7628, OAuthBearerSaslServer): Kafka's unsecured validator for development
  (alg "none" tokens: the principal claim, exp, iat, required scopes), or signed tokens checked
  against a JWKS document with PyJWT. A token that fails gets `{"status":"invalid_token"}` as the
  server's challenge; the client answers \\x01 and authentication fails with that message.

Failures raise `SaslFailure`; `client_message` is what Kafka shows the client: its own text for
Kafka's SaslAuthenticationException cases, and for the others (unknown user, wrong password or
proof: Kafka's SaslException) only `Authentication failed during authentication due to invalid
credentials with SASL mechanism <m>`, so a client cannot tell an unknown user from a wrong
password.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from controller.security_model import SCRAM_MIN_ITERATIONS, ScramCredential


class SaslFailure(Exception):
    """Authentication failed; `client_message` None: Kafka's generic invalid-credentials text."""

    def __init__(self, reason: str, client_message: str | None = None) -> None:
        super().__init__(reason)
        self.client_message = client_message


def generic_failure(mechanism: str, reauthenticating: bool = False) -> str:
    what = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"


# ---- JAAS ------------------------------------------------------------------------------------

_JAAS = re.compile(r'\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;\s*$', re.S)
_OPTION = re.compile(r'([\w.\-]+)\s*=\s*(?:"((?:\\.|[^"\\])*)"|([^\s;"]+))')


@dataclass(frozen=True, slots=True)
class JaasConfig:
    login_module: str
    options: Mapping[str, str]


def parse_jaas(text: str) -> JaasConfig:
    """One JAAS login module entry: `Module required key="value" ...;`."""
    m = _JAAS.fullmatch(text)
    if m is None:
        raise ValueError(f"JAAS config entry not in the form 'LoginModule flag key=value ...;': {text!r}")
    options = {o.group(1): (o.group(3) if o.group(2) is None else re.sub(r"\\(.)", r"\1", o.group(2)))
               for o in _OPTION.finditer(m.group(3))}
    return JaasConfig(m.group(1), options)


# ---- mechanisms --------------------------------------------------------------------------------

class SaslServer(Protocol):
    mechanism: str
    complete: bool
    authorization_id: str
    credential_expiry_ms: int | None
    """when the credential ends (an OAuth token's exp), for KIP-368's session lifetime"""

    async def evaluate(self, token: bytes) -> bytes:
        """One client token -> the server's answer; raises SaslFailure."""


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id = ""
        self.credential_expiry_ms: int | None = None

    async def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            raise SaslFailure("bad PLAIN token", f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authzid, username, password = parts
        if not username:
            raise SaslFailure("no username", "Authentication failed: username not specified")
        if not password:
            raise SaslFailure("no password", "Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure(f"invalid username or password user={username}",
                              "Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslFailure("authorization id differs", "Authentication failed: Client requested "
                              "an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


SCRAM_HASHES: Mapping[str, Callable[..., Any]] = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_VALUE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"
_CLIENT_FIRST = re.compile(rf"n,(a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
                           rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>(?:,[A-Za-z]+={_VALUE})*)")
_CLIENT_FINAL = re.compile(rf"c=(?P<channel>[A-Za-z0-9+/=]*),r=(?P<nonce>{_PRINTABLE})"
                           rf"(?:,[A-Za-z]+={_VALUE})*,p=(?P<proof>[A-Za-z0-9+/=]+)")


def scram_username(saslname: str) -> str:
    """RFC 5802 saslname -> user name (=2C is a comma, =3D an equals sign)."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


def scram_credential(mechanism: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """Kafka's ScramFormatter: the salted password's stored key and server key."""
    salted = hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism]().name, password.encode(), salt, iterations)
    return scram_from_salted(mechanism, salted, salt, iterations)


def scram_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """A credential from a salted password (AlterUserScramCredentials sends that, not the password)."""
    hf = SCRAM_HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", hf)
    return ScramCredential(salt, hf(client_key).digest(), hmac.digest(salted, b"Server Key", hf), iterations)


class ScramServer:
    """States: RECEIVE_CLIENT_FIRST -> RECEIVE_CLIENT_FINAL -> COMPLETE; any failure -> FAILED."""

    def __init__(self, mechanism: str, credentials: Callable[[str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self._hf = SCRAM_HASHES[mechanism]
        self._credentials = credentials
        self.complete = False
        self.authorization_id = ""
        self.credential_expiry_ms: int | None = None
        self._state = "RECEIVE_CLIENT_FIRST"
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    async def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            self._state = "FAILED"
            raise SaslFailure("SCRAM message not UTF-8") from None
        if self._state == "RECEIVE_CLIENT_FIRST":
            return self._client_first(text)
        if self._state == "RECEIVE_CLIENT_FINAL":
            return self._client_final(text)
        raise SaslFailure(f"unexpected SCRAM message in state {self._state}")

    def _client_first(self, text: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            self._state = "FAILED"
            raise SaslFailure("invalid SCRAM client first message")
        username = scram_username(m.group("saslname"))
        credential = self._credentials(username)
        if credential is None:
            self._state = "FAILED"
            raise SaslFailure(f"unknown user={username}")
        authzid = m.group("authzid")
        if authzid and authzid != username:
            self._state = "FAILED"
            raise SaslFailure("authorization id differs", "Authentication failed: Client requested "
                              "an authorization id that is different from username")
        if credential.iterations < SCRAM_MIN_ITERATIONS:
            self._state = "FAILED"
            raise SaslFailure(f"iterations {credential.iterations} below {SCRAM_MIN_ITERATIONS}")
        self.authorization_id = username
        self._credential = credential
        self._nonce = m.group("nonce") + secrets.token_urlsafe(24).replace("-", "A")
        self._client_first_bare = text.split(",", 2)[2]  # after the gs2 header "n,[a=...],"
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "RECEIVE_CLIENT_FINAL"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._state = "FAILED"
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise SaslFailure("invalid SCRAM client final message")
        if m.group("nonce") != self._nonce:
            raise SaslFailure("invalid client nonce in the final client message")
        credential = self._credential
        assert credential is not None
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, self._hf)
        try:
            proof = base64.b64decode(m.group("proof"), validate=True)
        except ValueError:
            raise SaslFailure("invalid client proof") from None
        if len(proof) != len(signature):
            raise SaslFailure("invalid client proof")
        client_key = bytes(a ^ b for a, b in zip(signature, proof))
        if not hmac.compare_digest(self._hf(client_key).digest(), credential.stored_key):
            raise SaslFailure(f"invalid client credentials user={self.authorization_id}")
        server_signature = hmac.digest(credential.server_key, auth_message, self._hf)
        self._state = "COMPLETE"
        self.complete = True
        self._credential = None
        return b"v=" + base64.b64encode(server_signature)


_OAUTH_RESPONSE = re.compile(
    r"n,(a=(?P<authzid>[^,]*))?,\x01(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*)\x01")
_BEARER = re.compile(r"(?P<scheme>\w+)[ ]+(?P<token>[-_.a-zA-Z0-9]+)")


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    """OAUTHBEARER validation: the unsecured validator's JAAS options, or JWKS (PyJWT)."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0
    jwks_url: str | None = None
    audience: tuple[str, ...] = ()
    issuer: str | None = None


class _InvalidToken(Exception):
    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


def _b64url_json(part: str) -> dict[str, Any]:
    data = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def unsecured_claims(token: str, settings: OAuthSettings, now_ms: int) -> tuple[str, int]:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: (principal, expiry ms)."""
    parts = token.split(".")
    if len(parts) != 3 or parts[2]:
        raise _InvalidToken("Unsecured JWS compact serializations must have 3 dot-separated "
                            "Base64URL-encoded values and the third must be empty")
    try:
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
    except ValueError as e:
        raise _InvalidToken(f"invalid JWS: {e}") from None
    if header.get("alg", "none") != "none":
        raise _InvalidToken("an unsecured JWS must have alg none")
    principal = claims.get(settings.principal_claim)
    if not isinstance(principal, str) or not principal:
        raise _InvalidToken(f"Required claim missing: {settings.principal_claim}")
    skew = settings.clock_skew_ms
    iat = claims.get("iat")
    if iat is not None:
        if not isinstance(iat, (int, float)):
            raise _InvalidToken("The iat claim had the incorrect type")
        if iat * 1000 > now_ms + skew:
            raise _InvalidToken(f"The indicated time ({iat * 1000:.0f} ms) is in the future")
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)):
        raise _InvalidToken("Required claim missing: exp")
    if now_ms >= exp * 1000 + skew:
        raise _InvalidToken(f"The indicated time ({exp * 1000:.0f} ms) has passed")
    if iat is not None and exp <= iat:
        raise _InvalidToken("The expiration time is not after the issued-at time")
    _check_scope(claims.get(settings.scope_claim), settings.required_scope)
    return principal, int(exp * 1000)


def _check_scope(scope: object, required: tuple[str, ...]) -> None:
    have = set(scope.split()) if isinstance(scope, str) else set(scope) if isinstance(scope, list) else set()
    for item in required:
        if item not in have:
            raise _InvalidToken(f"The provided scope ({sorted(have)}) was missing a required scope ({item})",
                                scope=" ".join(required))


class OAuthBearerServer:
    mechanism = "OAUTHBEARER"

    def __init__(self, settings: OAuthSettings, jwks: Any = None) -> None:
        self._settings = settings
        self._jwks = jwks
        self.complete = False
        self.authorization_id = ""
        self.credential_expiry_ms: int | None = None
        self._error: str | None = None

    async def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise SaslFailure(f"invalid token {self._error}", self._error)
        self._error = None
        m = _OAUTH_RESPONSE.fullmatch(token.decode("utf-8", "replace"))
        if m is None:
            raise SaslFailure("invalid OAUTHBEARER client first message")
        pairs = dict(kv.split("=", 1) for kv in m.group("kvpairs").split("\x01") if kv)
        bearer = _BEARER.fullmatch(pairs.get("auth", ""))
        if bearer is None or bearer.group("scheme").lower() != "bearer":
            raise SaslFailure("invalid OAUTHBEARER auth value")
        try:
            if self._jwks is not None:
                principal, expiry = await asyncio.to_thread(self._signed, bearer.group("token"))
            else:
                principal, expiry = unsecured_claims(bearer.group("token"), self._settings,
                                                     int(time.time() * 1000))
        except _InvalidToken as e:
            status = "insufficient_scope" if e.scope is not None else "invalid_token"
            self._error = json.dumps({"status": status, **({"scope": e.scope} if e.scope else {})},
                                     separators=(",", ":"))
            return self._error.encode()
        authzid = m.group("authzid") or ""
        if authzid and authzid != principal:
            raise SaslFailure("authorization id differs", "Authentication failed: Client requested an "
                              f"authorization id ({authzid}) that is different from the token's "
                              f"principal name ({principal})")
        self.authorization_id = principal
        self.credential_expiry_ms = expiry
        self.complete = True
        return b""

    def _signed(self, token: str) -> tuple[str, int]:
        """A signed token checked with PyJWT against the JWKS document's keys."""
        import jwt

        s = self._settings
        try:
            key = self._jwks.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token, key.key, algorithms=[key.algorithm_name] if getattr(key, "algorithm_name", None)
                else ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256"],
                audience=list(s.audience) or None, issuer=s.issuer, leeway=s.clock_skew_ms / 1000,
                options={"require": ["exp", "sub"] if s.principal_claim == "sub" else ["exp"],
                         "verify_aud": bool(s.audience)})
        except jwt.PyJWTError as e:
            raise _InvalidToken(str(e)) from None
        principal = claims.get(s.principal_claim)
        if not isinstance(principal, str) or not principal:
            raise _InvalidToken(f"Required claim missing: {s.principal_claim}")
        _check_scope(claims.get(s.scope_claim), s.required_scope)
        return principal, int(claims["exp"] * 1000)
