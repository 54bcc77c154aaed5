"""`rebalance --partitions` keeps current leaders when a plan of as few replica moves
allows it: where a partition would lose its leader while another partition holds that
broker as a follower, the two swap (the tester's lc: [2,3], [3,1] over brokers 1-4 moved
lc-1's leader 3 away; moving lc-0's follower 3 costs the same copy and changes no leader)."""

from __future__ import annotations

import pytest

from kafkactl.cluster.reassignment_plan import plan_reassignment, topic_replication_factor
from tests.cluster.test_reassignment_plan import brute_force


@pytest.mark.parametrize("parts", [
    {0: [2, 3], 1: [3, 1]},
    {0: [2, 4], 1: [4, 1]},
    {0: [2, 4], 1: [1, 4], 2: [4, 3]},
])
def test_a_leader_is_kept_when_a_plan_of_as_few_moves_keeps_it(
        parts: dict[int, list[int]]) -> None:
    live = [1, 2, 3, 4]
    plan = plan_reassignment({"lc": parts}, live)
    assert plan.replica_moves == brute_force(parts, live, topic_replication_factor(parts))
    assert plan.leader_changes == 0, plan.targets
    for (_t, p), target in plan.targets.items():
        assert target[0] == parts[p][0]
