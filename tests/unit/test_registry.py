"""Every API the registry advertises can be decoded and answered at every advertised version.

ApiVersions is derived from the registry, so a version listed there must have kio request and
response classes, a request of that version must round-trip through the codec and convert up to
the handler's version, and the handler's response must convert down to it and encode.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from kio.serial import entity_reader

from broker.handlers import registry
from protocol import messages

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = registry.load_handlers()
SERVED = {**HANDLERS, **registry.load_unadvertised()}
"""Advertised or not (broker/handlers/versions.py UNADVERTISED), a served version must work."""
CASES = [
    (key, version)
    for key, handler in SERVED.items()
    for version in range(handler.min_version, handler.max_version + 1)
]


def test_registry_is_not_empty_and_names_are_kafkas() -> None:
    assert {0, 1, 2, 3, 18} <= set(HANDLERS)
    assert HANDLERS[18].name == "api_versions"
    for key, handler in HANDLERS.items():
        assert handler.api_key == key
        assert 0 <= handler.min_version <= handler.max_version


@pytest.mark.parametrize(("key", "version"), CASES, ids=[f"{SERVED[k].name}-v{v}" for k, v in CASES])
def test_every_advertised_version_decodes_and_encodes(key: int, version: int) -> None:
    handler = SERVED[key]
    request_class = messages.request_class(key, version)
    response_class = messages.response_class(key, version)
    assert int(request_class.__api_key__) == key and int(response_class.__api_key__) == key
    if request_class.__module__.startswith("kio."):  # Samsa's own Produce v0-2 share one class
        assert int(request_class.__version__) == version and int(response_class.__version__) == version

    # a request of this version survives the wire and reaches the handler's version
    request = messages._zero_entity(request_class)
    body = messages.encode_bytes(request)
    decoded, consumed = messages.decode_request(key, version, body, 0)
    assert decoded == request
    assert consumed == len(body)
    upgraded = handler.handler_request(version, decoded)
    if handler.upgrade is None:
        assert type(upgraded) is handler.request_class
    else:  # an upgrade may take a family of old versions to an older class (Fetch v4-12: v12's)
        assert int(type(upgraded).__api_key__) == key
        assert version <= int(type(upgraded).__version__) <= handler.max_version

    # the handler's response converts down to this version and survives the wire
    response = messages.convert(messages._zero_entity(handler.response_class), response_class)
    assert type(response) is response_class
    encoded = messages.encode_bytes(response)
    back, used = entity_reader(response_class)(encoded, 0)
    assert back == response
    assert used == len(encoded)


def test_admin_versions_registered() -> None:
    """The admin APIs of issue 2, at the versions clients and the CLI tools need."""
    expected = {19: (2, 7), 20: (1, 6), 21: (0, 2), 32: (1, 4), 33: (0, 2), 37: (0, 3), 44: (0, 1), 60: (0, 2)}
    for key, (low, high) in expected.items():
        assert (HANDLERS[key].min_version, HANDLERS[key].max_version) == (low, high)


def test_delete_topics_old_versions_keep_their_topic_names() -> None:
    """v1-5 carry names in `topic_names`, which v6 replaced; the upgrade must not drop them."""
    import datetime

    handler = HANDLERS[20]
    for version in range(1, 6):
        old = messages.request_class(20, version)(topic_names=("a", "b"), timeout=datetime.timedelta(seconds=1))
        upgraded = handler.handler_request(version, old)
        assert [t.name for t in upgraded.topics] == ["a", "b"]


def test_every_handler_module_is_in_the_versions_table_and_says_the_same() -> None:
    """broker/handlers/versions.py is the one place versions are written: every api_NN_*.py
    module has its row, registers under it, and its opening comment names the same versions."""
    declared = {**registry.declared(), **registry.unadvertised()}
    assert not set(registry.declared()) & set(registry.unadvertised())
    modules = sorted(p.stem for p in (ROOT / "broker" / "handlers").glob("api_*.py"))
    assert sorted(d.module.rsplit(".", 1)[1] for d in declared.values()) == modules
    assert set(declared) == set(SERVED) and set(registry.declared()) == set(HANDLERS)
    for key, d in declared.items():
        handler = SERVED[key]
        assert (handler.min_version, handler.max_version) == (d.min_version, d.max_version)
        assert d.module == handler.handle.__module__
        source = (ROOT / "broker" / "handlers" / (d.module.rsplit(".", 1)[1] + ".py")).read_text()
        assert re.search(rf"^API_KEY = {key}$", source, re.MULTILINE), d.module
        first = source.splitlines()[0]
        said = f"version {d.min_version}" if d.min_version == d.max_version else f"versions {d.min_version}-{d.max_version}"
        assert f"(key {key}), {said}" in first, f"{d.module}: opening comment {first!r} does not say {said}"


def test_a_registration_its_row_does_not_name_is_refused() -> None:
    with pytest.raises(RuntimeError, match="API key 9999 registered by"):
        registry.api(9999)(HANDLERS[18].handle)
    assert registry.get(9999) is None


def test_handler_modules_load_on_their_first_request() -> None:
    """The broker imports no handler at start-up (a cold start's largest cost); `get` imports
    the one module asked for."""
    code = (
        "import sys\n"
        "from broker.handlers import registry\n"
        "assert len(registry.declared()) > 20\n"
        "assert not [m for m in sys.modules if m.startswith('broker.handlers.api_')]\n"
        "assert registry.get(11).name == 'join_group'\n"
        "print(sorted(m for m in sys.modules if m.startswith('broker.handlers.api_')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "['broker.handlers.api_11_join_group']"
