"""The controller's leadership decisions over its view of the cluster, as pure functions
(no ZooKeeper, no I/O; the controller's event task writes what they return).

Unclean leader election is a topic's setting (its unclean.leader.election.enable, else the
broker's): `unclean` is one answer for every topic, or a function asked per topic, and only
for a partition that needs it, one with no live in-sync replica that may lead but with a
live out-of-sync one (Kafka's collectUncleanLeaderElectionState reads the topic configs of
those partitions only). The controller asks first with a function that notes the topics
and answers False, reads their settings, and decides again only if one is on."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from kafkactl.cluster.controller_requests import ClusterView
from kafkactl.cluster.partition_election import (
    elect_leader,
    new_partition_state,
    remove_replicas,
)
from kafkactl.cluster.topic_state import NO_LEADER, PartitionState

TopicPartition = tuple[str, int]
# True/False for every topic, or asked per topic (see the module's doc)
Unclean = bool | Callable[[str], bool]


def _elect(topic: str, replicas: list[int], state: PartitionState, live: Collection[int],
           epoch: int, unclean: Unclean, exclude: Collection[int] = ()
           ) -> PartitionState | None:
    """elect_leader, asking `unclean` about `topic` only when no live in-sync replica may
    lead and a live out-of-sync one could."""
    new = elect_leader(replicas, state, live, epoch, exclude=exclude)
    if new is not None or not any(r in live and r not in exclude for r in replicas):
        return new
    if not (unclean(topic) if callable(unclean) else unclean):
        return None
    return elect_leader(replicas, state, live, epoch, unclean=True, exclude=exclude)


def broker_change_states(view: ClusterView, dead: set[int], epoch: int, *, unclean: Unclean,
                         shutting_down: Collection[int]
                         ) -> dict[TopicPartition, PartitionState]:
    """New states for the partitions a broker change affects: offline partitions with an
    eligible live replica get a leader, replicas that died leave the ISR. A partition none
    of whose replicas is live loses its leader but keeps its ISR (shrinking it to one dead
    broker would only forget who else holds every record: whichever ISR member returns
    first leads again)."""
    live = set(view.brokers)
    changed: dict[TopicPartition, PartitionState] = {}
    for tp, state in view.states.items():
        replicas = view.assignments[tp[0]][tp[1]]
        if view.offline_replicas:
            live = view.online_replicas(tp, replicas)
        if not live.intersection(replicas):
            if state.leader != NO_LEADER and state.leader not in live:
                changed[tp] = PartitionState(NO_LEADER, state.leader_epoch + 1,
                                             list(state.isr), epoch, state.zk_version)
            continue
        new = None
        if state.leader in dead or state.leader not in live:
            new = _elect(tp[0], replicas, state, live, epoch, unclean, shutting_down)
        if new is None and set(state.isr) & dead:
            new = remove_replicas(state, dead, epoch)
        if new is not None:
            changed[tp] = new
    return changed


def start_states(view: ClusterView, partitions: Iterable[TopicPartition], epoch: int, *,
                 unclean: Unclean, shutting_down: Collection[int]
                 ) -> tuple[dict[TopicPartition, PartitionState],
                            dict[TopicPartition, PartitionState]]:
    """(first states, new leaders): partitions that have no state and a live replica, and
    offline ones that have an eligible live replica."""
    live = set(view.brokers) - set(shutting_down)
    created: dict[TopicPartition, PartitionState] = {}
    elected: dict[TopicPartition, PartitionState] = {}
    for tp in partitions:
        replicas = view.assignments.get(tp[0], {}).get(tp[1])
        if replicas is None:
            continue
        state = view.states.get(tp)
        online = view.online_replicas(tp, replicas) - set(shutting_down) \
            if view.offline_replicas else live
        if state is None:
            first = new_partition_state(replicas, online, epoch)
            if first is not None:
                created[tp] = first
        elif state.leader not in online:
            new = _elect(tp[0], replicas, state, online, epoch, unclean)
            if new is not None:
                elected[tp] = new
    return created, elected


def offline_replica_states(view: ClusterView, broker_id: int,
                           partitions: Iterable[TopicPartition], epoch: int, *,
                           unclean: Unclean, shutting_down: Collection[int]
                           ) -> dict[TopicPartition, PartitionState]:
    """New states once `broker_id`'s replicas of `partitions` are on an offline log dir
    (Kafka's onReplicasBecomeOffline): a partition it led gets another leader from the
    ISR where there is one (without one it is left leaderless), and the replica leaves
    the ISR (the last member stays, as for a dead broker)."""
    changed: dict[TopicPartition, PartitionState] = {}
    for tp in partitions:
        state = view.states.get(tp)
        replicas = view.assignments.get(tp[0], {}).get(tp[1])
        if state is None or replicas is None:
            continue
        new = None
        if state.leader == broker_id:
            new = _elect(tp[0], replicas, state, view.online_replicas(tp, replicas), epoch,
                         unclean, shutting_down)
        if new is None and broker_id in state.isr:
            new = remove_replicas(state, {broker_id}, epoch)
        if new is not None:
            changed[tp] = new
    return changed
