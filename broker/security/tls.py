"""TLS contexts from Kafka's ssl.* configs: the standard library's ssl module, key and trust stores
read with the cryptography package.

Stores: PEM (a file with the private key, possibly encrypted, and the certificate chain; or
ssl.keystore.key and ssl.keystore.certificate.chain inline; trust stores are PEM certificates) and
PKCS12. JKS is refused at start-up (broker/config/security.py): no maintained Python library reads
it. OpenSSL loads a key only from a file, so the key and chain are written, unencrypted, to a file
of mode 0600 in a private temporary directory that is removed as soon as the context holds them.

A TLS connection cannot use sendfile: record bytes must pass through OpenSSL in this process, so
the fetch path reads each file region into memory and writes it to the TLS transport (see
network.py); PLAINTEXT and SASL_PLAINTEXT listeners keep zero-copy.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from broker.config import BrokerConfig, ConfigError

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.S)
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """Where a key or trust store comes from (one listener's view of the ssl.* configs)."""

    store_type: str
    location: str | None
    password: str | None
    key_password: str | None = None
    inline_key: str | None = None
    inline_chain: str | None = None
    key: str = "ssl.keystore.location"
    """the config named in errors"""


def _read(spec: StoreSpec) -> bytes:
    assert spec.location is not None
    try:
        return Path(spec.location).read_bytes()
    except OSError as e:
        raise ConfigError(f"{spec.key} {spec.location} cannot be read: {e.strerror or e}", spec.key) from None


def _password(text: str | None) -> bytes | None:
    return text.encode() if text else None


def keystore_pem(spec: StoreSpec) -> tuple[bytes, bytes]:
    """(unencrypted PKCS#8 private key, certificate chain) of a key store, both PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        if spec.store_type == "PKCS12":
            key, cert, extra = pkcs12.load_key_and_certificates(
                _read(spec), _password(spec.password))
            if key is None or cert is None:
                raise ConfigError(f"{spec.key} {spec.location} holds no private key with a "
                                  "certificate", spec.key)
            certs = [cert, *extra]
        else:
            data = (_read(spec) if spec.location else
                    (spec.inline_key or "").encode() + b"\n" + (spec.inline_chain or "").encode())
            blocks = [(m.group(1), m.group(0)) for m in _PEM_BLOCK.finditer(data)]
            keys = [b for kind, b in blocks if kind.endswith(b"PRIVATE KEY")]
            if len(keys) != 1:
                raise ConfigError(f"{spec.key}: a PEM key store must hold exactly one private key "
                                  f"(found {len(keys)})", spec.key)
            key = serialization.load_pem_private_key(
                keys[0], _password(spec.key_password or spec.password))
            certs = [x509.load_pem_x509_certificate(b) for kind, b in blocks if kind == b"CERTIFICATE"]
            if not certs:
                raise ConfigError(f"{spec.key}: the PEM key store holds no certificate", spec.key)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{spec.key} {spec.location or '(inline)'} cannot be loaded: {e}",
                          spec.key) from None
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def truststore_pem(spec: StoreSpec) -> str:
    """The trusted certificates of a trust store, PEM (for SSLContext.load_verify_locations)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        if spec.store_type == "PKCS12":
            store = pkcs12.load_pkcs12(_read(spec), _password(spec.password))
            certs = [c.certificate for c in store.additional_certs]
            if store.cert is not None:
                certs.append(store.cert.certificate)
        else:
            data = _read(spec) if spec.location else (spec.inline_chain or "").encode()
            certs = x509.load_pem_x509_certificates(data)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{spec.key} {spec.location or '(inline)'} cannot be loaded: {e}",
                          spec.key) from None
    if not certs:
        raise ConfigError(f"{spec.key} {spec.location or '(inline)'} holds no certificate", spec.key)
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def load_key_pair(context: ssl.SSLContext, key_pem: bytes, chain_pem: bytes) -> None:
    """Give `context` a certificate chain and its key (through a 0600 file removed at once)."""
    with tempfile.TemporaryDirectory(prefix="samsa-tls-") as tmp:
        path = os.path.join(tmp, "key-and-chain.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem + chain_pem)
        context.load_cert_chain(path)


def write_pem_files(directory: Path, spec: StoreSpec | None, trust: StoreSpec | None) -> dict[str, str]:
    """For clients that take only file names (kazoo): the key pair and trusted certificates as
    PEM files (mode 0600) in `directory`; returns kazoo's keyword arguments."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    out: dict[str, str] = {}

    def write(name: str, data: bytes) -> str:
        path = directory / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return str(path)

    if spec is not None:
        key_pem, chain_pem = keystore_pem(spec)
        out["keyfile"] = write("zookeeper-key.pem", key_pem)
        out["certfile"] = write("zookeeper-chain.pem", chain_pem)
    if trust is not None:
        out["ca"] = write("zookeeper-ca.pem", truststore_pem(trust).encode())
    return out


def _keystore(config: BrokerConfig, listener: str) -> StoreSpec:
    return StoreSpec(config.listener_value(listener, "ssl.keystore.type"),
                     config.listener_value(listener, "ssl.keystore.location"),
                     config.listener_value(listener, "ssl.keystore.password"),
                     config.listener_value(listener, "ssl.key.password"),
                     config.listener_value(listener, "ssl.keystore.key"),
                     config.listener_value(listener, "ssl.keystore.certificate.chain"))


def _truststore(config: BrokerConfig, listener: str) -> StoreSpec | None:
    location = config.listener_value(listener, "ssl.truststore.location")
    inline = config.listener_value(listener, "ssl.truststore.certificates")
    if not location and not inline:
        return None
    password = config.listener_value(listener, "ssl.truststore.password")
    return StoreSpec(str(config.listener_value(listener, "ssl.truststore.type")), location,
                     password, inline_chain=inline, key="ssl.truststore.location")


def _versions(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> None:
    enabled = [_VERSIONS[p] for p in config.listener_value(listener, "ssl.enabled.protocols")]
    if enabled:
        context.minimum_version, context.maximum_version = min(enabled), max(enabled)
    suites = config.listener_value(listener, "ssl.cipher.suites")
    if suites:
        try:
            context.set_ciphers(":".join(suites))
        except ssl.SSLError:
            raise ConfigError(f"ssl.cipher.suites {','.join(suites)}: no cipher suite OpenSSL "
                              "knows (use OpenSSL's names)", "ssl.cipher.suites") from None


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener (ssl.client.auth decides whether a client
    certificate is required, requested or not asked for)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, config, listener)
    load_key_pair(context, *keystore_pem(_keystore(config, listener)))
    client_auth = config.listener_value(listener, "ssl.client.auth")
    if client_auth != "none":
        trust = _truststore(config, listener)
        if trust is None:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        else:
            context.load_verify_locations(cadata=truststore_pem(trust))
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The inter-broker client's TLS context for connections to `listener` of other brokers: the
    same trust store (else the system's), this broker's key store as its client certificate, the
    host name checked when ssl.endpoint.identification.algorithm is https."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, config, listener)
    if config.listener_value(listener, "ssl.protocol") == "TLSv1.2":
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    trust = _truststore(config, listener)
    if trust is None:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        context.load_verify_locations(cadata=truststore_pem(trust))
    algorithm = str(config.listener_value(listener, "ssl.endpoint.identification.algorithm") or "")
    context.check_hostname = algorithm.lower() == "https"
    spec = _keystore(config, listener)
    if spec.location or spec.inline_key:
        load_key_pair(context, *keystore_pem(spec))
    return context
