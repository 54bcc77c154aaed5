"""The controller's ElectLeaders decisions, as pure functions over a ClusterView (no
ZooKeeper): KIP-460's unclean election (Kafka's processReplicaLeaderElection with
ElectionType.UNCLEAN) elects, for each named partition without a live leader, its first
live in-sync replica in assignment order, else its first live replica even out of sync
(which then forms the ISR alone); a partition with a live leader needs none; with no live
replica none is elected. A replica in a log dir its broker has offline (KIP-112) or on a
broker shutting down is never elected, by either election type. ELECTION_NOT_NEEDED says
what a standalone broker says. It used to answer INVALID_REQUEST to every unclean
election."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kafkactl.cluster import controller_admin
from kafkactl.cluster.broker_registry import BrokerInfo
from kafkactl.cluster.controller_context import Reassignment
from kafkactl.cluster.controller_events import ElectLeaders, request_event
from kafkactl.cluster.controller_requests import ClusterView
from kafkactl.cluster.partition_election import ELECTION_NOT_NEEDED_MESSAGE, ElectionType
from kafkactl.cluster.topic_state import NO_LEADER, PartitionState
from kafkactl.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
EPOCH = 7


@dataclass
class FakeController:
    """A ControllerContext whose writes always succeed (as ZooKeeper's when no one raced)."""

    view: ClusterView
    epoch: int = EPOCH
    epoch_zk_version: int = 0
    shutting_down: set[int] = field(default_factory=set)
    reassignments: dict[TopicPartition, Reassignment] = field(default_factory=dict)
    deletions: set[str] = field(default_factory=set)
    zk: Any = None
    announced: list[set[TopicPartition]] = field(default_factory=list)

    def check_active(self) -> None:
        pass

    async def write_states(self, states: dict[TopicPartition, PartitionState], *,
                           create: bool) -> None:
        for tp, state in states.items():
            self.view.states[tp] = PartitionState(state.leader, state.leader_epoch,
                                                  list(state.isr), state.controller_epoch,
                                                  state.zk_version + 1)

    def announce(self, partitions: set[TopicPartition], *, is_new: bool) -> None:
        self.announced.append(partitions)

    def send_update_metadata(self) -> None:
        pass

    def send_stop_replica(self, broker_id: int, name: str, parts: dict[int, list[int]], *,
                          deleting_topic: bool = True) -> None:
        pass

    def forget_topic(self, name: str) -> None:
        pass


def controller(live: set[int], partitions: dict[TopicPartition, tuple[list[int], int, list[int]]]
               ) -> FakeController:
    """Live brokers and partitions (replicas, leader, ISR), at leader epoch 3."""
    view = ClusterView(1, EPOCH, brokers={b: BrokerInfo(b, "127.0.0.1", 9000 + b)
                                          for b in live})
    for (t, p), (replicas, leader, isr) in partitions.items():
        view.assignments.setdefault(t, {})[p] = replicas
        view.states[(t, p)] = PartitionState(leader, 3, isr, EPOCH - 1, 5)
    return FakeController(view)


def test_unclean_election_takes_a_live_replica_only_where_no_live_leader_is() -> None:
    c = controller({2, 3}, {
        ("t", 0): ([1, 2, 3], NO_LEADER, [1]),     # only a dead replica was in sync
        ("t", 1): ([1, 3, 2], NO_LEADER, [1, 2]),  # a live one still in sync: it first
        ("t", 2): ([2, 3], 2, [2, 3]),             # a live leader: nothing to do
        ("t", 3): ([1, 4], NO_LEADER, [1]),        # no live replica at all
        ("t", 4): ([1, 3], 1, [1]),                # its leader is dead (not yet noticed)
    })
    changes, errors = controller_admin.unclean_elections(
        c, [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("t", 4), ("t", 9), ("nosuch", 0)])
    assert changes == {
        ("t", 0): PartitionState(2, 4, [2], EPOCH, 5),  # first live in assignment order
        ("t", 1): PartitionState(2, 4, [2], EPOCH, 5),  # the in-sync one, not 3
        ("t", 4): PartitionState(3, 4, [3], EPOCH, 5),
    }
    assert errors[("t", 2)] == (ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE)
    assert errors[("t", 3)][0] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert "replicas 1,4" in errors[("t", 3)][1]
    for tp in (("t", 9), ("nosuch", 0)):
        assert errors[tp] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition")
    assert set(changes) | set(errors) == {("t", 0), ("t", 1), ("t", 2), ("t", 3), ("t", 4),
                                          ("t", 9), ("nosuch", 0)}
    # None: every partition
    changes, errors = controller_admin.unclean_elections(c, None)
    assert set(changes) == {("t", 0), ("t", 1), ("t", 4)}
    assert set(errors) == {("t", 2), ("t", 3)}


def test_offline_log_dirs_and_stopping_brokers_are_never_elected() -> None:
    c = controller({1, 2, 3}, {
        ("t", 0): ([1, 2, 3], NO_LEADER, [9]),
        ("t", 1): ([1, 2], NO_LEADER, [9]),
        ("t", 2): ([2, 1], 1, [1, 2]),   # preferred 2 in sync but its log dir is offline
        ("u", 0): ([3], NO_LEADER, [3]),  # its topic is being deleted
    })
    c.view.offline_replicas = {1: {("t", 0), ("t", 1)}, 2: {("t", 2)}}
    c.shutting_down = {2}
    c.deletions = {"u"}
    changes, errors = controller_admin.unclean_elections(c, [("t", 0), ("t", 1), ("u", 0)])
    assert changes == {("t", 0): PartitionState(3, 4, [3], EPOCH, 5)}
    assert errors[("t", 1)][0] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert errors[("u", 0)] == (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
    c.shutting_down = set()
    changes, errors = controller_admin.preferred_elections(c, [("t", 2), ("u", 0)])
    assert changes == {}
    assert errors[("t", 2)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert errors[("u", 0)][0] == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_preferred_election_not_needed_says_what_a_standalone_broker_says() -> None:
    c = controller({1, 2}, {("t", 0): ([1, 2], 1, [1, 2]), ("t", 1): ([1, 2], 2, [1, 2])})
    changes, errors = controller_admin.preferred_elections(c, None)
    assert errors == {("t", 0): (ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE)}
    assert changes == {("t", 1): PartitionState(1, 4, [1, 2], EPOCH, 5)}
    assert ELECTION_NOT_NEEDED_MESSAGE == "Leader election not needed for topic partition."


def test_elect_leaders_applies_the_election_type_the_request_names() -> None:
    c = controller({2}, {("t", 0): ([1, 2], NO_LEADER, [1]), ("t", 1): ([2, 1], 1, [1, 2])})
    outcome = asyncio.run(controller_admin.elect_leaders(c, [("t", 0), ("t", 1)],
                                                         ElectionType.PREFERRED))
    assert outcome[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert outcome[("t", 1)] == (ErrorCode.NONE, "")  # the preferred replica 2 leads again
    assert c.view.states[("t", 0)].leader == NO_LEADER
    outcome = asyncio.run(controller_admin.elect_leaders(c, [("t", 0)], ElectionType.UNCLEAN))
    assert outcome == {("t", 0): (ErrorCode.NONE, "")}
    assert (c.view.states[("t", 0)].leader, c.view.states[("t", 0)].isr) == (2, [2])
    assert c.announced[-1] == {("t", 0)}  # the brokers hear of the new leader


def test_the_elect_leaders_event_carries_the_election_type() -> None:
    async def build() -> ElectLeaders:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        event = request_event("elect_leaders", ([("t", 0)], 1), future)
        assert isinstance(event, ElectLeaders)
        return event

    event = asyncio.run(build())
    assert event.partitions == [("t", 0)] and event.election_type == ElectionType.UNCLEAN


def test_an_isr_change_may_not_add_a_replica_in_an_offline_log_dir() -> None:
    """KIP-112 with KIP-841's check: a leader's AlterPartition that adds back a replica its
    broker has in an offline log dir is refused (INELIGIBLE_REPLICA), also right after that
    broker registered again (the tester's case: a stale proposal accepted after the
    controller had marked the replica offline); adding an online replica is taken."""
    from kafkactl.cluster.controller_context import IsrChange

    c = controller({1, 2, 3}, {("t", 0): ([2, 3, 1], 2, [2, 3]),
                               ("t", 1): ([2, 3, 1], 2, [2, 3])})
    c.view.offline_replicas[1] = {("t", 0)}
    writes, refused = controller_admin.isr_changes(c, 2, [
        IsrChange("t", 0, 3, [1, 2, 3], 5), IsrChange("t", 1, 3, [1, 2, 3], 5)])
    assert [(ch.topic, ch.partition, code) for ch, code, _ in refused] == [
        ("t", 0, ErrorCode.INELIGIBLE_REPLICA)]
    assert list(writes) == [("t", 1)] and writes[("t", 1)].isr == [1, 2, 3]
