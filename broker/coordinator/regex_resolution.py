"""KIP-848 subscriptions by regular expression, resolved as Kafka 4.3.1's group coordinator resolves
them (GroupMetadataManager.maybeUpdateRegularExpressions and handleRegularExpressionsResult,
TopicRegexResolver).

A heartbeat never waits for a regular expression to be resolved: it may start a resolution of all
the group's regular expressions, which runs after it (off the heartbeat path, one at a time per
group) and is applied as a change of its own (consumer_groups.py: a ConsumerGroupRegularExpression
record per regular expression, and the group epoch bumped when what they match changed). A
heartbeat starts one (`RegexRefresh.due`) when

  0. the group subscribes to regular expressions (counting the one this heartbeat brings),
  1. no resolution is under way for the group,
  2. the last one is more than REGEX_BATCH_REFRESH_MIN_INTERVAL_MS old, and
  3. a regular expression is not resolved yet, or topics were created since the last resolution
     (the coordinator's topic-creation mark, `new_topics_mark`), or the last one is older than
     group.consumer.regex.refresh.interval.ms.

A resolution matches the regular expressions (RE2 syntax: Kafka evaluates them with RE2J) against
the cluster's topics when it runs, and keeps only those the principal of the heartbeat that
started it may DESCRIBE (Kafka's filterTopicDescribeAuthorizedTopics).

A group's resolution: idle -> scheduled (a heartbeat found it due) -> idle (applied when it runs,
or cancelled when the group's partition is unloaded or the coordinator closes).
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections.abc import Callable, Iterable

import re2

from broker import clock
from broker.coordinator.consumer_group import ConsumerGroup, ResolvedRegularExpression
from controller.model import ClusterImage

REGEX_BATCH_REFRESH_MIN_INTERVAL_MS = 10_000
"""Kafka's least time between two resolutions of a group's regular expressions (also the floor of
group.consumer.regex.refresh.interval.ms)."""

TopicFilter = Callable[[Iterable[str]], frozenset[str]]
"""The topics among these that a member's principal may DESCRIBE."""

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


def compile_regex(pattern: str) -> re2._Regexp | None:
    """A subscription's regular expression, compiled as Kafka does (RE2J syntax: RE2's), or None
    when it is invalid."""
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error:
        return None


class RegexUpdate(enum.Enum):
    """What a heartbeat did to the member's regular expression (Kafka's UpdateRegularExpressionStatus)."""

    NO_CHANGE = "no_change"
    UPDATED = "updated"
    """Changed to one no member subscribed to: the group epoch waits for its resolution."""
    UPDATED_AND_RESOLVED = "updated_and_resolved"
    """Changed to one already resolved, or dropped: the group epoch is bumped now."""


def resolve(
    image: ClusterImage, regexes: Iterable[str], may_describe: TopicFilter, version: int, now_ms: int
) -> dict[str, ResolvedRegularExpression]:
    """Each regular expression's matching topics that `may_describe` keeps: every topic name, the
    internal ones too, as Kafka's TopicRegexResolver matches every name of its metadata image."""
    compiled = {regex: compile_regex(regex) for regex in regexes}
    matched: dict[str, set[str]] = {regex: set() for regex in compiled}
    for name in image.topics:
        for regex, pattern in compiled.items():
            if pattern is not None and pattern.fullmatch(name):
                matched[regex].add(name)
    allowed = may_describe({name for names in matched.values() for name in names})
    return {regex: ResolvedRegularExpression(frozenset(names & allowed), version, now_ms)
            for regex, names in matched.items()}  # fmt: skip


class RegexRefresh:
    """When a group's regular expressions are due for a resolution, and the resolutions scheduled."""

    def __init__(self, refresh_interval_ms: int) -> None:
        self._refresh_interval_ms = refresh_interval_ms
        self._scheduled: dict[str, asyncio.Handle] = {}
        self._seen: ClusterImage | None = None
        self._topic_ids: frozenset[uuid.UUID] = frozenset()
        self._new_topics_mark = 0
        """Kafka's lastMetadataImageWithNewTopics: when this coordinator last saw topics created
        (wall-clock ms; 0 until it has, so that groups loaded here are not all due at once)."""

    def new_topics_mark(self, image: ClusterImage) -> int:
        """The topic-creation mark as of `image`: moved to now when it has topics the last image
        seen did not (a deleted topic leaves the subscription through its metadata instead)."""
        if image is not self._seen:
            ids = frozenset(t.topic_id for t in image.topics.values())
            if self._seen is not None and not ids <= self._topic_ids:
                self._new_topics_mark = clock.now_ms()
            self._seen, self._topic_ids = image, ids
        return self._new_topics_mark

    def due(self, group: ConsumerGroup, old: str | None, new: str | None, brought_new: bool,
            image: ClusterImage) -> set[str] | None:  # fmt: skip
        """The regular expressions to resolve now, if a resolution is due (conditions 0-3 above),
        for a member of `group` changing its regular expression from `old` to `new`
        (`brought_new`: one no member subscribed to)."""
        counts: dict[str, int] = {}  # the members' regular expressions before this heartbeat's change
        for m in group.members.values():
            if m.subscribed_topic_regex:
                counts[m.subscribed_topic_regex] = counts.get(m.subscribed_topic_regex, 0) + 1
        if not brought_new and not counts:
            return None
        if group.group_id in self._scheduled:
            return None
        resolved = list(group.resolved_regexes.values())
        last_ms = resolved[0].timestamp_ms if resolved else None
        now = clock.now_ms()
        if last_ms is not None and now <= last_ms + REGEX_BATCH_REFRESH_MIN_INTERVAL_MS:
            return None
        if old:
            counts[old] = counts.get(old, 0) - 1
            if counts[old] <= 0:
                del counts[old]
        if new:
            counts[new] = counts.get(new, 0) + 1
        version = resolved[0].version if resolved else 0
        required = (
            brought_new
            or len(counts) != len(group.resolved_regexes)
            or version < self.new_topics_mark(image)
            or last_ms is None
            or now > last_ms + self._refresh_interval_ms
        )
        return set(counts) if required and counts else None

    def schedule(self, group_id: str, run: Callable[[], None]) -> None:
        """Run the group's resolution after the heartbeat (its answer does not wait for it)."""
        def once() -> None:
            self._scheduled.pop(group_id, None)
            run()

        self._scheduled[group_id] = asyncio.get_running_loop().call_soon(once)

    def cancel(self, group_id: str) -> None:
        handle = self._scheduled.pop(group_id, None)
        if handle is not None:
            handle.cancel()

    def close(self) -> None:
        for handle in self._scheduled.values():
            handle.cancel()
        self._scheduled.clear()
