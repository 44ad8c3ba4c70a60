"""The share groups' `simple` assignor (broker/share/simple_assignor.py): Kafka's balance and
sharing rules, stickiness, and the heterogeneous case."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.share.simple_assignor import ShareMemberSpec, assign

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def spec(*topics: uuid.UUID, x: frozenset[int] | None = None) -> ShareMemberSpec:
    """A member subscribed to `topics`, currently assigned partitions `x` of T1."""
    return ShareMemberSpec(frozenset(topics), {T1: x} if x is not None else {})


def sizes(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def test_one_partition_is_shared_by_every_member() -> None:
    members = {m: spec(T1) for m in ("a", "b", "c")}
    assert assign(members, {T1: [0]}) == {m: {T1: frozenset({0})} for m in ("a", "b", "c")}


def test_partitions_are_balanced_across_members() -> None:
    result = assign({"a": spec(T1), "b": spec(T1)}, {T1: range(4)})
    assert sizes(result) == {"a": 2, "b": 2}
    assert result["a"][T1] | result["b"][T1] == frozenset(range(4))
    # An odd count: Kafka's desired counts by member index give the first member the extra one.
    result = assign({"a": spec(T1), "b": spec(T1)}, {T1: range(3)})
    assert sizes(result) == {"a": 2, "b": 1}


def test_a_joining_member_takes_partitions_from_the_overfilled_only() -> None:
    members = {"a": spec(T1, x=frozenset({0, 1})), "b": spec(T1, x=frozenset({2, 3})), "c": spec(T1)}
    result = assign(members, {T1: range(4)})
    assert result["a"] == {T1: frozenset({0, 1})}  # desired 2: keeps both
    assert len(result["b"][T1]) == 1 and result["b"][T1] < frozenset({2, 3})
    assert result["c"][T1] == frozenset({2, 3}) - result["b"][T1]


def test_more_members_than_partitions_share_each_partition_evenly() -> None:
    members = {m: spec(T1) for m in "abcde"}
    result = assign(members, {T1: range(2)})
    holders = {p: sum(1 for a in result.values() if p in a.get(T1, ())) for p in range(2)}
    assert holders == {0: 3, 1: 3}  # desired sharing ceil(5/2)
    assert sorted(sizes(result).values()) == [1, 1, 1, 1, 2]


def test_partitions_not_assignable_are_not_given_and_are_taken_away() -> None:
    members = {"a": spec(T1, x=frozenset({0, 1})), "b": spec(T1)}
    result = assign(members, {T1: [0, 2]})
    assert result["a"] == {T1: frozenset({0})}
    assert result["b"] == {T1: frozenset({2})}


def test_heterogeneous_subscriptions_balance_each_topic_among_its_subscribers() -> None:
    result = assign({"a": spec(T1), "b": spec(T1, T2)}, {T1: range(2), T2: range(2)})
    assert result["b"][T2] == frozenset({0, 1})  # b alone subscribes T2
    assert T2 not in result["a"]
    assert len(result["a"][T1]) == 1 and len(result["b"][T1]) == 1
    assert result["a"][T1] | result["b"][T1] == frozenset({0, 1})


def test_a_topic_nobody_subscribes_any_more_is_taken_away() -> None:
    members = {"a": ShareMemberSpec(frozenset({T2}), {T1: frozenset({0})}), "b": spec(T2)}
    result = assign(members, {T2: range(2)})
    assert T1 not in result["a"]


def test_no_members_no_assignment() -> None:
    assert assign({}, {T1: range(3)}) == {}


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=8), st.integers(min_value=0, max_value=12), st.data())
def test_homogeneous_assignments_are_balanced_shared_as_desired_and_stable(
    num_members: int, num_partitions: int, data: st.DataObject
) -> None:
    ids = [f"m{i}" for i in range(num_members)]
    current = {
        m: data.draw(st.frozensets(st.integers(min_value=0, max_value=num_partitions + 2), max_size=6))
        for m in ids
    }
    members = {m: ShareMemberSpec(frozenset({T1}), {T1: current[m]}) for m in ids}
    result = assign(members, {T1: range(num_partitions)})
    if num_partitions == 0:
        assert all(not a for a in result.values())
        return
    sharing = -(-num_members // num_partitions)
    for p in range(num_partitions):
        assert 1 <= sum(1 for a in result.values() if p in a.get(T1, ())) <= sharing
    counts = sizes(result).values()
    assert max(counts) - min(counts) <= 1
    assert all(a.get(T1, frozenset()) <= frozenset(range(num_partitions)) for a in result.values())
    # Sticky: assigning again from this answer changes nothing.
    again = assign({m: ShareMemberSpec(frozenset({T1}), result[m]) for m in ids}, {T1: range(num_partitions)})
    assert again == result


def test_a_member_at_its_desired_count_is_not_given_more() -> None:
    members = {"a": spec(T1, x=frozenset({0})), "b": spec(T1, x=frozenset({0, 1})), "c": spec(T1)}
    result = assign(members, {T1: range(3)})
    assert sizes(result) == {"a": 1, "b": 1, "c": 1}
    assert result["a"] == {T1: frozenset({0})} and result["b"] == {T1: frozenset({1})}
