"""Share sessions (broker/share/share_session.py): epochs, partitions added and forgotten, the
final request, the session limit, disconnects, with Kafka's error codes."""

from __future__ import annotations

import uuid

import pytest

from broker.share.share_session import (
    FINAL_EPOCH,
    ContextKind,
    ShareSessionCache,
    next_epoch,
)
from protocol.errors import ErrorCode, KafkaError

T = uuid.UUID(int=3)
P0, P1, P2 = (T, 0), (T, 1), (T, 2)


def error_of(call: object) -> ErrorCode:
    assert callable(call)
    with pytest.raises(KafkaError) as e:
        call()
    return e.value.code


def test_a_session_opens_moves_through_epochs_and_closes() -> None:
    cache = ShareSessionCache()
    first = cache.new_context("g", "m", 0, [P0, P1], [], False, "conn-1")
    assert (first.kind, first.partitions) == (ContextKind.INITIAL, (P0, P1))
    session = cache.get("g", "m")
    assert session is not None and session.epoch == 1
    second = cache.new_context("g", "m", 1, [P2], [P0], True, "conn-1")
    assert (second.kind, second.partitions) == (ContextKind.INCREMENTAL, (P1, P2))
    assert session.epoch == 2
    # The same epoch again (a retried request) is refused.
    assert (
        error_of(lambda: cache.new_context("g", "m", 1, [], [], False, "conn-1"))
        is ErrorCode.invalid_share_session_epoch
    )
    cache.acknowledge_session_update("g", "m", 2)
    assert session.epoch == 3
    final = cache.new_context("g", "m", FINAL_EPOCH, [], [], True, "conn-1")
    assert final.kind is ContextKind.FINAL
    removed = cache.remove("g", "m")
    assert removed is session and list(removed.partitions) == [P1, P2]
    assert (
        error_of(lambda: cache.new_context("g", "m", 3, [], [], False, "conn-1"))
        is ErrorCode.share_session_not_found
    )


def test_session_errors() -> None:
    cache = ShareSessionCache(max_entries=1)
    assert (
        error_of(lambda: cache.new_context("g", "m", FINAL_EPOCH, [], [], False, "c"))
        is ErrorCode.share_session_not_found
    )
    assert error_of(lambda: cache.new_context("g", "m", 0, [P0], [], True, "c")) is ErrorCode.invalid_request
    cache.new_context("g", "m", 0, [P0], [], False, "c")
    assert (
        error_of(lambda: cache.new_context("g", "m2", 0, [P0], [], False, "c2"))
        is ErrorCode.share_session_limit_reached
    )
    # A member reopening its own session replaces it, within the limit.
    assert cache.new_context("g", "m", 0, [P1], [], False, "c").partitions == (P1,)
    assert (
        error_of(lambda: cache.acknowledge_session_update("g", "m", 0))
        is ErrorCode.invalid_share_session_epoch
    )
    assert (
        error_of(lambda: cache.acknowledge_session_update("g", "x", 1)) is ErrorCode.share_session_not_found
    )
    cache.acknowledge_session_update("g", "m", FINAL_EPOCH)  # leaves the epoch as it is
    session = cache.get("g", "m")
    assert session is not None and session.epoch == 1


def test_a_closed_connection_removes_its_session() -> None:
    cache = ShareSessionCache()
    cache.new_context("g", "m", 0, [P0], [], False, "conn-1")
    assert cache.on_disconnect("other") is None
    removed = cache.on_disconnect("conn-1")
    assert removed is not None and removed.member_id == "m"
    assert cache.get("g", "m") is None
    # A session already closed by its final request is not removed twice.
    cache.new_context("g", "m", 0, [P0], [], False, "conn-2")
    cache.remove("g", "m")
    assert cache.on_disconnect("conn-2") is None


def test_next_epoch_wraps_to_one() -> None:
    assert (next_epoch(0), next_epoch(41), next_epoch(2**31 - 1), next_epoch(-1)) == (1, 42, 1, -1)
