# Over 700 lines: every broker config is declared once here, as a field of one dataclass, and the config table is derived from it.
"""The broker's configuration: `BrokerConfig`, every broker config declared once as a field,
built from server.properties (`from_properties`); the broker config table derived from it.

Most fields are the config of the same name (dots as underscores) with its default or its synonym
group applied (`log_retention_ms` from log.retention.ms, .minutes or .hours); a few combine
several configs (`broker_id`, `listeners`, `log_dirs`, see `_derived_settings`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from broker.config.group import GroupCoordinatorSettings, check_group_coordinator_configs
from broker.config.listeners import (
    DEFAULT_PROTOCOL_MAP,
    Listener,
    parse_listeners,
    parse_security_protocol_map,
)
from broker.config.security import (
    check_security,
    listener_security_overrides,
    split_listener_key,
)
from broker.config.settings import (
    BOOLEAN,
    CLEANUP,
    DOUBLE,
    INT,
    LIST,
    LONG,
    MINUTE_MS,
    NO_DOWNCONVERSION,
    NO_MESSAGE_FORMAT,
    NO_PREALLOCATE,
    NO_TIERED_STORAGE,
    NO_TIMESTAMP_DIFFERENCE,
    SHORT,
    STRING,
    TIMESTAMP_TYPE,
    ConfigDef,
    Synonym,
    at_least,
    definitions,
    setting,
)
from broker.config.topic import TOPIC_CONFIGS, LogConfig, build_log_config
from broker.config.values import INT_MAX, LONG_MAX, ConfigError, OneOf, Range, Scope, parse_value

ASSIGNOR_CLASSES: dict[str, str] = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
"""group.consumer.assignors: Kafka's built-in assignor classes and the names clients ask for."""
ASSIGNOR_NAMES = OneOf(("uniform", "range", *ASSIGNOR_CLASSES))

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
"""producer.id.expiration.ms: idle producers are forgotten after a day (storage's default too)."""


@dataclass(frozen=True, slots=True)
class BrokerConfig(GroupCoordinatorSettings):
    """The broker's typed settings. Build it with `from_properties`.

    Most attributes are the config of the same name (dots as underscores) with its default
    applied; a few are derived: `broker_id` (node.id or broker.id), `listeners`,
    `advertised_listeners` (defaults to `listeners`), `listener_security_protocol_map`,
    `inter_broker_listener_name`, `log_dirs` (log.dirs or log.dir), `log_retention_ms`
    (log.retention.ms > .minutes > .hours), `log_roll_ms`, `log_roll_jitter_ms`,
    `log_flush_interval_ms` (falls back to the scheduler interval) and
    `zookeeper_connection_timeout_ms` (falls back to the session timeout).
    `overrides` holds the known keys explicitly set (DescribeConfigs STATIC_BROKER_CONFIG);
    `values` every broker config's own typed value with its default applied (None when unset
    and without default), as DescribeConfigs shows it.
    """
    # ---- identity, listeners, data directories ------------------------------------------------
    broker_id: int = setting(INT, 0,
        "The broker's id (Samsa's default is 0; Kafka's is -1). If node.id is also set the two "
        "must agree.")
    node_id: int = setting(INT, 0,
        "The node id; a synonym of broker.id kept for KRaft-style configuration files.")
    cluster_id: str | None = setting(STRING, None,
        "The cluster id to use; when unset Samsa generates one. It is kept in meta.properties "
        "(single node) or /cluster/id (ZooKeeper); a broker whose stored cluster id differs from a "
        "set cluster.id refuses to start.")
    broker_rack: str | None = setting(STRING, None,
        "The broker's rack, used for rack-aware replica placement and reported in Metadata.")
    listeners: tuple[Listener, ...] = setting(STRING, "PLAINTEXT://127.0.0.1:9092",
        "Comma-separated listeners NAME://host:port the broker binds; an empty host binds the "
        "default interface, port 0 picks a free port. A listener's security protocol "
        "(listener.security.protocol.map) is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.")
    advertised_listeners: tuple[Listener, ...] = setting(STRING, None,
        "Listeners published to clients in Metadata, if different from `listeners`.")
    listener_security_protocol_map: Mapping[str, str] = setting(STRING, DEFAULT_PROTOCOL_MAP,
        "Map of listener name to security protocol, as NAME:PROTOCOL pairs separated by commas.")
    inter_broker_listener_name: str = setting(STRING, None,
        "Listener name followers use to fetch from leaders (over its security protocol); defaults "
        "to the listener security.inter.broker.protocol names, else PLAINTEXT, or the first "
        "advertised listener.")
    log_dirs: tuple[Path, ...] = setting(LIST, None,
        "Comma-separated directories holding partition logs; when unset, log.dir is used.")
    log_dir: str = setting(STRING, "./samsa-data",
        "The data directory used when log.dirs is not set (Samsa's default is ./samsa-data).")
    # ---- topics ---------------------------------------------------------------------------------
    num_partitions: int = setting(INT, 1,
        "Default number of partitions for new topics.", at_least(1))
    default_replication_factor: int = setting(INT, 1,
        "Default replication factor for automatically created topics and CreateTopics requests "
        "that leave it unset.", at_least(1))
    auto_create_topics_enable: bool = setting(BOOLEAN, True,
        "Create a topic when Metadata asks for one that does not exist (and the client allows it).")
    samsa_auto_create_topics_max_per_request: int = setting(INT, 100,
        "Most unknown topics one Metadata request may auto-create; the others named in it are "
        "answered UNKNOWN_TOPIC_OR_PARTITION, Kafka's answer for a topic not created yet, so the "
        "client asks again and the next request creates the next ones (a line is logged when the "
        "cap applies). Kafka has no such limit.", at_least(1))
    delete_topic_enable: bool = setting(BOOLEAN, True,
        "Whether DeleteTopics is allowed.")
    # ---- network ------------------------------------------------------------------------------
    socket_request_max_bytes: int = setting(INT, 104_857_600,
        "Largest request frame accepted; bigger frames close the connection.", at_least(1))
    socket_send_buffer_bytes: int = setting(INT, 102_400,
        "Accepted for compatibility; the OS sizes socket buffers: Samsa never sets SO_SNDBUF, "
        "which leaves Linux's auto-tuning free to grow the buffer past a fixed size on the fetch "
        "path (Kafka: SO_SNDBUF of client sockets).")
    socket_receive_buffer_bytes: int = setting(INT, 102_400,
        "Accepted for compatibility; the OS sizes socket buffers: Samsa never sets SO_RCVBUF, "
        "which leaves Linux's auto-tuning free to grow the buffer past a fixed size on the produce "
        "path (Kafka: SO_RCVBUF of client sockets).")
    queued_max_requests: int = setting(INT, 500,
        "Accepted for compatibility; Samsa reads one request per connection at a time and reads "
        "the next only after answering it, so no request queue builds up: pipelined requests wait "
        "in the socket buffer (Kafka: requests queued before the network threads stop reading).",
        at_least(1))
    connections_max_idle_ms: int = setting(LONG, 600_000,
        "A client connection with no request in flight and no new request started for this many "
        "milliseconds is closed (checked every tenth of it, at most every 30 s); a negative value "
        "keeps idle connections open.")
    max_connections: int = setting(INT, INT_MAX,
        "Most client connections the broker holds at once, over all listeners "
        "(listener.name.<name>.max.connections sets a listener's own limit). At the limit the "
        "broker stops accepting, as Kafka does: new connections wait in the listen backlog until "
        "one closes. With several listeners, the inter-broker listener is exempt from the "
        "broker-wide limit; accepting on it beyond the limit closes the least recently active "
        "connection of another listener.", at_least(0))
    max_connections_per_ip: int = setting(INT, INT_MAX,
        "Most connections from one IP address; a new connection beyond it is accepted and closed "
        "at once (one log line per interval, with a count). May be 0 only when "
        "max.connections.per.ip.overrides is set.", at_least(0))
    max_connections_per_ip_overrides: Mapping[str, int] = setting(STRING, "",
        "Per-address exceptions to max.connections.per.ip: `host:count,...` (for example "
        "`hostName:100,127.0.0.1:200`); host names are resolved at start-up, every address of a "
        "name counts.")
    queued_max_request_bytes: int = setting(LONG, -1,
        "Bytes of requests being read or handled that the broker holds at once; 0 or less is "
        "unbounded, Kafka's default and Samsa's. A frame reserves its declared size when its size "
        "prefix is read and returns it when its response is written; when nothing is left, "
        "connections stop reading (TCP pushes back on the clients) until memory is returned. Samsa "
        "keeps it unbounded because a reservation is of the declared size: a few connections "
        "declaring 100 MB frames and sending nothing would stop every connection from reading; "
        "Samsa backs a large frame's buffer with memory only as its bytes arrive and closes a "
        "frame that is not complete within samsa.request.receive.timeout.ms, so a sender holds "
        "only what it actually sent, for a bounded time. When set, it must be at least "
        "socket.request.max.bytes.")
    samsa_request_receive_timeout_ms: int = setting(LONG, 60_000,
        "A request frame must arrive whole within this many milliseconds of its first byte (or of "
        "the moment queued.max.request.bytes let it be read); otherwise the connection is closed "
        "with one log line and its buffered bytes are released (slow senders, frames missing their "
        "last bytes). Kafka has no such limit. The default is twice the 30 s request.timeout.ms of "
        "Kafka's clients, after which a client no longer waits for the answer.", at_least(1))
    fetch_max_bytes: int = setting(INT, 57_671_680,
        "Most bytes returned by one Fetch response: caps the request's max_bytes (the first batch "
        "still goes out whole).", at_least(1024))
    max_incremental_fetch_session_cache_slots: int = setting(INT, 1000,
        "Accepted for compatibility; Samsa keeps no fetch sessions: every Fetch is answered "
        "sessionless (session id 0), so clients send full fetch requests (Kafka: incremental fetch "
        "sessions kept per broker).", at_least(0))
    num_network_threads: int = setting(INT, 3,
        "Accepted for compatibility; Samsa serves all connections on one asyncio loop.",
        at_least(1), read_only=False)
    num_io_threads: int = setting(INT, 8,
        "The threads that write appends to the logs while the disk is slow (a write over 20 ms "
        "sends writes there for 10 s), so that a slow disk holds up the partitions it writes and "
        "not the event loop; requests are handled on one asyncio loop (Kafka: the request "
        "handler threads).",
        at_least(1), read_only=False)
    background_threads: int = setting(INT, 10,
        "Accepted for compatibility; Samsa runs background work (retention, flushes, checkpoints, "
        "offset expiry) as tasks on its asyncio loop, and compaction on log.cleaner.threads "
        "threads (Kafka: the background scheduler's threads).", at_least(1), read_only=False)
    num_recovery_threads_per_data_dir: int = setting(INT, 2,
        "Accepted for compatibility; Samsa loads and recovers logs one at a time, in one thread "
        "off the event loop (Kafka: threads per data directory recovering logs at start-up).",
        at_least(1), read_only=False)
    # ---- log: segments, retention, flush -----------------------------------------------------
    message_max_bytes: int = setting(INT, 1_048_588,
        "Largest record batch the broker accepts (default for the topic config max.message.bytes).",
        at_least(0))
    log_segment_bytes: int = setting(INT, 1_073_741_824,
        "Maximum size of one segment file.", at_least(14))
    log_roll_ms: int = setting(LONG, None,
        "Roll a new segment after this many milliseconds; when unset, log.roll.hours is used.")
    log_roll_hours: int = setting(INT, 168,
        "Roll a new segment after this many hours (used when log.roll.ms is unset).", at_least(1))
    log_roll_jitter_ms: int = setting(LONG, None,
        "Maximum random jitter subtracted from the roll time; when unset, log.roll.jitter.hours is "
        "used.")
    log_roll_jitter_hours: int = setting(INT, 0,
        "Maximum roll jitter in hours (used when log.roll.jitter.ms is unset).", at_least(0))
    log_index_size_max_bytes: int = setting(INT, 10_485_760,
        "Maximum size of an offset or time index file.", at_least(4))
    log_index_interval_bytes: int = setting(INT, 4096,
        "Bytes of log between offset index entries.", at_least(0))
    log_retention_ms: int = setting(LONG, None,
        "Keep log segments this many milliseconds; -1 keeps them forever. Takes precedence over "
        "log.retention.minutes and .hours.")
    log_retention_minutes: int | None = setting(INT, None,
        "Retention in minutes, used when log.retention.ms is unset.")
    log_retention_hours: int = setting(INT, 168,
        "Retention in hours, used when neither log.retention.ms nor log.retention.minutes is set.")
    log_retention_bytes: int = setting(LONG, -1,
        "Delete old segments once a partition is larger than this; -1 means no size limit.")
    log_retention_check_interval_ms: int = setting(LONG, 300_000,
        "How often retention is checked.", at_least(1))
    log_initial_task_delay_ms: int = setting(LONG, 30_000,
        "Delay after start-up before the first retention check (Kafka's internal "
        "log.initial.task.delay.ms; Kafka delays its flush and checkpoint tasks too, Samsa runs "
        "those from their first interval).", at_least(0))
    log_segment_delete_delay_ms: int = setting(LONG, 60_000,
        "Delay before a deleted segment's files are removed from disk.", at_least(0))
    log_flush_interval_messages: int = setting(LONG, LONG_MAX,
        "fsync a partition after this many messages.", at_least(1))
    log_flush_interval_ms: int = setting(LONG, None,
        "fsync a partition when its oldest unflushed message is this old; when unset, "
        "log.flush.scheduler.interval.ms is used.")
    log_flush_scheduler_interval_ms: int = setting(LONG, LONG_MAX,
        "How often the flusher checks whether any log needs an fsync.")
    log_flush_offset_checkpoint_interval_ms: int = setting(INT, 60_000,
        "How often the recovery point checkpoint is written; 0 writes it only at shutdown.",
        at_least(0))
    log_flush_start_offset_checkpoint_interval_ms: int = setting(INT, 60_000,
        "How often the log start offset checkpoint is written; 0 writes it only at shutdown.",
        at_least(0))
    log_preallocate: bool = setting(BOOLEAN, False, NO_PREALLOCATE)
    log_cleanup_policy: tuple[str, ...] = setting(LIST, ("delete",),
        "Default cleanup policy: delete, compact, or both.", CLEANUP)
    log_message_timestamp_type: str = setting(STRING, "CreateTime",
        "Default timestamp type of stored messages.", TIMESTAMP_TYPE)
    log_message_timestamp_before_max_ms: int = setting(LONG, LONG_MAX,
        "How far in the past a record timestamp may be, relative to the broker's clock.",
        at_least(0))
    log_message_timestamp_after_max_ms: int = setting(LONG, 3_600_000,
        "How far in the future a record timestamp may be, relative to the broker's clock.",
        at_least(0))
    log_message_downconversion_enable: bool = setting(BOOLEAN, True, NO_DOWNCONVERSION)
    log_message_format_version: str = setting(STRING, "3.0-IV1", NO_MESSAGE_FORMAT)
    log_message_timestamp_difference_max_ms: int = setting(LONG, LONG_MAX, NO_TIMESTAMP_DIFFERENCE,
        at_least(0))
    log_local_retention_ms: int = setting(LONG, -2, NO_TIERED_STORAGE + "(Kafka: the default of "
        "local.retention.ms).", at_least(-2))
    log_local_retention_bytes: int = setting(LONG, -2, NO_TIERED_STORAGE + "(Kafka: the default of "
        "local.retention.bytes).", at_least(-2))
    # ---- log cleaner ---------------------------------------------------------------------------
    log_cleaner_enable: bool = setting(BOOLEAN, True,
        "Run the log cleaner (compaction).")
    log_cleaner_threads: int = setting(INT, 1,
        "Cleaner threads.", at_least(0))
    log_cleaner_backoff_ms: int = setting(LONG, 15_000,
        "Sleep between cleaner passes when nothing needs cleaning.", at_least(0))
    log_cleaner_min_cleanable_ratio: float = setting(DOUBLE, 0.5,
        "Minimum dirty ratio before a log is compacted.", Range(0, 1))
    log_cleaner_delete_retention_ms: int = setting(LONG, 86_400_000,
        "How long tombstones are kept on compacted topics.", at_least(0))
    log_cleaner_min_compaction_lag_ms: int = setting(LONG, 0,
        "Minimum age of a message before it may be compacted.", at_least(0))
    log_cleaner_max_compaction_lag_ms: int = setting(LONG, LONG_MAX,
        "Maximum time a message stays ineligible for compaction.", at_least(1))
    log_cleaner_dedupe_buffer_size: int = setting(LONG, 134_217_728,
        "Memory for the cleaner's key -> offset map, shared by all cleaner threads; counted as "
        "Kafka counts it (24 bytes per key), so it bounds the same number of keys per pass.",
        at_least(0))
    log_cleaner_io_buffer_size: int = setting(INT, 524_288,
        "Read and write buffer of a cleaner thread.", at_least(0))
    log_cleaner_io_buffer_load_factor: float = setting(DOUBLE, 0.9,
        "How full the cleaner's offset map may get before a pass stops mapping more of the dirty "
        "section.")
    # ---- group coordinator and offsets -----------------------------------------------------------
    offsets_topic_num_partitions: int = setting(INT, 50,
        "Partitions of __consumer_offsets.", at_least(1))
    offsets_topic_replication_factor: int = setting(SHORT, 3,
        "Replication factor of __consumer_offsets (capped to the live brokers when it is created).",
        at_least(1))
    offsets_topic_segment_bytes: int = setting(INT, 104_857_600,
        "Segment size of __consumer_offsets.", at_least(1))
    offsets_retention_minutes: int = setting(INT, 10_080,
        "Committed offsets of empty groups are kept this long.", at_least(1))
    offsets_retention_check_interval_ms: int = setting(LONG, 600_000,
        "How often stale offsets are expired.", at_least(1))
    offsets_commit_timeout_ms: int = setting(INT, 5000,
        "How long an offset commit waits for __consumer_offsets replication.", at_least(1))
    offset_metadata_max_bytes: int = setting(INT, 4096,
        "Largest metadata string allowed with an offset commit.")
    group_min_session_timeout_ms: int = setting(INT, 6000,
        "Smallest session timeout a member may ask for.")
    group_max_session_timeout_ms: int = setting(INT, 1_800_000,
        "Largest session timeout a member may ask for.")
    group_initial_rebalance_delay_ms: int = setting(INT, 3000,
        "How long the first rebalance of a new group waits for more members (the Samsa CLI may "
        "choose a lower value).")
    group_max_size: int = setting(INT, INT_MAX,
        "Most members a consumer group may have.", at_least(1))
    group_consumer_session_timeout_ms: int = setting(INT, 45_000,
        "A member of a consumer-protocol (KIP-848) group is fenced when it sends no heartbeat "
        "for this long.", at_least(1))
    group_consumer_heartbeat_interval_ms: int = setting(INT, 5_000,
        "How often a member of a consumer-protocol (KIP-848) group is told to heartbeat.", at_least(1))
    group_consumer_assignment_interval_ms: int = setting(INT, 1_000,
        "A consumer-protocol (KIP-848) group's target assignment is computed again at most this "
        "often (KIP-1263); heartbeats in between get the last one.", at_least(0))
    group_consumer_max_size: int = setting(INT, INT_MAX,
        "Most members a consumer-protocol (KIP-848) group may have.", at_least(1))
    group_consumer_regex_refresh_interval_ms: int = setting(INT, 600_000,
        "A consumer-protocol (KIP-848) group's regular expressions are resolved again (against the "
        "topics the member whose heartbeat finds them due may describe) at least this often, and no "
        "sooner than 10 s after their last resolution; topics created since it make them due too "
        "(Kafka's internal config).", at_least(10_000))
    group_consumer_migration_policy: str = setting(STRING, "bidirectional",
        "Online conversion of a classic group with members that uses the consumer embedded protocol "
        "to a consumer-protocol (KIP-848) group (upgrade: a ConsumerGroupHeartbeat joins it) and back "
        "(downgrade: its last consumer-protocol member leaves): disabled, upgrade, downgrade or "
        "bidirectional (case insensitive). Empty groups change type whatever the policy.",
        OneOf(("disabled", "downgrade", "upgrade", "bidirectional"), ignore_case=True))
    group_consumer_assignors: tuple[str, ...] = setting(LIST, (
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor"),
        "Server-side assignors of consumer-protocol (KIP-848) groups, the first the default: "
        "Kafka's class names or their short names uniform and range.", ASSIGNOR_NAMES)
    # ---- transactions and producer ids ------------------------------------------------------
    producer_id_expiration_ms: int = setting(INT, DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        "Idle producer ids are forgotten after this long.", at_least(1))
    transaction_max_timeout_ms: int = setting(INT, 900_000,
        "Largest transaction timeout a producer may ask for.", at_least(1))
    transactional_id_expiration_ms: int = setting(INT, 604_800_000,
        "A transactional id whose transaction has been complete (or empty) this long is removed "
        "from __transaction_state.", at_least(1))
    transaction_state_log_num_partitions: int = setting(INT, 50,
        "Partitions of __transaction_state, created on the first FindCoordinator for a "
        "transaction.", at_least(1))
    transaction_state_log_replication_factor: int = setting(SHORT, 3,
        "Replication factor of __transaction_state (at most the live brokers when it is "
        "created).", at_least(1))
    transaction_state_log_min_isr: int = setting(INT, 2,
        "min.insync.replicas of __transaction_state.", at_least(1))
    transaction_state_log_segment_bytes: int = setting(INT, 104_857_600,
        "segment.bytes of __transaction_state.", at_least(1))
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = setting(INT, 10_000,
        "How often the transaction coordinator aborts transactions past their timeout.", at_least(1))
    transaction_remove_expired_transaction_cleanup_interval_ms: int = setting(INT, 3_600_000,
        "How often the transaction coordinator removes expired transactional ids.", at_least(1))
    transaction_partition_verification_enable: bool = setting(BOOLEAN, True,
        "KIP-890: a transactional produce is appended only to a partition its transaction has "
        "added (verified with the transaction coordinator).", read_only=False)
    # ---- share coordinator (KIP-932) -------------------------------------------------------------
    share_coordinator_state_topic_num_partitions: int = setting(INT, 50,
        "Partitions of __share_group_state, created when a share group first initializes a "
        "share partition's state.", at_least(1))
    share_coordinator_state_topic_replication_factor: int = setting(SHORT, 3,
        "Replication factor of __share_group_state (at most the live brokers when it is "
        "created).", at_least(1))
    share_coordinator_state_topic_min_isr: int = setting(SHORT, 2,
        "min.insync.replicas of __share_group_state.", at_least(1))
    share_coordinator_state_topic_segment_bytes: int = setting(INT, 104_857_600,
        "segment.bytes of __share_group_state.", at_least(1))
    share_coordinator_snapshot_update_records_per_snapshot: int = setting(INT, 500,
        "Updates of a share partition's state written between two snapshots of it.", Range(0, 500))
    share_coordinator_write_timeout_ms: int = setting(INT, 5000,
        "How long the share coordinator waits for its state records to be replicated.", at_least(1))
    # ---- replication ----------------------------------------------------------------------------
    replica_lag_time_max_ms: int = setting(LONG, 30_000,
        "A follower that has not caught up for this long leaves the ISR.")
    replica_fetch_max_bytes: int = setting(INT, 1_048_576,
        "Bytes a follower asks for per partition.", at_least(0))
    replica_fetch_min_bytes: int = setting(INT, 1,
        "min_bytes of follower fetches.")
    replica_fetch_wait_max_ms: int = setting(INT, 500,
        "max_wait_ms of follower fetches.")
    replica_fetch_backoff_ms: int = setting(INT, 1000,
        "Sleep after a failed follower fetch.", at_least(0))
    replica_fetch_response_max_bytes: int = setting(INT, 10_485_760,
        "Bytes a follower asks for per fetch response.", at_least(0))
    replica_socket_timeout_ms: int = setting(INT, 30_000,
        "Socket timeout of follower fetches.")
    replica_high_watermark_checkpoint_interval_ms: int = setting(LONG, 5000,
        "How often high watermarks are checkpointed; 0 or less checkpoints them only at shutdown.")
    num_replica_fetchers: int = setting(INT, 1,
        "Fetcher tasks per source broker.")
    # ---- controller, ZooKeeper, shutdown -------------------------------------------------------
    zookeeper_connect: str | None = setting(STRING, None,
        "ZooKeeper connect string host:port[,...][/chroot]; when unset Samsa uses its embedded "
        "controller.")
    zookeeper_session_timeout_ms: int = setting(INT, 18_000,
        "ZooKeeper session timeout.")
    zookeeper_connection_timeout_ms: int = setting(INT, None,
        "How long to wait for a ZooKeeper connection; defaults to zookeeper.session.timeout.ms.")
    controller_socket_timeout_ms: int = setting(INT, 30_000,
        "Accepted for compatibility; Samsa's controller sends no requests to brokers: they follow "
        "partition state through ZooKeeper watches, or the embedded controller on a single node "
        "(Kafka: socket timeout of controller-to-broker requests).")
    controlled_shutdown_enable: bool = setting(BOOLEAN, True,
        "Move leadership away before shutting down.")
    controlled_shutdown_max_retries: int = setting(INT, 3,
        "Attempts of a controlled shutdown.")
    controlled_shutdown_retry_backoff_ms: int = setting(LONG, 5000,
        "Sleep between controlled shutdown attempts.")
    samsa_heartbeat_port: int = setting(INT, 0,
        "UDP port of this broker's failure-detector heartbeats (0 picks a free port); advertised "
        "in its ZooKeeper registration.", Range(0, 65535))
    samsa_heartbeat_interval_ms: int = setting(INT, 100,
        "How often a broker sends each peer a UDP heartbeat (cluster mode).", at_least(10))
    samsa_heartbeat_timeout_ms: int = setting(INT, 500,
        "Silence after which a broker reports a peer as suspected; a majority of a partition's ISR "
        "suspecting its leader moves leadership, and a leader takes a suspected follower that "
        "holds its high watermark back out of the ISR, without waiting for the ZooKeeper session "
        "to expire or for replica.lag.time.max.ms.", at_least(50))
    samsa_preferred_leader_settle_ms: int = setting(LONG, 10_000,
        "How long a broker must have been registered before the preferred leader election gives "
        "it leadership back: clients back off from reconnecting to a broker that was down "
        "(librdkafka's reconnect.backoff.max.ms is 10 s), and a move earlier stalls their writes "
        "for the rest of that backoff.", at_least(0))
    samsa_peer_address_overrides: str = setting(STRING, "",
        "Testing: `id=host:tcp_port:udp_port,...` reach peer `id`'s inter-broker listener and "
        "heartbeats through these addresses (the cluster harness's fault-injecting proxies).")
    auto_leader_rebalance_enable: bool = setting(BOOLEAN, True,
        "Move leadership back to preferred replicas periodically.")
    leader_imbalance_check_interval_seconds: int = setting(LONG, 300,
        "How often preferred leader balance is checked.", at_least(1))
    leader_imbalance_per_broker_percentage: int = setting(INT, 10,
        "The share of a broker's preferred partitions led elsewhere above which the controller "
        "moves them back.", Range(0, 100))
    quota_window_num: int = setting(INT, 11,
        "The number of samples client quota rates are measured over (broker/quotas.py).", at_least(1))
    quota_window_size_seconds: int = setting(INT, 1,
        "The time span of each client quota rate sample.", at_least(1))
    leader_replication_throttled_rate: int = setting(LONG, 9_223_372_036_854_775_807,
        "Bytes per second this broker sends, as leader, for the partitions a topic's "
        "leader.replication.throttled.replicas names for it; above it, followers outside the ISR "
        "get no records for them (broker/replication/throttle.py; kafka-reassign-partitions "
        "--throttle sets it). The default is no throttle.", at_least(0), read_only=False)
    follower_replication_throttled_rate: int = setting(LONG, 9_223_372_036_854_775_807,
        "Bytes per second this broker fetches, as a follower outside the ISR, for the partitions a "
        "topic's follower.replication.throttled.replicas names for it; above it, it leaves them out "
        "of its fetches. The default is no throttle.", at_least(0), read_only=False)
    replication_quota_window_num: int = setting(INT, 11,
        "The number of samples the replication throttles' rates are measured over.", at_least(1))
    replication_quota_window_size_seconds: int = setting(INT, 1,
        "The time span of each replication throttle rate sample.", at_least(1))
    replica_alter_log_dirs_io_max_bytes_per_second: int = setting(LONG, 9_223_372_036_854_775_807,
        "Bytes per second this broker copies, in all, into the future logs of replicas moving "
        "between its log dirs (AlterReplicaLogDirs; broker/replication/alter_log_dirs.py); above "
        "it, no copy step starts. The default is no throttle.", at_least(0), read_only=False)
    alter_log_dirs_replication_quota_window_num: int = setting(INT, 11,
        "The number of samples the log dir move throttle's rate is measured over.", at_least(1))
    alter_log_dirs_replication_quota_window_size_seconds: int = setting(INT, 1,
        "The time span of each log dir move throttle rate sample.", at_least(1))
    # ---- metrics (broker/metrics) ----------------------------------------------------------------
    metrics_prometheus_port: int = setting(INT, 0,
        "Port of the Prometheus endpoint (GET /metrics): Kafka's broker metrics under the names "
        "the Prometheus JMX exporter gives them with Strimzi's rules (docs/operations.md). 0: no "
        "endpoint.", Range(0, 65535))
    metrics_prometheus_host: str = setting(STRING, "0.0.0.0",
        "Address the Prometheus endpoint listens on (metrics.prometheus.port set).")
    # ---- not configs: what from_properties works out besides ----------------------------------
    max_connections_per_listener: Mapping[str, int] = field(default_factory=dict)
    """listener.name.<name>.max.connections, by listener name."""
    overrides: Mapping[str, str] = field(default_factory=dict, repr=False)
    values: Mapping[str, object] = field(default_factory=dict, repr=False)
    dynamic_default: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The cluster-wide dynamic broker configs (DYNAMIC_DEFAULT_BROKER_CONFIG, config/dynamic.py)."""
    dynamic_broker: Mapping[str, str] = field(default_factory=dict, repr=False)
    """This broker's own dynamic configs (DYNAMIC_BROKER_CONFIG)."""

    @property
    def offsets_retention_ms(self) -> int:
        """offsets.retention.minutes in milliseconds."""
        return self.offsets_retention_minutes * MINUTE_MS

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> tuple[BrokerConfig, list[str]]:
        """Build the config from server.properties strings.

        Returns the config and the sorted keys that are not broker configs Samsa knows (not
        fatal; the caller logs them). Raises ConfigError naming the key for an invalid value.
        """
        unknown = sorted(k for k in props
                         if k not in BROKER_CONFIGS and not _LISTENER_MAX_CONNECTIONS.match(k)
                         and split_listener_key(k) is None)
        overrides = {k: v for k, v in props.items() if k in BROKER_CONFIGS}
        values: dict[str, object] = {}
        for name, d in BROKER_CONFIGS.items():
            values[name] = d.parse(overrides[name]) if name in overrides else d.default
        check_group_coordinator_configs(values)
        kwargs = _derived_settings(values, overrides)
        kwargs.update(_connection_limits(values, props))
        kwargs.update(listener_security_overrides(props))
        for f in dataclasses.fields(cls):
            if f.name in ("overrides", "values", "dynamic_default", "dynamic_broker") or f.name in kwargs:
                continue
            key = f.name.replace("_", ".")
            if key not in BROKER_CONFIGS:
                raise AssertionError(f"BrokerConfig.{f.name} has no config definition")
            kwargs[f.name] = effective_value(values, key)
        if kwargs["log_retention_ms"] == 0:
            key = next(s.name for s in broker_synonyms("log.retention.ms")
                       if values[s.name] is not None)
            raise ConfigError(f"{key} must be unlimited (-1) or, equal or greater than 1", key)
        config = cls(**kwargs, overrides=MappingProxyType(dict(overrides)),
                     values=MappingProxyType(values))
        check_security(config, config.listeners)
        return config, unknown

    def effective(self, name: str) -> object:
        """The value a broker config actually has, following its synonyms
        (`effective("log.retention.ms")` is 604800000 when only the hours default applies)."""
        return effective_value(self.values, name)

    def topic_defaults(self) -> dict[str, object]:
        """Each topic config's default on this broker (typed), from its broker synonyms."""
        out: dict[str, object] = {}
        for name, d in TOPIC_CONFIGS.items():
            v = self.effective(d.synonyms[0].name) if d.synonyms[0].name in self.values else None
            out[name] = d.default if v is None else v
        return out

    def log_config(self) -> LogConfig:
        """The broker's defaults for topics, as the storage layer's LogConfig."""
        return build_log_config(LogConfig(), self.topic_defaults())


_STATIC_TOPIC_DEFAULTS = frozenset({"log.message.format.version"})
"""Topic defaults Kafka never changed at runtime (its DynamicLogConfig's excluded configs)."""


def _broker_table() -> dict[str, ConfigDef]:
    """Every broker config by name: BrokerConfig's, then the topic configs that are also broker
    configs (scope BOTH). A broker config that a topic config falls back to first can be changed
    at runtime, as in Kafka."""
    table = {d.name: d for d in definitions(BrokerConfig)}
    for d in TOPIC_CONFIGS.values():
        if Scope.BROKER in d.scope:
            if d.name in table:
                raise AssertionError(f"{d.name} declared twice")
            table[d.name] = d
    for d in TOPIC_CONFIGS.values():
        primary = table.get(d.synonyms[0].name)  # None: a topic config with no broker default
        if primary is not None and primary.name not in _STATIC_TOPIC_DEFAULTS:
            table[primary.name] = dataclasses.replace(primary, read_only=False)
    return table


BROKER_CONFIGS: Mapping[str, ConfigDef] = MappingProxyType(_broker_table())
"""Configs accepted in server.properties and shown by DescribeConfigs for a broker."""
CONFIG_DEFS: Mapping[str, ConfigDef] = MappingProxyType({**BROKER_CONFIGS, **TOPIC_CONFIGS})
"""Every config Samsa knows, by name."""
INTERNAL_BROKER_CONFIGS = frozenset({"group.consumer.regex.refresh.interval.ms"})
"""Kafka's internal broker configs (defineInternal): accepted, described only where set."""

_BROKER_SYNONYM_GROUPS: Mapping[str, tuple[Synonym, ...]] = MappingProxyType({
    s.name: d.synonyms for d in TOPIC_CONFIGS.values() for s in d.synonyms
})
"""Broker config -> the group of broker configs that set the same thing (log.retention.*)."""


def broker_synonyms(name: str) -> tuple[Synonym, ...]:
    return _BROKER_SYNONYM_GROUPS.get(name, (Synonym(name),))


def _resolve_group(values: Mapping[str, object], group: tuple[Synonym, ...]) -> object:
    """The effective value of a synonym group: the first member that has a value (set or
    defaulted), times its factor. A negative retention means unlimited (-1), as in Kafka."""
    for syn in group:
        v = values.get(syn.name)
        if v is not None:
            if syn.factor != 1:
                assert isinstance(v, int)
                v = v * syn.factor
            if group[0].name == "log.retention.ms" and isinstance(v, int) and v < 0:
                v = -1
            return v
    return None


def effective_value(values: Mapping[str, object], name: str) -> object:
    """The value broker config `name` really has: for the first member of a synonym group
    (log.retention.ms) the group's resolution, otherwise its own value."""
    group = broker_synonyms(name)
    return _resolve_group(values, group) if group[0].name == name else values[name]


_LISTENER_MAX_CONNECTIONS = re.compile(r"listener\.name\.([^.]+)\.max\.connections")
"""Kafka's listener-prefixed max.connections: `listener.name.<lower-case name>.max.connections`."""


def _connection_limits(values: Mapping[str, object],
                       props: Mapping[str, str]) -> dict[str, Any]:
    """max.connections per listener (from the listener-prefixed keys of `props`), the per-IP
    overrides, and Kafka's checks of them and of queued.max.request.bytes."""
    out: dict[str, Any] = {}
    per_listener: dict[str, int] = {}
    for key, raw in props.items():
        m = _LISTENER_MAX_CONNECTIONS.fullmatch(key)
        if m:
            limit = parse_value(INT, key, raw)
            at_least(0).check(key, INT, limit)
            assert isinstance(limit, int)
            per_listener[m.group(1).upper()] = limit
    out["max_connections_per_listener"] = MappingProxyType(per_listener)
    ip_overrides: dict[str, int] = {}
    raw_overrides = str(values["max.connections.per.ip.overrides"] or "")
    for entry in filter(None, (e.strip() for e in raw_overrides.split(","))):
        host, sep, count = entry.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ConfigError("max.connections.per.ip.overrides contains invalid addresses : "
                              f"{entry} (expected host:count)", "max.connections.per.ip.overrides")
        ip_overrides[host.strip().strip("[]")] = int(count)
    out["max_connections_per_ip_overrides"] = MappingProxyType(ip_overrides)
    if values["max.connections.per.ip"] == 0 and not ip_overrides:
        raise ConfigError("max.connections.per.ip can be set to zero only if "
                          "max.connections.per.ip.overrides property is set.",
                          "max.connections.per.ip")
    queued = values["queued.max.request.bytes"]
    assert isinstance(queued, int)
    request_max = values["socket.request.max.bytes"]
    assert isinstance(request_max, int)
    if 0 < queued < request_max:
        raise ConfigError("queued.max.request.bytes must be larger or equal to "
                          "socket.request.max.bytes", "queued.max.request.bytes")
    return out


def _derived_settings(values: Mapping[str, object],
                      overrides: Mapping[str, str]) -> dict[str, Any]:
    """The BrokerConfig attributes that combine several configs or need parsing beyond type."""
    out: dict[str, Any] = {}
    if "node.id" in overrides and "broker.id" in overrides \
            and values["node.id"] != values["broker.id"]:
        raise ConfigError("broker.id and node.id are both set and differ "
                          f"({values['broker.id']} != {values['node.id']})", "node.id")
    out["broker_id"] = values["node.id"] if "node.id" in overrides else values["broker.id"]

    protocol_map = parse_security_protocol_map(
        "listener.security.protocol.map", str(values["listener.security.protocol.map"]))
    out["listener_security_protocol_map"] = MappingProxyType(protocol_map)
    listeners = parse_listeners("listeners", str(values["listeners"]), protocol_map)
    if not listeners:
        raise ConfigError("listeners must name at least one listener", "listeners")
    advertised = listeners
    if values["advertised.listeners"] is not None:
        advertised = parse_listeners(
            "advertised.listeners", str(values["advertised.listeners"]), protocol_map)
        if any(a.host == "0.0.0.0" for a in advertised):
            raise ConfigError("advertised.listeners cannot use the nonroutable meta-address "
                              "0.0.0.0. Use a routable IP address.", "advertised.listeners")
    out["listeners"], out["advertised_listeners"] = listeners, advertised

    names = [a.name for a in advertised]
    inter = values["inter.broker.listener.name"]
    if inter is not None and "security.inter.broker.protocol" in overrides:
        raise ConfigError("Only one of inter.broker.listener.name and "
                          "security.inter.broker.protocol should be set.",
                          "security.inter.broker.protocol")
    if inter is not None:
        inter = str(inter).upper()
        if inter not in names:
            raise ConfigError("inter.broker.listener.name must be a listener name defined in "
                              f"advertised.listeners; valid: {', '.join(names)}",
                              "inter.broker.listener.name")
    elif "security.inter.broker.protocol" in overrides:
        inter = str(values["security.inter.broker.protocol"])
        if inter not in names:
            raise ConfigError(f"security.inter.broker.protocol {inter} names no listener of "
                              f"advertised.listeners; valid: {', '.join(names)}",
                              "security.inter.broker.protocol")
    else:
        inter = "PLAINTEXT" if "PLAINTEXT" in names else names[0]
    out["inter_broker_listener_name"] = inter

    dirs = values["log.dirs"] or (values["log.dir"],)
    assert isinstance(dirs, tuple)
    out["log_dirs"] = tuple(Path(str(d)) for d in dirs if d)
    if not out["log_dirs"]:
        raise ConfigError("log.dirs and log.dir name no directory", "log.dirs")

    zk_conn = values["zookeeper.connection.timeout.ms"]
    out["zookeeper_connection_timeout_ms"] = (
        values["zookeeper.session.timeout.ms"] if zk_conn is None else zk_conn)
    return out

