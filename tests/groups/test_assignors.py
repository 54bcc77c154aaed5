"""Assignors and the coordinator partition mapping (pure functions)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.broker.coordinator import java_string_hash, partition_for
from kafkactl.client.group.assignors import MemberSubscription, range_assign, roundrobin_assign
from tests.hypothesis_profiles import examples


def subs(*ids: str, topics: tuple[str, ...] = ("t",)) -> list[MemberSubscription]:
    return [MemberSubscription(i, topics) for i in ids]


def test_range_is_the_seed_algorithm_with_remainders_first() -> None:
    # 7 partitions, 3 consumers: blocks of 7 // 3 = 2, the first 7 % 3 = 1 member gets one more
    plan = range_assign({"t": list(range(7))}, subs("c", "a", "b"))
    assert plan == {"a": [("t", 0), ("t", 1), ("t", 2)], "b": [("t", 3), ("t", 4)],
                    "c": [("t", 5), ("t", 6)]}


def test_range_sorts_partitions_and_is_per_topic() -> None:
    plan = range_assign({"x": [3, 1, 0, 2], "y": [0, 1]},
                        [MemberSubscription("m1", ("x", "y")), MemberSubscription("m2", ("x",))])
    assert plan == {"m1": [("x", 0), ("x", 1), ("y", 0), ("y", 1)], "m2": [("x", 2), ("x", 3)]}


def test_range_more_members_than_partitions() -> None:
    plan = range_assign({"t": [0, 1]}, subs("a", "b", "c"))
    assert plan == {"a": [("t", 0)], "b": [("t", 1)], "c": []}


def test_range_static_members_sort_by_instance_id() -> None:
    members = [MemberSubscription("z-1", ("t",), "alpha"), MemberSubscription("a-1", ("t",),
                                                                              "beta")]
    plan = range_assign({"t": [0, 1]}, members)
    assert plan == {"z-1": [("t", 0)], "a-1": [("t", 1)]}


def test_roundrobin_deals_in_turn_skipping_unsubscribed() -> None:
    members = [MemberSubscription("a", ("x", "y")), MemberSubscription("b", ("x",))]
    plan = roundrobin_assign({"x": [0, 1, 2], "y": [0, 1]}, members)
    assert plan == {"a": [("x", 0), ("x", 2), ("y", 0), ("y", 1)], "b": [("x", 1)]}


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(1, 40), st.integers(1, 9), st.sampled_from(["range", "roundrobin"]))
def test_every_partition_exactly_once_and_balanced(n: int, c: int, name: str) -> None:
    fn = range_assign if name == "range" else roundrobin_assign
    plan = fn({"t": list(range(n))}, subs(*[f"m{i}" for i in range(c)]))
    got = [tp for tps in plan.values() for tp in tps]
    assert sorted(got) == [("t", p) for p in range(n)]
    sizes = [len(v) for v in plan.values()]
    assert max(sizes) - min(sizes) <= 1


def test_java_string_hash_and_coordinator_partition() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("test", 50) == 3556498 % 50
    assert java_string_hash("héllo-😀") == _java_hash_reference("héllo-😀")


def _java_hash_reference(s: str) -> int:
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) % 2**32
    return h - 2**32 if h >= 2**31 else h
