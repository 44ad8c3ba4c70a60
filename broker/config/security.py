"""The security configs (TLS, SASL, the authorizer, ZooKeeper over TLS), declared once as the fields
of `SecurityConfig`, which `BrokerConfig` extends, and Kafka's listener-prefixed forms of them.

Kafka lets most of these be set per listener: `listener.name.<listener>.<config>` (for example
`listener.name.external.ssl.keystore.location`), and the SASL ones per listener and mechanism:
`listener.name.<listener>.<mechanism>.<config>` (`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config`).
`listener_security_overrides` collects those from server.properties; `listener_value` answers the
value a listener (and mechanism) sees: the most specific key set, else the broker's own value.
`check_security` refuses at start-up what Samsa cannot serve, with one clear message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from broker.config.listeners import Listener
from broker.config.settings import (
    BOOLEAN,
    INT,
    LIST,
    LONG,
    PASSWORD,
    STRING,
    ConfigDef,
    at_least,
    definitions,
    setting,
)
from broker.config.values import ConfigError, OneOf

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
"""The SASL mechanisms Samsa serves (Kafka also has GSSAPI, Kerberos, which Samsa does not)."""
AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer",
               "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
"""authorizer.class.name values that turn Samsa's authorizer on: ZooKeeper-mode Kafka's and KRaft's."""
PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
KEYSTORE_TYPES = OneOf(("JKS", "PKCS12", "PEM"))
CLIENT_AUTH = OneOf(("required", "requested", "none"))


@dataclass(frozen=True, slots=True, kw_only=True)
class SecurityConfig:
    """The security part of `BrokerConfig` (its fields are broker configs like any other)."""

    # ---- TLS (listener.name.<l>.ssl.* overrides each for one listener) ---------------------------
    ssl_keystore_type: str = setting(STRING, "JKS",
        "Format of the key store: PEM (a file holding the private key and certificate chain, or "
        "ssl.keystore.key and ssl.keystore.certificate.chain inline) or PKCS12 (read with the "
        "cryptography package). JKS, Kafka's default, is refused with a message: no maintained "
        "Python library reads it (convert it with keytool -importkeystore -deststoretype PKCS12).",
        KEYSTORE_TYPES)
    ssl_keystore_location: str | None = setting(STRING, None,
        "The key store file of SSL and SASL_SSL listeners (and of the inter-broker client).")
    ssl_keystore_password: str | None = setting(PASSWORD, None,
        "The password of a PKCS12 key store (PEM: of its encrypted private key when "
        "ssl.key.password is unset).")
    ssl_key_password: str | None = setting(PASSWORD, None,
        "The password of the private key in the key store.")
    ssl_keystore_key: str | None = setting(PASSWORD, None,
        "A PEM private key given inline instead of ssl.keystore.location (with "
        "ssl.keystore.certificate.chain).")
    ssl_keystore_certificate_chain: str | None = setting(PASSWORD, None,
        "A PEM certificate chain given inline (with ssl.keystore.key).")
    ssl_truststore_type: str = setting(STRING, "JKS",
        "Format of the trust store: PEM or PKCS12 (JKS is refused, as for the key store).",
        KEYSTORE_TYPES)
    ssl_truststore_location: str | None = setting(STRING, None,
        "The trust store file: the certificates client certificates (and, for the inter-broker "
        "client, broker certificates) are checked against.")
    ssl_truststore_password: str | None = setting(PASSWORD, None,
        "The password of a PKCS12 trust store.")
    ssl_truststore_certificates: str | None = setting(PASSWORD, None,
        "PEM trusted certificates given inline instead of ssl.truststore.location.")
    ssl_client_auth: str = setting(STRING, "none",
        "Whether SSL listeners ask for client certificates: required (a client without a trusted "
        "certificate cannot connect), requested (asked for, checked when given), none. The "
        "principal of a client certificate is its subject name mapped by "
        "ssl.principal.mapping.rules.", CLIENT_AUTH)
    ssl_protocol: str = setting(STRING, "TLSv1.3",
        "TLSv1.2: the inter-broker client speaks TLS 1.2 at most; TLSv1.3 or TLS: the highest "
        "version both sides have.",
        OneOf(("TLSv1.2", "TLSv1.3", "TLS")))
    ssl_enabled_protocols: tuple[str, ...] = setting(LIST, ("TLSv1.2", "TLSv1.3"),
        "The TLS versions listeners accept.", OneOf(("TLSv1.2", "TLSv1.3")))
    ssl_cipher_suites: tuple[str, ...] = setting(LIST, (),
        "TLS 1.2 cipher suites allowed, in OpenSSL's names (empty: OpenSSL's defaults); TLS 1.3's "
        "suites are always OpenSSL's.")
    ssl_endpoint_identification_algorithm: str = setting(STRING, "https",
        "https: the inter-broker client checks that a broker's certificate names the host it "
        "connects to; empty: it does not.")
    ssl_principal_mapping_rules: str = setting(STRING, "DEFAULT",
        "Rules mapping a client certificate's distinguished name to a principal name, as Kafka's "
        "(RULE:pattern/replacement/[LU], ..., DEFAULT).")
    # ---- SASL ------------------------------------------------------------------------------------
    sasl_enabled_mechanisms: tuple[str, ...] = setting(LIST, ("GSSAPI",),
        "SASL mechanisms SASL listeners accept: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER. "
        "GSSAPI (Kerberos), Kafka's default, is not served: a SASL listener must name others.")
    sasl_mechanism_inter_broker_protocol: str = setting(STRING, "GSSAPI",
        "The mechanism the inter-broker client authenticates with when the inter-broker listener "
        "is SASL_PLAINTEXT or SASL_SSL (its username and password come from that mechanism's "
        "JAAS config on the inter-broker listener).")
    sasl_jaas_config: str | None = setting(PASSWORD, None,
        "JAAS configuration of a SASL mechanism, normally given per listener and mechanism as "
        "listener.name.<listener>.<mechanism>.sasl.jaas.config: PlainLoginModule with "
        "user_<name>=\"password\" entries (the users PLAIN accepts), ScramLoginModule, "
        "OAuthBearerLoginModule (unsecuredValidator* options); username and password (or "
        "unsecuredLoginStringClaim_sub) are what the inter-broker client logs in with.")
    sasl_server_max_receive_size: int = setting(INT, 524_288,
        "Largest SASL token accepted before authentication completes; a larger frame closes "
        "the connection.", at_least(1))
    sasl_server_callback_handler_class: str | None = setting(STRING, None,
        "OAUTHBEARER token validation: unset (Kafka's unsecured validator, for development) or "
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler (tokens "
        "signed by a key of sasl.oauthbearer.jwks.endpoint.url, checked with PyJWT).")
    sasl_oauthbearer_jwks_endpoint_url: str | None = setting(STRING, None,
        "Where signed OAUTHBEARER tokens' keys are fetched from (a JWKS document; https: or http:, "
        "a file: URL is refused at start-up), refreshed every sasl.oauthbearer.jwks.endpoint.refresh.ms.")
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = setting(LONG, 3_600_000,
        "How often the JWKS document is fetched again.", at_least(0))
    sasl_oauthbearer_expected_audience: tuple[str, ...] = setting(LIST, (),
        "Audiences a signed token must name one of (empty: not checked).")
    sasl_oauthbearer_expected_issuer: str | None = setting(STRING, None,
        "The issuer a signed token must name (unset: not checked).")
    sasl_oauthbearer_sub_claim_name: str = setting(STRING, "sub",
        "The claim of a signed token that names the principal.")
    sasl_oauthbearer_scope_claim_name: str = setting(STRING, "scope",
        "The claim of a signed token that holds its scopes.")
    sasl_oauthbearer_clock_skew_seconds: int = setting(INT, 30,
        "Clock skew allowed when checking a signed token's times.", at_least(0))
    connections_max_reauth_ms: int = setting(LONG, 0,
        "KIP-368: the longest an authenticated SASL session lasts (0: no limit, unless a token "
        "expires sooner). Clients of SaslAuthenticate v1+ re-authenticate before it ends; a "
        "connection whose session has ended is closed at its next request other than "
        "SaslHandshake.", at_least(0))
    connection_failed_authentication_delay_ms: int = setting(INT, 100,
        "The failure answer to a failed authentication, and the close after it, are delayed by "
        "this long (slows password guessing; 0: no delay).", at_least(0))
    security_inter_broker_protocol: str = setting(STRING, "PLAINTEXT",
        "The inter-broker listener, named by its security protocol, when "
        "inter.broker.listener.name is unset (the two cannot both be set).",
        OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")))
    principal_builder_class: str | None = setting(STRING, None,
        "Accepted for compatibility; Samsa always builds principals as Kafka's "
        "DefaultKafkaPrincipalBuilder does (User:<SASL authorization id>, User:<mapped "
        "certificate name>, User:ANONYMOUS) and refuses any other class at start-up (Kafka: the "
        "class that builds principals).")
    # ---- authorizer ------------------------------------------------------------------------------
    authorizer_class_name: str = setting(STRING, "",
        "Empty: no authorization (every principal may do everything). "
        "kafka.security.authorizer.AclAuthorizer or "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer: every request is checked "
        "against the ACLs (CreateAcls), as Kafka's authorizers check them.",
        OneOf(("", *AUTHORIZERS)))
    super_users: str | None = setting(STRING, None,
        "Principals allowed everything whatever the ACLs, separated by semicolons "
        "(User:admin;User:CN=broker).")
    allow_everyone_if_no_acl_found: bool = setting(BOOLEAN, False,
        "With an authorizer: whether an operation on a resource that no ACL matches at all is "
        "allowed (Kafka's default: denied).")
    # ---- ZooKeeper over TLS ----------------------------------------------------------------------
    zookeeper_ssl_client_enable: bool = setting(BOOLEAN, False,
        "Connect to ZooKeeper over TLS (its secureClientPort), with the zookeeper.ssl.* key and "
        "trust stores.")
    zookeeper_clientCnxnSocket: str | None = setting(STRING, None,
        "Accepted for compatibility; Samsa's ZooKeeper client (kazoo) has one socket "
        "implementation, which speaks TLS when zookeeper.ssl.client.enable is true (Kafka: the "
        "Netty socket class ZooKeeper's TLS needs).")
    zookeeper_ssl_keystore_location: str | None = setting(STRING, None,
        "The client key store presented to ZooKeeper (PEM or PKCS12).")
    zookeeper_ssl_keystore_password: str | None = setting(PASSWORD, None,
        "Its password (PKCS12; PEM: of an encrypted key).")
    zookeeper_ssl_keystore_type: str | None = setting(STRING, None,
        "PEM or PKCS12 (unset: from the file name, .p12/.pfx is PKCS12).")
    zookeeper_ssl_truststore_location: str | None = setting(STRING, None,
        "The certificates ZooKeeper's certificate is checked against (PEM or PKCS12).")
    zookeeper_ssl_truststore_password: str | None = setting(PASSWORD, None,
        "The trust store's password (PKCS12).")
    zookeeper_ssl_truststore_type: str | None = setting(STRING, None,
        "PEM or PKCS12 (unset: from the file name).")
    zookeeper_ssl_endpoint_identification_algorithm: str = setting(STRING, "HTTPS",
        "HTTPS: ZooKeeper's certificate must name the host connected to; empty: not checked.")
    # ---- not configs -----------------------------------------------------------------------------
    listener_security_overrides: Mapping[str, Mapping[str, str]] = field()
    """listener.name.<listener>.[<mechanism>.]<config> values, by listener name (upper case) and
    the rest of the key (`ssl.keystore.location`, `scram-sha-512.sasl.jaas.config`)."""

    def listener_value(self, listener: str, name: str, mechanism: str | None = None) -> Any:
        """The value `listener` sees for security config `name`: listener and mechanism prefixed,
        listener prefixed, else the broker's own (typed as the config's type)."""
        prefixed = self.listener_security_overrides.get(listener.upper(), {})
        d = SECURITY_CONFIGS[name]
        for key in ((f"{mechanism.lower()}.{name}",) if mechanism else ()) + (name,):
            if key in prefixed:
                return d.parse(prefixed[key])
        values: Mapping[str, object] = getattr(self, "values")  # noqa: B009 - BrokerConfig's field
        return values[name]


SECURITY_CONFIGS: Mapping[str, ConfigDef] = MappingProxyType({d.name: d for d in definitions(SecurityConfig)})
"""The security configs by name."""

_PREFIXED = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_MECH_PREFIX = re.compile(r"(plain|scram-sha-256|scram-sha-512|oauthbearer|gssapi)\.(.+)")
LISTENER_CONFIGS = frozenset({
    "sasl.jaas.config", "connections.max.reauth.ms", "sasl.server.callback.handler.class",
    "sasl.enabled.mechanisms", "sasl.server.max.receive.size",
})
"""Besides every ssl.* and sasl.oauthbearer.* config, the configs Kafka reads per listener."""


def _listener_config(name: str) -> bool:
    return name.startswith(("ssl.", "sasl.oauthbearer.")) or name in LISTENER_CONFIGS


def split_listener_key(key: str) -> tuple[str, str] | None:
    """(LISTENER, rest) for a listener-prefixed security key Samsa knows, else None."""
    m = _PREFIXED.fullmatch(key)
    if m is None:
        return None
    rest = m.group(2)
    mech = _MECH_PREFIX.fullmatch(rest)
    name = mech.group(2) if mech else rest
    if name not in SECURITY_CONFIGS or not _listener_config(name):
        return None
    return m.group(1).upper(), rest


def listener_security_overrides(props: Mapping[str, str]) -> dict[str, Any]:
    """The `listener_security_overrides` field from server.properties (each value checked)."""
    out: dict[str, dict[str, str]] = {}
    for key, raw in props.items():
        split = split_listener_key(key)
        if split is None:
            continue
        listener, rest = split
        mech = _MECH_PREFIX.fullmatch(rest)
        SECURITY_CONFIGS[mech.group(2) if mech else rest].parse(raw)
        out.setdefault(listener, {})[rest] = raw
    return {"listener_security_overrides": MappingProxyType(
        {k: MappingProxyType(v) for k, v in out.items()})}


def parse_super_users(raw: str | None) -> frozenset[str]:
    """super.users: `User:a;User:b` (blanks around entries ignored)."""
    return frozenset(u.strip() for u in (raw or "").split(";") if u.strip())


def check_security(config: SecurityConfig, listeners: tuple[Listener, ...]) -> None:
    """Refuse, with one message naming the config, what Samsa cannot serve: a JKS store, GSSAPI
    or an unknown mechanism on a SASL listener, a TLS listener without a key store, a principal
    builder of its own."""
    if config.principal_builder_class not in (None, "", PRINCIPAL_BUILDER):
        raise ConfigError(f"principal.builder.class {config.principal_builder_class} is not "
                          f"supported: Samsa builds principals as {PRINCIPAL_BUILDER} does",
                          "principal.builder.class")
    for lst in listeners:
        protocol = lst.security_protocol
        if protocol in ("SSL", "SASL_SSL"):
            has_file = config.listener_value(lst.name, "ssl.keystore.location")
            has_inline = config.listener_value(lst.name, "ssl.keystore.key")
            if not has_file and not has_inline:
                raise ConfigError(f"listener {lst} is {protocol} but no key store is configured: "
                                  "set ssl.keystore.location (or ssl.keystore.key and "
                                  "ssl.keystore.certificate.chain)", "ssl.keystore.location")
            for store in ("ssl.keystore.type", "ssl.truststore.type"):
                location = config.listener_value(lst.name, store.replace("type", "location"))
                if location and config.listener_value(lst.name, store) == "JKS":
                    raise ConfigError(
                        f"{store} JKS ({location}) is not supported: no maintained Python library "
                        "reads Java key stores; convert it to PKCS12 (keytool -importkeystore "
                        f"-srckeystore {location} -destkeystore store.p12 -deststoretype PKCS12) "
                        "and set it to PKCS12, or use PEM", store)
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanisms = config.listener_value(lst.name, "sasl.enabled.mechanisms")
            unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
            if unknown or not mechanisms:
                raise ConfigError(
                    f"sasl.enabled.mechanisms {','.join(mechanisms) or '(none)'} on listener "
                    f"{lst}: Samsa serves {', '.join(SASL_MECHANISMS)}"
                    + (" (GSSAPI/Kerberos is not supported)" if "GSSAPI" in unknown else ""),
                    "sasl.enabled.mechanisms")
