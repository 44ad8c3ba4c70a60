"""Client quota enforcement: which quota applies to a request and how long to throttle it (pure).

Kafka's ClientQuotaManager with its default quota callback, for the three quota types Samsa
enforces (producer_byte_rate on Produce, consumer_byte_rate on Fetch, request_percentage on every
request). The quota of a (user, client-id) pair is the first configured one of, in Kafka's
order (the user is the request's principal name: the SASL or certificate user, ANONYMOUS
without authentication):
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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from controller.quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
)


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

    def unrecord(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str,
                 value: float, now_ms: int) -> None:  # fmt: skip
        """Take back a recorded value (a throttled fetch sends no data: Kafka's unrecordQuotaSensor)."""
        found = find_quota(quotas, key, user, client_id)
        sensor = None if found is None else self._sensors.get(found[1])
        if sensor is not None:
            sensor.record(-value, now_ms)


class ClientQuotas:
    """The broker's three quota managers over the quotas of the current cluster image.

    `produce` records a Produce request's size, `fetch` a consumer Fetch response's size,
    `request` a request's handling time (percent of one second per second, Kafka's
    nanosToPercentage); each returns the throttle time in ms (0 when no quota applies). Follower
    fetches and ApiVersions are exempt (the network layer does not record them).
    """

    def __init__(self, quotas: Callable[[], Mapping[QuotaEntity, Mapping[str, float]]], samples: int,
                 window_seconds: int) -> None:  # fmt: skip
        self._quotas = quotas
        window_ms = window_seconds * 1000
        self._produce = QuotaManager(samples, window_ms)
        self._fetch = QuotaManager(samples, window_ms)
        self._request = QuotaManager(samples, window_ms)

    @property
    def active(self) -> bool:
        """Any quota configured at all (the fast path skips every sensor otherwise)."""
        return bool(self._quotas())

    def produce(self, user: str, client_id: str, size: int, now_ms: int) -> int:
        return self._produce.record(self._quotas(), PRODUCER_BYTE_RATE, user, client_id, size, now_ms)

    def fetch(self, user: str, client_id: str, size: int, now_ms: int) -> int:
        throttle = self._fetch.record(self._quotas(), CONSUMER_BYTE_RATE, user, client_id, size, now_ms)
        if throttle:
            self._fetch.unrecord(self._quotas(), CONSUMER_BYTE_RATE, user, client_id, size, now_ms)
        return throttle

    def max_fetch_bytes(self, user: str, client_id: str) -> int:
        """The most a consumer's fetch may answer: its quota times (samples - 1) windows (Kafka's
        getMaxValueInQuotaWindow), so a throttled fetch can ever fit; unlimited without a quota."""
        found = find_quota(self._quotas(), CONSUMER_BYTE_RATE, user, client_id)
        if found is None:
            return 2**31 - 1
        return max(int(found[0] * (self._fetch.samples - 1) * self._fetch.window_ms / 1000), 1)

    def request(self, user: str, client_id: str, seconds: float, now_ms: int) -> int:
        return self._request.record(self._quotas(), REQUEST_PERCENTAGE, user, client_id, seconds * 100.0, now_ms)
