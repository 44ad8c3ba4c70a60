"""The group coordinator's view of the group configs (Kafka's GroupConfigManager): group id ->
the effective value of a group config. A group's own setting (the metadata image's group configs,
IncrementalAlterConfigs on a GROUP resource) clamped to the broker's current min/max bounds (Kafka's
GroupConfig.evaluate: the bounds may have changed since it was set), else the broker config it
falls back to (broker/config/group.py).

The consumer-protocol coordinator reads consumer.session.timeout.ms,
consumer.heartbeat.interval.ms and consumer.assignment.interval.ms through it on every use (a
member's session restart, each heartbeat answer, each target assignment decision), so a change
applies from the next heartbeat on. The share groups read theirs the same way: the share group
coordinator share.session.timeout.ms, share.heartbeat.interval.ms and
share.assignment.interval.ms on each heartbeat (`share_group_settings`), the share partition
leaders share.record.lock.duration.ms, share.delivery.count.limit,
share.partition.max.record.locks and share.isolation.level on each fetch, acknowledgement and
release, and share.auto.offset.reset when a share partition is first initialized
(`share_partition_settings`). The streams.* values are available through `value` but nothing
reads them: Samsa serves no streams groups.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from broker.config import BrokerConfig
from broker.config.group import GROUP_CONFIGS, clamp
from broker.config.values import ConfigError
from broker.share.in_flight import SharePartitionSettings
from broker.share.share_group import ShareGroupSettings
from controller.model import ClusterImage

log = logging.getLogger("samsa.coordinator")


class GroupConfigs:
    """Effective group config values, from the metadata image on every call (parsed once per
    image change)."""

    def __init__(self, config: BrokerConfig, image: Callable[[], ClusterImage]) -> None:
        self._config = config
        self._image = image
        self._source: Mapping[str, Mapping[str, str]] | None = None
        self._parsed: dict[str, dict[str, object]] = {}

    def overrides(self, group_id: str) -> dict[str, object]:
        """The group's own settings, typed; one the broker cannot parse (stored by another
        version) is left out with one log line, as Kafka skips an invalid stored config."""
        stored = self._image().group_configs
        if stored is not self._source:
            self._source, self._parsed = stored, {}
        parsed = self._parsed.get(group_id)
        if parsed is None:
            parsed = {}
            for name, raw in stored.get(group_id, {}).items():
                try:
                    parsed[name] = GROUP_CONFIGS[name].parse(raw)
                except (KeyError, ConfigError) as e:
                    log.warning("group config ignored group=%s config=%s value=%s error=%s", group_id, name, raw, e)
            self._parsed[group_id] = parsed
        return parsed

    def value(self, group_id: str, name: str) -> object:
        """A group config's effective value for the group: its own setting within the broker's
        current bounds, else the broker default (streams.*: exposed, not used)."""
        own = self.overrides(group_id).get(name)
        if own is None:  # Kafka's coordinator then reads its own broker config
            d = GROUP_CONFIGS[name]
            return self._config.values[d.synonyms[0].name] if d.synonyms else d.default
        return clamp(name, own, self._config.values) if type(own) is int else own

    def int_value(self, group_id: str, name: str) -> int:
        """`value` of an INT group config (consumer.heartbeat.interval.ms, ...)."""
        value = self.value(group_id, name)
        assert type(value) is int, name
        return value

    def share_group_settings(self, group_id: str) -> ShareGroupSettings:
        """What the share group coordinator obeys for this share group now."""
        return ShareGroupSettings(
            max_size=self._config.group_share_max_size,
            heartbeat_interval_ms=self.int_value(group_id, "share.heartbeat.interval.ms"),
            session_timeout_ms=self.int_value(group_id, "share.session.timeout.ms"),
            assignment_interval_ms=self.int_value(group_id, "share.assignment.interval.ms"),
        )

    def share_partition_settings(self, group_id: str) -> SharePartitionSettings:
        """What a share partition leader obeys for this share group now."""
        return SharePartitionSettings(
            record_lock_duration_ms=self.int_value(group_id, "share.record.lock.duration.ms"),
            delivery_count_limit=self.int_value(group_id, "share.delivery.count.limit"),
            max_in_flight_records=self.int_value(group_id, "share.partition.max.record.locks"),
            read_committed=self.value(group_id, "share.isolation.level") == "read_committed",
            auto_offset_reset=str(self.value(group_id, "share.auto.offset.reset")),
        )
