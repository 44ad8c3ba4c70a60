"""Client quota enforcement: which quota applies to a request and how long to throttle it (pure).

Kafka's ClientQuotaManager with its default quota callback, for the three quota types Samsa
enforces (producer_byte_rate on Produce, consumer_byte_rate on Fetch, request_percentage on every
request). The quota of a (user, client-id) pair is the first configured one of, in Kafka's
order (the user is ANONYMOUS, Kafka's principal without authentication, until Samsa has it):
/config/users/<user>/clients/<client-id>, /config/users/<user>/clients/<default>,
/config/users/<user>, /config/users/<default>/clients/<client-id>,
/config/users/<default>/clients/<default>, /config/users/<default>, /config/clients/<client-id>,
/config/clients/<default>. Each (quota type, user tag,
client-id tag) has its own rate sensor, the tags being those of the matched level with a default
replaced by the request's own user or client id, so clients under one default quota are measured
apart, as Kafka's metric tags make them.

A sensor is Kafka's Rate over a SampledStat: `quota.window.num` samples of
`quota.window.size.seconds` each; a recorded value that takes the rate above the quota throttles
the request by (rate - quota) / quota * window, the window being the time the samples span (at
least num - 1 full windows), capped at num * window (QuotaUtils.boundedThrottleTime).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.quotas import CLIENT_ID, USER, QuotaEntity

ANONYMOUS = "ANONYMOUS"
"""The user of every request while Samsa has no authentication (Kafka's KafkaPrincipal.ANONYMOUS)."""


def find_quota(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[float, tuple[str, str]] | None:
    """(limit, (user tag, client-id tag)) of the quota `key` that applies, or None (unlimited)."""
    levels: list[tuple[QuotaEntity, tuple[str, str]]] = [
        (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
        (((CLIENT_ID, None), (USER, user)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
        (((CLIENT_ID, None), (USER, None)), (user, client_id)),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    ]
    for entity, tags in levels:
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return value, tags
    return None


@dataclass
class _Sample:
    start_ms: int
    value: float = 0.0


@dataclass
class Rate:
    """Kafka's Rate over `samples` windows of `window_ms` (SampledStat, Rate.windowSize)."""

    samples: int
    window_ms: int
    _samples: list[_Sample] = field(default_factory=list)

    def record(self, value: float, now_ms: int) -> None:
        if not self._samples or now_ms >= self._samples[-1].start_ms + self.window_ms:
            self._samples.append(_Sample(now_ms))
            del self._samples[: -self.samples]
        self._samples[-1].value += value

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        self._samples = [s for s in self._samples if now_ms - s.start_ms < expire_age]

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = self._samples[0].start_ms if self._samples else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def rate(self, now_ms: int) -> float:
        """Per second."""
        window = self.window_size_ms(now_ms)
        return sum(s.value for s in self._samples) * 1000.0 / window


@dataclass
class QuotaManager:
    """The sensors of one quota type's clients, and the throttle time of each recorded request."""

    samples: int
    window_ms: int
    _sensors: dict[tuple[str, str], Rate] = field(default_factory=dict)

    def record(
        self,
        quotas: Mapping[QuotaEntity, Mapping[str, float]],
        key: str,
        user: str,
        client_id: str,
        value: float,
        now_ms: int,
    ) -> int:
        """Record `value` against the (user, client id)'s quota `key`; the throttle time in ms."""
        found = find_quota(quotas, key, user, client_id)
        if found is None:
            return 0
        limit, tags = found
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = Rate(self.samples, self.window_ms)
        sensor.record(value, now_ms)
        rate = sensor.rate(now_ms)
        if rate <= limit:
            return 0
        if limit <= 0:
            return self.samples * self.window_ms
        throttle = round((rate - limit) / limit * sensor.window_size_ms(now_ms))
        return min(throttle, self.samples * self.window_ms)
