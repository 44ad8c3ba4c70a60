"""The handler registry: which API keys and versions this broker serves.

Every handler module registers itself with `@api(key, min_version, max_version)`. The handler is
written against the max_version kio classes; `dispatch` converts requests up to it and responses
down to the version the client sent. ApiVersions is answered from this registry and nothing else,
so a version is advertised exactly when a handler claims it.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from kio.index import _name_from_key

from protocol import messages

if TYPE_CHECKING:
    from broker.context import RequestContext

HandlerFn = Callable[["RequestContext", Any], Awaitable[Any]]
ErrorResponseFn = Callable[["RequestContext", Any, Exception], Any]
UpgradeFn = Callable[[int, Any], Any]
"""(api_version, request as decoded) -> the max_version request; for APIs whose old versions
carry fields the newest lacks (FindCoordinator key, LeaveGroup member_id, OffsetFetch group_id),
which the by-name `messages.convert` would drop."""


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
    min_version: int,
    max_version: int,
    *,
    error_response: ErrorResponseFn | None = None,
    upgrade: UpgradeFn | None = None,
) -> Callable[[HandlerFn], HandlerFn]:
    """Register the decorated coroutine as the handler of `api_key` for the given versions."""

    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in _REGISTRY:
            raise RuntimeError(f"API key {api_key} registered twice")
        # Schemas load lazily (importing every version's kio module costs start-up time);
        # tests/unit/test_registry.py checks that every registered version has both schemas.
        _REGISTRY[api_key] = ApiHandler(
            api_key, _name_from_key(api_key), min_version, max_version, fn, error_response, upgrade
        )
        return fn

    return register


def load_handlers() -> dict[int, ApiHandler]:
    """Import every `broker.handlers.api_*` module once and return the registry."""
    import broker.handlers as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("api_"):
            importlib.import_module(f"{package.__name__}.{info.name}")
    return dict(sorted(_REGISTRY.items()))


def get(api_key: int) -> ApiHandler | None:
    return _REGISTRY.get(api_key)
