"""Kafka's kafka-share-groups.sh (Kafka 4.3.1's ShareGroupCommand) against Samsa and Apache Kafka:
the visible output must be the same after normalising what differs between any two clusters
(member ids, the coordinator's port).

The share group: a topic of 2 partitions with 3 records each, consumed and accepted by one Java
KafkaShareConsumer (compat/jvm/harness/clients-4/ShareCli.java) whose group has
share.auto.offset.reset=earliest. While that member is in the group: --describe with --members and
--state (and --verbose), and the refusals of --reset-offsets, --delete-offsets and --delete. Once
it has left (the group is Empty): --list (with --state), --describe (offsets), --reset-offsets
--to-earliest / --to-latest / --to-datetime with --dry-run and --execute, --delete-offsets --topic,
--delete --group; each action on a group that does not exist, and --describe and --delete of a
classic group. (4.3.1's tool has no --to-offset, --shift-by or --from-file for share groups.)
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from compat.jvm import TOOL_JVM, compile_harness, run_tool
from compat.kafka import classpath, java

TOPIC = "cli-share"
GROUP = "cli-share-group"
UNKNOWN = "cli-share-nope"
CLASSIC = f"{GROUP}-classic"  # a classic group with a committed offset (ShareCli)


def _lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = re.sub(r"\s+", " ", line).strip()
        line = re.sub(rf"^{GROUP} \S+ /", f"{GROUP} <member> /", line)  # --members: a member id (a Uuid)
        line = re.sub(r"127\.0\.0\.1:\d+ \(\d+\)", "<coordinator>", line)
        if line and not line.startswith("at ") and not re.match(r"\.\.\. \d+ more", line):
            out.append(line)
    return out


def _tool(bootstrap: str, step: str, *args: str) -> dict[str, Any]:
    """One run of kafka-share-groups: its exit code, standard output and error (stack frames and
    the client's own log lines left out)."""
    r = run_tool("kafka-share-groups", "--bootstrap-server", bootstrap, *args, check=False, timeout=60)
    err = [line for line in _lines(r.stderr) if not re.match(r"(WARN|ERROR|INFO) ", line)]
    return {"step": step, "rc": r.returncode, "out": _lines(r.stdout), "err": err}


class _Member:
    """ShareCli's share consumer: started, in the group once it has accepted the records, gone
    once its standard input closes."""

    def __init__(self, bootstrap: str, base_timestamp_ms: int) -> None:
        jars = os.pathsep.join([classpath("clients-4"), str(compile_harness("clients-4"))])
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [java(), *TOOL_JVM, "-cp", jars, "ShareCli", bootstrap, TOPIC, GROUP, str(base_timestamp_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
        )

    def wait_for(self, step: str, timeout: float = 90) -> dict[str, Any]:
        """Its next line of that step (killed after `timeout` seconds without it)."""
        assert self.proc.stdout is not None
        watchdog = threading.Timer(timeout, self.proc.kill)
        watchdog.start()
        try:
            for line in self.proc.stdout:
                if line.startswith("{") and (o := json.loads(line))["step"] == step:
                    return o
        finally:
            watchdog.cancel()
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.stderr.seek(0)
        err = self.stderr.read().decode(errors="replace")
        raise RuntimeError(f"ShareCli: no {step!r} line (exit {self.proc.returncode})\n{err[-4000:]}")

    def leave(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.wait_for("end", timeout=30)
        self.proc.wait(timeout=10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.stderr.close()


def _ours(o: dict[str, Any]) -> dict[str, Any]:
    """A --list run with only this test's groups (other tests' share groups may be listed, in
    each broker's order), header first."""
    if not o["step"].startswith("list"):
        return o
    header = [line for line in o["out"] if line.startswith("GROUP ")]
    return {**o, "out": header + sorted(line for line in o["out"] if line.startswith(GROUP))}


def _batch(bootstrap: str, steps: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Runs of kafka-share-groups that change nothing the others see, at once (JVM start-up is
    most of each run)."""
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda step: _ours(_tool(bootstrap, step, *steps[step])), steps))


def _scenario(target: Any) -> list[dict[str, Any]]:
    bs = target.bootstrap_servers
    base = (int(time.time()) - 3600) * 1000  # the records' timestamps: base + i seconds
    second = datetime.datetime.fromtimestamp(base / 1000 + 1, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    group = ["--group", GROUP]
    unknown = ["--group", UNKNOWN]
    member = _Member(bs, base)
    try:
        obs: list[dict[str, Any]] = [member.wait_for("holding")]
        obs += _batch(bs, {  # while the member is in the group; and a group that does not exist
            "describe members": ["--describe", *group, "--members", "--verbose"],
            "describe state": ["--describe", *group, "--state", "--verbose"],
            "list state stable": ["--list", "--state", "Stable"],
            "reset while active": ["--reset-offsets", *group, "--topic", TOPIC, "--to-earliest", "--execute"],
            "delete offsets while active": ["--delete-offsets", *group, "--topic", TOPIC],
            "delete while active": ["--delete", *group],
            "unknown describe": ["--describe", *unknown],
            "unknown reset": ["--reset-offsets", *unknown, "--topic", TOPIC, "--to-earliest", "--dry-run"],
            "unknown delete offsets": ["--delete-offsets", *unknown, "--topic", TOPIC],
            "unknown delete": ["--delete", *unknown],
            "classic describe": ["--describe", "--group", CLASSIC],
            "classic delete": ["--delete", "--group", CLASSIC],
        })
        member.leave()
    finally:
        member.kill()
    obs += _batch(bs, {  # the group is Empty
        "list": ["--list"],
        "list state": ["--list", "--state"],
        "describe": ["--describe", *group],
        "describe verbose": ["--describe", *group, "--offsets", "--verbose"],
        "describe members empty": ["--describe", *group, "--members"],
        "describe state empty": ["--describe", *group, "--state"],
        "reset earliest dry-run": ["--reset-offsets", *group, "--topic", TOPIC, "--to-earliest", "--dry-run"],
        "delete offsets unknown topic": ["--delete-offsets", *group, "--topic", "cli-share-no-topic"],
    })
    for step, args in {
        "reset earliest": ["--reset-offsets", *group, "--topic", TOPIC, "--to-earliest", "--execute"],
        "describe after earliest": ["--describe", *group],
        "reset datetime": ["--reset-offsets", *group, "--all-topics", "--to-datetime", second, "--execute"],
        "reset latest partition": ["--reset-offsets", *group, "--topic", f"{TOPIC}:1", "--to-latest", "--execute"],
        "describe after resets": ["--describe", *group],
        "delete offsets": ["--delete-offsets", *group, "--topic", TOPIC],
        "describe after delete offsets": ["--describe", *group],
        "delete": ["--delete", *group],
        "list after delete": ["--list"],
    }.items():
        obs.append(_ours(_tool(bs, step, *args)))
    return obs


@pytest.mark.compat(client="kafka-share-groups", scenario="list, describe, reset-offsets, delete-offsets, delete")
def test_share_groups_cli(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("cli-share-groups", _scenario)}
    out = {step: o.get("out") for step, o in obs.items()}
    assert obs["holding"]["accepted"] == [f"p{p}r{i}" for p in (0, 1) for i in range(3)]
    assert out["describe members"] == [
        "GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS MEMBER-EPOCH ASSIGNMENT",
        f"{GROUP} <member> /127.0.0.1 consumer-{GROUP}-1 2 3 {TOPIC}:0,1",
    ]
    assert out["describe state"][1] == f"{GROUP} <coordinator> Stable 3 3 1"
    assert obs["reset while active"]["err"] == [f"Share group '{GROUP}' is not empty."]
    assert out["list"] == [GROUP] and out["list after delete"] == []
    assert out["list state"] == ["GROUP STATE", f"{GROUP} Empty"]
    assert out["describe"][1:] == [f"{GROUP} {TOPIC} {p} 0 0" for p in (0, 1)]  # all accepted: no lag
    assert obs["describe members empty"]["err"] == [f"Share group '{GROUP}' has no active members."]
    assert out["describe after earliest"][1:] == [f"{GROUP} {TOPIC} {p} 0 3" for p in (0, 1)]
    assert out["reset datetime"][1:] == [f"{GROUP} {TOPIC} {p} 1" for p in (0, 1)]
    assert out["describe after resets"][1:] == [f"{GROUP} {TOPIC} 0 1 2", f"{GROUP} {TOPIC} 1 3 0"]
    assert out["delete offsets"] == ["TOPIC STATUS", f"{TOPIC} Successful"]
    assert out["describe after delete offsets"] == [f"Share group '{GROUP}' has no offset information."]
    assert out["delete"] == [f"Deletion of requested share groups ('{GROUP}') was successful."]
    assert out["unknown describe"] == [
        "Error: Executing share group command failed due to org.apache.kafka.common.errors."
        f"GroupIdNotFoundException: Group {UNKNOWN} not found."
    ]
    assert out["classic delete"] == [
        "Error: Deletion of some share groups failed:",
        f"* Group '{CLASSIC}' could not be deleted due to: java.lang.IllegalArgumentException: "
        f"Group '{CLASSIC}' is not a share group.",
    ]
