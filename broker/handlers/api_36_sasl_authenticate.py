# SaslAuthenticate (key 36), versions 0-2.
# Carries the SASL tokens of the mechanism SaslHandshake v1 chose (PLAIN, SCRAM-SHA-256/512,
# OAUTHBEARER: broker/security/sasl.py). Each token gets the mechanism's answer with NONE; the last
# one also the session lifetime (v1+, KIP-368): the shorter of connections.max.reauth.ms and the
# time left on the credential (an OAuth token), 0 for none. A failure is answered, after
# connection.failed.authentication.delay.ms, with SASL_AUTHENTICATION_FAILED and Kafka's message
# (for an unknown user or a wrong password only "Authentication failed during authentication due to
# invalid credentials with SASL mechanism <m>"), logged once (client address, mechanism) and the
# connection closes. On an authenticated connection outside re-authentication it is answered
# ILLEGAL_SASL_STATE, as KafkaApis does.
# Not supported: nothing of v0-2 is left out.
from __future__ import annotations

import asyncio
import datetime

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.static.primitive import i64Timedelta

from broker.context import RequestContext
from broker.handlers import registry
from broker.security.sasl import SaslFailure
from broker.security.session import SaslState
from protocol.errors import ErrorCode

API_KEY = 36


def _response(error: ErrorCode, message: str | None, token: bytes = b"", lifetime_ms: int = 0,
              ) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=error, error_message=message, auth_bytes=token,
        session_lifetime=i64Timedelta.parse(datetime.timedelta(milliseconds=lifetime_ms)))


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    session = ctx.session
    if session is None or session.state not in (SaslState.AUTHENTICATE, SaslState.REAUTHENTICATE):
        return _response(ErrorCode.illegal_sasl_state,
                         "SaslAuthenticate request received after successful authentication")
    try:
        token, lifetime_ms = await session.authenticate(request.auth_bytes, ctx.api_version)
    except SaslFailure as e:
        delay_ms = session.security.failed_delay_ms
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)
        return _response(ErrorCode.sasl_authentication_failed, e.client_message)
    return _response(ErrorCode.none, None, token, lifetime_ms)
