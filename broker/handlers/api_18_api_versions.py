# ApiVersions (key 18), versions 0-4.
# Answers with every API key and version range in the handler registry (nothing kept by hand;
# registry.declared(), so the handler modules themselves load on their first request).
# Response header is always v0 (KIP-511). v3+ requests with a client software name or version
# outside Kafka's pattern get INVALID_REQUEST. An ApiVersions version above 4 is answered by
# network.py with `unsupported_version_body` (v0 body, UNSUPPORTED_VERSION, our ApiVersions range).
# Feature flags come from versions.FEATURES, each finalized at its max level (finalized epoch 0;
# -1, Kafka's 'none', when the table is empty).
from __future__ import annotations

import re
from functools import cache

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import (
    ApiVersionsResponse as ApiVersionsResponseV0,
)
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.api_versions.v4.response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kio.static.primitive import i16, i64

from broker.context import RequestContext
from broker.handlers import registry
from broker.handlers.versions import FEATURES
from protocol.errors import ErrorCode
from protocol.messages import encode_bytes
from protocol.types import NO_THROTTLE

API_KEY = 18
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


@cache
def _api_keys() -> tuple[ApiVersion, ...]:
    return tuple(
        ApiVersion(api_key=i16(d.api_key), min_version=i16(d.min_version), max_version=i16(d.max_version))
        for d in registry.declared().values()
    )


@cache
def _features() -> tuple[tuple[SupportedFeatureKey, ...], tuple[FinalizedFeatureKey, ...]]:
    supported = tuple(
        SupportedFeatureKey(name=name, min_version=i16(lo), max_version=i16(hi)) for name, (lo, hi) in FEATURES.items()
    )
    finalized = tuple(
        FinalizedFeatureKey(name=name, min_version_level=i16(hi), max_version_level=i16(hi))
        for name, (_, hi) in FEATURES.items()
    )
    return supported, finalized


def unsupported_version_body() -> bytes:
    handler = registry.get(API_KEY)
    assert handler is not None
    return encode_bytes(
        ApiVersionsResponseV0(
            error_code=ErrorCode.unsupported_version,
            api_keys=(
                ApiVersionV0(
                    api_key=i16(API_KEY),
                    min_version=i16(handler.min_version),
                    max_version=i16(handler.max_version),
                ),
            ),
        )
    )


@registry.api(API_KEY)
async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    error = ErrorCode.none
    if ctx.api_version >= 3 and not (
        _SOFTWARE.match(request.client_software_name) and _SOFTWARE.match(request.client_software_version)
    ):
        error = ErrorCode.invalid_request
    if error != ErrorCode.none:
        return ApiVersionsResponse(error_code=error, api_keys=(), throttle_time=NO_THROTTLE)
    supported, finalized = _features()
    if ctx.api_version < 4:  # v0-v3 omit features whose min supported version is 0
        supported = tuple(f for f in supported if f.min_version > 0)
    return ApiVersionsResponse(
        error_code=error,
        api_keys=_api_keys(),
        throttle_time=NO_THROTTLE,
        supported_features=supported,
        finalized_features_epoch=i64(0 if finalized else -1),
        finalized_features=finalized,
    )
