"""Security in-process: SCRAM against RFC 7677's example exchange, ssl.principal.mapping.rules
against Kafka's SslPrincipalMapperTest cases, and the authorizer's rules (broker/acl.py). Real
clients over real listeners: tests/integration/test_security.py, compat/test_security.py."""

from __future__ import annotations

import asyncio
import base64

import pytest

from broker.acl import Authorizer
from broker.security import sasl
from broker.security.principal import NoMatchingRule, SslPrincipalMapper
from broker.security.sasl import SaslFailure, ScramServer, scram_credential
from controller.security_model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    SecurityImage,
)

# RFC 7677, section 3: SCRAM-SHA-256 for user "user", password "pencil"
CLIENT_NONCE, SERVER_NONCE = "rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FINAL = (f"c=biws,r={CLIENT_NONCE}{SERVER_NONCE},"
                "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")


def _server(monkeypatch: pytest.MonkeyPatch) -> ScramServer:
    monkeypatch.setattr(sasl.secrets, "token_urlsafe", lambda n: SERVER_NONCE)
    credential = scram_credential("SCRAM-SHA-256", "pencil", SALT, 4096)
    return ScramServer("SCRAM-SHA-256", lambda user: credential if user == "user" else None)


def test_scram_sha_256_exchange_of_rfc_7677(monkeypatch: pytest.MonkeyPatch) -> None:
    server = _server(monkeypatch)
    first = asyncio.run(server.evaluate(f"n,,n=user,r={CLIENT_NONCE}".encode()))
    assert first == f"r={CLIENT_NONCE}{SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    final = asyncio.run(server.evaluate(CLIENT_FINAL.encode()))
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


@pytest.mark.parametrize("client_final", [
    CLIENT_FINAL.replace("p=dHzb", "p=eHzb"),  # a wrong proof: another password
    CLIENT_FINAL.replace(SERVER_NONCE, SERVER_NONCE[:-1]),  # another nonce
])
def test_scram_wrong_proof_or_nonce_fails(monkeypatch: pytest.MonkeyPatch, client_final: str) -> None:
    server = _server(monkeypatch)
    asyncio.run(server.evaluate(f"n,,n=user,r={CLIENT_NONCE}".encode()))
    with pytest.raises(SaslFailure):
        asyncio.run(server.evaluate(client_final.encode()))
    assert not server.complete


def test_scram_unknown_user_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SaslFailure):
        asyncio.run(_server(monkeypatch).evaluate(f"n,,n=nobody,r={CLIENT_NONCE}".encode()))


def test_ssl_principal_mapping_rules_as_kafka() -> None:
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    assert SslPrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT").name(
        "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=nobody")


def _acl(name: str, pattern: PatternType, principal: str, op: AclOperation, permission: AclPermissionType,
         kind: ResourceType = ResourceType.TOPIC, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(kind, name, pattern), AccessControlEntry(principal, host, op, permission))


ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC = ResourceType.TOPIC


def _authorizer(*acls: AclBinding, allow_if_no_acl: bool = False) -> Authorizer:
    authorizer = Authorizer(True, frozenset({"User:admin"}), allow_if_no_acl)
    authorizer.on_image(SecurityImage(frozenset(acls), {}))
    return authorizer


def test_authorizer_rules() -> None:
    a = _authorizer(
        _acl("orders", LITERAL, "User:alice", AclOperation.WRITE, ALLOW),
        _acl("pay", PREFIXED, "User:alice", AclOperation.READ, ALLOW),
        _acl("payroll", LITERAL, "User:alice", AclOperation.READ, DENY),
        _acl("*", LITERAL, "User:*", AclOperation.DESCRIBE, ALLOW, host="10.0.0.1"),
    )
    ok = lambda op, name, who="User:alice", host="127.0.0.1": a.authorize(who, host, op, TOPIC, name)  # noqa: E731
    assert ok(AclOperation.WRITE, "orders") and ok(AclOperation.DESCRIBE, "orders")  # WRITE implies DESCRIBE
    assert not ok(AclOperation.READ, "orders")
    assert ok(AclOperation.READ, "payments")  # the prefix
    assert not ok(AclOperation.READ, "payroll")  # DENY wins over the prefix's ALLOW
    assert not ok(AclOperation.WRITE, "other")  # no ACL on it, allow.everyone.if.no.acl.found off
    assert ok(AclOperation.DESCRIBE, "other", "User:bob", "10.0.0.1") and not ok(AclOperation.DESCRIBE, "other", "User:bob")
    assert ok(AclOperation.DELETE, "anything", "User:admin")  # a super user
    assert a.authorize_any("User:alice", "127.0.0.1", AclOperation.WRITE, TOPIC)  # KIP-679
    assert not a.authorize_any("User:carol", "127.0.0.1", AclOperation.WRITE, TOPIC)
    # allow.everyone.if.no.acl.found: a resource without any ACL is open, one with ACLs is not
    b = _authorizer(_acl("orders", LITERAL, "User:alice", AclOperation.WRITE, ALLOW), allow_if_no_acl=True)
    assert b.authorize("User:bob", "h", AclOperation.READ, TOPIC, "other")
    assert not b.authorize("User:bob", "h", AclOperation.READ, TOPIC, "orders")
