"""TLS and SASL listeners with real clients, and what a bad client gets (issue 14).

One broker for the module, with a listener of each security protocol: PLAINTEXT (where SCRAM users
are created, as Kafka's own tests bootstrap them), SASL_SSL (PEM key store, PLAIN and
SCRAM-SHA-256/512), SSL (PKCS12 key store, client certificates required) and SASL_PLAINTEXT
(PLAIN, for the raw-bytes cases). Certificates are made at test time (broker/testing/certs.py).
confluent-kafka (librdkafka) and kafka-python produce and consume over SASL_SSL with SCRAM-SHA-512
and over SSL with a client certificate; the SCRAM users are made through confluent-kafka's
AlterUserScramCredentials and read back with DescribeUserScramCredentials.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from broker.testing.certs import PASSWORD, CertificateAuthority, Issued
from broker.testing.ports import free_port
from broker.testing.process import SamsaProcess
from protocol.errors import ErrorCode
from tests.support.raw_client import RawClient, encode_request, frame, request_header

TIMEOUT = 30
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@dataclass(frozen=True)
class Secured:
    broker: SamsaProcess
    ca: CertificateAuthority
    client: Issued
    plaintext: int
    sasl_ssl: int
    ssl: int
    sasl_plaintext: int

    def sasl_ssl_conf(self, mechanism: str, user: str, password: str) -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_ssl}", "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                "ssl.ca.location": str(self.ca.pem)}

    def ssl_conf(self) -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.ssl}", "security.protocol": "SSL",
                "ssl.ca.location": str(self.ca.pem), "ssl.certificate.location": str(self.client.chain_pem),
                "ssl.key.location": str(self.client.key_pem)}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("security")
    ca = CertificateAuthority(root / "tls")
    server = ca.issue("broker")
    client = ca.issue("client", client=True)
    ports = [free_port() for _ in range(4)]
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{ports[0]},SASL_SSL://127.0.0.1:{ports[1]},"
                     f"SSL://127.0.0.1:{ports[2]},SASL_PLAINTEXT://127.0.0.1:{ports[3]}",
        # a PEM key store (key and chain in one file), which the SASL_SSL listener uses
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.pem),
        # the SSL listener: PKCS12 stores, client certificates required
        "listener.name.ssl.ssl.keystore.type": "PKCS12",
        "listener.name.ssl.ssl.keystore.location": str(server.p12),
        "listener.name.ssl.ssl.keystore.password": PASSWORD,
        "listener.name.ssl.ssl.truststore.type": "PKCS12",
        "listener.name.ssl.ssl.truststore.location": str(ca.p12),
        "listener.name.ssl.ssl.truststore.password": PASSWORD,
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN,OAUTHBEARER",
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        # KIP-368: OAUTHBEARER sessions on SASL_SSL last 1.5 s, then the client re-authenticates
        "listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms": "1500",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "1000",
        "connection.failed.authentication.delay.ms": "0",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
    }
    with SamsaProcess(root / "data", props) as broker:
        yield Secured(broker, ca, client, *ports)


def _admin(secured: Secured) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{secured.plaintext}"})


def _create_topic(secured: Secured) -> str:
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    admin = _admin(secured)  # kept referenced until the future is done
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    return topic


def _confluent_roundtrip(conf: dict[str, Any], topic: str, value: bytes) -> list[bytes]:
    producer = Producer({**conf, "acks": "all"})
    producer.produce(topic, value=value)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while not got and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
        return got
    finally:
        consumer.close()


def _kafka_python_roundtrip(topic: str, value: bytes, **security: Any) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(acks="all", **security)
    try:
        producer.send(topic, value=value).get(TIMEOUT)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=TIMEOUT * 1000,
                             **security)
    try:
        for m in consumer:
            return [m.value]
        return []
    finally:
        consumer.close()


def _scram_users(secured: Secured, *users: tuple[str, str, ScramMechanism]) -> None:
    admin = _admin(secured)
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 8192), password.encode())
        for user, password, mechanism in users])
    for f in futures.values():
        f.result(TIMEOUT)


# ---------------------------------------------------------------------------- clients that succeed


def test_scram_credentials_made_and_described_then_used_over_sasl_ssl(secured: Secured) -> None:
    _scram_users(secured, ("bob", "bob-secret", ScramMechanism.SCRAM_SHA_512),
                 ("carol", "carol-secret", ScramMechanism.SCRAM_SHA_256))
    admin = _admin(secured)
    described = admin.describe_user_scram_credentials(["bob", "carol"])
    infos = {user: [(i.mechanism, i.iterations) for i in f.result(TIMEOUT).scram_credential_infos]
             for user, f in described.items()}
    assert infos == {"bob": [(ScramMechanism.SCRAM_SHA_512, 8192)],
                     "carol": [(ScramMechanism.SCRAM_SHA_256, 8192)]}
    topic = _create_topic(secured)
    assert _confluent_roundtrip(secured.sasl_ssl_conf("SCRAM-SHA-512", "bob", "bob-secret"), topic,
                                b"scram-512") == [b"scram-512"]
    got = _kafka_python_roundtrip(
        topic, b"kafka-python", bootstrap_servers=f"127.0.0.1:{secured.sasl_ssl}", security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-secret",
        ssl_cafile=str(secured.ca.pem))
    assert got == [b"scram-512"]  # the first record of the topic
    producer = Producer({**secured.sasl_ssl_conf("SCRAM-SHA-256", "carol", "carol-secret"), "acks": "all"})
    producer.produce(topic, value=b"scram-256")
    assert producer.flush(TIMEOUT) == 0


def test_scram_credential_deleted_no_longer_authenticates(secured: Secured) -> None:
    _scram_users(secured, ("dave", "dave-secret", ScramMechanism.SCRAM_SHA_512))
    admin = _admin(secured)
    for f in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)]).values():
        f.result(TIMEOUT)
    with pytest.raises(KafkaException) as info:
        admin.describe_user_scram_credentials(["dave"])["dave"].result(TIMEOUT)
    assert info.value.args[0].code() == ErrorCode.resource_not_found
    assert _failed_login(secured, "SCRAM-SHA-512", "dave", "dave-secret")


def test_plain_over_sasl_ssl(secured: Secured) -> None:
    topic = _create_topic(secured)
    assert _confluent_roundtrip(secured.sasl_ssl_conf("PLAIN", "alice", "alice-secret"), topic,
                                b"plain") == [b"plain"]


def test_oauthbearer_unsecured_tokens_and_reauthentication(secured: Secured) -> None:
    topic = _create_topic(secured)
    conf = {"bootstrap.servers": f"127.0.0.1:{secured.sasl_ssl}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(secured.ca.pem), "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=olivia",
            "acks": "all", "linger.ms": 0}
    producer = Producer(conf)
    for i in range(3):  # the same connection lives past two session lifetimes
        producer.produce(topic, value=b"%d" % i)
        assert producer.flush(TIMEOUT) == 0
        time.sleep(1.2)
    log = secured.broker.read_log()
    oauth = [line for line in log.splitlines() if "mechanism=OAUTHBEARER" in line]
    assert not [line for line in oauth if "session_expired" in line or "authentication failed" in line], oauth


def test_ssl_with_client_certificates(secured: Secured) -> None:
    topic = _create_topic(secured)
    assert _confluent_roundtrip(secured.ssl_conf(), topic, b"ssl") == [b"ssl"]
    got = _kafka_python_roundtrip(
        topic, b"kafka-python", bootstrap_servers=f"127.0.0.1:{secured.ssl}", security_protocol="SSL",
        ssl_cafile=str(secured.ca.pem), ssl_certfile=str(secured.client.chain_pem),
        ssl_keyfile=str(secured.client.key_pem))
    assert got == [b"ssl"]


# ------------------------------------------------------------------------------------ bad clients


def _failed_login(secured: Secured, mechanism: str, user: str, password: str) -> bool:
    """True when a confluent-kafka producer cannot authenticate (librdkafka reports it)."""
    errors: list[Any] = []
    producer = Producer({**secured.sasl_ssl_conf(mechanism, user, password),
                         "error_cb": errors.append, "message.timeout.ms": 3000})
    deadline = time.monotonic() + TIMEOUT
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    return any("Authentication failed" in e.str() or "SASL authentication error" in e.str() for e in errors)


def test_wrong_password_and_unknown_user_fail_with_one_log_line(secured: Secured) -> None:
    assert _failed_login(secured, "SCRAM-SHA-512", "bob", "not-bob-secret")
    assert _failed_login(secured, "PLAIN", "nobody", "x")
    log = secured.broker.read_log()
    assert "authentication failed client=127.0.0.1:" in log
    assert "mechanism=SCRAM-SHA-512" in log and "mechanism=PLAIN" in log
    assert "not-bob-secret" not in log


def _handshake(client: RawClient, mechanism: str) -> Any:
    return client.request(SaslHandshakeRequest(mechanism=mechanism))


def test_raw_plain_wrong_password_answered_then_closed(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as c:
        assert c.request(ApiVersionsRequest(client_software_name="raw", client_software_version="1")
                         ).error_code == ErrorCode.none
        assert _handshake(c, "PLAIN").error_code == ErrorCode.none
        answer = c.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"))
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == ("Authentication failed: Invalid username or password")
        assert c.closed_by_peer(5)


def test_raw_plain_right_password_then_requests(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as c:
        assert _handshake(c, "PLAIN").error_code == ErrorCode.none
        assert c.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret")).error_code == ErrorCode.none
        assert c.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False)).brokers


def test_expired_session_closes_at_its_next_request(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as c:
        assert _handshake(c, "PLAIN").error_code == ErrorCode.none
        answer = c.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        assert answer.error_code == ErrorCode.none
        assert answer.session_lifetime.total_seconds() == 1.0  # connections.max.reauth.ms
        time.sleep(1.2)  # no re-authentication: the session has expired
        c.send_request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False))
        assert c.closed_by_peer(5)
    assert "reason=session_expired" in secured.broker.read_log()


def test_api_versions_of_an_unsupported_version_may_be_retried_before_the_handshake(secured: Secured) -> None:
    """franz-go asks ApiVersions v5 first; Kafka answers UNSUPPORTED_VERSION and lets it ask again."""
    with RawClient(secured.sasl_plaintext) as c:
        body = encode_request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 1,
                              api_version=3)
        c.send_bytes(body[:4] + struct.pack(">h", 18) + struct.pack(">h", 99) + body[8:])  # version 99
        c.recv_frame()  # UNSUPPORTED_VERSION, answered with v0's body
        assert c.request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"),
                         ).error_code == ErrorCode.none
        assert _handshake(c, "PLAIN").error_code == ErrorCode.none
        assert c.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret")).error_code == ErrorCode.none


def test_sasl_handshake_v0_then_bare_tokens(secured: Secured) -> None:
    """SaslHandshake v0: the SASL tokens follow in frames without Kafka headers (Kafka's legacy flow)."""
    with RawClient(secured.sasl_plaintext) as c:
        assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), api_version=0).error_code == ErrorCode.none
        c.send_bytes(frame(b"\0alice\0alice-secret"))
        assert c._recv_exactly(4) == b"\0\0\0\0"  # PLAIN's answer: an empty token
        assert c.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False)).brokers
    with RawClient(secured.sasl_plaintext) as c:
        assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), api_version=0).error_code == ErrorCode.none
        c.send_bytes(frame(b"\0alice\0wrong"))
        assert c.closed_by_peer(5)  # v0 has no way to say why: the connection closes


def test_unknown_mechanism_is_refused_with_the_enabled_ones(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as c:
        answer = _handshake(c, "GSSAPI")
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == ["PLAIN"]
        assert c.closed_by_peer(5)


def test_request_before_authentication_closes_the_connection(secured: Secured) -> None:
    with RawClient(secured.sasl_plaintext) as c:
        c.send_request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False))
        assert c.closed_by_peer(5)
    assert "reason=request before authentication" in secured.broker.read_log()


def test_sasl_handshake_on_a_plaintext_listener_is_illegal_state(secured: Secured) -> None:
    with RawClient(secured.plaintext) as c:
        assert _handshake(c, "PLAIN").error_code == ErrorCode.illegal_sasl_state


def test_tls_hello_on_plaintext_and_plaintext_on_tls_close_that_connection(secured: Secured) -> None:
    context = ssl.create_default_context(cafile=str(secured.ca.pem))
    with socket.create_connection(("127.0.0.1", secured.plaintext), timeout=10) as raw, \
            pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        context.wrap_socket(raw, server_hostname="localhost")
    with RawClient(secured.sasl_ssl) as c:
        c.send_bytes(encode_request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 1))
        assert c.closed_by_peer(10)
    with RawClient(secured.ssl) as c:  # no client certificate: the handshake fails
        c.send_bytes(encode_request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 1))
        assert c.closed_by_peer(10)
    with RawClient(secured.plaintext) as c:  # and everyone else is still served
        assert c.request(ApiVersionsRequest(client_software_name="raw", client_software_version="1")
                         ).error_code == ErrorCode.none
    assert "reason=tls_handshake_failed" in secured.broker.read_log()


def _raw(api_key: int, version: int, cid: int, body: bytes) -> bytes:
    """A frame with request header v1 (SaslHandshake v1 and SaslAuthenticate v0 are not flexible)."""
    return frame(request_header(api_key, version, cid, "bad", flexible=False) + body)


async def _bad_login(port: int) -> int:
    """One connection: SaslHandshake v1 PLAIN, SaslAuthenticate v0 with a wrong password; the error code."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        mechanism = b"PLAIN"
        writer.write(_raw(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism))
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        await reader.readexactly(size)
        token = b"\0alice\0wrong"
        writer.write(_raw(36, 0, 2, struct.pack(">i", len(token)) + token))
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        body = await reader.readexactly(size)
        code: int = struct.unpack_from(">h", body, 4)[0]
        assert await reader.read() == b""  # closed after the answer
        return code
    finally:
        writer.close()


def test_a_thousand_bad_logins_while_others_are_served(secured: Secured) -> None:
    topic = _create_topic(secured)
    producer = Producer({**secured.sasl_ssl_conf("PLAIN", "alice", "alice-secret"), "acks": "all",
                         "linger.ms": 0})

    async def logins() -> list[int]:
        gate = asyncio.Semaphore(50)

        async def one() -> int:
            async with gate:
                return await _bad_login(secured.sasl_plaintext)

        return await asyncio.gather(*(one() for _ in range(1000)))

    async def main() -> tuple[list[int], int]:
        task = asyncio.create_task(logins())
        sent = 0
        while not task.done():  # a real client keeps producing meanwhile
            producer.produce(topic, value=b"%d" % sent)
            sent += 1
            await asyncio.to_thread(producer.flush, TIMEOUT)
        return await task, sent

    started = time.monotonic()
    codes, sent = asyncio.run(main())
    assert codes == [ErrorCode.sasl_authentication_failed] * 1000
    assert sent > 0 and producer.flush(TIMEOUT) == 0
    assert time.monotonic() - started < 60
    assert secured.broker.read_log().count("authentication failed client=") >= 1000
    assert secured.broker.running


def test_oauthbearer_tokens_signed_by_a_jwks_key(tmp_path: Path) -> None:
    """OAuthBearerValidatorCallbackHandler: tokens are checked against the keys of a JWKS document
    (served over HTTP here), the audience and the expiry; the token's sub is the principal."""
    import http.server
    import json
    import threading

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key, stranger = (rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2))
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    document = json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}).encode()

    class Jwks(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = free_port()
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": f"http://127.0.0.1:{server.server_address[1]}/jwks",
        "sasl.oauthbearer.expected.audience": "samsa",
        "connection.failed.authentication.delay.ms": "0",
    }

    def token(signer: Any, **claims: Any) -> str:
        body = {"sub": "jwt-user", "aud": "samsa", "exp": int(time.time()) + 300, **claims}
        return jwt.encode(body, signer, algorithm="RS256", headers={"kid": "k1"})

    def delivered(signed: str) -> bool:
        """A record is delivered with this token (False at the first authentication error)."""
        errors: list[Any] = []
        done: list[Any] = []
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _: (signed, time.time() + 300),
                             "error_cb": errors.append, "message.timeout.ms": 10000})
        producer.produce("jwt", value=b"x", on_delivery=lambda err, _: done.append(err))
        deadline = time.monotonic() + 10
        while not errors and not done and time.monotonic() < deadline:
            producer.poll(0.1)
        return done == [None] and not errors

    try:
        with SamsaProcess(tmp_path / "data", props) as broker:
            assert delivered(token(key))
            assert not delivered(token(stranger))  # another key's signature
            assert not delivered(token(key, aud="elsewhere"))
            assert not delivered(token(key, exp=int(time.time()) - 60))
            assert broker.read_log().count("authentication failed") >= 3
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("kind", ["process", "inprocess"])
def test_the_pytest_plugin_starts_a_tls_only_broker(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """samsa_broker_factory and samsa_inprocess_broker_factory take the security configs too."""
    ca = CertificateAuthority(tmp_path / "tls")
    factory = request.getfixturevalue("samsa_broker_factory" if kind == "process" else "samsa_inprocess_broker_factory")
    broker = factory({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                      "ssl.keystore.location": str(ca.issue("broker").pem),
                      "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.pem)})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SSL",
                         "ssl.ca.location": str(ca.pem)})
    producer.produce("plugin-tls", value=b"x")
    assert producer.flush(TIMEOUT) == 0
