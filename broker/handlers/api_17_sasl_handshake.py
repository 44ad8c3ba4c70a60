# SaslHandshake (key 17), versions 0-1.
# Chooses the SASL mechanism of a connection on a SASL_PLAINTEXT or SASL_SSL listener
# (broker/security/session.py): an enabled mechanism is answered NONE with the listener's enabled
# mechanisms and the connection goes on to SaslAuthenticate (v1) or to bare SASL tokens (v0); any
# other is answered UNSUPPORTED_SASL_MECHANISM and the connection closes, as Kafka's
# SaslServerAuthenticator does. On an authenticated connection of a client that used SaslAuthenticate
# v1+ it begins KIP-368 re-authentication. Anywhere else (PLAINTEXT and SSL listeners, a client
# that cannot re-authenticate) it is answered ILLEGAL_SASL_STATE, as KafkaApis does.
# Not supported: GSSAPI (Kerberos) is never an enabled mechanism.
from __future__ import annotations

from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from broker.context import RequestContext
from broker.handlers import registry
from protocol.errors import ErrorCode

API_KEY = 17


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    session = ctx.session
    accepted = None if session is None else session.handshake(request.mechanism, ctx.api_version)
    if accepted is None:
        return SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    assert session is not None
    return SaslHandshakeResponse(
        error_code=ErrorCode.none if accepted else ErrorCode.unsupported_sasl_mechanism,
        mechanisms=session.security.mechanisms,
    )
