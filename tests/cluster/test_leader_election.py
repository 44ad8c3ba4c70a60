"""ElectLeaders on a 3-broker cluster: preferred and unclean elections with Kafka's own
kafka-leader-election tool and confluent-kafka's AdminClient, each per-partition error, and
a broker that is not the controller forwarding the request to it."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32

from broker.testing.cluster import SamsaCluster
from compat.jvm import run_tool
from tests.cluster.conftest import create_topic
from tests.support.raw_client import RawClient

# the controller's own preferred-leader rebalancing would undo the imbalance the test sets up
OVERRIDES = {"auto.leader.rebalance.enable": "false"}


def leader_election(cluster: SamsaCluster, election_type: str, topic: str, partition: int) -> str:
    result = run_tool(
        "kafka-leader-election", "--bootstrap-server", cluster.bootstrap_servers, "--election-type", election_type,
        "--topic", topic, "--partition", str(partition), check=False, timeout=60,
    )  # fmt: skip
    return result.stdout + result.stderr


def partition(cluster: SamsaCluster, topic: str, p: int = 0, via: int | None = None) -> tuple[int, list[int]]:
    view = cluster.metadata(via, [topic]).topics[topic][p]
    return view.leader, sorted(view.isr)


def elect(admin: AdminClient, election_type: ElectionType, *tps: tuple[str, int]) -> dict[str, str]:
    """confluent-kafka's elect_leaders: "topic-p" -> error name ("" for success)."""
    done = admin.elect_leaders(election_type, [TopicPartition(t, p) for t, p in tps]).result(30)
    return {f"{tp.topic}-{tp.partition}": "" if e is None else e.name() for tp, e in done.items()}


def test_preferred_and_unclean_elections(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(3, overrides=OVERRIDES)
    create_topic(cluster, "pref", assignments=[[1, 2, 3]])
    create_topic(cluster, "lost", assignments=[[2, 3]])
    create_topic(cluster, "gone", assignments=[[2]])
    cluster.wait_for(lambda: partition(cluster, "pref") == (1, [1, 2, 3]) and partition(cluster, "lost") == (2, [2, 3]),
                     10, "full ISRs")  # fmt: skip

    # broker 1 stops (its leadership moves to 2) and comes back into the ISR: 2 leads, 1 is preferred
    cluster.stop(1)
    cluster.process(1).start()
    cluster.wait_for(lambda: partition(cluster, "pref") == (2, [1, 2, 3]), 20, "broker 1 back in the ISR")
    out = leader_election(cluster, "PREFERRED", "pref", 0)
    assert "Successfully completed leader election (PREFERRED) for partitions pref-0" in out, out
    assert partition(cluster, "pref", via=cluster.controller())[0] == 1  # the answer waited for its image
    cluster.wait_for(lambda: all(partition(cluster, "pref", via=i) == (1, [1, 2, 3]) for i in cluster.live()),
                     10, "every broker sees broker 1 lead")  # fmt: skip
    out = leader_election(cluster, "PREFERRED", "pref", 0)
    assert "Valid replica already elected for partitions pref-0" in out, out

    # lost-0: 3 leaves the ISR, then its only ISR member 2 goes: offline until an unclean election
    cluster.stop(3)
    cluster.wait_for(lambda: partition(cluster, "lost") == (2, [2]), 20, "3 out of lost-0's ISR")
    cluster.stop(2)
    cluster.process(3).start()
    cluster.wait_for(lambda: 3 in cluster.metadata().brokers and partition(cluster, "lost") == (-1, [2]), 20,
                     "lost-0 offline with broker 3 back")  # fmt: skip
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    assert elect(admin, ElectionType.PREFERRED, ("lost", 0), ("pref", 0), ("pref", 7), ("nope", 0)) == {
        "lost-0": "PREFERRED_LEADER_NOT_AVAILABLE",
        "pref-0": "ELECTION_NOT_NEEDED",
        "pref-7": "UNKNOWN_TOPIC_OR_PART",  # librdkafka's name
        "nope-0": "UNKNOWN_TOPIC_OR_PART",
    }
    assert elect(admin, ElectionType.UNCLEAN, ("gone", 0), ("pref", 0)) == {
        "gone-0": "ELIGIBLE_LEADERS_NOT_AVAILABLE",  # its one replica is down
        "pref-0": "ELECTION_NOT_NEEDED",  # it has a leader
    }
    assert partition(cluster, "lost") == (-1, [2])  # none of that elected anything
    out = leader_election(cluster, "UNCLEAN", "lost", 0)
    assert "Successfully completed leader election (UNCLEAN) for partitions lost-0" in out, out
    assert partition(cluster, "lost", via=cluster.controller()) == (3, [3])

    # a broker that is not the controller forwards the request: the controller's answer
    controller = cluster.controller()
    other = next(i for i in cluster.live() if i != controller)
    with RawClient(cluster.brokers[other].client_port) as c:
        answer = c.request(ElectLeadersRequest(
            election_type=i8(0), topic_partitions=(TopicPartitions(topic=TopicName("pref"), partitions=(i32(0),)),),
        ))  # fmt: skip
    assert answer.error_code == 0
    assert [(r.topic, [(p.partition_id, p.error_code.name) for p in r.partition_result])
            for r in answer.replica_election_results] == [("pref", [(0, "election_not_needed")])]  # fmt: skip
