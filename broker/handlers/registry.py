"""The handler registry: which API keys and versions this broker serves.

The versions are written once, in `broker/handlers/versions.py`. Every handler module registers
itself with `@api(API_KEY)` and serves its row's range; the handler is written against the
max_version kio classes, and `dispatch` converts requests up to it and responses down to the
version the client sent. ApiVersions is answered from the table and nothing else, so a version is
advertised exactly when its row says so. The rows of `UNADVERTISED` are served the same way but
not advertised (the share group APIs, until share groups are served whole); `load_handlers()`
and ApiVersions leave them out.

Handler modules are imported on the first request for their key: importing all of them (and the
kio schemas they use) is about 40% of a cold start; `load_handlers()` imports every module
(tests/unit/test_registry.py does, and checks each module against its row).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.handlers.versions import SERVED, UNADVERTISED
from protocol import messages
from protocol.kio_compat import api_name

if TYPE_CHECKING:
    from broker.context import RequestContext

HandlerFn = Callable[["RequestContext", Any], Awaitable[Any]]
ErrorResponseFn = Callable[["RequestContext", Any, Exception], Any]
UpgradeFn = Callable[[int, Any], Any]
"""(api_version, request as decoded) -> the request as the handler takes it: the max_version
class, for APIs whose old versions carry fields the newest lacks (FindCoordinator key, LeaveGroup
member_id, OffsetFetch group_id), which the by-name `messages.convert` would drop; or, where the
newest versions name things differently, the newest class of the old family (Fetch v4-12 by topic
name: v12's)."""


@dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handle: HandlerFn
    error_response: ErrorResponseFn | None
    """Builds the response that carries an error for a request the handler failed on."""
    upgrade: UpgradeFn | None = None

    def handler_request(self, api_version: int, request: Any) -> Any:
        """The request as the handler takes it: converted up to the max_version class."""
        if self.upgrade is not None and api_version != self.max_version:
            return self.upgrade(api_version, request)
        return messages.convert(request, self.request_class)

    @property
    def request_class(self) -> type:
        return messages.request_class(self.api_key, self.max_version)

    @property
    def response_class(self) -> type:
        return messages.response_class(self.api_key, self.max_version)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


_REGISTRY: dict[int, ApiHandler] = {}


def api(
    api_key: int,
    *,
    error_response: ErrorResponseFn | None = None,
    upgrade: UpgradeFn | None = None,
) -> Callable[[HandlerFn], HandlerFn]:
    """Register the decorated coroutine as the handler of `api_key`, for the versions of its row
    in `versions.SERVED`."""

    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in _REGISTRY:
            raise RuntimeError(f"API key {api_key} registered twice")
        declaration = _declaration(api_key)
        if declaration is None or fn.__module__ != declaration.module:
            raise RuntimeError(
                f"API key {api_key} registered by {fn.__module__}, but broker/handlers/versions.py "
                f"names {declaration and declaration.module}"
            )
        # Schemas load lazily (importing every version's kio module costs start-up time);
        # tests/unit/test_registry.py checks that every registered version has both schemas.
        _REGISTRY[api_key] = ApiHandler(
            api_key, api_name(api_key), declaration.min_version, declaration.max_version, fn,
            error_response, upgrade,
        )  # fmt: skip
        return fn

    return register


@dataclass(frozen=True, slots=True)
class ApiDeclaration:
    """A served API key: its version range and the module that handles it."""

    api_key: int
    min_version: int
    max_version: int
    module: str


_DECLARED = {
    key: ApiDeclaration(key, low, high, f"{__package__}.{module}")
    for key, (module, low, high) in SERVED.items()
}


_UNADVERTISED = {
    key: ApiDeclaration(key, low, high, f"{__package__}.{module}")
    for key, (module, low, high) in UNADVERTISED.items()
}


def declared() -> dict[int, ApiDeclaration]:
    """Every advertised API key's declaration, by key (no handler module imported)."""
    return _DECLARED


def unadvertised() -> dict[int, ApiDeclaration]:
    """The API keys served but not advertised, by key."""
    return _UNADVERTISED


def _declaration(api_key: int) -> ApiDeclaration | None:
    return _DECLARED.get(api_key) or _UNADVERTISED.get(api_key)


def load_handlers() -> dict[int, ApiHandler]:
    """Import every advertised handler module and return their handlers (tests, tools; the
    broker imports lazily)."""
    return {key: h for key in sorted(declared()) if (h := get(key)) is not None}


def load_unadvertised() -> dict[int, ApiHandler]:
    """The handlers served but not advertised, their modules imported."""
    return {key: h for key in sorted(unadvertised()) if (h := get(key)) is not None}


def get(api_key: int) -> ApiHandler | None:
    """The handler of `api_key`, its module imported on first use; None for an unknown key."""
    handler = _REGISTRY.get(api_key)
    if handler is None:
        declaration = _declaration(api_key)
        if declaration is None:
            return None
        importlib.import_module(declaration.module)
        handler = _REGISTRY[api_key]
    return handler
