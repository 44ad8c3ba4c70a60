"""Security in a cluster (issue 14): replication over a SASL_SSL inter-broker listener, and ACLs and
SCRAM credentials kept in ZooKeeper in Kafka's layout (/kafka-acl/<type>/<name>,
/config/users/<user>), written through one broker and seen by the others."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from broker.testing.certs import PASSWORD, CertificateAuthority
from broker.testing.cluster import SamsaCluster, ZooKeeperServer
from broker.testing.process import SamsaProcess
from tests.cluster.conftest import broker_logs, create_topic

TIMEOUT = 20


def _znode(cluster: SamsaCluster, path: str) -> dict[str, object]:
    zk = KazooClient(f"127.0.0.1:{cluster.zookeeper.port}")
    zk.start(10)
    try:
        data, _ = zk.get(path)
        return dict(json.loads(data))
    finally:
        zk.stop()
        zk.close()


def _admin(cluster: SamsaCluster, broker: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.brokers[broker].client_port}"})


def test_replication_over_sasl_ssl_and_security_metadata_in_zookeeper(
        cluster_factory: Callable[..., SamsaCluster], tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "tls")
    server = ca.issue("broker")
    cluster = cluster_factory(3, overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:SASL_SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.pem),
        "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.replication.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
            'password="broker-secret" user_broker="broker-secret";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker;User:ANONYMOUS",
    })
    # every follower fetches over SASL_SSL: acks=all with min.insync.replicas=3 needs all three
    create_topic(cluster, "secured", partitions=1, replication_factor=3, configs={"min.insync.replicas": "3"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        producer.produce("secured", value=b"%d" % i)
    assert producer.flush(TIMEOUT) == 0, broker_logs(cluster)
    assert sorted(cluster.metadata(1, topics=["secured"]).topics["secured"][0].isr) == [1, 2, 3]
    logs = broker_logs(cluster, tail=200_000)
    assert "authentication failed" not in logs and "tls_handshake_failed" not in logs

    # an ACL created through broker 1 is in ZooKeeper and seen by broker 3
    binding = AclBinding(ResourceType.TOPIC, "secured", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    one = _admin(cluster, 1)
    for f in one.create_acls([binding]).values():
        f.result(TIMEOUT)
    assert _znode(cluster, "/kafka-acl/Topic/secured") == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    three = _admin(cluster, 3)
    alice = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,  # type: ignore[arg-type]
                             AclOperation.ANY, AclPermissionType.ANY)
    cluster.wait_for(lambda: len(three.describe_acls(alice).result(TIMEOUT)) == 1, 10, "the ACL on broker 3")

    # a SCRAM credential stored through broker 2 is in ZooKeeper and described by broker 3
    two = _admin(cluster, 2)
    for f in two.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret")]).values():
        f.result(TIMEOUT)
    stored = _znode(cluster, "/config/users/alice")
    assert list(stored["config"]) == ["SCRAM-SHA-256"]  # type: ignore[call-overload]
    assert "iterations=4096" in stored["config"]["SCRAM-SHA-256"]  # type: ignore[index]
    assert "alice-secret" not in json.dumps(stored)
    cluster.wait_for(
        lambda: [i.iterations for i in three.describe_user_scram_credentials(["alice"])["alice"]
                 .result(TIMEOUT).scram_credential_infos] == [4096], 10, "the credential on broker 3")


def test_zookeeper_over_tls(tmp_path: Path) -> None:
    """zookeeper.ssl.client.enable: the broker's ZooKeeper session (kazoo) goes over TLS to
    ZooKeeper's secure port, checking its certificate against the trust store (PKCS12 here,
    written out as PEM for kazoo)."""
    ca = CertificateAuthority(tmp_path / "tls")
    zk_cert = ca.issue("zookeeper")
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper", tls=(zk_cert.pem, ca.pem)).start()
    try:
        with SamsaProcess(tmp_path / "broker", {
            "broker.id": "1",
            "zookeeper.connect": f"127.0.0.1:{zookeeper.secure_port}",
            "zookeeper.ssl.client.enable": "true",
            "zookeeper.ssl.truststore.type": "PKCS12", "zookeeper.ssl.truststore.location": str(ca.p12),
            "zookeeper.ssl.truststore.password": PASSWORD,
            "offsets.topic.replication.factor": "1",
        }) as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            admin.create_topics([NewTopic("over-tls", 1, 1)])["over-tls"].result(TIMEOUT)
            zk = KazooClient(f"127.0.0.1:{zookeeper.secure_port}", use_ssl=True, ca=str(ca.pem), verify_certs=True)
            zk.start(10)
            try:
                assert zk.exists("/brokers/topics/over-tls") and zk.get_children("/brokers/ids") == ["1"]
            finally:
                zk.stop()
                zk.close()
    finally:
        zookeeper.stop()


def test_replication_over_scram_credentials_stored_in_zookeeper(
        cluster_factory: Callable[..., SamsaCluster], tmp_path: Path) -> None:
    """SASL_SSL with SCRAM-SHA-512 between brokers: the brokers' own credential is created through
    a client listener once the cluster runs (kept in ZooKeeper, read by every broker), and the
    replica fetchers authenticate with it: acks=all with min.insync.replicas=3 needs all three."""
    ca = CertificateAuthority(tmp_path / "tls")
    server = ca.issue("broker")
    cluster = cluster_factory(3, overrides={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:SASL_SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.pem),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.replication.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            'password="broker-secret";',
    })
    admin = _admin(cluster, 1)
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"broker-secret")]).values():
        f.result(TIMEOUT)
    create_topic(cluster, "scram-replicated", partitions=1, replication_factor=3,
                 configs={"min.insync.replicas": "3"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        producer.produce("scram-replicated", value=b"%d" % i)
    assert producer.flush(TIMEOUT) == 0, broker_logs(cluster)
    assert sorted(cluster.metadata(1, topics=["scram-replicated"]).topics["scram-replicated"][0].isr) == [1, 2, 3]
