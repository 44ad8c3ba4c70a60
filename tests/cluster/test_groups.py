"""Consumer groups through a coordinator move (issue 15's "group stall").

The stall: the chaos test restarts a group member every round (every few seconds) and moves the
coordinator between rounds; once, the group read nothing for 10 s. Why: the classic group keeps a
membership change made during a rebalance in the coordinator's memory only; __consumer_offsets gets
the group's record when the rebalance completes (Kafka's design: a GroupMetadata record per
completed generation, or when the group empties). A member that leaves, followed within that window
by a move of the coordinator (here a clean restart of its broker), is forgotten: the new coordinator
loads the last completed generation, which still lists it, gives every loaded member a full session
(Kafka's onGroupLoaded does the same), and the partitions assigned to the departed member are read
by nobody until its session expires and a rebalance hands them over. So the stall is bounded by
session.timeout.ms, and is Kafka's too. (In the chaos run it compounded: a member restarted while its
JoinGroup waited on the ghost had its LeaveGroup queued behind that JoinGroup on the same
connection, timed out after 5 s, and became a ghost in turn.)

The test makes the window happen on purpose and shows the bound: the remaining member reads the
departed member's partitions again within session.timeout.ms (and a little), and the new
coordinator's log names the ghost's session expiry.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, Producer

from broker.coordinator.records import partition_for
from broker.testing.cluster import SamsaCluster
from tests.cluster.conftest import broker_logs, create_topic

TOPIC = "grp"
GROUP = "stall-group"
SESSION_MS = 6000


def consumer(cluster: SamsaCluster, client_id: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP, "client.id": client_id,
        "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 500,
        "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 1000, "partition.assignment.strategy": "range",
        "topic.metadata.refresh.interval.ms": 1000,
    })  # fmt: skip


def test_member_leaving_just_before_the_coordinator_moves_is_a_ghost_for_one_session(cluster: SamsaCluster) -> None:
    create_topic(cluster, TOPIC, 2, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            producer.produce(TOPIC, value=b"x%d" % n, partition=n % 2)
            producer.poll(0.01)
            n += 1
        producer.flush(30)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    stayer, leaver = consumer(cluster, "stayer"), consumer(cluster, "leaver")
    stayer.subscribe([TOPIC])
    leaver.subscribe([TOPIC])
    try:
        read: dict[int, float] = {}  # partition -> time the stayer last read from it
        deadline = time.monotonic() + 60
        while not (stayer.assignment() and leaver.assignment() and len(read) >= 1) and time.monotonic() < deadline:
            for c in (stayer, leaver):
                m = c.poll(0.1)
                q = m.partition() if c is stayer and m is not None and m.error() is None else None
                if q is not None:
                    read[q] = time.monotonic()
        assert stayer.assignment() and leaver.assignment(), "the group never split the two partitions"
        orphaned = leaver.assignment()[0].partition
        offsets = cluster.metadata(topics=["__consumer_offsets"]).topics["__consumer_offsets"]
        coordinator = offsets[partition_for(GROUP, len(offsets))].leader
        # the leaver leaves (LeaveGroup: a rebalance starts, in memory), and at once the coordinator moves
        leaver.close()
        left_at = time.monotonic()
        assert cluster.stop(coordinator) == 0
        cluster.process(coordinator).start()
        while orphaned not in read or read[orphaned] < left_at:
            m = stayer.poll(0.1)
            q = m.partition() if m is not None and m.error() is None else None
            if q is not None:
                read[q] = time.monotonic()
            assert time.monotonic() - left_at < SESSION_MS / 1000 + 15, broker_logs(cluster, 4000)
        took = read[orphaned] - left_at
        logs = "".join(cluster.process(b).read_log() for b in cluster.live())
        print(f"\nGROUPS partition {orphaned} of the member that left read again after {took:.2f}s "
              f"(session.timeout.ms {SESSION_MS}); ghost expired: {'member session expired' in logs}")  # fmt: skip
        assert took < SESSION_MS / 1000 + 5
    finally:
        stop.set()
        writer.join(60)
        stayer.close()
