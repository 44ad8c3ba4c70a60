"""The broker's metric families at scrape time, under the names the Prometheus JMX exporter gives
Kafka's MBeans with Strimzi's rules (compat/jmx/kafka-metrics.yaml holds the same rules for
Apache Kafka; compat/test_metrics_names.py compares both brokers' names and labels).

The rules, in short: `kafka.<domain>:type=<T>,name=<N>,<k>=<v>...` becomes
`kafka_<domain>_<t>_<n>` in lower case with the MBean's keys as labels; a meter (`...PerSec`)
is its count, `..._total`; a gauge is its value; a histogram or timer is a gauge per percentile
(`quantile` "0.50" ... "0.999") and `..._count`; a `...Percent` gauge is `..._percent`.

`BrokerCollector.families()` runs on the event loop (the endpoint's thread asks the loop for it),
so it reads a consistent state without locks: counters from `BrokerMetrics`, gauges computed
from the replica manager, logs, controller image, group coordinator and connection quotas.
It builds plain tuples; the endpoint formats them in its own thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from broker.coordinator.group import GroupState, parse_assignment
from broker.metrics.histogram import Histogram
from broker.metrics.stats import (
    LOG_FLUSH_MICROS,
    QUANTILES,
    TIME_HISTOGRAMS,
    BrokerMetrics,
    Family,
    Labels,
    TopicStats,
)
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId

if TYPE_CHECKING:
    from broker.acceptor import ConnectionQuotas
    from broker.coordinator.coordinator import GroupCoordinator
    from broker.coordinator.group import ClassicGroup
    from broker.log.manager import LogManager
    from broker.metrics.end_offsets import RemoteEndOffsets
    from broker.replication.replica_manager import ReplicaManager
    from controller.interface import Controller

BROKER_STATE_RUNNING = 3
"""Kafka's BrokerState RUNNING (kafka.server:type=KafkaServer,name=BrokerState)."""

TOPIC_METERS: tuple[tuple[str, str, str], ...] = (
    ("messagesin", "messages_in", "Records appended as leader (MessagesInPerSec)."),
    ("bytesin", "bytes_in", "Bytes produced and appended as leader (BytesInPerSec)."),
    ("bytesout", "bytes_out", "Bytes sent to consumers (BytesOutPerSec)."),
    ("bytesrejected", "bytes_rejected", "Bytes of batches refused as larger than max.message.bytes."),
    ("failedproducerequests", "failed_produce_requests",
     "Produced partition entries that failed unexpectedly (not leader, too large, corrupt excluded)."),
    ("failedfetchrequests", "failed_fetch_requests", "Fetched partitions that failed unexpectedly."),
    ("totalproducerequests", "total_produce_requests", "Produced partition entries."),
    ("totalfetchrequests", "total_fetch_requests", "Fetched partitions (consumers and followers)."),
)  # fmt: skip
"""BrokerTopicMetrics meters: (name in the metric, TopicStats attribute, help)."""


def _summary(family: Family, labels: Labels, histogram: Histogram, now: float, scale: float = 1.0) -> None:
    values = histogram.quantiles([q for q, _ in QUANTILES], now)
    family.summaries.append((labels, [v * scale for v in values], histogram.count))


class BrokerCollector:
    """Computes every family from the broker's collaborators (given at construction, in
    `Broker.start`). `loop_idle()` is the event loop's idle fraction since the previous scrape,
    None when the loop does not measure it."""

    def __init__(
        self,
        metrics: BrokerMetrics,
        *,
        broker_id: BrokerId,
        replica_manager: ReplicaManager,
        log_manager: LogManager,
        controller: Controller,
        group_coordinator: GroupCoordinator,
        quotas: Callable[[], ConnectionQuotas],
        loop_idle: Callable[[], float | None],
        now: Callable[[], float],
        remote_end_offsets: RemoteEndOffsets | None = None,
    ) -> None:
        """`remote_end_offsets`: where the high watermarks of partitions this broker does not
        host come from (group lag); without it they have no lag sample."""
        self._remote = remote_end_offsets
        self.metrics = metrics
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.controller = controller
        self.group_coordinator = group_coordinator
        self._quotas = quotas
        self._loop_idle = loop_idle
        self._now = now

    def families(self) -> list[Family]:
        out: list[Family] = []
        now = self._now()
        out += self._server()
        out += self._broker_topic_metrics()
        out += self._replica_manager()
        out += self._partitions_and_logs(now)
        out += self._controller()
        out += self._purgatories()
        out += self._requests(now)
        out += self._network()
        out += self._fetchers()
        out += self._groups()
        for source in self.metrics.sources:
            out += source()
        return out

    # -- kafka.server --------------------------------------------------------------------------

    def _server(self) -> list[Family]:
        state = Family("kafka_server_kafkaserver_brokerstate", "gauge",
                       "The broker's state (Kafka's BrokerState: 3 is RUNNING).")
        state.add((), BROKER_STATE_RUNNING)
        return [state]

    def _broker_topic_metrics(self) -> list[Family]:
        stats = self.metrics.topics
        topics: list[tuple[str, TopicStats]] = sorted(stats.topics.items())
        out = []
        for name, attribute, doc in TOPIC_METERS:
            f = Family(f"kafka_server_brokertopicmetrics_{name}", "counter", doc)
            f.add((), getattr(stats.all_topics, attribute))
            for topic, t in topics:  # Kafka creates a topic's meter when it first marks it
                if value := getattr(t, attribute):
                    f.add((("topic", topic),), value)
            out.append(f)
        out += _unlabelled("kafka_server_brokertopicmetrics_", "counter", (
            ("replicationbytesin", stats.replication_bytes_in, "Bytes this broker's replica fetchers appended."),
            ("replicationbytesout", stats.replication_bytes_out, "Bytes sent to followers."),
        ))  # fmt: skip
        return out

    def _replica_manager(self) -> list[Family]:
        partitions = list(self.replica_manager.partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        under_min = at_min = under_replicated = 0
        for p in leaders:
            isr = len(p.isr)
            if isr < len(p.replicas):
                under_replicated += 1
            effective_min = min(p.log_config.min_insync_replicas, len(p.replicas))
            if isr < effective_min:
                under_min += 1
            elif isr == effective_min:
                at_min += 1
        gauges = (
            ("leadercount", len(leaders), "Partitions this broker leads."),
            ("partitioncount", len(partitions), "Partitions this broker hosts (leader or follower)."),
            ("offlinereplicacount", 0, "Replicas on an offline log directory (Samsa takes none offline)."),
            ("underreplicatedpartitions", under_replicated, "Led partitions whose ISR is smaller than their replica set."),
            ("underminisrpartitioncount", under_min, "Led partitions whose ISR is below min.insync.replicas."),
            ("atminisrpartitioncount", at_min, "Led partitions whose ISR is exactly min.insync.replicas."),
            ("reassigningpartitions", 0, "Led partitions being reassigned (Samsa does not reassign)."),
        )  # fmt: skip
        replica = self.metrics.replica
        return _unlabelled("kafka_server_replicamanager_", "gauge", gauges) + _unlabelled(
            "kafka_server_replicamanager_", "counter", (
                ("isrexpands", replica.isr_expands, "ISR expansions committed by the controller."),
                ("isrshrinks", replica.isr_shrinks, "ISR shrinks committed by the controller."),
                ("failedisrupdates", replica.failed_isr_updates, "ISR changes the controller refused or could not take."),
            ),
        )  # fmt: skip

    # -- kafka.cluster Partition, kafka.log Log ------------------------------------------------

    def _partitions_and_logs(self, now: float) -> list[Family]:
        names = ("underreplicated", "insyncreplicascount", "underminisr", "atminisr", "replicascount",
                 "laststableoffsetlag")  # fmt: skip
        docs = (
            "1 when this broker leads the partition and its ISR is smaller than its replica set.",
            "The ISR's size (on the leader; 0 on a follower).",
            "1 when this broker leads the partition and its ISR is below min.insync.replicas.",
            "1 when this broker leads the partition and its ISR is exactly min.insync.replicas.",
            "The replica set's size (on the leader; 0 on a follower).",
            "High watermark minus last stable offset (on the leader; 0 on a follower): open transactions.",
        )
        part = [Family(f"kafka_cluster_partition_{n}", "gauge", d) for n, d in zip(names, docs)]
        for tp, p in sorted(self.replica_manager.partitions.items()):
            labels = (("topic", tp.topic), ("partition", str(tp.partition)))
            leader = p.is_leader
            isr, replicas = len(p.isr), len(p.replicas)
            effective_min = min(p.log_config.min_insync_replicas, replicas)
            values = (
                1 if leader and isr < replicas else 0,
                isr if leader else 0,
                1 if leader and isr < effective_min else 0,
                1 if leader and isr == effective_min else 0,
                replicas if leader else 0,
                p.high_watermark - p.last_stable_offset if leader else 0,
            )
            for f, v in zip(part, values):
                f.add(labels, v)
        log_names = ("size", "numlogsegments", "logstartoffset", "logendoffset")
        log_docs = ("Bytes of the partition's log on disk.", "Segments of the log.",
                    "First offset of the log.", "Offset the next record appended gets.")
        logs = [Family(f"kafka_log_log_{n}", "gauge", d) for n, d in zip(log_names, log_docs)]
        for tp, log_ in sorted(self.log_manager.all_logs().items()):
            if log_.closed:
                continue
            labels = (("topic", tp.topic), ("partition", str(tp.partition)))
            segments = log_.segments
            for f, v in zip(logs, (sum(s.size for s in segments), len(segments),
                                   log_.log_start_offset, log_.log_end_offset)):
                f.add(labels, v)
        flush = Family("kafka_log_logflushstats_logflushrateandtimems", "summary",
                       "Milliseconds each log flush (fsync of segments and indexes) took.")
        _summary(flush, (), LOG_FLUSH_MICROS, now, scale=0.001)
        return [*part, *logs, flush]

    # -- kafka.controller ----------------------------------------------------------------------

    def _controller(self) -> list[Family]:
        image = self.controller.image
        active = image.controller_id == self.broker_id
        offline = imbalance = partitions = 0
        if active:
            live = set(image.brokers) - image.fenced
            for topic in image.topics.values():
                for reg in topic.partitions.values():
                    partitions += 1
                    if not reg.online or reg.leader not in live:
                        offline += 1
                    elif reg.replicas and reg.leader != reg.replicas[0]:
                        imbalance += 1
        gauges = (
            ("activecontrollercount", 1 if active else 0, "1 on the broker that is the active controller."),
            ("offlinepartitionscount", offline, "Partitions without a live leader (active controller only)."),
            ("preferredreplicaimbalancecount", imbalance,
             "Partitions not led by their preferred replica (active controller only)."),
            ("globaltopiccount", len(image.topics) if active else 0, "Topics in the cluster (active controller only)."),
            ("globalpartitioncount", partitions, "Partitions in the cluster (active controller only)."),
            ("activebrokercount", len(set(image.brokers) - image.fenced) if active else 0,
             "Registered brokers not fenced (active controller only)."),
            ("fencedbrokercount", len(image.fenced) if active else 0,
             "Registered brokers a majority suspects (active controller only)."),
        )  # fmt: skip
        return _unlabelled("kafka_controller_kafkacontroller_", "gauge", gauges)

    # -- kafka.server DelayedOperationPurgatory ------------------------------------------------

    def _purgatories(self) -> list[Family]:
        size = Family("kafka_server_delayedoperationpurgatory_purgatorysize", "gauge",
                      "Watchers in the purgatory (an operation watching n partitions counts n).")
        delayed = Family("kafka_server_delayedoperationpurgatory_numdelayedoperations", "gauge",
                         "Requests waiting in the purgatory.")
        for name, purgatory in (("Produce", self.replica_manager.delayed_produce),
                                ("Fetch", self.replica_manager.delayed_fetch)):
            labels = (("delayedOperation", name),)
            size.add(labels, purgatory.watched)
            delayed.add(labels, purgatory.delayed)
        return [size, delayed]

    # -- kafka.network RequestMetrics ----------------------------------------------------------

    def _requests(self, now: float) -> list[Family]:
        requests = Family("kafka_network_requestmetrics_requests", "counter", "Requests served, per API version.")
        errors = Family("kafka_network_requestmetrics_errors", "counter",
                        "Error codes in responses (every partition's and the request's), per code.")
        histograms = [
            Family(f"kafka_network_requestmetrics_{name.lower()}", "summary", _HISTOGRAM_DOCS[name])
            for name, _ in TIME_HISTOGRAMS
        ]
        for name, stats in sorted(self.metrics.requests.by_name.items()):
            for version, n in sorted(stats.requests.items()):
                requests.add((("request", name), ("version", str(version))), n)
            for code, n in sorted(stats.errors.items(), key=lambda e: e[0].value):
                errors.add((("request", name), ("error", code.name.upper())), n)
            labels = (("request", name),)
            for family, (_, attribute) in zip(histograms, TIME_HISTOGRAMS):
                _summary(family, labels, getattr(stats, attribute), now)
        return [requests, errors, *histograms]

    # -- connections and the event loop ---------------------------------------------------------

    def _network(self) -> list[Family]:
        connections = Family("kafka_server_socket_server_metrics_connection_count", "gauge",
                             "Open connections per listener (one network processor: the event loop).")
        for listener, n in sorted(self._quotas().per_listener.items()):
            connections.add((("listener", listener), ("networkProcessor", "0")), n)
        out = [connections]
        idle = self._loop_idle()
        if idle is not None:
            f = Family("kafka_network_socketserver_networkprocessoravgidle_percent", "gauge",
                       "Fraction of time the event loop (network and request handling) waited idle.")
            f.add((), idle)
            out.append(f)
        return out

    # -- replica fetchers ------------------------------------------------------------------------

    def _fetchers(self) -> list[Family]:
        manager = self.replica_manager.fetcher_manager
        lag = Family("kafka_server_fetcherlagmetrics_consumerlag", "gauge",
                     "Offsets a followed partition is behind its leader's high watermark.")
        largest = 0
        for fetcher in list(manager.fetchers.values()):
            client_id = fetcher.client_id
            for tp, n in fetcher.lags():
                lag.add((("clientId", client_id), ("topic", tp.topic), ("partition", str(tp.partition))), n)
                largest = max(largest, n)
        max_lag = Family("kafka_server_replicafetchermanager_maxlag", "gauge",
                         "The largest replica lag over every followed partition.")
        max_lag.add((("clientId", "Replica"),), largest)
        return [lag, max_lag]

    # -- the group coordinator -------------------------------------------------------------------

    def _groups(self) -> list[Family]:
        groups = self.group_coordinator.loaded_groups()
        classic = [g for g in groups if g.consumer is None]  # KIP-848 groups have states of their own
        by_state = dict.fromkeys(GroupState, 0)
        for group in classic:
            by_state[group.state] += 1
        counts = (
            ("numgroups", len(classic), "Classic groups this broker coordinates."),
            ("numoffsets", sum(len(g.offsets) for g in groups), "Committed offsets of those groups."),
            ("numgroupspreparingrebalance", by_state[GroupState.PREPARING_REBALANCE], "Groups in PreparingRebalance."),
            ("numgroupscompletingrebalance", by_state[GroupState.COMPLETING_REBALANCE], "Groups in CompletingRebalance."),
            ("numgroupsstable", by_state[GroupState.STABLE], "Groups in Stable."),
            ("numgroupsdead", by_state[GroupState.DEAD], "Groups in Dead."),
            ("numgroupsempty", by_state[GroupState.EMPTY], "Groups in Empty."),
        )  # fmt: skip
        return _unlabelled("kafka_coordinator_group_groupmetadatamanager_", "gauge", counts) + self._lag(groups)

    def _lag(self, groups: Iterable[ClassicGroup]) -> list[Family]:
        """Consumer group lag per group/topic/partition, computed on the coordinator: a committed
        offset against the partition's high watermark on this broker (leader or follower), or,
        for a partition it does not host, its leader's as the last refresh learned. Under
        kafka_exporter's names (Strimzi's Kafka Exporter) and kafka-lag-exporter's."""
        groups = list(groups)
        cluster = self.controller.image.cluster_id
        local = self.replica_manager.partitions
        high_watermarks = {tp: int(p.high_watermark) for tp, p in list(local.items())}
        if self._remote is not None:
            elsewhere = {tp for g in groups for tp in g.offsets if tp not in high_watermarks}
            high_watermarks.update(self._remote.wanted(elsewhere))
        lag = Family("kafka_consumergroup_lag", "gauge", "High watermark minus the group's committed offset.")
        current = Family("kafka_consumergroup_current_offset", "gauge", "The group's committed offset.")
        lag_sum = Family("kafka_consumergroup_lag_sum", "gauge", "The group's lag summed over a topic's partitions.")
        members = Family("kafka_consumergroup_members", "gauge", "Members of the group.")
        g_lag = Family("kafka_consumergroup_group_lag", "gauge", "High watermark minus the group's committed offset.")
        g_offset = Family("kafka_consumergroup_group_offset", "gauge", "The group's committed offset.")
        g_max = Family("kafka_consumergroup_group_max_lag", "gauge", "The group's largest partition lag.")
        g_sum = Family("kafka_consumergroup_group_sum_lag", "gauge", "The group's lag over all partitions.")
        for group in sorted(groups, key=lambda g: g.group_id):
            gid = group.group_id
            members.add((("consumergroup", gid),), group.size)
            owners = _owners(group)
            sums: dict[str, int] = {}
            largest = total = 0
            for tp, committed in sorted(group.offsets.items()):
                high_watermark = high_watermarks.get(tp)
                if high_watermark is None:
                    continue
                n = max(0, high_watermark - committed.offset)
                part = str(tp.partition)
                lag.add((("consumergroup", gid), ("topic", tp.topic), ("partition", part)), n)
                current.add((("consumergroup", gid), ("topic", tp.topic), ("partition", part)), committed.offset)
                host, consumer_id, client_id = owners.get(tp, ("", "", ""))
                labels = (("cluster_name", cluster), ("group", gid), ("topic", tp.topic), ("partition", part),
                          ("member_host", host), ("consumer_id", consumer_id), ("client_id", client_id))
                g_lag.add(labels, n)
                g_offset.add(labels, committed.offset)
                sums[tp.topic] = sums.get(tp.topic, 0) + n
                largest, total = max(largest, n), total + n
            for topic, n in sorted(sums.items()):
                lag_sum.add((("consumergroup", gid), ("topic", topic)), n)
            if group.offsets:
                g_max.add((("cluster_name", cluster), ("group", gid)), largest)
                g_sum.add((("cluster_name", cluster), ("group", gid)), total)
        return [lag, current, lag_sum, members, g_lag, g_offset, g_max, g_sum]


def _owners(group: ClassicGroup) -> dict[TopicPartition, tuple[str, str, str]]:
    """(member host, member id, client id) of the member each partition is assigned to."""
    if group.protocol_type != "consumer":
        return {}
    out: dict[TopicPartition, tuple[str, str, str]] = {}
    for member in group.members.values():
        try:
            assigned = parse_assignment(member.assignment)
        except Exception:  # a member's own bytes (malformed: ValueError, struct.error): never fail a scrape
            continue
        for topic, partition in assigned:
            out[TopicPartition(topic, partition)] = (member.client_host.lstrip("/"), member.member_id, member.client_id)
    return out


_HISTOGRAM_DOCS = {
    "RequestQueueTimeMs": "Milliseconds a request waited, received whole, behind the one in flight on its connection.",
    "LocalTimeMs": "Milliseconds the broker spent handling a request, its purgatory wait excluded.",
    "RemoteTimeMs": "Milliseconds a request waited in a purgatory (acks=all for followers, a fetch for data).",
    "ThrottleTimeMs": "Milliseconds a request was throttled by client quotas.",
    "ResponseQueueTimeMs": "Milliseconds a response waited to be sent (0: written by its connection at once).",
    "ResponseSendTimeMs": "Milliseconds writing the response took.",
    "TotalTimeMs": "Milliseconds from a request received whole to its response written.",
    "RequestBytes": "Bytes of request bodies.",
}


def _unlabelled(prefix: str, kind: str, rows: Iterable[tuple[str, float, str]]) -> list[Family]:
    """One family per (name, value, doc) row, each with a single sample and no labels."""
    out = []
    for name, value, doc in rows:
        f = Family(prefix + name, kind, doc)
        f.add((), value)
        out.append(f)
    return out
