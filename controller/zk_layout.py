"""The znode layout of a Samsa cluster and the JSON stored in each znode (pure, no I/O).

    /cluster/id                                   {"version":"1","id":"<cluster id>"}
    /controller                 ephemeral         {"version":1,"brokerid":N,"timestamp":"ms"}
    /controller_epoch                             "N" (bumped, with a version check, by each new
                                                  controller; every controller write carries a
                                                  check of this znode's version)
    /brokers/ids/<id>           ephemeral         {"version":5,"host","port","endpoints":[...],
                                                  "listener_security_protocol_map":{...},
                                                  "rack","timestamp","samsa_heartbeat":"host:port",
                                                  "samsa_offline_replicas":[[topic,p],...]}: the
                                                  replicas in its failed log dirs
    /brokers/topics/<topic>                       {"version":3,"topic_id":"<uuid>",
                                                  "partitions":{"0":[1,2,3],...},
                                                  "adding_replicas":{"0":[3]},
                                                  "removing_replicas":{"0":[1]}}: the replicas of
                                                  each partition (during a reassignment the union
                                                  of old and target) and the reassignments in
                                                  progress, as Kafka's KIP-455 topic znode
    /brokers/topics/<topic>/partitions/<p>/state  {"version":1,"leader","leader_epoch","isr",
                                                  "controller_epoch"}; changed only with a version
                                                  check; the znode version is the partition epoch
    /config/topics/<topic>                        {"version":1,"config":{...overrides}}
    /config/brokers/<id> and /config/brokers/<default>
                                                  {"version":1,"config":{...}}: dynamic broker
                                                  configs of one broker / the cluster default
    /admin/controlled_shutdown/<id>  ephemeral    a broker asking to lose its leaderships
    /samsa/suspicions/<suspect>/<reporter>  eph.  reporter stopped hearing suspect's heartbeats
    /latest_producer_id_block                     {"version":1,"broker","block_start","block_end"}
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, unquote

from controller.model import BrokerRegistration, Endpoint, PartitionRegistration
from controller.quotas import QuotaEntity
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId, LeaderEpoch

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
BROKER_CONFIGS = "/config/brokers"
GROUP_CONFIGS = "/config/groups"
CLIENT_QUOTAS = "/config/clients"
USER_QUOTAS = "/config/users"
DEFAULT_QUOTA_ZNODE = "<default>"
DEFAULT_BROKER_ZNODE = "<default>"
"""Kafka's znode name for the cluster-wide defaults (the image's entity "")."""
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"
SUSPICIONS = "/samsa/suspicions"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"

PERSISTENT_PATHS = (
    BROKER_IDS, TOPICS, TOPIC_CONFIGS, BROKER_CONFIGS, GROUP_CONFIGS, CLIENT_QUOTAS, USER_QUOTAS, CONTROLLED_SHUTDOWN,
    SUSPICIONS,
    "/cluster",
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def suspicion_path(suspect: int, reporter: int | None = None) -> str:
    base = f"{SUSPICIONS}/{suspect}"
    return base if reporter is None else f"{base}/{reporter}"


def shutdown_path(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{broker_id}"


def _dump(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(int(time.time() * 1000))


# -- brokers -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    registration: BrokerRegistration
    heartbeat: tuple[str, int] | None
    czxid: int = 0
    """creation zxid of the registration: a new value means the broker restarted"""


def encode_broker(reg: BrokerRegistration, heartbeat: tuple[str, int] | None) -> bytes:
    first = reg.endpoints[0] if reg.endpoints else Endpoint("PLAINTEXT", "", -1)
    return _dump(
        {
            "version": 5,
            "host": first.host,
            "port": first.port,
            "endpoints": [f"{e.listener}://{e.host}:{e.port}" for e in reg.endpoints],
            "listener_security_protocol_map": {e.listener: e.security_protocol for e in reg.endpoints},
            "rack": reg.rack,
            "jmx_port": -1,
            "timestamp": _now_ms(),
            "samsa_heartbeat": None if heartbeat is None else f"{heartbeat[0]}:{heartbeat[1]}",
            "samsa_offline_replicas": sorted([tp.topic, tp.partition] for tp in reg.offline_replicas),
        }
    )


def _host_port(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    return host.strip("[]"), int(port)


def decode_broker(broker_id: int, data: bytes, czxid: int = 0) -> BrokerInfo:
    doc = json.loads(data)
    protocols = doc.get("listener_security_protocol_map") or {}
    endpoints = []
    for ep in doc.get("endpoints", []):
        name, _, rest = ep.partition("://")
        host, port = _host_port(rest)
        endpoints.append(Endpoint(name, host, port, protocols.get(name, "PLAINTEXT")))
    hb = doc.get("samsa_heartbeat")
    return BrokerInfo(
        BrokerRegistration(BrokerId(broker_id), tuple(endpoints), doc.get("rack"), frozenset(
            TopicPartition(t, int(p)) for t, p in doc.get("samsa_offline_replicas") or ())),
        None if not hb else _host_port(hb),
        czxid,
    )


def parse_peer_overrides(raw: str | None) -> dict[BrokerId, tuple[str, int, int]]:
    """`samsa.peer.address.overrides`: `id=host:tcp_port:udp_port,...` (the cluster harness routes
    inter-broker traffic through fault-injecting proxies this way)."""
    out: dict[BrokerId, tuple[str, int, int]] = {}
    for item in (raw or "").split(","):
        item = item.strip()
        if not item:
            continue
        bid, _, addr = item.partition("=")
        host, tcp, udp = addr.rsplit(":", 2)
        out[BrokerId(int(bid))] = (host, int(tcp), int(udp))
    return out


def apply_override(info: BrokerInfo, listener: str, override: tuple[str, int, int] | None) -> BrokerInfo:
    """Point the inter-broker listener and the heartbeat address of a peer at a proxy."""
    if override is None:
        return info
    host, tcp, udp = override
    endpoints = tuple(
        Endpoint(e.listener, host, tcp, e.security_protocol) if e.listener == listener else e
        for e in info.registration.endpoints
    )
    return BrokerInfo(replace(info.registration, endpoints=endpoints), (host, udp), info.czxid)


# -- topics and partitions ---------------------------------------------------------------------


Reassigning = tuple[tuple[BrokerId, ...], tuple[BrokerId, ...]]
"""A partition's (adding replicas, removing replicas) while it is being reassigned."""


def encode_topic(
    topic_id: uuid.UUID,
    assignments: Mapping[int, tuple[BrokerId, ...]],
    reassigning: Mapping[int, Reassigning] | None = None,
) -> bytes:
    moving = {p: r for p, r in sorted((reassigning or {}).items()) if r[0] or r[1]}
    return _dump(
        {
            "version": 3,
            "topic_id": str(topic_id),
            "partitions": {str(p): list(r) for p, r in sorted(assignments.items())},
            "adding_replicas": {str(p): list(a) for p, (a, _) in moving.items() if a},
            "removing_replicas": {str(p): list(r) for p, (_, r) in moving.items() if r},
        }
    )


def decode_reassigning(data: bytes) -> dict[int, Reassigning]:
    """The partitions of a topic znode with a reassignment in progress."""
    doc = json.loads(data)
    adding, removing = doc.get("adding_replicas") or {}, doc.get("removing_replicas") or {}
    return {
        int(p): (tuple(BrokerId(b) for b in adding.get(p, ())), tuple(BrokerId(b) for b in removing.get(p, ())))
        for p in {*adding, *removing}
    }


def decode_topic(data: bytes) -> tuple[uuid.UUID, dict[int, tuple[BrokerId, ...]]]:
    doc = json.loads(data)
    assignments = {int(p): tuple(BrokerId(b) for b in r) for p, r in doc["partitions"].items()}
    return uuid.UUID(doc["topic_id"]), assignments


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: BrokerId
    leader_epoch: LeaderEpoch
    isr: tuple[BrokerId, ...]
    controller_epoch: int
    version: int
    """the znode version: the partition epoch"""

    def registration(self, replicas: tuple[BrokerId, ...], reassigning: Reassigning = ((), ())) -> PartitionRegistration:
        return PartitionRegistration(replicas, self.isr, self.leader, self.leader_epoch, self.version, *reassigning)


def encode_state(reg: PartitionRegistration, controller_epoch: int) -> bytes:
    return _dump(
        {
            "version": 1,
            "leader": reg.leader,
            "leader_epoch": reg.leader_epoch,
            "isr": list(reg.isr),
            "controller_epoch": controller_epoch,
        }
    )


def decode_state(data: bytes, version: int) -> PartitionState:
    doc = json.loads(data)
    return PartitionState(
        BrokerId(doc["leader"]),
        LeaderEpoch(doc["leader_epoch"]),
        tuple(BrokerId(b) for b in doc["isr"]),
        int(doc.get("controller_epoch", 0)),
        version,
    )


def broker_config_path(entity: str) -> str:
    """The znode of an entity's dynamic broker configs ("" is the cluster default)."""
    return f"{BROKER_CONFIGS}/{entity or DEFAULT_BROKER_ZNODE}"


def broker_config_entity(znode: str) -> str:
    return "" if znode == DEFAULT_BROKER_ZNODE else znode


def group_config_path(group: str) -> str:
    """The znode of a group's configs (KIP-848), the name URL-encoded as Kafka's Sanitizer does."""
    return f"{GROUP_CONFIGS}/{quote(group, safe='')}"


def group_config_entity(znode: str) -> str:
    return unquote(znode)


def _quota_name(name: str | None) -> str:
    """Kafka's Sanitizer: URL-encoded names, `<default>` for the default entity."""
    return DEFAULT_QUOTA_ZNODE if name is None else quote(name, safe="")


def _quota_unname(znode: str) -> str | None:
    return None if znode == DEFAULT_QUOTA_ZNODE else unquote(znode)


def quota_path(entity: QuotaEntity) -> str:
    """Kafka's znode of a quota entity: /config/clients/<c>, /config/users/<u>[/clients/<c>]."""
    names = dict(entity)
    if "user" in names:
        path = f"{USER_QUOTAS}/{_quota_name(names['user'])}"
        return f"{path}/clients/{_quota_name(names['client-id'])}" if "client-id" in names else path
    return f"{CLIENT_QUOTAS}/{_quota_name(names['client-id'])}"


def quota_entity(path: str) -> QuotaEntity:
    """The inverse of `quota_path`."""
    parts = path.split("/")  # "", "config", "clients"|"users", name[, "clients", name]
    if parts[2] == "clients":
        return (("client-id", _quota_unname(parts[3])),)
    if len(parts) > 5:
        return (("client-id", _quota_unname(parts[5])), ("user", _quota_unname(parts[3])))
    return (("user", _quota_unname(parts[3])),)


def encode_quotas(quotas: Mapping[str, float]) -> bytes:
    """As Kafka's ZooKeeper quota configs: strings, whole numbers without a fraction."""
    return encode_config({k: str(int(v)) if v == int(v) else repr(v) for k, v in quotas.items()})


def decode_quotas(data: bytes | None) -> dict[str, float]:
    return {k: float(v) for k, v in decode_config(data).items()}


def encode_config(configs: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(configs)})


def decode_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {str(k): str(v) for k, v in json.loads(data).get("config", {}).items()}


def decode_cluster_id(data: bytes) -> str:
    return str(json.loads(data)["id"])


def encode_controller(broker_id: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})


def decode_controller(data: bytes | None) -> BrokerId | None:
    if not data:
        return None
    return BrokerId(int(json.loads(data)["brokerid"]))


def encode_producer_block(broker_id: int, start: int, end: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)})


def decode_producer_block_end(data: bytes | None) -> int:
    """The last id of the latest block handed out, -1 before the first."""
    if not data:
        return -1
    return int(json.loads(data)["block_end"])
