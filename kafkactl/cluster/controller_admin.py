"""Changes operators ask the controller for (its event task runs them, one at a time):

- preferred leader election (ElectLeaders, and every leader.imbalance.check.interval
  when auto.leader.rebalance.enable): a partition led by another replica goes back to its
  first replica, when that one is live and in the ISR;
- partition reassignment (AlterPartitionReassignments, KIP-455): the replica set becomes
  the target plus the original replicas; the new replicas copy the data as followers;
  once every target replica is in the ISR the set shrinks to the target (a leader outside
  it hands over first) and the removed replicas delete their copy. The adding/removing
  sets are kept in the topic znode, so a new controller finishes what an old one began.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster.topic_state import PartitionState
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkactl.cluster.controller import KafkaController

log = logging.getLogger("kafkactl.controller")

TopicPartition = tuple[str, int]


@dataclass
class Reassignment:
    target: list[int]
    original: list[int]

    @property
    def adding(self) -> list[int]:
        return [r for r in self.target if r not in self.original]

    @property
    def removing(self) -> list[int]:
        return [r for r in self.original if r not in self.target]


def preferred_elections(c: KafkaController, partitions: list[TopicPartition] | None
                        ) -> tuple[dict[TopicPartition, PartitionState],
                                   dict[TopicPartition, tuple[ErrorCode, str]]]:
    """(new states, errors) for moving `partitions` (None: all) to their preferred
    leader."""
    live = set(c.view.brokers) - c.shutting_down
    changes: dict[TopicPartition, PartitionState] = {}
    errors: dict[TopicPartition, tuple[ErrorCode, str]] = {}
    wanted = partitions if partitions is not None else sorted(c.view.states)
    for tp in wanted:
        replicas = c.view.assignments.get(tp[0], {}).get(tp[1])
        state = c.view.states.get(tp)
        if replicas is None or state is None:
            errors[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition")
            continue
        preferred = replicas[0]
        if state.leader == preferred:
            errors[tp] = (ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica leads")
        elif preferred not in live or preferred not in state.isr:
            errors[tp] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                          f"preferred replica {preferred} is not live and in the ISR")
        else:
            changes[tp] = PartitionState(preferred, state.leader_epoch + 1, list(state.isr),
                                         c.epoch, state.zk_version)
    return changes, errors


def imbalanced_partitions(c: KafkaController, threshold_percent: int) -> list[TopicPartition]:
    """Partitions to give back to their preferred leader, for the brokers whose share of
    partitions led by someone else passes `threshold_percent` (Kafka's auto rebalance)."""
    preferred_of: dict[int, list[TopicPartition]] = {}
    for tp in c.view.states:
        replicas = c.view.assignments.get(tp[0], {}).get(tp[1])
        if replicas:
            preferred_of.setdefault(replicas[0], []).append(tp)
    out = []
    for broker, tps in preferred_of.items():
        if broker not in c.view.brokers:
            continue
        away = [tp for tp in tps if c.view.states[tp].leader != broker]
        if tps and len(away) * 100 / len(tps) > threshold_percent:
            out += away
    return out


# ---- reassignment ------------------------------------------------------------------------
def check_target(c: KafkaController, tp: TopicPartition,
                 target: list[int] | None) -> tuple[ErrorCode, str]:
    if c.view.assignments.get(tp[0], {}).get(tp[1]) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition"
    if target is None:
        return ErrorCode.NONE, ""
    if not target or len(set(target)) != len(target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the target must list distinct brokers"
    dead = [b for b in target if b not in c.view.brokers]
    if dead:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"brokers {dead} are not live"
    return ErrorCode.NONE, ""


def start(c: KafkaController, tp: TopicPartition, target: list[int]) -> list[int] | None:
    """Begin (or replace) a reassignment; the replica set to write, or None when the
    partition already has exactly these replicas."""
    current = c.view.assignments[tp[0]][tp[1]]
    existing = c.reassignments.get(tp)
    original = existing.original if existing is not None else list(current)
    if target == original and existing is None:
        return None
    c.reassignments[tp] = Reassignment(list(target), original)
    return list(dict.fromkeys([*target, *original]))


def completion(c: KafkaController, tp: TopicPartition
               ) -> tuple[list[int], PartitionState] | None:
    """When every target replica is in the ISR: (target replicas, the partition's new
    state: a target replica leads, the ISR keeps only target replicas)."""
    r = c.reassignments.get(tp)
    state = c.view.states.get(tp)
    if r is None or state is None or not set(r.target) <= set(state.isr):
        return None
    isr = [b for b in state.isr if b in r.target]
    leader = state.leader if state.leader in r.target else next(
        b for b in r.target if b in isr and b in c.view.brokers)
    return list(r.target), PartitionState(leader, state.leader_epoch + 1, isr, c.epoch,
                                          state.zk_version)


def write_assignment(c: KafkaController, topic: str) -> None:
    """(worker thread) The topic znode with its current replica sets and the adding /
    removing replicas of its reassignments in progress."""
    assignment = zk_topics.read_assignment(c.zk, topic)
    if assignment is None:
        return
    assignment.partitions = dict(c.view.assignments[topic])
    assignment.adding = {p: r.adding for (t, p), r in c.reassignments.items() if t == topic}
    assignment.removing = {p: r.removing for (t, p), r in c.reassignments.items()
                           if t == topic}
    zk_topics.set_assignment(c.zk, assignment)


def resume(c: KafkaController, assignment: zk_topics.TopicAssignment) -> None:
    """A reassignment an earlier controller began (from the topic znode)."""
    for p, replicas in assignment.partitions.items():
        adding = assignment.adding.get(p, [])
        removing = assignment.removing.get(p, [])
        if adding or removing:
            target = [b for b in replicas if b not in removing]
            original = [b for b in replicas if b not in adding]
            c.reassignments[(assignment.name, p)] = Reassignment(target, original)
            log.info("resuming the reassignment of %s-%d to %s", assignment.name, p, target)
