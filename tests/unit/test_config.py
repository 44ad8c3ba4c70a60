"""Tests for broker/config.py: properties parsing, the config table, BrokerConfig, topic
configs and DescribeConfigs output."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from broker.config import (
    BROKER_CONFIGS,
    CONFIG_DEFS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    Listener,
    LogConfig,
    Scope,
    describe_broker_configs,
    describe_topic_configs,
    load_properties,
    parse_listeners,
    parse_properties,
    parse_security_protocol_map,
    render_value,
    topic_log_config,
    validate_topic_configs,
)
from broker.config.broker import INTERNAL_BROKER_CONFIGS
from protocol.errors import ErrorCode, KafkaError


def cfg(**props: str) -> BrokerConfig:
    """A BrokerConfig from keyword props (underscores become dots); asserts no unknown keys."""
    props_with_dots = {k.replace("_", "."): v for k, v in props.items()}
    config, unknown = BrokerConfig.from_properties(props_with_dots)
    assert unknown == []
    return config


def by_name(entries):  # type: ignore[no-untyped-def]
    return {e.name: e for e in entries}


# ---- .properties --------------------------------------------------------------------------------


def test_properties_separators_comments_and_whitespace() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   \t\n"
        "a=1\n"
        "b: 2\n"
        "c 3\n"
        "  d   =   spaced value  \n"
        "e\t:\tx\n"
        "f\n"
        "g==h\n"
        "a=overridden\n"
    )
    assert parse_properties(text) == {
        "a": "overridden",
        "b": "2",
        "c": "3",
        "d": "spaced value  ",
        "e": "x",
        "f": "",
        "g": "=h",
    }


def test_properties_continuations() -> None:
    text = "listeners=PLAINTEXT://a:1,\\\n    PLAINTEXT2://b:2\nnext=x\\\n\n" "even=ends\\\\\nz=1\n"
    props = parse_properties(text)
    assert props["listeners"] == "PLAINTEXT://a:1,PLAINTEXT2://b:2"
    assert props["next"] == "x"  # continued onto an empty line
    assert props["even"] == "ends\\"  # an escaped backslash does not continue the line
    assert props["z"] == "1"


def test_properties_comment_lines_do_not_continue() -> None:
    assert parse_properties("# comment \\\nkey=v\n") == {"key": "v"}


def test_properties_escapes() -> None:
    text = (
        "tab=a\\tb\n"
        "nl=a\\nb\n"
        "bs=a\\\\b\n"
        "uni=caf\\u00e9\n"
        "pair=\\ud83d\\ude00\n"
        "key\\ with\\:colon\\=eq=v\n"
        "other=\\q\n"
    )
    props = parse_properties(text)
    assert props["tab"] == "a\tb"
    assert props["nl"] == "a\nb"
    assert props["bs"] == "a\\b"
    assert props["uni"] == "café"
    assert props["pair"] == "\U0001F600"
    assert props["key with:colon=eq"] == "v"
    assert props["other"] == "q"


def test_properties_malformed_unicode_escape() -> None:
    with pytest.raises(ConfigError, match="line 2"):
        parse_properties("ok=1\nbad=\\u12\n")


def test_properties_crlf_and_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(b"broker.id=3\r\nlog.dirs=/a, /b\r\n# x\r\n")
    assert load_properties(path) == {"broker.id": "3", "log.dirs": "/a, /b"}


# ---- the table ----------------------------------------------------------------------------------


def test_table_covers_every_logconfig_field() -> None:
    topic_attrs = {d.attr for d in TOPIC_CONFIGS.values()}
    assert {f.name for f in dataclasses.fields(LogConfig)} <= topic_attrs


def test_table_defaults_match_logconfig_defaults() -> None:
    config = cfg()
    assert config.log_config() == LogConfig()


TOPIC_ONLY = {
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable",
    "internal.segment.bytes", "replication.pipeline.enable",
}
"""Topic configs Kafka gives no broker default (no ServerTopicConfigSynonyms entry)."""


def test_every_topic_config_has_a_broker_synonym_that_exists() -> None:
    for d in TOPIC_CONFIGS.values():
        assert d.synonyms, d.name
        assert d.read_only is False
        if d.name in TOPIC_ONLY:
            assert d.synonyms[0].name == d.name and d.name not in BROKER_CONFIGS
            continue
        for syn in d.synonyms:
            assert syn.name in BROKER_CONFIGS, (d.name, syn.name)
        # the primary broker synonym is dynamically changeable in Kafka (but the message format)
        assert CONFIG_DEFS[d.synonyms[0].name].read_only is (d.name == "message.format.version")


def test_defaults_are_valid_for_their_definition() -> None:
    for d in CONFIG_DEFS.values():
        d.check(d.default)
        if d.default is not None:
            assert d.parse(d.default_string or "") == d.default, d.name


def test_brokerconfig_fields_are_the_broker_configs() -> None:
    """Every BrokerConfig field is a broker config declared where it stands (or one of the values
    from_properties adds besides, or the dynamic configs applied), and every broker config but the
    topic ones that are also broker configs (declared in LogConfig) is a field; a field is None only
    when its config has no default."""
    config = cfg()
    extra = {"max_connections_per_listener", "listener_security_overrides", "overrides", "values",
             "dynamic_default", "dynamic_broker"}
    fields = {f.name for f in dataclasses.fields(BrokerConfig)}
    in_log_config = {d.attr for d in BROKER_CONFIGS.values() if Scope.TOPIC in d.scope}
    assert fields - extra == {d.attr for d in BROKER_CONFIGS.values()} - in_log_config
    for name in fields - extra:
        if getattr(config, name) is None:
            assert BROKER_CONFIGS[name.replace("_", ".")].default is None, name


# ---- BrokerConfig -------------------------------------------------------------------------------


def test_defaults() -> None:
    c = cfg()
    assert c.broker_id == 0
    assert c.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),)
    assert c.advertised_listeners == c.listeners
    assert c.log_dirs == (Path("./samsa-data"),)
    assert c.num_partitions == 1
    assert c.default_replication_factor == 1
    assert c.auto_create_topics_enable is True
    assert c.delete_topic_enable is True
    assert c.socket_request_max_bytes == 104_857_600
    assert c.log_retention_ms == 7 * 24 * 3_600_000
    assert c.log_roll_ms == 7 * 24 * 3_600_000
    assert c.log_retention_check_interval_ms == 300_000
    assert c.offsets_topic_num_partitions == 50
    assert c.offsets_topic_replication_factor == 3
    assert c.offsets_retention_minutes == 10_080
    assert c.offsets_retention_ms == 10_080 * 60_000
    assert c.offset_metadata_max_bytes == 4096
    assert c.group_min_session_timeout_ms == 6000
    assert c.group_max_session_timeout_ms == 1_800_000
    assert c.group_initial_rebalance_delay_ms == 3000
    assert c.replica_lag_time_max_ms == 30_000
    assert c.zookeeper_connect is None
    assert c.zookeeper_session_timeout_ms == 18_000
    assert c.zookeeper_connection_timeout_ms == 18_000
    assert c.producer_id_expiration_ms == 86_400_000
    assert c.transaction_max_timeout_ms == 900_000
    assert c.log_cleanup_policy == ("delete",)
    assert c.inter_broker_listener_name == "PLAINTEXT"
    assert c.overrides == {}


def test_typed_values_and_overrides() -> None:
    props = {"num.partitions": "3", "auto.create.topics.enable": "FALSE",
             "log.cleaner.min.cleanable.ratio": "0.25", "log.cleanup.policy": "compact, delete",
             "zookeeper.connect": "zk:2181/samsa", "zookeeper.connection.timeout.ms": "5000"}
    c, unknown = BrokerConfig.from_properties(props)
    assert unknown == []
    assert c.num_partitions == 3
    assert c.auto_create_topics_enable is False
    assert c.log_cleaner_min_cleanable_ratio == 0.25
    assert c.log_cleanup_policy == ("compact", "delete")
    assert c.zookeeper_connect == "zk:2181/samsa"
    assert c.zookeeper_connection_timeout_ms == 5000
    assert dict(c.overrides) == props


def test_unknown_keys_are_reported_not_fatal() -> None:
    c, unknown = BrokerConfig.from_properties(
        {"process.roles": "broker", "num.partitions": "2", "controller.quorum.voters": "1@x:9093"})
    assert unknown == ["controller.quorum.voters", "process.roles"]
    assert c.num_partitions == 2
    assert "process.roles" not in c.overrides


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert cfg(log_retention_hours="2").log_retention_ms == 2 * 3_600_000
    assert cfg(log_retention_hours="2", log_retention_minutes="3").log_retention_ms == 180_000
    c = cfg(log_retention_hours="2", log_retention_minutes="3", log_retention_ms="1234")
    assert c.log_retention_ms == 1234
    assert c.log_config().retention_ms == 1234
    assert cfg(log_retention_ms="-5").log_retention_ms == -1
    assert cfg(log_retention_hours="-1").log_config().retention_ms == -1


def test_retention_zero_is_rejected() -> None:
    with pytest.raises(ConfigError) as e:
        cfg(log_retention_minutes="0")
    assert e.value.key == "log.retention.minutes"


def test_roll_and_flush_fallbacks() -> None:
    c = cfg(log_roll_hours="1", log_roll_jitter_hours="2", log_flush_scheduler_interval_ms="100")
    assert c.log_roll_ms == 3_600_000
    assert c.log_roll_jitter_ms == 7_200_000
    assert c.log_flush_interval_ms == 100
    lc = c.log_config()
    assert (lc.segment_ms, lc.segment_jitter_ms, lc.flush_ms) == (3_600_000, 7_200_000, 100)
    c = cfg(log_roll_hours="1", log_roll_ms="500", log_flush_interval_ms="7",
            log_flush_scheduler_interval_ms="100")
    assert c.log_roll_ms == 500
    assert (c.log_flush_interval_ms, c.log_flush_scheduler_interval_ms) == (7, 100)


def test_broker_synonyms_flow_into_log_config() -> None:
    c = cfg(message_max_bytes="2000", log_segment_bytes="4096", log_cleanup_policy="compact",
            min_insync_replicas="2", unclean_leader_election_enable="true",
            compression_type="zstd", log_message_timestamp_type="LogAppendTime")
    lc = c.log_config()
    assert lc.max_message_bytes == 2000
    assert lc.segment_bytes == 4096
    assert lc.cleanup_policy == "compact"
    assert lc.compact and not lc.delete
    assert lc.min_insync_replicas == 2
    assert lc.unclean_leader_election_enable is True
    assert lc.compression_type == "zstd"
    assert lc.log_append_time


def test_node_id_and_broker_id() -> None:
    assert cfg(broker_id="4").broker_id == 4
    assert cfg(node_id="5").broker_id == 5
    assert cfg(node_id="5", broker_id="5").broker_id == 5
    with pytest.raises(ConfigError):
        cfg(node_id="5", broker_id="6")


def test_log_dirs() -> None:
    assert cfg(log_dir="/x").log_dirs == (Path("/x"),)
    assert cfg(log_dir="/x", log_dirs="/a , /b").log_dirs == (Path("/a"), Path("/b"))


# ---- listeners ----------------------------------------------------------------------------------


def test_listener_parsing() -> None:
    c = cfg(listeners="PLAINTEXT://127.0.0.1:0")
    assert c.listeners == (Listener("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT"),)
    c = cfg(listeners="PLAINTEXT://:9092, INTERNAL://[::1]:9093",
            listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT")
    assert c.listeners == (Listener("PLAINTEXT", "", 9092, "PLAINTEXT"),
                           Listener("INTERNAL", "::1", 9093, "PLAINTEXT"))
    assert str(c.listeners[1]) == "INTERNAL://[::1]:9093"
    assert str(c.listeners[0]) == "PLAINTEXT://:9092"
    protocols = parse_security_protocol_map("m", "PLAINTEXT:PLAINTEXT,SSL:SSL")
    assert parse_listeners("listeners", "SSL://[::1]:9093", protocols) == (
        Listener("SSL", "::1", 9093, "SSL"),)


def test_listeners_with_protocol_map_and_advertised() -> None:
    c = cfg(listeners="internal://0.0.0.0:9092,EXTERNAL://0.0.0.0:9094",
            advertised_listeners="INTERNAL://broker1:9092,EXTERNAL://public.example:9094",
            listener_security_protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,TLS:SASL_SSL",
            inter_broker_listener_name="internal")
    assert [lst.name for lst in c.listeners] == ["INTERNAL", "EXTERNAL"]
    assert c.advertised_listeners[1] == Listener("EXTERNAL", "public.example", 9094, "PLAINTEXT")
    assert c.inter_broker_listener_name == "INTERNAL"
    assert c.listener_security_protocol_map == {
        "INTERNAL": "PLAINTEXT", "EXTERNAL": "PLAINTEXT", "TLS": "SASL_SSL"}


@pytest.mark.parametrize(
    ("props", "key", "says"),
    [
        ({"listeners": "SSL://127.0.0.1:9093"}, "ssl.keystore.location", "no key store is configured"),
        ({"listeners": "EXTERNAL://:9094", "listener.security.protocol.map": "EXTERNAL:SASL_SSL",
          "ssl.keystore.location": "/k.p12", "ssl.keystore.type": "PKCS12"},
         "sasl.enabled.mechanisms", "GSSAPI/Kerberos is not supported"),
        ({"listeners": "SSL://:9093", "ssl.keystore.location": "/k.jks"}, "ssl.keystore.type",
         "convert it to PKCS12"),
        ({"listeners": "SASL_PLAINTEXT://:9094", "sasl.enabled.mechanisms": "SCRAM-SHA-1"},
         "sasl.enabled.mechanisms", "Samsa serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"),
        ({"principal.builder.class": "com.example.Builder"}, "principal.builder.class", "not supported"),
        ({"listeners": "A://:1,B://:2", "listener.security.protocol.map": "A:PLAINTEXT,B:SSL",
          "inter.broker.listener.name": "A", "security.inter.broker.protocol": "SSL",
          "ssl.keystore.location": "/k.pem", "ssl.keystore.type": "PEM"},
         "security.inter.broker.protocol", "Only one of"),
    ],
)
def test_what_samsa_cannot_serve_is_refused(props: dict[str, str], key: str, says: str) -> None:
    """A listener configured in a way Samsa cannot serve is refused with one message, never
    served as something else."""
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_properties(props)
    assert e.value.key == key
    assert says in str(e.value)


def test_listener_prefixed_security_configs() -> None:
    c, unknown = BrokerConfig.from_properties({
        "listeners": "PLAINTEXT://:9092,SASL_SSL://:9093,SSL://:9094",
        "ssl.keystore.location": "/k.pem", "ssl.keystore.type": "PEM",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "M required;",
        "listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms": "5000",
        "listener.name.sasl_ssl.not.a.config": "x",
        "security.inter.broker.protocol": "SASL_SSL",
    })
    assert unknown == ["listener.name.sasl_ssl.not.a.config"]
    assert c.listener_value("SSL", "ssl.client.auth") == "required"
    assert c.listener_value("SASL_SSL", "ssl.client.auth") == "none"
    assert c.listener_value("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-512") == "M required;"
    assert c.listener_value("SASL_SSL", "connections.max.reauth.ms", "SCRAM-SHA-512") == 5000
    assert c.listener_value("SASL_SSL", "connections.max.reauth.ms", "PLAIN") == 0
    assert c.inter_broker_listener_name == "SASL_SSL"


def test_cli_refuses_a_tls_listener_without_a_key_store(capsys: pytest.CaptureFixture[str]) -> None:
    from broker.cli import main

    assert main(["serve", "--override", "listeners=SSL://127.0.0.1:0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("samsa: listener SSL://127.0.0.1:0 is SSL but no key store is configured")


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"listeners": "PLAINTEXT:/127.0.0.1:9092"}, "listeners"),
        ({"listeners": "PLAINTEXT://127.0.0.1:70000"}, "listeners"),
        ({"listeners": "FOO://127.0.0.1:9092"}, "listeners"),
        ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "listeners"),
        ({"listeners": "PLAINTEXT://a:1,SSL://b:1"}, "listeners"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
        ({"listener.security.protocol.map": "A=B"}, "listener.security.protocol.map"),
        ({"listener.security.protocol.map": "A:TLS"}, "listener.security.protocol.map"),
        ({"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name"),
    ],
)
def test_listener_errors_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_properties(props)
    assert e.value.key == key
    assert key in str(e.value)


def test_two_listeners_may_both_use_port_zero() -> None:
    c = cfg(listeners="PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT")
    assert [lst.port for lst in c.listeners] == [0, 0]


# ---- invalid broker values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("num.partitions", "abc", ("Invalid value abc for configuration num.partitions: "
                                  "Not a number of type INT")),
        ("num.partitions", "0", ("Invalid value 0 for configuration num.partitions: "
                                "Value must be at least 1")),
        ("num.partitions", "2147483648", "Not a number of type INT"),
        ("offsets.topic.replication.factor", "40000", "Not a number of type SHORT"),
        ("auto.create.topics.enable", "yes", "Expected value to be either true or false"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "Value must be no more than 1"),
        ("log.cleanup.policy", "compact,nope", "String must be one of: compact, delete"),
        ("compression.type", "brotli", ("String must be one of: uncompressed, zstd, lz4, "
                                        "snappy, gzip, producer")),
        ("log.retention.ms", "1.5", "Not a number of type LONG"),
        ("group.consumer.migration.policy", "foobar", ("Invalid value foobar for configuration "
         "group.consumer.migration.policy: String must be one of (case insensitive): DISABLED, DOWNGRADE, "
         "UPGRADE, BIDIRECTIONAL")),
    ],
)
def test_invalid_broker_values(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_properties({key: value})
    assert e.value.key == key
    assert message in str(e.value)
    assert isinstance(e.value, ValueError)


# ---- topic configs ------------------------------------------------------------------------------


def test_topic_log_config_applies_overrides() -> None:
    defaults = cfg(log_retention_hours="1").log_config()
    lc = topic_log_config(defaults, {"cleanup.policy": "compact,delete", "segment.bytes": "1024",
                                     "min.cleanable.dirty.ratio": "0.1", "preallocate": "true",
                                     "retention.bytes": None})
    assert lc.cleanup_policy == "compact,delete"
    assert lc.compact and lc.delete
    assert lc.segment_bytes == 1024
    assert lc.min_cleanable_dirty_ratio == 0.1
    assert lc.preallocate is True
    assert lc.retention_ms == 3_600_000  # broker default kept
    assert lc.retention_bytes == -1


def test_validate_topic_configs_accepts_good_values() -> None:
    validate_topic_configs({"retention.ms": "-1", "cleanup.policy": "compact",
                            "message.timestamp.type": "LogAppendTime", "flush.ms": "0",
                            "max.message.bytes": "10", "retention.bytes": None})


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"retention.mss": "1"}, "Unknown topic config name: retention.mss"),
        ({"log.retention.ms": "1"}, "Unknown topic config name: log.retention.ms"),
        ({"retention.ms": "-2"}, ("Invalid value -2 for configuration retention.ms: "
                                 "Value must be at least -1")),
        ({"retention.ms": "soon"}, ("Invalid value soon for configuration retention.ms: "
                                   "Not a number of type LONG")),
        ({"cleanup.policy": "compact,compact"}, "values must not be duplicated"),
        ({"message.timestamp.type": "createtime"}, ("String must be one of: CreateTime, "
                                                   "LogAppendTime")),
        ({"min.insync.replicas": "0"}, "Value must be at least 1"),
        ({"unclean.leader.election.enable": "1"}, "Expected value to be either true or false"),
        ({"segment.bytes": "10"}, "Value must be at least 14"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
         "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ],
)
def test_validate_topic_configs_rejects(configs: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaError) as e:
        validate_topic_configs(configs)
    assert e.value.code == ErrorCode.invalid_config
    assert message in e.value.message


def test_validate_topic_configs_null_handling() -> None:
    validate_topic_configs({"retention.ms": None})
    with pytest.raises(KafkaError, match="Null value not supported for topic configs"):
        validate_topic_configs({"retention.ms": None}, allow_null=False)


def test_topic_log_config_rejects_bad_values() -> None:
    with pytest.raises(KafkaError) as e:
        topic_log_config(LogConfig(), {"segment.ms": "0"})
    assert e.value.code == ErrorCode.invalid_config


# ---- DescribeConfigs ----------------------------------------------------------------------------


def test_describe_topic_defaults_only() -> None:
    entries = by_name(describe_topic_configs(cfg(), {}))
    assert set(entries) == set(TOPIC_CONFIGS) - {"internal.segment.bytes"}  # internal: listed only where set
    assert by_name(describe_topic_configs(cfg(), {"internal.segment.bytes": "1000"}))["internal.segment.bytes"].value == "1000"
    seg = entries["segment.bytes"]
    assert seg.value == "1073741824"
    assert seg.source == ConfigSource.DEFAULT_CONFIG
    assert seg.is_default
    assert seg.synonyms == (ConfigSynonym("log.segment.bytes", "1073741824", 5),)
    assert seg.config_type == ConfigType.INT
    assert seg.read_only is False and seg.is_sensitive is False
    assert seg.documentation
    assert entries["cleanup.policy"].value == "delete"
    assert entries["cleanup.policy"].config_type == ConfigType.LIST
    assert entries["preallocate"].value == "false"
    assert entries["min.cleanable.dirty.ratio"].value == "0.5"
    assert entries["flush.ms"].value == "9223372036854775807"
    # Kafka drops synonyms that precede the primary broker config: only log.retention.hours has
    # a default, so retention.ms shows no synonyms at all.
    assert entries["retention.ms"].value == "604800000"
    assert entries["retention.ms"].synonyms == ()
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG


def test_describe_topic_override_then_static_then_default() -> None:
    broker = cfg(log_segment_bytes="2048", log_retention_ms="5000", log_retention_hours="2")
    entries = by_name(describe_topic_configs(broker, {"segment.bytes": "4096"}))
    seg = entries["segment.bytes"]
    assert seg.value == "4096"
    assert seg.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert seg.synonyms == (
        ConfigSynonym("segment.bytes", "4096", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.segment.bytes", "2048", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    )
    ret = entries["retention.ms"]
    assert ret.value == "5000"
    assert ret.source == ConfigSource.STATIC_BROKER_CONFIG
    assert ret.synonyms == (
        ConfigSynonym("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )


def test_describe_topic_renders_override_as_kafka_does() -> None:
    entries = by_name(describe_topic_configs(
        cfg(), {"cleanup.policy": " compact , delete ", "preallocate": "TRUE"}))
    assert entries["cleanup.policy"].value == "compact,delete"
    assert entries["cleanup.policy"].synonyms[0] == ConfigSynonym(
        "cleanup.policy", "compact,delete", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert entries["preallocate"].value == "true"


def test_describe_broker_configs() -> None:
    broker = cfg(log_retention_hours="24", num_partitions="3",
                 ssl_keystore_password="secret")
    entries = by_name(describe_broker_configs(broker))
    assert set(entries) == set(BROKER_CONFIGS) - INTERNAL_BROKER_CONFIGS  # Kafka's internal ones: only where set
    assert "retention.ms" not in entries
    internal = by_name(describe_broker_configs(cfg(group_consumer_regex_refresh_interval_ms="20000")))
    assert internal["group.consumer.regex.refresh.interval.ms"].value == "20000"

    hours = entries["log.retention.hours"]
    assert hours.value == "24"
    assert hours.source == ConfigSource.STATIC_BROKER_CONFIG
    assert hours.synonyms == (
        ConfigSynonym("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )
    assert hours.read_only is True  # only log.retention.ms is dynamically changeable in Kafka

    ms = entries["log.retention.ms"]
    assert ms.value is None and ms.synonyms == () and ms.source == ConfigSource.DEFAULT_CONFIG
    assert ms.read_only is False
    assert ms.config_type == ConfigType.LONG

    parts = entries["num.partitions"]
    assert (parts.value, parts.source) == ("3", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["delete.topic.enable"].value == "true"
    assert entries["delete.topic.enable"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["listeners"].value == "PLAINTEXT://127.0.0.1:9092"
    assert entries["log.cleanup.policy"].value == "delete"
    assert entries["zookeeper.connect"].value is None

    pw = entries["ssl.keystore.password"]
    assert pw.is_sensitive and pw.value is None
    assert pw.config_type == ConfigType.PASSWORD
    assert pw.synonyms == (ConfigSynonym("ssl.keystore.password", None,
                                         ConfigSource.STATIC_BROKER_CONFIG),)


def test_describe_broker_flush_synonyms() -> None:
    entries = by_name(describe_broker_configs(cfg(log_flush_scheduler_interval_ms="10")))
    sched = entries["log.flush.scheduler.interval.ms"]
    assert sched.synonyms == (
        ConfigSynonym("log.flush.scheduler.interval.ms", "10", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.flush.scheduler.interval.ms", str((1 << 63) - 1),
                      ConfigSource.DEFAULT_CONFIG),
    )
    assert entries["log.flush.interval.ms"].synonyms == ()


@pytest.mark.parametrize(
    ("ctype", "value", "rendered"),
    [
        (ConfigType.BOOLEAN, True, "true"),
        (ConfigType.LIST, ("a", "b"), "a,b"),
        (ConfigType.LIST, (), ""),
        (ConfigType.LONG, (1 << 63) - 1, "9223372036854775807"),
        (ConfigType.DOUBLE, 0.5, "0.5"),
        (ConfigType.DOUBLE, 1, "1.0"),
        (ConfigType.DOUBLE, 1e-5, "1.0E-5"),
        (ConfigType.DOUBLE, 12345678.0, "1.2345678E7"),
        (ConfigType.STRING, None, None),
    ],
)
def test_render_value(ctype: ConfigType, value: object, rendered: str | None) -> None:
    assert render_value(ctype, value) == rendered


def test_stock_kafka_server_properties(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "############################# Server Basics #############################\n"
        "broker.id=0\n"
        "#listeners=PLAINTEXT://:9092\n"
        "num.network.threads=3\n"
        "num.io.threads=8\n"
        "socket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\n"
        "socket.request.max.bytes=104857600\n"
        "log.dirs=/tmp/kafka-logs\n"
        "num.partitions=1\n"
        "num.recovery.threads.per.data.dir=1\n"
        "offsets.topic.replication.factor=1\n"
        "transaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\n"
        "log.retention.hours=168\n"
        "log.retention.check.interval.ms=300000\n"
        "zookeeper.connect=localhost:2181\n"
        "zookeeper.connection.timeout.ms=18000\n"
        "group.initial.rebalance.delay.ms=0\n"
        "process.roles=broker,controller\n"
    )
    config, unknown = BrokerConfig.from_properties(load_properties(path))
    assert unknown == ["process.roles"]
    assert config.log_dirs == (Path("/tmp/kafka-logs"),)
    assert config.offsets_topic_replication_factor == 1
    assert config.group_initial_rebalance_delay_ms == 0
    assert config.zookeeper_connect == "localhost:2181"
    assert config.log_retention_ms == 168 * 3_600_000


@pytest.mark.parametrize(("name", "value", "ok"), [
    ("compression.gzip.level", "-1", True), ("compression.gzip.level", "1", True),
    ("compression.gzip.level", "9", True), ("compression.gzip.level", "0", False),
    ("compression.gzip.level", "-2", False), ("compression.gzip.level", "10", False),
    ("leader.replication.throttled.replicas", "*", True), ("leader.replication.throttled.replicas", "", True),
    ("follower.replication.throttled.replicas", "0:1, 2:3", True),
    ("follower.replication.throttled.replicas", "*,0:1", False),
    ("follower.replication.throttled.replicas", "0:a", False),
])
def test_kafkas_own_validators(name: str, value: str, ok: bool) -> None:
    """Kafka's GzipCompression.LevelValidator and ThrottledReplicaListValidator, not a plain range."""
    if ok:
        validate_topic_configs({name: value})
    else:
        with pytest.raises(KafkaError) as e:
            validate_topic_configs({name: value})
        assert e.value.code == ErrorCode.invalid_config
