"""One consumer-group member in its own process, so that a test can kill it with SIGKILL.

    python groups_member.py CLIENT BOOTSTRAP TOPIC GROUP SESSION_MS

CLIENT is kafka-python, aiokafka, confluent-kafka or confluent-kafka-consumer-protocol (KIP-848). The member subscribes to TOPIC in GROUP
(offsets from the earliest when the group has none), commits synchronously after every poll that
returned records, and prints one JSON line per event on stdout:
{"assignment": [partitions]} whenever its assignment changes, {"record": [partition, offset]} for
every record, {"commit_error": "..."} and finally {"closed": true}. SIGTERM makes it close
cleanly (which sends LeaveGroup).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
from typing import Any

HEARTBEAT_MS = 300
MAX_POLL_INTERVAL_MS = 10_000


def emit(**event: Any) -> None:
    print(json.dumps(event), flush=True)


class Assignment:
    def __init__(self) -> None:
        self.last: list[int] | None = None

    def update(self, partitions: list[int]) -> None:
        partitions = sorted(partitions)
        if partitions != self.last:
            self.last = partitions
            emit(assignment=partitions)


def run_kafka_python(bootstrap: str, topic: str, group: str, session_ms: int, stop: threading.Event) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=f"member-{group}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=HEARTBEAT_MS,
        max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
    )
    # The topic's metadata before the first poll: tests/support/clients.py kafka_python_await_topics
    # says why (this script runs alone, without the tests package on its path).
    consumer.partitions_for_topic(topic)
    assignment = Assignment()
    while not stop.is_set():
        batch = consumer.poll(timeout_ms=200)
        for records in batch.values():
            for m in records:
                emit(record=[m.partition, m.offset])
        if batch:
            try:
                consumer.commit()
            except Exception as e:  # CommitFailedError during a rebalance: the next poll rejoins
                emit(commit_error=repr(e))
        assignment.update([tp.partition for tp in consumer.assignment()])
    consumer.close()


def run_aiokafka(bootstrap: str, topic: str, group: str, session_ms: int, stop: threading.Event) -> None:
    from aiokafka import AIOKafkaConsumer

    async def main() -> None:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=f"member-{group}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
        )
        await consumer.start()
        assignment = Assignment()
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for m in records:
                    emit(record=[m.partition, m.offset])
            if batch:
                try:
                    await consumer.commit()
                except Exception as e:
                    emit(commit_error=repr(e))
            assignment.update([tp.partition for tp in consumer.assignment()])
        await consumer.stop()

    asyncio.run(main())


def run_confluent(
    bootstrap: str, topic: str, group: str, session_ms: int, stop: threading.Event, consumer_protocol: bool = False
) -> None:
    from confluent_kafka import Consumer, KafkaException

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"member-{group}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
    }
    if consumer_protocol:
        config["group.protocol"] = "consumer"
    else:
        config |= {"session.timeout.ms": session_ms, "heartbeat.interval.ms": HEARTBEAT_MS}
    consumer = Consumer(config)
    consumer.subscribe([topic])
    assignment = Assignment()
    while not stop.is_set():
        messages = consumer.consume(num_messages=100, timeout=0.2)
        got = False
        for m in messages:
            if m.error() is None:
                got = True
                emit(record=[m.partition(), m.offset()])
        if got:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as e:
                emit(commit_error=repr(e))
        assignment.update([tp.partition for tp in consumer.assignment()])
    consumer.close()


def run_confluent_consumer_protocol(
    bootstrap: str, topic: str, group: str, session_ms: int, stop: threading.Event
) -> None:
    """confluent-kafka with group.protocol=consumer (KIP-848): the session timeout and heartbeat
    interval are the broker's (group.consumer.*), not the client's."""
    run_confluent(bootstrap, topic, group, session_ms, stop, consumer_protocol=True)


RUNNERS = {
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "confluent-kafka": run_confluent,
    "confluent-kafka-consumer-protocol": run_confluent_consumer_protocol,
}


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    if os.environ.get("SAMSA_MEMBER_DEBUG"):  # the client's own debug log, to diagnose a stuck member
        logging.getLogger().setLevel(logging.DEBUG)
    client, bootstrap, topic, group, session_ms = sys.argv[1:6]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    RUNNERS[client](bootstrap, topic, group, int(session_ms), stop)
    emit(closed=True)


if __name__ == "__main__":
    main()
