"""Share sessions: the broker's record of which share partitions a share consumer fetches from
it, as Kafka 4.3.1's ShareSessionCache, ShareSession and SharePartitionManager.newContext keep it.
Pure (no I/O); not reachable from any handler yet.

A session is keyed by (group id, member id) and numbered by its epoch. Session epochs and
transitions (a ShareFetch's ShareSessionEpoch):

    0 (initial)   opens a session (replacing any the member had) with the request's partitions;
                  the session's epoch becomes 1. Acknowledgements in it: INVALID_REQUEST. No room
                  (`group.share.max.share.sessions`): SHARE_SESSION_LIMIT_REACHED.
    n > 0         must equal the session's epoch (else INVALID_SHARE_SESSION_EPOCH; no session:
                  SHARE_SESSION_NOT_FOUND); adds the request's partitions, drops its forgotten
                  ones, and moves the epoch to n + 1 (after 2^31-1 comes 1).
    -1 (final)    the last request of a session (SHARE_SESSION_NOT_FOUND when there is none): its
                  acknowledgements are applied, then the session is removed and the member's
                  records still acquired in its partitions are released.

ShareAcknowledge uses the same epochs (0: INVALID_SHARE_SESSION_EPOCH; -1 leaves the epoch as it
is). When the connection a session was opened on closes, the session is removed as if the
member had left: its acquired records are released without waiting for their locks.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_INT32_MAX = 2**31 - 1

TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


class ContextKind(enum.Enum):
    INITIAL = "initial"
    """A new session: the response lists every partition."""
    INCREMENTAL = "incremental"
    """An existing session: the response lists the partitions with something to say."""
    FINAL = "final"
    """The session ends after this request."""


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    connection_id: str
    epoch: int
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)
    """The session's partitions, in the order they were added."""


@dataclass(frozen=True, slots=True)
class ShareFetchContext:
    kind: ContextKind
    partitions: tuple[TopicIdPartition, ...]
    """The partitions the fetch serves: the session's after this request's changes (none for a
    final request)."""


class ShareSessionCache:
    """The share sessions of one broker."""

    def __init__(self, max_entries: int = 2_000) -> None:
        self.max_entries = max_entries
        """`group.share.max.share.sessions`"""
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._by_connection: dict[str, tuple[str, str]] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def new_context(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        fetch: Iterable[TopicIdPartition],
        forget: Iterable[TopicIdPartition],
        acknowledgements_present: bool,
        connection_id: str,
    ) -> ShareFetchContext:
        """The session a ShareFetch runs in (Kafka's SharePartitionManager.newContext); raises
        KafkaError with Kafka's code."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if key not in self.sessions:
                raise KafkaError(ErrorCode.share_session_not_found)
            return ShareFetchContext(ContextKind.FINAL, ())
        if epoch == INITIAL_EPOCH:
            if acknowledgements_present:
                raise KafkaError(
                    ErrorCode.invalid_request, "Acknowledge data present in initial share fetch request"
                )
            self.remove(group_id, member_id)
            if len(self.sessions) >= self.max_entries:
                raise KafkaError(ErrorCode.share_session_limit_reached)
            session = ShareSession(group_id, member_id, connection_id, next_epoch(INITIAL_EPOCH))
            session.partitions = dict.fromkeys(fetch)
            self.sessions[key] = session
            self._by_connection[connection_id] = key
            return ShareFetchContext(ContextKind.INITIAL, tuple(session.partitions))
        session = self._session_at(key, epoch)
        for tp in fetch:
            session.partitions.setdefault(tp, None)
        for tp in forget:
            session.partitions.pop(tp, None)
        session.epoch = next_epoch(session.epoch)
        return ShareFetchContext(ContextKind.INCREMENTAL, tuple(session.partitions))

    def acknowledge_session_update(self, group_id: str, member_id: str, epoch: int) -> None:
        """A ShareAcknowledge's epoch check (Kafka's acknowledgeSessionUpdate)."""
        if epoch == INITIAL_EPOCH:
            raise KafkaError(ErrorCode.invalid_share_session_epoch)
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if key not in self.sessions:
                raise KafkaError(ErrorCode.share_session_not_found)
            return
        session = self._session_at(key, epoch)
        session.epoch = next_epoch(session.epoch)

    def _session_at(self, key: tuple[str, str], epoch: int) -> ShareSession:
        session = self.sessions.get(key)
        if session is None:
            raise KafkaError(ErrorCode.share_session_not_found)
        if session.epoch != epoch:
            raise KafkaError(
                ErrorCode.invalid_share_session_epoch,
                f"Expected share session epoch {session.epoch}, got {epoch}",
            )
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        """Remove a session (a final request, a member leaving); its partitions are where the
        member's acquired records must be released."""
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None and self._by_connection.get(session.connection_id) == (group_id, member_id):
            del self._by_connection[session.connection_id]
        return session

    def on_disconnect(self, connection_id: str) -> ShareSession | None:
        """The connection closed: the session opened on it, if it is still there, is removed
        (Kafka then releases the member's records, as for a member leaving)."""
        key = self._by_connection.pop(connection_id, None)
        if key is None:
            return None
        return self.remove(*key)
