"""The pure parts of `kafkactl rebalance --partitions` behind --additional and the stranded
moves: the throttles of a plan together with the reassignments in progress (Kafka's
ReassignPartitionsUnitTest.testMoveMap, the same answers), and which moves could not
finish (a partition without a live leader)."""

from __future__ import annotations

from kafkactl.cluster.reassignment_plan import (
    plan_reassignment,
    reassignment_throttles,
    stranded_moves,
)


def test_throttles_cover_the_moves_in_progress_as_kafka_computes_them() -> None:
    ongoing = {("foo", 0): ([1, 2, 3, 4], [4], [3]),
               ("foo", 1): ([4, 5, 6, 7, 8], [7, 8], [4, 5]),
               ("foo", 2): ([1, 2, 3, 4], [3, 4], [1, 2]),
               ("foo", 3): ([1, 2, 3, 4], [3, 4], [1, 2]),
               ("foo", 4): ([1, 2, 3, 4], [3, 4], [1, 2]),
               ("foo", 5): ([1, 2, 3, 4], [3, 4], [1, 2])}
    proposed = {("foo", 0): [1, 2, 5], ("foo", 2): [3, 4], ("foo", 3): [5, 6],
                ("foo", 4): [3], ("foo", 5): [3, 4, 5, 6], ("bar", 0): [1, 2, 3]}
    current = {("foo", p): [1, 2, 3, 4] for p in (0, 2, 3, 4, 5)} | {
        ("foo", 1): [4, 5, 6, 7, 8], ("bar", 0): [2, 3, 4], ("baz", 0): [1, 2, 3]}
    th = reassignment_throttles(proposed, current, ongoing)
    assert th.leader == {"foo": "0:1,0:2,0:3,1:4,1:5,1:6,2:1,2:2,3:1,3:2,4:1,4:2,5:1,5:2",
                         "bar": "0:2,0:3,0:4"}
    assert th.follower == {"foo": "0:5,1:7,1:8,2:3,2:4,3:5,3:6,4:3,5:3,5:4,5:5,5:6",
                           "bar": "0:1"}
    assert th.brokers == [1, 2, 3, 4, 5, 6, 7, 8]


def test_a_move_in_progress_keeps_its_throttles_beside_a_new_one() -> None:
    """The repro: thr-0 1 -> 2 running, thr-1 1 -> 3 added: both in the configs."""
    th = reassignment_throttles({("thr", 1): [3]}, {("thr", 1): [1]},
                                {("thr", 0): ([2, 1], [2], [1])})
    assert (th.leader, th.follower, th.brokers) == (
        {"thr": "0:1,1:1"}, {"thr": "0:2,1:3"}, [1, 2, 3])
    # without moves in progress: the plan's alone, as before
    th = reassignment_throttles({("thr", 1): [3]}, {("thr", 1): [1]})
    assert (th.leader, th.follower, th.brokers) == ({"thr": "1:1"}, {"thr": "1:3"}, [1, 3])


def test_moves_without_a_live_leader_are_stranded() -> None:
    live = [1, 2]
    targets = {("t", 0): [2], ("t", 1): [1, 2], ("t", 2): [2, 1], ("t", 3): [1]}
    current = {("t", 0): [3], ("t", 1): [3, 1], ("t", 2): [1, 2], ("t", 3): [1]}
    # without leaders: only a partition with no live replica at all
    assert set(stranded_moves(targets, current, live)) == {("t", 0)}
    # t-1's live replica 1 is not in sync (no leader); t-2 only reorders but has none either
    leaders = {("t", 0): -1, ("t", 1): -1, ("t", 2): -1, ("t", 3): 1}
    out = stranded_moves(targets, current, live, leaders)
    assert set(out) == {("t", 0), ("t", 1), ("t", 2)}
    assert out[("t", 0)].startswith("its replicas (3) are all on brokers that are not live")
    assert out[("t", 1)] == (
        "it has no leader (its live replicas 1 are not in sync): a new replica would have "
        "nothing to copy from, so the move could not finish until an in-sync replica is "
        "back (start broker 3 first, or elect an out-of-sync leader with `kafkactl "
        "rebalance --unclean-leaders`, which may lose records)")


def test_the_planner_leaves_a_stranded_move_out_and_plans_the_rest() -> None:
    assignments = {"solo": {0: [3]}, "two": {0: [3, 1]}}
    plan = plan_reassignment(assignments, [1, 2], leaders={("solo", 0): -1, ("two", 0): 1})
    assert plan.targets == {("two", 0): [1, 2]}
    assert set(plan.stranded) == {("solo", 0)} and plan.refused == {}
    assert (plan.replica_moves, plan.leader_changes) == (1, 1)
    # the replica sets alone (no leaders: a pure placement) plan every move, as before
    alone = plan_reassignment(assignments, [1, 2])
    assert alone.targets == {("solo", 0): [2], ("two", 0): [1, 2]} and not alone.stranded
