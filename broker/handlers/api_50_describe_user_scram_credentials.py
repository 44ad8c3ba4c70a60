# DescribeUserScramCredentials (key 50), version 0.
# KIP-554: each user's SCRAM mechanisms and iteration counts (never salts or keys), all users when
# the request names none. A user without credentials is RESOURCE_NOT_FOUND, a user named twice
# DUPLICATE_RESOURCE, with KRaft Kafka's messages. Needs DESCRIBE on the cluster
# (CLUSTER_AUTHORIZATION_FAILED).
# Not supported: nothing of v0 is left out.
from __future__ import annotations

from collections import Counter

from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest
from kio.schema.describe_user_scram_credentials.v0.response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kio.static.primitive import i8, i32

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import audit
from controller.security_model import SCRAM_MECHANISMS, AclOperation
from protocol.errors import ErrorCode
from protocol.types import NO_THROTTLE

API_KEY = 50


def _result(user: str, code: ErrorCode, message: str | None,
            infos: tuple[CredentialInfo, ...] = ()) -> DescribeUserScramCredentialsResult:
    return DescribeUserScramCredentialsResult(user=user, error_code=code, error_message=message,
                                              credential_infos=infos)


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: DescribeUserScramCredentialsRequest,
                 ) -> DescribeUserScramCredentialsResponse:
    names = [u.name for u in request.users or ()]
    if not ctx.authorized(AclOperation.DESCRIBE):
        message = "Cluster authorization failed."
        return DescribeUserScramCredentialsResponse(
            throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed, error_message=message,
            results=tuple(_result(n, ErrorCode.cluster_authorization_failed, message) for n in dict.fromkeys(names)))
    scram = ctx.services.security_store.image.scram
    counts = Counter(names) if names else Counter(sorted(scram))
    results = []
    for user, count in counts.items():
        if count > 1:
            results.append(_result(user, ErrorCode.duplicate_resource, "Cannot describe SCRAM credentials "
                                   f"for the same user twice in a single request: {user}"))
        elif not scram.get(user):
            results.append(_result(user, ErrorCode.resource_not_found,
                                   f"Attempt to describe a user credential that does not exist: {user}"))
        else:
            results.append(_result(user, ErrorCode.none, None, tuple(
                CredentialInfo(mechanism=i8(SCRAM_MECHANISMS[m]), iterations=i32(c.iterations))
                for m, c in sorted(scram[user].items()))))
    audit(ctx, "describe_user_scram_credentials", users=len(results))
    return DescribeUserScramCredentialsResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                                                error_message=None, results=tuple(results))
