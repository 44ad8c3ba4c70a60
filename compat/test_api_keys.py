"""Records every API key Apache Kafka 4.3.1 serves (its own ApiVersions answer) for docs/compat.md,
and checks that compat/api_keys.py gives Samsa's status for each key Samsa does not serve."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from kio.schema.api_versions.v3 import ApiVersionsRequest

from broker.handlers.versions import SERVED
from compat.api_keys import NOT_SERVED, KafkaApi, name_of
from compat.conftest import Targets
from compat.matrix import KAFKA_API_KEYS
from tests.support.raw_client import RawClient


def ask(port: int) -> list[KafkaApi]:
    """The keys and versions the broker on 127.0.0.1:`port` answers ApiVersions v3 with."""
    with RawClient(port) as c:
        answer: Any = c.request(
            ApiVersionsRequest(client_software_name="samsa-compat", client_software_version="1")
        )
    assert answer.error_code == 0, f"ApiVersions error {answer.error_code}"
    return [
        KafkaApi(int(a.api_key), name_of(int(a.api_key)), int(a.min_version), int(a.max_version))
        for a in answer.api_keys
    ]


def test_every_kafka_api_key_has_a_status(targets: Targets) -> None:
    kafka = targets.get("kafka")
    broker = ask(int(kafka.bootstrap_servers.rsplit(":", 1)[1]))
    controller_port = getattr(kafka, "controller_port", 0)  # the jar launcher's; a container hides it
    controller = ask(controller_port) if controller_port else []
    served_names = {a.name for a in broker}
    controller_only = [a for a in controller if a.name not in served_names]
    KAFKA_API_KEYS.write_text(json.dumps(
        {"broker": [asdict(a) for a in broker], "controller_only": [asdict(a) for a in controller_only]},
        indent=1,
    ))
    missing = [f"{a.name} (key {a.key})" for a in broker if a.key not in SERVED and a.name not in NOT_SERVED]
    assert not missing, "Kafka serves keys with no status in compat/api_keys.py: " + ", ".join(missing)
    served_by_samsa = {name_of(k) for k in SERVED}
    stale = sorted(n for n in NOT_SERVED if n in served_by_samsa or n not in served_names)
    assert not stale, "compat/api_keys.py NOT_SERVED names keys Samsa serves or Kafka does not: " + ", ".join(stale)
