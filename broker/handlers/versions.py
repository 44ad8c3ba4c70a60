"""The API keys and versions this broker serves: the one place they are written.

`key: (handler module, min version, max version)`. ApiVersions is answered from this table before
any handler module is imported (importing them all and their kio schemas is about 40% of a cold
start); each handler registers with `@registry.api(API_KEY)` and takes its range from here, and
tests/unit/test_registry.py checks that every `api_NN_*.py` module is listed, that its API_KEY is
its row's and that its opening comment names the same versions. Raising a max version here is
the whole of advertising it: do it only once the handler serves that version completely.
"""

from __future__ import annotations

SERVED: dict[int, tuple[str, int, int]] = {
    0: ('api_00_produce', 0, 12),
    1: ('api_01_fetch', 4, 17),
    2: ('api_02_list_offsets', 1, 11),
    3: ('api_03_metadata', 0, 13),
    8: ('api_08_offset_commit', 2, 9),
    9: ('api_09_offset_fetch', 1, 9),
    10: ('api_10_find_coordinator', 0, 6),
    11: ('api_11_join_group', 0, 9),
    12: ('api_12_heartbeat', 0, 4),
    13: ('api_13_leave_group', 0, 5),
    14: ('api_14_sync_group', 0, 5),
    15: ('api_15_describe_groups', 0, 5),
    16: ('api_16_list_groups', 0, 5),
    17: ('api_17_sasl_handshake', 0, 1),
    18: ('api_18_api_versions', 0, 4),
    19: ('api_19_create_topics', 2, 7),
    20: ('api_20_delete_topics', 1, 6),
    21: ('api_21_delete_records', 0, 2),
    22: ('api_22_init_producer_id', 0, 5),
    23: ('api_23_offset_for_leader_epoch', 2, 4),
    24: ('api_24_add_partitions_to_txn', 0, 5),
    25: ('api_25_add_offsets_to_txn', 0, 4),
    26: ('api_26_end_txn', 0, 5),
    27: ('api_27_write_txn_markers', 1, 1),
    28: ('api_28_txn_offset_commit', 0, 5),
    29: ('api_29_describe_acls', 1, 3),
    30: ('api_30_create_acls', 1, 3),
    31: ('api_31_delete_acls', 1, 3),
    32: ('api_32_describe_configs', 1, 4),
    33: ('api_33_alter_configs', 0, 2),
    34: ('api_34_alter_replica_log_dirs', 1, 2),
    35: ('api_35_describe_log_dirs', 1, 5),
    36: ('api_36_sasl_authenticate', 0, 2),
    37: ('api_37_create_partitions', 0, 3),
    42: ('api_42_delete_groups', 0, 2),
    43: ('api_43_elect_leaders', 0, 2),
    44: ('api_44_incremental_alter_configs', 0, 1),
    45: ('api_45_alter_partition_reassignments', 0, 1),
    46: ('api_46_list_partition_reassignments', 0, 0),
    47: ('api_47_offset_delete', 0, 0),
    48: ('api_48_describe_client_quotas', 0, 1),
    49: ('api_49_alter_client_quotas', 0, 1),
    50: ('api_50_describe_user_scram_credentials', 0, 0),
    51: ('api_51_alter_user_scram_credentials', 0, 0),
    60: ('api_60_describe_cluster', 0, 2),
    61: ('api_61_describe_producers', 0, 0),
    65: ('api_65_describe_transactions', 0, 0),
    66: ('api_66_list_transactions', 0, 2),
    68: ('api_68_consumer_group_heartbeat', 0, 1),
    69: ('api_69_consumer_group_describe', 0, 1),
    74: ('api_74_list_config_resources', 1, 1),
    75: ('api_75_describe_topic_partitions', 0, 0),
    76: ('api_76_share_group_heartbeat', 1, 1),
    77: ('api_77_share_group_describe', 1, 1),
    78: ('api_78_share_fetch', 1, 2),
    79: ('api_79_share_acknowledge', 1, 2),
    90: ('api_90_describe_share_group_offsets', 0, 1),
    91: ('api_91_alter_share_group_offsets', 0, 0),
    92: ('api_92_delete_share_group_offsets', 0, 0),
    # the share coordinator's state RPCs (KIP-932), which share partition leaders send it; Kafka
    # lists them on its broker listener
    83: ('api_83_initialize_share_group_state', 0, 0),
    84: ('api_84_read_share_group_state', 0, 0),
    85: ('api_85_write_share_group_state', 0, 1),
    86: ('api_86_delete_share_group_state', 0, 0),
    87: ('api_87_read_share_group_state_summary', 0, 1),
}

# Served but not advertised in ApiVersions: a key whose handler is built but not yet held to
# Kafka by a case of the differential suite for each version (compat/test_zz_api_coverage.py).
UNADVERTISED: dict[int, tuple[str, int, int]] = {}

# Feature flags (KIP-584) in ApiVersions v3+: `name: (min supported, max supported)`; each is also
# answered as finalized at its max level, as a single-version cluster finalizes it. Add a feature
# here only once every behaviour its level promises is served (clients switch protocols on it).
FEATURES: dict[str, tuple[int, int]] = {
    # KIP-890 transactions v2: Produce v12, EndTxn v5, TxnOffsetCommit v5, AddPartitionsToTxn v4-5
    "transaction.version": (0, 2),
    "group.version": (0, 1),  # level 1: the KIP-848 consumer group protocol (ConsumerGroupHeartbeat)
    # level 1: KIP-932 share groups (heartbeat, fetch, acknowledge, the offsets admin APIs, the
    # share coordinator); Kafka 4.3's level 2 adds KIP-1191's dead-letter queues, not served here
    "share.version": (0, 1),
}
