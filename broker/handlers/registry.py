"""The handler registry: which API keys and versions this broker serves.

Every handler module registers itself with `@api(key, min_version, max_version)`. The handler is
written against the max_version kio classes; `dispatch` converts requests up to it and responses
down to the version the client sent. ApiVersions is answered from this registry and nothing else,
so a version is advertised exactly when a handler claims it.

Handler modules are imported on the first request for their key: importing all of them (and the
kio schemas they use) is about 40% of a cold start. ApiVersions still needs every key's range
before then, so `declared()` reads it from each module's own `@registry.api(API_KEY, min, max`
line without importing it, and registration checks that what the module registers equals what
was read; `load_handlers()` imports every module (tests/unit/test_registry.py does, so the two can
never disagree in CI).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
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
        declaration = declared().get(api_key)
        if declaration is None or (declaration.min_version, declaration.max_version) != (min_version, max_version):
            raise RuntimeError(
                f"API key {api_key} registers versions {min_version}-{max_version}, but its module declares "
                f"{declaration}: keep `@registry.api(API_KEY, min, max` literal in broker/handlers/api_NN_*.py"
            )
        # Schemas load lazily (importing every version's kio module costs start-up time);
        # tests/unit/test_registry.py checks that every registered version has both schemas.
        _REGISTRY[api_key] = ApiHandler(
            api_key, _name_from_key(api_key), min_version, max_version, fn, error_response, upgrade
        )
        return fn

    return register


@dataclass(frozen=True, slots=True)
class ApiDeclaration:
    """A handler module's key and version range, as its source declares them."""

    api_key: int
    min_version: int
    max_version: int
    module: str


_HANDLER_FILE = re.compile(r"api_(\d+)_\w+\.py")
_DECLARATION = re.compile(
    r"^API_KEY = (\d+)$.*?^@registry\.api\(API_KEY, (\d+), (\d+)[,)]", re.MULTILINE | re.DOTALL
)


@cache
def declared() -> dict[int, ApiDeclaration]:
    """Every handler module's declaration, read from its source (no import), by API key."""
    result: dict[int, ApiDeclaration] = {}
    for path in sorted(Path(__file__).parent.glob("api_*.py")):
        name = _HANDLER_FILE.fullmatch(path.name)
        found = _DECLARATION.search(path.read_text())
        if name is None or found is None or int(found.group(1)) != int(name.group(1)):
            raise RuntimeError(f"{path}: expected API_KEY = {name and int(name.group(1))} and @registry.api(API_KEY, min, max")
        key, low, high = (int(g) for g in found.groups())
        result[key] = ApiDeclaration(key, low, high, f"{__package__}.{path.stem}")
    if not result:  # e.g. an install without the .py sources: refuse rather than advertise nothing
        raise RuntimeError(f"no handler sources (api_*.py) in {Path(__file__).parent}")
    return result


def load_handlers() -> dict[int, ApiHandler]:
    """Import every handler module and return the registry (tests, tools; the broker imports lazily)."""
    for key in declared():
        get(key)
    return dict(sorted(_REGISTRY.items()))


def get(api_key: int) -> ApiHandler | None:
    """The handler of `api_key`, its module imported on first use; None for an unknown key."""
    handler = _REGISTRY.get(api_key)
    if handler is None:
        declaration = declared().get(api_key)
        if declaration is None:
            return None
        importlib.import_module(declaration.module)
        handler = _REGISTRY[api_key]
    return handler
