# AlterUserScramCredentials (key 51), version 0.
# KIP-554 (what kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type
# users sends): upsertions carry the salt, the iterations and the salted password, from which the
# stored key and server key are kept (never the password); deletions remove one mechanism's
# credential. Checked as KRaft Kafka's ScramControlManager checks them: an empty user name or fewer
# than 4096 or more than 16384 iterations UNACCEPTABLE_CREDENTIAL, an unknown mechanism
# UNSUPPORTED_SASL_MECHANISM, a user altered twice in one request DUPLICATE_RESOURCE, deleting what
# does not exist RESOURCE_NOT_FOUND. Stored in ZooKeeper's /config/users/<user> in a cluster (seen by
# every broker at once) or in the data directory. Needs ALTER on the cluster
# (CLUSTER_AUTHORIZATION_FAILED).
# Not supported: nothing of v0 is left out.
from __future__ import annotations

from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers._admin import audit
from broker.security.sasl import scram_from_salted
from controller.security_model import (
    SCRAM_MAX_ITERATIONS,
    SCRAM_MECHANISMS,
    SCRAM_MIN_ITERATIONS,
    AclOperation,
)
from controller.security_store import ScramChange
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_THROTTLE

API_KEY = 51
_MECHANISM_NAMES = {code: name for name, code in SCRAM_MECHANISMS.items()}
DUPLICATE = "A user credential cannot be altered twice in the same request"


def _check(name: str, mechanism: int) -> str:
    if not name:
        raise KafkaError(ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism not in _MECHANISM_NAMES:
        raise KafkaError(ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return _MECHANISM_NAMES[mechanism]


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    users = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
    if not ctx.authorized(AclOperation.ALTER):
        return AlterUserScramCredentialsResponse(throttle_time=NO_THROTTLE, results=tuple(
            AlterUserScramCredentialsResult(user=u, error_code=ErrorCode.cluster_authorization_failed,
                                            error_message="Cluster authorization failed.") for u in users))
    errors: dict[str, KafkaError] = {}
    changes: dict[str, ScramChange] = {}
    for d in request.deletions:
        if d.name in errors:
            continue
        try:
            if changes.pop(d.name, None) is not None:
                raise KafkaError(ErrorCode.duplicate_resource, DUPLICATE)
            mechanism = _check(d.name, d.mechanism)
            if mechanism not in ctx.services.security_store.image.scram.get(d.name, {}):
                raise KafkaError(ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
            changes[d.name] = ScramChange(d.name, mechanism, None)
        except KafkaError as e:
            errors[d.name] = e
    for up in request.upsertions:
        if up.name in errors:
            continue
        try:
            if changes.pop(up.name, None) is not None:
                raise KafkaError(ErrorCode.duplicate_resource, DUPLICATE)
            mechanism = _check(up.name, up.mechanism)
            if up.iterations < SCRAM_MIN_ITERATIONS:
                raise KafkaError(ErrorCode.unacceptable_credential, "Too few iterations")
            if up.iterations > SCRAM_MAX_ITERATIONS:
                raise KafkaError(ErrorCode.unacceptable_credential, "Too many iterations")
            changes[up.name] = ScramChange(up.name, mechanism, scram_from_salted(
                mechanism, up.salted_password, up.salt, int(up.iterations)))
        except KafkaError as e:
            errors[up.name] = e
    stored = await ctx.services.security_store.alter_scram(list(changes.values())) if changes else []
    for change, error in zip(changes.values(), stored):
        if error is not None:
            errors[change.user] = error
    results = [AlterUserScramCredentialsResult(user=u, error_code=errors[u].code if u in errors else ErrorCode.none,
                                               error_message=errors[u].message if u in errors else None)
               for u in users if u in errors or u in changes]
    for u in users:
        audit(ctx, "alter_user_scram_credentials", user=repr(u),
              change="delete" if u in changes and changes[u].credential is None else "upsert",
              result=errors[u].code.name if u in errors else "NONE")
    return AlterUserScramCredentialsResponse(throttle_time=NO_THROTTLE, results=tuple(results))
