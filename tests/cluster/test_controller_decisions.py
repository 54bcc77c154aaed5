"""The controller's pure decisions: replica assignment and leader election."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kafkactl.cluster.assignment import AssignmentError, assign_replicas
from kafkactl.cluster.partition_election import (
    elect_leader,
    new_partition_state,
    remove_replicas,
)
from kafkactl.cluster.topic_state import (
    PartitionState,
    TopicAssignment,
    parse_assignment,
    parse_partition_state,
)


@pytest.mark.parametrize("brokers", [[0], [1, 2, 3], [0, 1, 2, 3, 4]])
@pytest.mark.parametrize("partitions", [1, 2, 12, 1000])
def test_leaders_and_replicas_spread_evenly(brokers: list[int], partitions: int) -> None:
    for rf in range(1, len(brokers) + 1):
        for start in range(len(brokers)):
            out = assign_replicas(brokers, partitions, rf, start_index=start)
            assert sorted(out) == list(range(partitions))
            leaders = Counter(r[0] for r in out.values())
            assert max(leaders.values()) - min(leaders[b] for b in brokers) <= 1
            for replicas in out.values():
                assert len(replicas) == len(set(replicas)) == rf
                assert set(replicas) <= set(brokers)
            load = Counter(b for r in out.values() for b in r)
            assert max(load.values()) - min(load[b] for b in brokers) <= rf


def test_added_partitions_continue_the_numbering_and_random_start_is_seedable() -> None:
    out = assign_replicas([1, 2, 3], 3, 2, first_partition=4, start_index=0)
    assert sorted(out) == [4, 5, 6]
    a = assign_replicas([1, 2, 3], 6, 2, rng=random.Random(7))
    b = assign_replicas([1, 2, 3], 6, 2, rng=random.Random(7))
    assert a == b


def test_impossible_assignments_are_refused_with_the_reason() -> None:
    with pytest.raises(AssignmentError, match="larger than the 2 available brokers"):
        assign_replicas([1, 2], 3, 3)
    with pytest.raises(AssignmentError, match="at least 1"):
        assign_replicas([1, 2], 0, 1)


def test_new_partition_takes_the_first_live_replica() -> None:
    assert new_partition_state([3, 1, 2], {1, 2}, 5) == PartitionState(1, 0, [1, 2], 5)
    assert new_partition_state([3], {1, 2}, 5) is None


def test_offline_leader_election_prefers_assignment_order_within_the_isr() -> None:
    state = PartitionState(1, 4, [1, 3, 2], 2, zk_version=7)
    new = elect_leader([1, 2, 3], state, {2, 3}, 9)
    assert new is not None
    assert (new.leader, new.leader_epoch, new.isr, new.controller_epoch, new.zk_version) == \
        (2, 5, [3, 2], 9, 7)
    # no live ISR member: offline unless unclean election is on
    lone = PartitionState(1, 4, [1], 2)
    assert elect_leader([1, 2], lone, {2}, 9) is None
    unclean = elect_leader([1, 2], lone, {2}, 9, unclean=True)
    assert unclean is not None and unclean.leader == 2 and unclean.isr == [2]
    # a broker being shut down is not elected
    assert elect_leader([1, 2, 3], state, {1, 2, 3}, 9, exclude={1, 2}).leader == 3  # type: ignore[union-attr]


def test_dead_replicas_leave_the_isr_but_the_last_one_stays() -> None:
    state = PartitionState(1, 0, [1, 2], 1)
    after = remove_replicas(state, {1}, 3)
    assert after is not None and (after.leader, after.isr, after.leader_epoch) == (-1, [2], 1)
    only = PartitionState(1, 0, [1], 1)
    after = remove_replicas(only, {1}, 3)
    assert after is not None and (after.leader, after.isr) == (-1, [1])
    assert remove_replicas(state, {5}, 3) is None


def test_znode_layouts_round_trip_and_garbage_is_rejected() -> None:
    import json
    import uuid

    tid = uuid.uuid4()
    a = TopicAssignment("t", {0: [1, 2], 1: [2, 1]}, tid)
    value = json.loads(a.to_json())
    assert value["version"] == 3 and value["partitions"] == {"0": [1, 2], "1": [2, 1]}
    back = parse_assignment("t", value)
    assert back is not None and back.partitions == a.partitions and back.topic_id == tid
    for bad in (None, [], {"partitions": {}}, {"partitions": {"0": "x"}},
                {"partitions": {"1": [1]}}, {"partitions": {"a": [1]}}):
        assert parse_assignment("t", bad) is None
    s = PartitionState(2, 3, [2], 4)
    assert parse_partition_state(json.loads(s.to_json())) == s
    assert parse_partition_state({"leader": "x"}) is None


def test_replicas_in_an_offline_log_dir_lose_leadership_isr_and_eligibility() -> None:
    """KIP-112: broker 1's replica of t-0 is in an offline log dir. It leaves the ISR,
    another in-sync replica leads, the metadata names it offline; t-1 (led by 2) only
    shrinks its ISR; an election never picks an offline replica, even an unclean one."""
    from kafkactl.cluster import controller_decisions as decisions
    from kafkactl.cluster import controller_requests as build
    from kafkactl.cluster.broker_registry import BrokerInfo

    view = build.ClusterView(1, 3, brokers={b: BrokerInfo(b, "127.0.0.1", 9090 + b, epoch=b)
                                            for b in (1, 2, 3)},
                             assignments={"t": {0: [1, 2, 3], 1: [2, 1, 3], 2: [1]}})
    view.states = {("t", 0): PartitionState(1, 4, [1, 2, 3], 3, 7),
                   ("t", 1): PartitionState(2, 2, [2, 1], 3, 5),
                   ("t", 2): PartitionState(1, 0, [1], 3, 1)}
    view.offline_replicas[1] = {("t", 0), ("t", 1), ("t", 2)}
    changed = decisions.offline_replica_states(view, 1, view.offline_replicas[1], 3,
                                               unclean=False, shutting_down=())
    assert changed == {("t", 0): PartitionState(2, 5, [2, 3], 3, 7),
                       ("t", 1): PartitionState(2, 3, [2], 3, 5),
                       ("t", 2): PartitionState(-1, 1, [1], 3, 1)}  # the last ISR member stays
    view.states.update(changed)
    assert build.update_metadata(view, 2)["topic_states"][0]["partition_states"][0][
        "offline_replicas"] == [1]
    # broker 3 dies: t-0 may not go back to 1 (offline there), even with unclean election
    view.states[("t", 0)] = PartitionState(3, 6, [3], 3, 8)
    del view.brokers[3]
    assert decisions.broker_change_states(view, {3}, 3, unclean=True, shutting_down=()) == {
        ("t", 0): PartitionState(2, 7, [2], 3, 8)}
    view.states[("t", 0)] = PartitionState(-1, 6, [3], 3, 8)
    del view.brokers[2]
    assert decisions.start_states(view, [("t", 0)], 3, unclean=True, shutting_down=()) == (
        {}, {})
