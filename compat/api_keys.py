"""Every API key Apache Kafka serves, as its own ApiVersions answers, with Samsa's status for each.

compat/test_api_keys.py asks the running Kafka 4.3.1 of the differential suite for ApiVersions on
its broker listener (what clients and admin tools connect to) and on its controller listener
(KRaft's own, and `--bootstrap-controller` tools), and writes the answer to
compat/target/kafka-api-keys.json; compat/matrix.py renders it into docs/compat.md. The list of
keys is Kafka's; what is written here is only Samsa's status for the keys it does not serve
(served keys and their versions come from broker/handlers/versions.py). The test fails when Kafka
serves a key that has neither, or when an entry here names a key Samsa now serves or Kafka no
longer serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.index import UnknownAPIKey

from protocol.kio_compat import api_name

DELEGATION_TOKENS = "not yet: delegation tokens (KIP-48) are in no issue yet"
NEW_GROUPS = "not yet: issue 16 (KIP-848 consumer groups, share groups)"
OPERATOR = "not yet: issue 13 (operator admin APIs)"
KRAFT = (
    "out: KRaft only. Samsa keeps cluster metadata in ZooKeeper (a cluster) or its data directory "
    "(one node), not in a Raft quorum, so there is no quorum to describe or change"
)

NOT_SERVED: dict[str, str] = {
    "create_delegation_token": DELEGATION_TOKENS,
    "renew_delegation_token": DELEGATION_TOKENS,
    "expire_delegation_token": DELEGATION_TOKENS,
    "describe_delegation_token": DELEGATION_TOKENS,
    "streams_group_heartbeat": NEW_GROUPS + "; streams groups are KIP-1071",
    "streams_group_describe": NEW_GROUPS + "; streams groups are KIP-1071",
    "update_features": (
        "out for now: Samsa's feature levels are fixed (transaction.version 2 finalized, as on a new Kafka 4.x "
        "cluster; its ApiVersions lists them), so kafka-features.sh has nothing to upgrade"
    ),
    "unregister_broker": (
        "out: KRaft only. It removes a broker's registration from the KRaft controller; in Samsa's "
        "ZooKeeper mode a registration is an ephemeral znode that goes with the broker's session"
    ),
    "describe_quorum": KRAFT,
    "add_raft_voter": KRAFT,
    "remove_raft_voter": KRAFT,
}
"""Samsa's status for each API key Kafka serves on its broker listener and Samsa does not."""

CONTROLLER_ONLY = (
    "out: KRaft's own (controller listener only: the Raft quorum, broker registration and "
    "heartbeats, forwarding); Samsa's brokers and controller talk through ZooKeeper"
)
"""The status of every key Kafka serves only on its controller listener."""


@dataclass(frozen=True)
class KafkaApi:
    key: int
    name: str
    min_version: int
    max_version: int


def name_of(key: int) -> str:
    try:
        return api_name(key)
    except UnknownAPIKey:
        return f"key {key}"

