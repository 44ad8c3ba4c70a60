"""The differential suite's fixtures: the two targets, cached observations, and the matrix.

`kafka_target` is parametrized over ("samsa", "kafka"): one Samsa and one Apache Kafka (from the
Maven jars, compat/kafka.py) per session, each started on first use and stopped at the end. A
differential test observes a scenario on its own target and, on Samsa, compares with the same
scenario observed on Kafka (`differential()`: each scenario runs once per target and is cached).
On Kafka the test's own assertions check the observation, so a broken harness cannot pass.

Each test is marked `@pytest.mark.compat(client=..., scenario=...)`; its outcome per target is
recorded, merged into compat/target/results.json at the end of the session and turned into
docs/compat.md by compat/matrix.py. A test skipped on a target (with the reason why the scenario
cannot run there) is recorded as "not run" with that reason.

Besides the session's Samsa, `targets.get("samsa-<name>")` starts a dedicated Samsa (same
settings, its own data and SAMSA_API_STATS file); `targets.api_versions_seen()` is the union of
what every Samsa of the session served.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.testing import SamsaProcess
from compat import matrix
from compat.differences import normalise
from compat.kafka import COMMON_SETTINGS, TARGET, Target, start_kafka

TARGETS = ("samsa", "kafka")
GO_DIR = Path(__file__).resolve().parent / "go"
GO_BIN = TARGET / "go" / "samsa-compat-go"

# Samsa gets the same settings as Kafka, and the same node id (Kafka's KRaft node is 1).
SAMSA_SETTINGS = {**COMMON_SETTINGS, "broker.id": "1"}


@dataclass
class SamsaTarget:
    process: SamsaProcess
    api_stats: Path
    name: str = "samsa"

    @property
    def bootstrap_servers(self) -> str:
        return self.process.bootstrap_servers

    def api_versions_seen(self) -> dict[int, set[int]]:
        """Every (API key, version) this Samsa has served: stops it (the broker writes
        SAMSA_API_STATS at shutdown) and starts it again on the same data and port."""
        self.process.stop()
        seen = json.loads(self.api_stats.read_text())
        self.process.start()
        return {int(k): {int(v) for v in versions} for k, versions in seen.items()}

    def close(self) -> None:
        self.process.close()


class Targets:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self._started: dict[str, Any] = {}
        self._starters: dict[str, Callable[[Path], Any]] = {}

    def register(self, name: str, start: Callable[[Path], Any]) -> None:
        """How `get(name)` starts a target with settings of its own: `start(directory)` returns a
        started SamsaProcess (names "samsa-<x>") or Kafka target ("kafka-<x>", named so)."""
        self._starters.setdefault(name, start)

    def get(self, name: str) -> Any:
        """"kafka", "samsa" (the session's Samsa), "samsa-<name>" (a dedicated one) or a
        registered one."""
        if name not in self._started:
            start = self._starters.get(name)
            if name.startswith("samsa"):
                stats = self.tmp / f"{name}-api-stats.json"
                os.environ["SAMSA_API_STATS"] = str(stats)
                try:
                    proc = start(self.tmp / name) if start else SamsaProcess(self.tmp / name, SAMSA_SETTINGS).start()
                finally:
                    del os.environ["SAMSA_API_STATS"]
                self._started[name] = SamsaTarget(proc, stats, name)
            else:
                target: Target = start(self.tmp / name) if start else start_kafka()
                self._started[name] = target
        return self._started[name]

    def api_versions_seen(self) -> dict[int, set[int]]:
        """The (API key, version) pairs served by any Samsa of this session (each is restarted)."""
        seen: dict[int, set[int]] = {}
        self.get("samsa")
        for t in list(self._started.values()):
            if isinstance(t, SamsaTarget):
                for key, versions in t.api_versions_seen().items():
                    seen.setdefault(key, set()).update(versions)
        return seen

    def close(self) -> None:
        for t in self._started.values():
            t.close()


@pytest.fixture(scope="session")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Targets]:
    t = Targets(tmp_path_factory.mktemp("compat"))
    yield t
    t.close()


@pytest.fixture(scope="session")
def go_binary() -> Path:
    """compat/go (franz-go) built into compat/target/go/ once per session."""
    go = shutil.which("go")
    assert go, "Go is not installed (tests/run.sh installs it)"
    GO_BIN.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([go, "build", "-o", str(GO_BIN), "."], cwd=GO_DIR, check=True, timeout=900)
    return GO_BIN


@pytest.fixture(params=TARGETS)
def kafka_target(request: pytest.FixtureRequest, targets: Targets) -> Any:
    """A running broker: Samsa or Apache Kafka (object with .name and .bootstrap_servers; Samsa's
    also has .process, the SamsaProcess)."""
    return targets.get(request.param)


class Observations:
    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str], threading.Lock] = {}

    def get(self, key: str, target: Any, run: Callable[[Any], Any]) -> Any:
        k = (key, target.name)
        with self._lock:
            once = self._running.setdefault(k, threading.Lock())
        with once:
            if k not in self._cache:
                self._run(k, target, run)
        status, value = self._cache[k]
        if status == "error":
            raise RuntimeError(f"scenario {key} failed on {target.name}") from value
        return value

    def _run(self, k: tuple[str, str], target: Any, run: Callable[[Any], Any]) -> None:
        try:
            self._cache[k] = ("ok", run(target))
        except Exception as e:  # noqa: BLE001 - re-raised for every test that needs it
            self._cache[k] = ("error", e)


@pytest.fixture(scope="session")
def observations() -> Observations:
    return Observations()


@pytest.fixture
def differential(kafka_target: Any, targets: Targets, observations: Observations) -> Callable[..., Any]:
    """differential(key, run) -> this target's observations (a list of dicts). On Samsa it also
    asserts they equal Kafka's for the same scenario, after compat/differences.py normalisation."""

    def check(key: str, run: Callable[[Any], list[dict]]) -> list[dict]:
        if kafka_target.name.startswith("samsa"):
            # both targets at once: the clients are mostly JVM start-up, which overlaps well;
            # "samsa-<x>" is compared with "kafka-<x>" (targets with settings of their own)
            kafka = targets.get("kafka" + kafka_target.name.removeprefix("samsa"))
            with ThreadPoolExecutor(1) as pool:
                reference_future = pool.submit(observations.get, key, kafka, run)
                mine = observations.get(key, kafka_target, run)
                reference = reference_future.result()
            got = [json.dumps(o, sort_keys=True) for o in normalise(key, mine)]
            want = [json.dumps(o, sort_keys=True) for o in normalise(key, reference)]
            assert got == want, f"{key}: Samsa (left) differs from Apache Kafka (right)"
        else:
            mine = observations.get(key, kafka_target, run)
        return normalise(key, mine)

    return check


# ------------------------------------------------------------------------------------- matrix

_results: dict[str, dict[str, Any]] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "compat(client, scenario): a differential scenario (docs/compat.md)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    marker = item.get_closest_marker("compat")
    callspec = getattr(item, "callspec", None)
    if marker is not None and callspec is not None and "kafka_target" in callspec.params:
        target = callspec.params["kafka_target"]
        key = f"{marker.kwargs['client']}|{marker.kwargs['scenario']}|{target}"
        row = {"client": marker.kwargs["client"], "scenario": marker.kwargs["scenario"], "target": target,
               "test": item.nodeid}
        previous = _results.get(key)
        if report.skipped:
            # not run on this target, with the reason; another test of the same row that ran wins
            if previous is None or previous.get("skipped"):
                _results[key] = {**row, "passed": False, "skipped": True, "detail": _skip_reason(report)}
        elif report.when == "call" or report.failed:
            if previous is not None and previous.get("skipped"):
                previous = None
            passed = report.passed and (previous is None or previous["passed"])
            _results[key] = {**row, "passed": passed, "detail": "" if passed else _first_line(report.longreprtext)}
    return report


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("E "):
            return line[1:].strip()[:200]
    return text.strip().splitlines()[-1][:200] if text.strip() else ""


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _results:
        return
    TARGET.mkdir(exist_ok=True)
    path = TARGET / "results.json"
    merged: dict[str, Any] = {}
    if path.exists():
        try:
            merged = json.loads(path.read_text())
        except ValueError:
            merged = {}
    merged.update(_results)
    path.write_text(json.dumps(merged, indent=1, sort_keys=True))
    matrix.write(merged, generated_at=time.strftime("%Y-%m-%d %H:%M:%S"))
