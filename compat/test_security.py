# Over 700 lines: one differential of the whole secured setup (TLS, SASL, ACLs) against Kafka, sharing one pair of secured brokers.
"""TLS, SASL and ACLs against Samsa and Apache Kafka 4.3.1 with the same settings (issue 14).

Both brokers get the same secured settings (`secured_settings`): besides PLAINTEXT, a SASL_SSL
listener (SCRAM-SHA-512, PLAIN, OAUTHBEARER) and an SSL listener requiring client certificates,
PKCS12 key and trust stores made at test time (broker/testing/certs.py), the authorizer (KRaft's
StandardAuthorizer class name) with super.users User:admin and User:ANONYMOUS (the PLAINTEXT and
controller listeners). On each, kafka-configs.sh creates the SCRAM user and kafka-acls.sh grants
it and the client certificate's principal a topic and group prefix. Then, each observed on both:

- Java kafka-clients 4.x and 3.9, confluent-kafka, kafka-python, aiokafka, franz-go and kafkajs
  produce and consume over SASL_SSL with SCRAM-SHA-512 and over SSL with a client certificate;
  Java and confluent-kafka also with PLAIN and with unsecured OAUTHBEARER tokens; Spark's
  connector writes and reads over SASL_SSL;
- the ACL matrix (a user without ACLs, then with some, then with them deleted) through
  confluent-kafka's clients and AdminClient;
- a KIP-848 consumer subscribed by a regular expression is assigned only the topics it may describe;
- ConsumerGroupDescribe and ShareGroupDescribe, raw, of groups assigned a topic the caller may
  not describe (TOPIC_AUTHORIZATION_FAILED);
- bad SASL clients, raw bytes over TLS.

Every scenario's observations on Samsa must equal Kafka's (compat/differences.py lists the one
allowed difference).
"""
from __future__ import annotations

import ssl
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from broker.testing.certs import PASSWORD, CertificateAuthority, Issued
from broker.testing.ports import free_port
from broker.testing.process import SamsaProcess
from compat.conftest import SAMSA_SETTINGS, TARGETS, Targets
from compat.jvm import CLIENT_CLASSPATHS, run_main, run_tool
from compat.kafka import TARGET, KafkaJarProcess
from compat.test_go_node_clients import CLIENT_NAMES as PROGRAMS
from compat.test_go_node_clients import (
    node_script,  # noqa: F401 - the fixture, used by name
    run_program,
)
from protocol.errors import ErrorCode
from tests.support import consumer_protocol, fidelity
from tests.support.raw_client import RawClient

TIMEOUT = 30
PREFIX = "sec-"
CLIENT_PRINCIPAL = "User:CN=client,O=samsa"  # the client certificate's subject, as Kafka names it
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@dataclass(frozen=True)
class Tls:
    ca: CertificateAuthority
    server: Issued
    client: Issued


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    ca = CertificateAuthority(tmp_path_factory.mktemp("compat-tls"))
    return Tls(ca, ca.issue("broker"), ca.issue("client", client=True))


def secured_settings(tls: Tls) -> dict[str, str]:
    """The settings both brokers get besides their listeners."""
    plain = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    return {
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tls.server.p12),
        "ssl.keystore.password": PASSWORD,
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(tls.ca.p12),
        "ssl.truststore.password": PASSWORD,
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN,OAUTHBEARER",
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        # KIP-368: PLAIN sessions on SASL_SSL last a minute (SaslAuthenticate answers the lifetime)
        "listener.name.sasl_ssl.plain.connections.max.reauth.ms": "60000",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            f'password="admin-secret" {plain};',
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
    }


@dataclass
class Secured:
    """A secured broker's addresses, by listener."""
    target: Any
    ports: dict[str, int]

    @property
    def name(self) -> str:
        return str(self.target.name)

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def _start_samsa(tls: Tls) -> Callable[[Path], SamsaProcess]:
    def start(directory: Path) -> SamsaProcess:
        ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port(), "SSL": free_port()}
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
        return SamsaProcess(directory, {**SAMSA_SETTINGS, **secured_settings(tls), "listeners": listeners}).start()

    return start


def _start_kafka(tls: Tls) -> Callable[[Path], KafkaJarProcess]:
    def start(directory: Path) -> KafkaJarProcess:
        kafka = KafkaJarProcess(secured_settings(tls), data_dir=directory,
                                listeners={"SASL_SSL": free_port(), "SSL": free_port()})
        kafka.name = "kafka-secure"
        return kafka.start()

    return start


_prepared: dict[str, list[dict]] = {}


@pytest.fixture(params=TARGETS)
def kafka_target(request: pytest.FixtureRequest, targets: Targets, tls: Tls) -> Any:
    """This module's targets: a secured Samsa and a secured Kafka (compared by `differential`)."""
    targets.register("samsa-secure", _start_samsa(tls))
    targets.register("kafka-secure", _start_kafka(tls))
    return targets.get(f"{request.param}-secure")


def secured(target: Any) -> Secured:
    if isinstance(target, KafkaJarProcess):
        return Secured(target, {"PLAINTEXT": target.port, **target.extra_listeners})
    proc = target.process
    ports = {}
    for item in proc.overrides["listeners"].split(","):
        name, _, address = item.partition("://")
        ports[name] = int(address.rsplit(":", 1)[1])
    return Secured(target, ports)


def _tool_lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.strip()]


def _prepare(target: Any) -> list[dict]:
    """Once per broker: the SCRAM user (kafka-configs.sh) and the ACLs (kafka-acls.sh) of the
    clients' scenarios. Returns what the tools printed."""
    s = secured(target)
    if s.name in _prepared:
        return _prepared[s.name]
    server = ["--bootstrap-server", s.bootstrap()]
    obs: list[dict] = []
    out = run_tool("kafka-configs", *server, "--alter", "--add-config",
                   "SCRAM-SHA-512=[iterations=8192,password=bob-secret]", "--entity-type", "users",
                   "--entity-name", "bob").stdout
    obs.append({"step": "kafka-configs-alter", "out": _tool_lines(out)})
    # (kafka-configs.sh --describe of users also sends DescribeClientQuotas, which Samsa does not serve)
    admin = AdminClient({"bootstrap.servers": s.bootstrap()})

    def credentials() -> list[str]:
        try:
            described = admin.describe_user_scram_credentials(["bob"])["bob"].result(TIMEOUT)
        except KafkaException as e:
            return [str(e.args[0].name())]
        return [f"{i.mechanism.name}/{i.iterations}" for i in described.scram_credential_infos]

    obs.append({"step": "scram-described", "credentials": _eventually(credentials, ["SCRAM_SHA_512/8192"])})
    for principal in ("User:bob", CLIENT_PRINCIPAL):
        out = run_tool("kafka-acls", *server, "--add", "--allow-principal", principal, "--operation", "All",
                       "--topic", PREFIX, "--group", PREFIX, "--resource-pattern-type", "prefixed").stdout
        obs.append({"step": "kafka-acls-add", "principal": principal, "out": sorted(_tool_lines(out))})
    out = run_tool("kafka-acls", *server, "--list", "--topic", PREFIX, "--resource-pattern-type", "prefixed").stdout
    obs.append({"step": "kafka-acls-list", "out": sorted(_tool_lines(out))})
    _prepared[s.name] = obs
    time.sleep(1)  # Kafka's authorizer and SCRAM cache follow its metadata log
    return obs


def _client_conf(s: Secured, tls: Tls, how: str) -> dict[str, str]:
    """librdkafka's settings for "scram" (SASL_SSL, SCRAM-SHA-512 as bob), "ssl" (client certificate),
    "oauthbearer" (SASL_SSL, an unsecured token for bob) or "plain-<user>" (SASL_SSL, PLAIN)."""
    if how == "oauthbearer":
        return {"bootstrap.servers": s.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": "true",
                "sasl.oauthbearer.config": "principal=bob", "ssl.ca.location": str(tls.ca.pem)}
    if how == "plain":
        how = "plain-admin"
    if how == "ssl":
        return {"bootstrap.servers": s.bootstrap("SSL"), "security.protocol": "SSL",
                "ssl.ca.location": str(tls.ca.pem), "ssl.certificate.location": str(tls.client.chain_pem),
                "ssl.key.location": str(tls.client.key_pem)}
    mechanism, user, password = ("SCRAM-SHA-512", "bob", "bob-secret") if how == "scram" else \
        ("PLAIN", how.removeprefix("plain-"), PLAIN_USERS[how.removeprefix("plain-")])
    return {"bootstrap.servers": s.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(tls.ca.pem)}


def _java_props(s: Secured, tls: Tls, how: str, path: Path) -> Path:
    if how == "ssl":
        props = {"bootstrap.servers": s.bootstrap("SSL"), "security.protocol": "SSL",
                 "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tls.client.p12),
                 "ssl.keystore.password": PASSWORD}
    else:
        mechanism, jaas = {
            "scram": ("SCRAM-SHA-512", 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                       'username="bob" password="bob-secret";'),
            "plain": ("PLAIN", 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                               'username="admin" password="admin-secret";'),
            "oauthbearer": ("OAUTHBEARER", 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule '
                                           'required unsecuredLoginStringClaim_sub="bob";'),
        }[how]
        props = {"bootstrap.servers": s.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
                 "sasl.mechanism": mechanism, "sasl.jaas.config": jaas}
    props.update({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(tls.ca.p12),
                  "ssl.truststore.password": PASSWORD})
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def _confluent_roundtrip(conf: dict[str, str], topic: str, group: str) -> list[dict]:
    obs: list[dict] = []
    producer = Producer({**conf, "acks": "all"})
    for i in range(2):
        producer.produce(topic, value=b"v%d" % i, partition=0,
                         on_delivery=lambda err, m: obs.append(
                             {"step": "produced", "err": err and err.name(), "offset": m.offset()}))
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    got: list[str] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 2 and time.monotonic() < deadline:
            m = consumer.poll(0.3)
            if m is not None and m.error() is None:
                got.append(f"{m.offset()}:{m.value().decode()}")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    obs.append({"step": "consumed", "records": got})
    return obs


def _kafka_python_roundtrip(security: dict[str, Any], topic: str, group: str) -> list[dict]:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(acks="all", **security)
    try:
        offsets = [producer.send(topic, value=b"v%d" % i, partition=0).get(TIMEOUT).offset for i in range(2)]
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=10_000,
                             **security)
    got: list[str] = []
    try:
        for m in consumer:
            got.append(f"{m.offset}:{m.value.decode()}")
            if len(got) == 2:
                break
    finally:
        consumer.close()
    return [{"step": "produced", "offsets": offsets}, {"step": "consumed", "records": got}]


def _aiokafka_roundtrip(security: dict[str, Any], topic: str, group: str) -> list[dict]:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[dict]:
        producer = AIOKafkaProducer(acks="all", **security)
        await producer.start()
        try:
            offsets = [(await producer.send_and_wait(topic, value=b"v%d" % i, partition=0)).offset for i in range(2)]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **security)
        await consumer.start()
        got: list[str] = []
        try:
            while len(got) < 2:
                m = await asyncio.wait_for(consumer.getone(), TIMEOUT)
                got.append(f"{m.offset}:{m.value.decode()}")  # type: ignore[union-attr]
        finally:
            await consumer.stop()
        return [{"step": "produced", "offsets": offsets}, {"step": "consumed", "records": got}]

    return asyncio.run(run())


CLIENTS = {  # client: the ways it connects here
    "confluent-kafka": ("scram", "ssl", "plain", "oauthbearer"),
    "kafka-python": ("scram", "ssl"),
    "aiokafka": ("scram", "ssl"),
    **{cp: ("scram", "ssl", "plain", "oauthbearer") for cp in CLIENT_CLASSPATHS},
}
CLIENT_NAMES = {"confluent-kafka": "confluent-kafka", "kafka-python": "kafka-python", "aiokafka": "aiokafka",
                "clients-3.9": "java 3.9", "clients-4": "java 4.x"}
SCENARIOS = {"scram": "SASL_SSL with SCRAM-SHA-512", "ssl": "SSL with a client certificate",
             "plain": "SASL_SSL with PLAIN", "oauthbearer": "SASL_SSL with OAUTHBEARER (unsecured tokens)"}


def _params() -> list[Any]:
    return [pytest.param(client, how, id=f"{client}-{how}", marks=pytest.mark.compat(
        client=CLIENT_NAMES[client], scenario=SCENARIOS[how]))
        for client, hows in CLIENTS.items() for how in hows]


def _python_security(s: Secured, tls: Tls, how: str, client: str) -> dict[str, Any]:
    """kafka-python's and aiokafka's settings (the same names) for "scram" or "ssl"."""
    if client == "aiokafka":
        from aiokafka.helpers import create_ssl_context

        context = create_ssl_context(cafile=str(tls.ca.pem), certfile=str(tls.client.chain_pem) if how == "ssl" else None,
                                     keyfile=str(tls.client.key_pem) if how == "ssl" else None)
        security: dict[str, Any] = {"ssl_context": context}
    else:
        security = {"ssl_cafile": str(tls.ca.pem)}
        if how == "ssl":
            security.update(ssl_certfile=str(tls.client.chain_pem), ssl_keyfile=str(tls.client.key_pem))
    if how == "ssl":
        security.update(bootstrap_servers=s.bootstrap("SSL"), security_protocol="SSL")
    else:
        security.update(bootstrap_servers=s.bootstrap("SASL_SSL"), security_protocol="SASL_SSL",
                        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-secret")
    return security


@pytest.mark.compat(client="kafka-configs.sh, kafka-acls.sh", scenario="SCRAM users and ACLs by the CLI tools")
def test_cli_tools_prepare(kafka_target: Any, differential: Callable[..., Any]) -> None:
    obs = differential("security-prepare", _prepare)
    steps = {o["step"]: o for o in obs}
    assert steps["scram-described"]["credentials"] == ["SCRAM_SHA_512/8192"]
    assert any("principal=User:bob, host=*, operation=ALL, permissionType=ALLOW" in line
               for line in steps["kafka-acls-list"]["out"])


@pytest.mark.parametrize(("client", "how"), _params())
def test_secured_clients(client: str, how: str, kafka_target: Any, differential: Callable[..., Any],
                         tls: Tls, tmp_path: Path) -> None:
    topic = group = f"{PREFIX}{client}-{how}"

    def run(target: Any) -> list[dict]:
        _prepare(target)
        s = secured(target)
        if client == "confluent-kafka":
            return _confluent_roundtrip(_client_conf(s, tls, how), topic, group)
        if client == "kafka-python":
            return _kafka_python_roundtrip(_python_security(s, tls, how, client), topic, group)
        if client == "aiokafka":
            return _aiokafka_roundtrip(_python_security(s, tls, how, client), topic, group)
        props = _java_props(s, tls, how, tmp_path / f"{s.name}.properties")
        # kafka-clients declares jackson-databind optional; its unsecured OAUTHBEARER tokens need it
        jackson = sorted((TARGET / "kafka").glob("jackson-*.jar")) if how == "oauthbearer" else []
        return run_main(client, "Secure", str(props), topic, group, extra_jars=jackson)[1:]

    obs = differential(f"security-{client}-{how}", run)
    consumed = [o for o in obs if o["step"] == "consumed"]
    assert consumed and consumed[0]["records"] == ["0:v0", "1:v1"]


def _error_name(call: Callable[[], Any]) -> str:
    try:
        call()
        return ""
    except KafkaException as e:
        return str(e.args[0].name())


def _visible(admin: AdminClient) -> list[str]:
    return sorted(t for t in admin.list_topics(timeout=TIMEOUT).topics if t.startswith(PREFIX + "matrix"))


def _produce_error(conf: dict[str, str], topic: str) -> str:
    errors: list[str] = []
    producer = Producer({**conf, "message.timeout.ms": 5000, "acks": "all"})
    producer.produce(topic, value=b"x", on_delivery=lambda err, m: errors.append(err.name() if err else ""))
    producer.flush(TIMEOUT)
    return errors[0] if errors else "not delivered"


def _consume_as(conf: dict[str, str], topic: str, group: str) -> str:
    """What a group consumer first gets: "record <offset>" or the error's name."""
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = consumer.poll(0.3)
            if m is not None:
                return f"record {m.offset()}" if m.error() is None else str(m.error().name())
        return "nothing"
    finally:
        consumer.close()


def _eventually(observe: Callable[[], Any], want: Any) -> Any:
    """Kafka's authorizer follows its metadata log: what an ACL change allows shows a moment later."""
    deadline = time.monotonic() + 10
    got = observe()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.2)
        got = observe()
    return got


def _acl_matrix(target: Any, tls: Tls) -> list[dict]:
    _prepare(target)
    s = secured(target)
    alice_conf = _client_conf(s, tls, "plain-alice")
    admin = AdminClient({"bootstrap.servers": s.bootstrap()})  # ANONYMOUS: a super user
    alice = AdminClient(alice_conf)
    topic = f"{PREFIX}matrix-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    obs: list[dict] = [{"step": "no-acls", "visible": _eventually(lambda: _visible(alice), []),
                        "produce": _produce_error(alice_conf, topic)}]
    obs.append({"step": "alice-create-topic", "err": _error_name(
        lambda: alice.create_topics([NewTopic(topic + "-new", 1, 1)])[topic + "-new"].result(TIMEOUT))})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    obs.append({"step": "alice-describe-configs", "err": _error_name(
        lambda: alice.describe_configs([resource])[resource].result(TIMEOUT))})
    anything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    seen: list[Any] = []
    obs.append({"step": "alice-describe-acls", "err": _error_name(
        lambda: seen.extend(alice.describe_acls(anything).result(TIMEOUT))), "bindings": len(seen)})
    grant = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", op,
                        AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    obs.append({"step": "alice-create-acls", "err": _error_name(
        lambda: next(iter(alice.create_acls(grant).values())).result(TIMEOUT))})
    for f in admin.create_acls(grant).values():
        f.result(TIMEOUT)
    obs.append({"step": "granted", "visible": _eventually(lambda: _visible(alice), [topic]),
                "produce": _eventually(lambda: _produce_error(alice_conf, topic), "")})
    group = f"{topic}-group"
    obs.append({"step": "consume-without-group-acl", "got": _consume_as(alice_conf, topic, group)})
    for f in admin.create_acls([
            AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                       AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                       AclPermissionType.ALLOW)]).values():
        f.result(TIMEOUT)
    obs.append({"step": "consume-with-acls",
                "got": _eventually(lambda: _consume_as(alice_conf, topic, group), "record 0")})
    described_topic = alice.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic]
    cluster = alice.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    obs.append({"step": "authorized-operations",
                "topic": sorted(op.name for op in described_topic.result(TIMEOUT).authorized_operations or []),
                "cluster": sorted(op.name for op in cluster.authorized_operations or [])})
    mine = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, "User:alice", None,
                            AclOperation.ANY, AclPermissionType.ANY)
    described = admin.describe_acls(mine).result(TIMEOUT)
    obs.append({"step": "described", "acls": sorted(f"{b.principal} {b.operation.name} {b.permission_type.name}"
                                                    for b in described)})
    deleted = next(iter(admin.delete_acls([mine]).values())).result(TIMEOUT)
    obs.append({"step": "deleted", "acls": sorted(f"{b.principal} {b.operation.name}" for b in deleted)})
    obs.append({"step": "revoked", "visible": _eventually(lambda: _visible(alice), []),
                "produce": _eventually(lambda: _produce_error(alice_conf, topic), "TOPIC_AUTHORIZATION_FAILED")})
    for o in obs:
        for k, v in o.items():
            if isinstance(v, list):
                o[k] = [x.replace(topic, "<topic>") for x in v]
    return obs


@pytest.mark.compat(client="confluent-kafka", scenario="ACL matrix: no ACLs, granted (topic, group), authorized operations, described, deleted")
def test_acl_matrix(kafka_target: Any, differential: Callable[..., Any], tls: Tls) -> None:
    obs = differential("security-acl-matrix", lambda t: _acl_matrix(t, tls))
    steps = {o["step"]: o for o in obs}
    assert steps["no-acls"] == {"step": "no-acls", "visible": [], "produce": "TOPIC_AUTHORIZATION_FAILED"}
    assert steps["alice-create-topic"]["err"] == "TOPIC_AUTHORIZATION_FAILED"
    # what confluent-kafka reports, on both brokers, for a DescribeAcls without DESCRIBE on the
    # cluster (which Kafka's AclApis answers CLUSTER_AUTHORIZATION_FAILED): no error, no bindings
    assert steps["alice-describe-acls"] == {"step": "alice-describe-acls", "err": "", "bindings": 0}
    assert steps["alice-create-acls"]["err"] == "CLUSTER_AUTHORIZATION_FAILED"
    assert steps["granted"] == {"step": "granted", "visible": ["<topic>"], "produce": ""}
    assert steps["consume-without-group-acl"]["got"] == "GROUP_AUTHORIZATION_FAILED"
    assert steps["consume-with-acls"]["got"] == "record 0"
    assert steps["authorized-operations"] == {"step": "authorized-operations", "topic": ["DESCRIBE", "READ", "WRITE"],
                                              "cluster": []}
    assert steps["described"]["acls"] == ["User:alice DESCRIBE ALLOW", "User:alice READ ALLOW",
                                          "User:alice WRITE ALLOW"]
    assert steps["revoked"] == {"step": "revoked", "visible": [], "produce": "TOPIC_AUTHORIZATION_FAILED"}


ACL_STATES = ("none", "allow", "deny", "prefixed")
TOPIC_OPS = (AclOperation.WRITE, AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
             AclOperation.ALTER_CONFIGS, AclOperation.CREATE)


def _acls_for(state: str, topic: str, group: str) -> list[AclBinding]:
    """alice's ACLs in one state of the operation matrix, on names no other state uses."""
    def allow(kind: ResourceType, name: str, op: AclOperation, pattern: ResourcePatternType) -> AclBinding:
        return AclBinding(kind, name, pattern, "User:alice", "*", op, AclPermissionType.ALLOW)

    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    if state == "none":
        return []
    pattern = prefixed if state == "prefixed" else literal
    acls = [allow(ResourceType.TOPIC, topic, op, pattern) for op in TOPIC_OPS]
    acls += [allow(ResourceType.TOPIC, topic + "-new", AclOperation.CREATE, literal),
             allow(ResourceType.GROUP, group, AclOperation.READ, pattern)]
    if state == "deny":  # a deny on the same resources wins over every allow
        acls += [AclBinding(kind, name, literal, "User:alice", "*", AclOperation.ALL, AclPermissionType.DENY)
                 for kind, name in ((ResourceType.TOPIC, topic), (ResourceType.TOPIC, topic + "-new"),
                                    (ResourceType.GROUP, group))]
    return acls


def _operations(conf: dict[str, str], alice: AdminClient, topic: str, group: str, fetcher: str) -> dict[str, str]:
    """Each operation once as alice: "" when it worked, else the error's name. The fetch goes
    through `fetcher`, a group alice may always use (librdkafka's consumer needs one), so that it
    answers for the topic alone; the commit through the state's own group."""
    got = {"produce": _produce_error(conf, topic)}
    described = alice.list_topics(topic=topic, timeout=TIMEOUT).topics.get(topic)
    got["metadata"] = "missing" if described is None else described.error.name() if described.error else ""
    if got["metadata"]:  # librdkafka never fetches a topic its metadata refuses (Kafka and Samsa alike)
        got["fetch"] = "not attempted"
    else:
        consumer = Consumer({**conf, "group.id": fetcher, "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            deadline, got["fetch"] = time.monotonic() + 10, "nothing"
            while time.monotonic() < deadline and got["fetch"] == "nothing":
                m = consumer.poll(0.3)
                if m is not None:
                    got["fetch"] = "" if m.error() is None else str(m.error().name())
        finally:
            consumer.close()
    committer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        got["commit"] = _error_name(lambda: committer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False))
    finally:
        committer.close()
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    got["describe-configs"] = _error_name(lambda: alice.describe_configs([resource])[resource].result(TIMEOUT))
    change = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    got["alter-configs"] = _error_name(lambda: alice.incremental_alter_configs([change])[change].result(TIMEOUT))
    new = topic + "-new"
    got["create-topic"] = _error_name(lambda: alice.create_topics([NewTopic(new, 1, 1)])[new].result(TIMEOUT))
    got["delete-topic"] = _error_name(lambda: alice.delete_topics([topic])[topic].result(TIMEOUT))
    return got


def _described(admin: AdminClient, names: set[str]) -> int:
    """How many of alice's ACL bindings on these resource names the broker describes."""
    alice = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
                             AclOperation.ANY, AclPermissionType.ANY)
    return len([b for b in admin.describe_acls(alice).result(TIMEOUT) if b.name in names])


def _acl_operations(target: Any, tls: Tls) -> list[dict]:
    """The ACL matrix by operation: produce, fetch, group commit, describe and alter configs, create
    and delete topic, each with no ACL, allow ACLs, allow and deny ACLs, and prefixed allow ACLs."""
    _prepare(target)
    s = secured(target)
    conf = _client_conf(s, tls, "plain-alice")
    admin = AdminClient({"bootstrap.servers": s.bootstrap()})  # ANONYMOUS: a super user
    alice = AdminClient(conf)
    base = f"{PREFIX}ops-{uuid.uuid4().hex[:6]}"
    fetcher = f"{base}-fetcher"
    grant = AclBinding(ResourceType.GROUP, fetcher, ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
    next(iter(admin.create_acls([grant]).values())).result(TIMEOUT)
    obs: list[dict] = []
    for state in ACL_STATES:
        topic, group = f"{base}-{state}", f"{base}-{state}-group"
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
        acls = _acls_for(state, topic, group)
        for f in (admin.create_acls(acls).values() if acls else ()):
            f.result(TIMEOUT)
        # Kafka's authorizer follows its metadata log: wait until the broker describes them all
        _eventually(lambda names={a.name for a in acls}: _described(admin, names), len(acls))
        obs.append({"state": state, **_operations(conf, alice, topic, group, fetcher)})
    return obs


@pytest.mark.compat(client="confluent-kafka", scenario="ACL matrix by operation: produce, fetch, commit, configs, create and delete topic with no, allow, deny and prefixed ACLs")
def test_acl_operation_matrix(kafka_target: Any, differential: Callable[..., Any], tls: Tls) -> None:
    obs = differential("security-acl-operations", lambda t: _acl_operations(t, tls))
    by_state = {o["state"]: o for o in obs}
    assert by_state["allow"]["produce"] == by_state["prefixed"]["produce"] == ""
    assert by_state["none"]["produce"] == by_state["deny"]["produce"] == "TOPIC_AUTHORIZATION_FAILED"
    assert by_state["none"]["metadata"] == by_state["deny"]["metadata"] == "TOPIC_AUTHORIZATION_FAILED"
    assert by_state["allow"]["fetch"] == by_state["prefixed"]["fetch"] == ""
    assert by_state["allow"]["delete-topic"] == "" and by_state["deny"]["delete-topic"] != ""


def _txn_acls(target: Any, tls: Tls) -> list[dict]:
    """A transactional producer as alice: what each missing ACL answers (WRITE on the transactional
    id for InitProducerId and FindCoordinator, READ on the group for AddOffsetsToTxn)."""
    _prepare(target)
    s = secured(target)
    alice_conf = _client_conf(s, tls, "plain-alice")
    admin = AdminClient({"bootstrap.servers": s.bootstrap()})  # ANONYMOUS: a super user
    topic = f"{PREFIX}txn-{uuid.uuid4().hex[:6]}"
    tid, group = f"{topic}-tid", f"{topic}-group"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    for f in admin.create_acls([AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice",
                                           "*", op, AclPermissionType.ALLOW)
                                for op in (AclOperation.WRITE, AclOperation.READ)]).values():
        f.result(TIMEOUT)

    def init() -> Producer:
        producer = Producer({**alice_conf, "transactional.id": tid, "transaction.timeout.ms": 60000})
        producer.init_transactions(TIMEOUT)
        return producer

    obs: list[dict] = [{"step": "no-transactional-id-acl", "err": _error_name(init)}]
    for f in admin.create_acls([AclBinding(ResourceType.TRANSACTIONAL_ID, tid, ResourcePatternType.LITERAL,
                                           "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)]).values():
        f.result(TIMEOUT)
    producers: list[Producer] = []
    obs.append({"step": "granted", "err": _eventually(lambda: _error_name(lambda: producers.append(init())), "")})
    producer = producers[-1]
    producer.begin_transaction()
    producer.produce(topic, value=b"in a transaction")
    consumer = Consumer({**alice_conf, "group.id": group})
    offsets = [TopicPartition(topic, 0, 1)]
    obs.append({"step": "offsets-without-group-acl", "err": _error_name(
        lambda: producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT))})
    obs.append({"step": "abort", "err": _error_name(lambda: producer.abort_transaction(TIMEOUT))})
    consumer.close()
    producer.begin_transaction()
    producer.produce(topic, value=b"committed")
    obs.append({"step": "commit", "err": _error_name(lambda: producer.commit_transaction(TIMEOUT))})
    return obs


@pytest.mark.compat(client="confluent-kafka", scenario="transactions under ACLs: no transactional id ACL, granted, offsets without the group's ACL")
def test_transactional_acls(kafka_target: Any, differential: Callable[..., Any], tls: Tls) -> None:
    obs = differential("security-txn-acls", lambda t: _txn_acls(t, tls))
    assert obs == [
        {"step": "no-transactional-id-acl", "err": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"},
        {"step": "granted", "err": ""},
        {"step": "offsets-without-group-acl", "err": "GROUP_AUTHORIZATION_FAILED"},
        {"step": "abort", "err": ""},
        {"step": "commit", "err": ""},
    ]


def _regex_acls(target: Any, tls: Tls) -> list[dict]:
    """A KIP-848 consumer as bob (SCRAM) subscribed by a regular expression matching a topic of
    the prefix bob may use and one it may not describe: only the first is assigned (Kafka resolves
    regular expressions with the heartbeat's principal, keeping the topics it may DESCRIBE)."""
    _prepare(target)
    s = secured(target)
    admin = AdminClient({"bootstrap.servers": s.bootstrap()})  # ANONYMOUS: a super user
    topics = [f"{PREFIX}rx-a", "nosec-rx-b"]
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        f.result(TIMEOUT)
    consumer = Consumer({**_client_conf(s, tls, "scram"), "group.id": f"{PREFIX}rx-g", "group.protocol": "consumer"})
    try:
        consumer.subscribe(["^(sec|nosec)-rx-.*"])  # librdkafka sends a "^"-regex to the broker
        deadline = time.monotonic() + TIMEOUT
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        settle = time.monotonic() + 2  # heartbeats after the first assignment change nothing
        while time.monotonic() < settle:
            consumer.poll(0.2)
        group = admin.describe_consumer_groups([f"{PREFIX}rx-g"])[f"{PREFIX}rx-g"].result(TIMEOUT)
        return [
            {"step": "assigned", "partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in consumer.assignment())},
            {"step": "described", "partitions": sorted(f"{tp.topic}-{tp.partition}" for m in group.members
                                                       for tp in m.assignment.topic_partitions)},
        ]  # fmt: skip
    finally:
        consumer.close()


@pytest.mark.compat(client="confluent-kafka", scenario="KIP-848 regular expression resolved to the topics the member may describe")
def test_regex_subscription_acls(kafka_target: Any, differential: Callable[..., Any], tls: Tls) -> None:
    obs = differential("security-regex-acls", lambda t: _regex_acls(t, tls))
    assert obs == [{"step": "assigned", "partitions": [f"{PREFIX}rx-a-0"]},
                   {"step": "described", "partitions": [f"{PREFIX}rx-a-0"]}]  # the broker's side: not only the client's


def _plain_raw(s: Secured, tls: Tls, user: str) -> RawClient:
    """A raw protocol client over SASL_SSL, authenticated as `user` with PLAIN."""
    client = _tls_raw(s, tls)
    client.request(SaslHandshakeRequest(mechanism="PLAIN"))
    answer = client.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{PLAIN_USERS[user]}".encode()))
    assert answer.error_code == 0, answer
    return client


def _consumer_member(client: RawClient, group: str, topics: tuple[str, ...]) -> None:
    """A KIP-848 member of `group`, heartbeating until it is assigned a partition of each topic."""
    member, deadline = uuid.uuid4().hex[:22], time.monotonic() + TIMEOUT
    answer = consumer_protocol.join(client, member, group=group, topics=topics)
    while answer.assignment is None or len(answer.assignment.topic_partitions) < len(topics):
        assert answer.error_code == 0 and time.monotonic() < deadline, answer
        time.sleep(0.2)
        answer = consumer_protocol.heartbeat(client, member, int(answer.member_epoch), group=group)


def _share_member(client: RawClient, group: str, topics: tuple[str, ...]) -> None:
    """A KIP-932 member of `group`, heartbeating until it is assigned a partition of each topic
    (once their share-group state is initialized)."""
    member, epoch, deadline = uuid.uuid4().hex[:22], 0, time.monotonic() + TIMEOUT
    subscribed: tuple[TopicName, ...] | None = tuple(TopicName(t) for t in topics)
    while True:
        answer = client.request(ShareGroupHeartbeatRequest(
            group_id=GroupId(group), member_id=member, member_epoch=i32(epoch), subscribed_topic_names=subscribed))
        assert answer.error_code in (0, *consumer_protocol.RETRIABLE) and time.monotonic() < deadline, answer
        if answer.error_code == 0:
            epoch, subscribed = int(answer.member_epoch), None
            if answer.assignment is not None and len(answer.assignment.topic_partitions) == len(topics):
                return
        time.sleep(0.2)


def _group_describe_acls(target: Any, tls: Tls) -> list[dict]:
    """ConsumerGroupDescribe and ShareGroupDescribe as alice, who may DESCRIBE the groups and one
    topic but not the other: a group with a member assigned the other topic is answered
    TOPIC_AUTHORIZATION_FAILED with no members (Kafka's KafkaApis), the others in full."""
    _prepare(target)
    s = secured(target)
    tag = uuid.uuid4().hex[:6]
    shown, hidden = f"gdesc-shown-{tag}", f"gdesc-hidden-{tag}"
    groups = {key: f"gdesc-{key}-{tag}" for key in ("both", "shown", "share-both", "share-shown", "no-acl")}
    with RawClient(s.ports["PLAINTEXT"], timeout=TIMEOUT) as client:  # ANONYMOUS: a super user
        for topic in (shown, hidden):
            fidelity.create_topic(client, topic)
        fidelity.await_coordinator(client, groups["both"])
        _consumer_member(client, groups["both"], (shown, hidden))
        _consumer_member(client, groups["shown"], (shown,))
        _share_member(client, groups["share-both"], (shown, hidden))
        _share_member(client, groups["share-shown"], (shown,))
    admin = AdminClient({"bootstrap.servers": s.bootstrap()})
    grants = [AclBinding(ResourceType.GROUP, g, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.DESCRIBE,
                         AclPermissionType.ALLOW) for key, g in groups.items() if key != "no-acl"]
    grants.append(AclBinding(ResourceType.TOPIC, shown, ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.DESCRIBE, AclPermissionType.ALLOW))
    for f in admin.create_acls(grants).values():
        f.result(TIMEOUT)
    labels = {shown: "<shown>", hidden: "<hidden>", **{g: f"<{key}>" for key, g in groups.items()}}

    def described() -> list[dict]:
        with _plain_raw(s, tls, "alice") as alice:
            consumer = alice.request(ConsumerGroupDescribeRequest(group_ids=tuple(
                GroupId(groups[k]) for k in ("both", "shown", "no-acl")), include_authorized_operations=True)).groups
            share = alice.request(ShareGroupDescribeRequest(group_ids=tuple(
                GroupId(groups[k]) for k in ("share-both", "share-shown", "no-acl")),
                include_authorized_operations=True)).groups
        return [{"api": api, "group": labels[str(g.group_id)], "first": i == 0, "error": ErrorCode(g.error_code).name,
                 "message": g.error_message, "assignor": g.assignor_name, "operations": int(g.authorized_operations),
                 "members": len(g.members),
                 "assigned": sorted({labels[str(tp.topic_name)] for m in g.members for tp in m.assignment.topic_partitions})}
                for api, answer in (("consumer", consumer), ("share", share)) for i, g in enumerate(answer)]  # fmt: skip

    deadline = time.monotonic() + 10
    obs = described()
    while any(o["error"] == "group_authorization_failed" and o["group"] != "<no-acl>" for o in obs) \
            and time.monotonic() < deadline:  # Kafka's authorizer follows its metadata log
        time.sleep(0.2)
        obs = described()
    # alice's grants go: the ACL matrix expects her to see no topic, whatever ran before it
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in grants]  # fmt: skip
    for f in admin.delete_acls(filters).values():
        f.result(TIMEOUT)
    # by group: Kafka answers the groups refused GROUP_AUTHORIZATION_FAILED first ("first"), then
    # the coordinator's answers in the order of their __consumer_offsets partitions
    return sorted(obs, key=lambda o: (o["api"], o["group"]))


@pytest.mark.compat(client="raw protocol", scenario="ConsumerGroupDescribe and ShareGroupDescribe of groups assigned a topic the principal may not describe")
def test_group_describe_checks_the_assigned_topics(kafka_target: Any, differential: Callable[..., Any], tls: Tls) -> None:
    obs = {(o["api"], o["group"]): o for o in differential("security-group-describe-acls", lambda t: _group_describe_acls(t, tls))}
    denied = {"error": "topic_authorization_failed",
              "message": "The group has described topic(s) that the client is not authorized to describe.",
              "assignor": "", "operations": -2147483648, "members": 0, "assigned": []}
    for api, group in (("consumer", "<both>"), ("share", "<share-both>")):
        assert {k: v for k, v in obs[api, group].items() if k not in ("api", "group", "first")} == denied
    assert obs["consumer", "<shown>"]["assigned"] == obs["share", "<share-shown>"]["assigned"] == ["<shown>"]
    for api in ("consumer", "share"):
        assert obs[api, "<no-acl>"]["error"] == "group_authorization_failed" and obs[api, "<no-acl>"]["first"]


def _tls_raw(s: Secured, tls: Tls) -> RawClient:
    """A raw protocol client over TLS to the SASL_SSL listener."""
    client = RawClient(s.ports["SASL_SSL"])
    context = ssl.create_default_context(cafile=str(tls.ca.pem))
    client.sock = context.wrap_socket(client.sock, server_hostname="127.0.0.1")
    return client


def _closed(client: RawClient) -> bool:
    """The broker closes the connection within 5 s without sending anything more."""
    try:
        return client.closed_by_peer(5)
    except ssl.SSLError:
        return True


def _answered_then_closed(client: RawClient) -> tuple[bool, bool]:
    """(whether anything arrived, whether the connection closed), within 5 s."""
    answered = False
    deadline = time.monotonic() + 5
    client.sock.settimeout(1)
    while time.monotonic() < deadline:
        try:
            data = client.sock.recv(65536)
        except TimeoutError:
            continue
        except (ssl.SSLError, OSError):
            return answered, True
        if not data:
            return answered, True
        answered = True
    return answered, False


METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def _bad_clients(target: Any, tls: Tls) -> list[dict]:
    """Exact answers to bad SASL clients on the SASL_SSL listener, as raw bytes."""
    _prepare(target)
    s = secured(target)
    obs: list[dict] = []
    with _tls_raw(s, tls) as c:
        a = c.request(SaslHandshakeRequest(mechanism="GSSAPI"))
        obs.append({"step": "unknown-mechanism", "err": ErrorCode(a.error_code).name,
                    "mechanisms": sorted(a.mechanisms), "closed": _closed(c)})
    for mechanism, token, what in (
            ("PLAIN", b"\0alice\0wrong", "plain-wrong-password"),
            ("PLAIN", b"\0nobody\0x", "plain-unknown-user"),
            ("SCRAM-SHA-512", b"n,,n=nobody,r=abcdefghijklmnop", "scram-unknown-user")):
        with _tls_raw(s, tls) as c:
            c.request(SaslHandshakeRequest(mechanism=mechanism))
            a = c.request(SaslAuthenticateRequest(auth_bytes=token))
            obs.append({"step": what, "err": ErrorCode(a.error_code).name, "message": a.error_message,
                        "closed": _closed(c)})
    with _tls_raw(s, tls) as c:
        c.send_request(METADATA)
        obs.append({"step": "metadata-before-handshake", "closed": _closed(c)})
    with _tls_raw(s, tls) as c:
        c.request(SaslHandshakeRequest(mechanism="PLAIN"))
        c.send_request(METADATA)
        answered, closed = _answered_then_closed(c)
        obs.append({"step": "metadata-before-authenticate", "answered": answered, "closed": closed})
    with _tls_raw(s, tls) as c:
        c.request(SaslHandshakeRequest(mechanism="PLAIN"))
        a = c.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        again = c.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        obs.append({"step": "authenticated", "err": ErrorCode(a.error_code).name, "token": a.auth_bytes.hex(),
                    "lifetime": str(a.session_lifetime), "again": ErrorCode(again.error_code).name,
                    "again-message": again.error_message, "metadata": len(c.request(METADATA).brokers)})
    return obs


@pytest.mark.compat(client="raw protocol", scenario="bad SASL clients: unknown mechanism, wrong password, unknown user, requests before authentication")
def test_bad_sasl_clients(kafka_target: Any, differential: Callable[..., Any], tls: Tls) -> None:
    obs = differential("security-bad-clients", lambda t: _bad_clients(t, tls))
    steps = {o["step"]: o for o in obs}
    assert steps["unknown-mechanism"] == {"step": "unknown-mechanism", "err": "unsupported_sasl_mechanism",
                                          "mechanisms": ["OAUTHBEARER", "PLAIN", "SCRAM-SHA-512"], "closed": True}
    for what in ("plain-wrong-password", "plain-unknown-user", "scram-unknown-user"):
        assert steps[what]["err"] == "sasl_authentication_failed" and steps[what]["closed"], steps[what]
    assert steps["metadata-before-handshake"]["closed"] and steps["metadata-before-authenticate"]["closed"]
    assert steps["authenticated"]["err"] == "none" and steps["authenticated"]["metadata"] == 1
    assert steps["authenticated"]["lifetime"] == "0:01:00"  # listener.name.sasl_ssl.plain.connections.max.reauth.ms


def _program_env(tls: Tls, how: str) -> dict[str, str]:
    """compat/go/security.go's environment for "scram" (SASL_SSL as bob) or "ssl" (client certificate)."""
    env = {"COMPAT_TLS_CA": str(tls.ca.pem)}
    if how == "ssl":
        env.update(COMPAT_TLS_CERT=str(tls.client.chain_pem), COMPAT_TLS_KEY=str(tls.client.key_pem))
    else:
        env["COMPAT_SASL"] = "SCRAM-SHA-512:bob:bob-secret"
    return env


def _program_params() -> list[Any]:
    return [pytest.param(lang, how, id=f"{lang}-{how}", marks=pytest.mark.compat(client=PROGRAMS[lang],
                                                                                  scenario=SCENARIOS[how]))
            for lang in ("go", "node") for how in ("scram", "ssl")]


@pytest.mark.parametrize(("lang", "how"), _program_params())
def test_secured_go_and_node_clients(lang: str, how: str, kafka_target: Any, differential: Callable[..., Any],
                                     tls: Tls, request: pytest.FixtureRequest) -> None:
    """franz-go's and kafkajs' produce-consume scenario (compat/test_go_node_clients.py) over
    SASL_SSL/SCRAM-SHA-512 and over SSL with a client certificate."""
    cmd = [str(request.getfixturevalue("go_binary"))] if lang == "go" else request.getfixturevalue("node_script")

    def run(target: Any) -> list[dict]:
        _prepare(target)
        s = secured(target)
        return run_program(cmd, s.bootstrap("SSL" if how == "ssl" else "SASL_SSL"), "produce-consume",
                           f"{PREFIX}{lang}-{how}", env=_program_env(tls, how))

    obs = differential(f"security-{lang}-{how}", run)
    assert len([o for o in obs if o["step"] == "consumed"]) >= 5


@pytest.fixture(scope="module")
def spark() -> Any:
    from compat.spark import pipeline

    session = pipeline.spark_session("samsa-compat-security")
    yield session
    session.stop()


def _spark_roundtrip(spark: Any, target: Any, tls: Tls) -> list[dict]:
    """The Kafka connector writes two rows and reads them back over SASL_SSL with SCRAM-SHA-512."""
    _prepare(target)
    s = secured(target)
    topic = f"{PREFIX}spark"
    admin = AdminClient({"bootstrap.servers": s.bootstrap()})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    options = {
        "kafka.bootstrap.servers": s.bootstrap("SASL_SSL"), "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="bob" password="bob-secret";',
        "kafka.ssl.truststore.type": "PKCS12", "kafka.ssl.truststore.location": str(tls.ca.p12),
        "kafka.ssl.truststore.password": PASSWORD,
    }
    rows = spark.createDataFrame([("k0", "v0"), ("k1", "v1")], "key string, value string")
    rows.coalesce(1).write.format("kafka").options(**options).option("topic", topic).save()
    read = (spark.read.format("kafka").options(**options).option("subscribe", topic)
            .option("groupIdPrefix", f"{PREFIX}spark")  # the group ACL's prefix
            .option("startingOffsets", "earliest").option("endingOffsets", "latest").load().collect())
    return [{"step": "read", "records": sorted(
        f"{r['partition']}:{r['offset']}:{bytes(r['key']).decode()}:{bytes(r['value']).decode()}" for r in read)}]


@pytest.mark.compat(client="spark 4.0 (pyspark)", scenario="SASL_SSL with SCRAM-SHA-512")
def test_spark_over_sasl_ssl(kafka_target: Any, differential: Callable[..., Any], tls: Tls, spark: Any) -> None:
    obs = differential("security-spark", lambda t: _spark_roundtrip(spark, t, tls))
    assert obs == [{"step": "read", "records": ["0:0:k0:v0", "0:1:k1:v1"]}]
