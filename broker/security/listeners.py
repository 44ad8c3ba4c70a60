"""Each listener's `ListenerSecurity`, built at start-up from the broker's config: its TLS context,
its SASL mechanisms with their credentials (PLAIN users from the JAAS config, SCRAM credentials
from the security store, OAUTHBEARER validation), connections.max.reauth.ms per mechanism. A
configuration Samsa cannot serve raises ConfigError here, before the broker listens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.config import BrokerConfig, ConfigError, Listener
from broker.security.principal import SslPrincipalMapper
from broker.security.sasl import (
    JaasConfig,
    OAuthBearerServer,
    OAuthSettings,
    PlainServer,
    SaslServer,
    ScramServer,
    parse_jaas,
)
from broker.security.session import ListenerSecurity
from broker.security.tls import server_context
from controller.security_model import ScramCredential

ScramLookup = Callable[[str, str], ScramCredential | None]
"""(user, mechanism) -> the stored credential"""
JWKS_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
UNSECURED_HANDLER = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                     "OAuthBearerUnsecuredValidatorCallbackHandler")


def jaas(config: BrokerConfig, listener: str, mechanism: str) -> JaasConfig | None:
    """The JAAS config `listener` uses for `mechanism` (listener.name.<l>.<m>.sasl.jaas.config,
    then sasl.jaas.config), or None."""
    text = config.listener_value(listener, "sasl.jaas.config", mechanism)
    if not text:
        return None
    try:
        return parse_jaas(str(text))
    except ValueError as e:
        raise ConfigError(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config: {e}",
                          "sasl.jaas.config") from None


def _oauth_settings(config: BrokerConfig, listener: str, options: dict[str, str]) -> tuple[OAuthSettings, Any]:
    handler = config.listener_value(listener, "sasl.server.callback.handler.class", "OAUTHBEARER")
    url = config.listener_value(listener, "sasl.oauthbearer.jwks.endpoint.url")
    if handler not in (None, "", JWKS_HANDLER, UNSECURED_HANDLER):
        raise ConfigError(f"sasl.server.callback.handler.class {handler} is not supported: use "
                          f"{JWKS_HANDLER} (with sasl.oauthbearer.jwks.endpoint.url) or leave it unset "
                          "(unsecured tokens)", "sasl.server.callback.handler.class")
    if handler == JWKS_HANDLER or (url and handler != UNSECURED_HANDLER):
        if not url:
            raise ConfigError(f"{JWKS_HANDLER} needs sasl.oauthbearer.jwks.endpoint.url",
                              "sasl.oauthbearer.jwks.endpoint.url")
        import jwt

        if not str(url).lower().startswith(("https://", "http://")):
            raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url {url}: only https: and http: URLs "
                              "are supported", "sasl.oauthbearer.jwks.endpoint.url")
        refresh_ms = config.listener_value(listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms")
        settings = OAuthSettings(
            principal_claim=str(config.listener_value(listener, "sasl.oauthbearer.sub.claim.name")),
            scope_claim=str(config.listener_value(listener, "sasl.oauthbearer.scope.claim.name")),
            clock_skew_ms=int(config.listener_value(listener, "sasl.oauthbearer.clock.skew.seconds")) * 1000,
            jwks_url=str(url),
            audience=tuple(config.listener_value(listener, "sasl.oauthbearer.expected.audience")),
            issuer=config.listener_value(listener, "sasl.oauthbearer.expected.issuer"),
        )
        return settings, jwt.PyJWKClient(str(url), lifespan=max(1, int(refresh_ms) // 1000))
    try:
        skew = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0)
    except ValueError:
        raise ConfigError("unsecuredValidatorAllowableClockSkewMs must be a number",
                          "sasl.jaas.config") from None
    return OAuthSettings(
        principal_claim=options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
        scope_claim=options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
        required_scope=tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
        clock_skew_ms=skew,
    ), None


def _server_factory(config: BrokerConfig, lst: Listener, mechanisms: tuple[str, ...],
                    scram: ScramLookup) -> Callable[[str], SaslServer]:
    plain_users: dict[str, str] = {}
    oauth: tuple[OAuthSettings, Any] = (OAuthSettings(), None)
    for mechanism in mechanisms:
        entry = jaas(config, lst.name, mechanism)
        options = dict(entry.options) if entry else {}
        if mechanism == "PLAIN":
            plain_users = {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_")}
            if not plain_users:
                raise ConfigError(
                    f"listener {lst} enables PLAIN but its JAAS config names no user: set "
                    f"listener.name.{lst.name.lower()}.plain.sasl.jaas.config to "
                    'org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'user_<name>="<password>" ...;', "sasl.jaas.config")
        elif mechanism == "OAUTHBEARER":
            oauth = _oauth_settings(config, lst.name, options)

    def new_server(mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainServer(plain_users)
        if mechanism == "OAUTHBEARER":
            return OAuthBearerServer(*oauth)
        return ScramServer(mechanism, lambda name: scram(name, mechanism))

    return new_server


def listener_securities(config: BrokerConfig, scram: ScramLookup) -> dict[str, ListenerSecurity]:
    """Every listener's ListenerSecurity, by listener name."""
    out: dict[str, ListenerSecurity] = {}
    mapper = SslPrincipalMapper(config.ssl_principal_mapping_rules)
    for lst in config.listeners:
        protocol = lst.security_protocol
        tls = server_context(config, lst.name) if protocol in ("SSL", "SASL_SSL") else None
        if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            out[lst.name] = ListenerSecurity(lst.name, protocol, tls, mapper=mapper)
            continue
        mechanisms = tuple(config.listener_value(lst.name, "sasl.enabled.mechanisms"))
        out[lst.name] = ListenerSecurity(
            lst.name, protocol, tls, mechanisms,
            new_server=_server_factory(config, lst, mechanisms, scram),
            reauth_ms={m: int(config.listener_value(lst.name, "connections.max.reauth.ms", m))
                       for m in mechanisms},
            max_receive_size=int(config.listener_value(lst.name, "sasl.server.max.receive.size")),
            failed_delay_ms=config.connection_failed_authentication_delay_ms,
            mapper=mapper,
        )
    return out
