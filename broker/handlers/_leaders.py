"""Leader discovery in Produce (v10+) and Fetch (v16+) error answers (KIP-951).

Not a handler: the registry only imports `api_*` modules. When a partition is answered
NOT_LEADER_OR_FOLLOWER (and, for Fetch, FENCED_LEADER_EPOCH), Kafka also answers its current
leader and leader epoch, and the leader's endpoint on the listener the request came in on among
the response's node endpoints, so that the client goes to the new leader without first asking for
metadata (KafkaApis.getCurrentLeader: a leader that is not alive is named without an endpoint;
an unknown partition is leader -1, epoch -1).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.model import ClusterImage
from protocol.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class LeaderNode:
    node_id: int
    host: str
    port: int
    rack: str | None


class LeaderDiscovery:
    """Collects, for one response, the current leaders named and their endpoints."""

    def __init__(self, image: ClusterImage, listener: str) -> None:
        self._image = image
        self._listener = listener
        self._nodes: dict[int, LeaderNode] = {}

    def current_leader(self, tp: TopicPartition) -> tuple[int, int]:
        """(leader id, leader epoch) of `tp`, remembering the leader's endpoint if it is alive."""
        image = self._image
        reg = image.partition(tp.topic, tp.partition)
        if reg is None:
            return -1, -1
        broker = image.brokers.get(reg.leader)
        if broker is not None and reg.leader not in image.fenced:
            ep = broker.endpoint(self._listener)
            if ep is not None:
                self._nodes[reg.leader] = LeaderNode(reg.leader, ep.host, ep.port, broker.rack)
        return reg.leader, reg.leader_epoch

    @property
    def nodes(self) -> list[LeaderNode]:
        return list(self._nodes.values())
