"""Changes operators ask the controller for (its event task runs them, one at a time):

- preferred leader election (ElectLeaders, and every leader.imbalance.check.interval
  when auto.leader.rebalance.enable): a partition led by another replica goes back to its
  first replica, when that one is live (its log dir online) and in the ISR;
- unclean leader election (ElectLeaders' UNCLEAN type, KIP-460): a named partition without
  a live leader gets the first live replica of its ISR in assignment order, else the first
  live replica at all, even out of sync (records only the lost leaders had are gone);
- partition reassignment (AlterPartitionReassignments, KIP-455): the replica set becomes
  the target plus the original replicas; the new replicas copy the data as followers;
  once every target replica is in the ISR the set shrinks to the target (a leader outside
  it hands over first) and the removed replicas delete their copy. The adding/removing
  sets are kept in the topic znode, so a new controller finishes what an old one began.
"""

from __future__ import annotations

import asyncio
import logging

from kafkactl.cluster import controller_zk
from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster.controller_context import ControllerContext, IsrChange, Reassignment
from kafkactl.cluster.partition_election import (
    ELECTION_NOT_NEEDED_MESSAGE,
    ElectionType,
    elect_leader,
)
from kafkactl.cluster.topic_state import PartitionState
from kafkactl.protocol.errors import ErrorCode

__all__ = ["IsrChange", "Reassignment"]  # re-exported: the records live in controller_context

log = logging.getLogger("kafkactl.controller")

TopicPartition = tuple[str, int]


IsrResult = tuple[IsrChange, ErrorCode, PartitionState | None]


def isr_changes(c: ControllerContext, broker_id: int, changes: list[IsrChange]
                ) -> tuple[dict[TopicPartition, PartitionState], list[IsrResult]]:
    """(states to write, the answers of the others) for a leader's AlterPartition, checked
    in the order of Kafka's KafkaController.processAlterPartition: the partition must be
    led by `broker_id`; a leader epoch below the current one is FENCED_LEADER_EPOCH, a
    leader or partition epoch above it NOT_CONTROLLER (this controller is behind, the
    leader asks again); a request for the ISR the partition already has is answered with
    the current state, whatever partition epoch it names (Kafka's
    LeaderAndIsr.equalsAllowStalePartitionEpoch, checked before the partition epoch so
    that a request applied once, whose answer was lost, gets the same answer when the
    leader sends it again); otherwise the partition epoch must be the current one
    (INVALID_UPDATE_VERSION), the ISR made of the partition's replicas with the leader in
    it (INVALID_REQUEST), and a replica it adds online: a live broker, the replica's log
    dir not offline there (else INELIGIBLE_REPLICA, as Kafka's KIP-841 check)."""
    answered: list[IsrResult] = []
    writes: dict[TopicPartition, PartitionState] = {}
    for change in changes:
        tp = (change.topic, change.partition)
        state = c.view.states.get(tp)
        replicas = c.view.assignments.get(change.topic, {}).get(change.partition)
        if state is None or replicas is None:
            answered.append((change, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
            continue
        already = sorted(change.isr) == sorted(state.isr)
        code = _isr_change_error(c, tp, state, replicas, broker_id, change, already)
        if code != ErrorCode.NONE:
            answered.append((change, code, None))
        elif already:
            answered.append((change, ErrorCode.NONE, state))  # no write
        else:
            writes[tp] = PartitionState(state.leader, state.leader_epoch, list(change.isr),
                                        c.epoch, state.zk_version)
    return writes, answered


def _isr_change_error(c: ControllerContext, tp: TopicPartition, state: PartitionState,
                      replicas: list[int], broker_id: int, change: IsrChange,
                      already: bool) -> ErrorCode:
    """Why `change` is refused (NONE: it is not; also when it asks for the ISR the
    partition `already` has, at a stale partition epoch too)."""
    if state.leader != broker_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if change.leader_epoch < state.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if change.leader_epoch > state.leader_epoch or change.partition_epoch > state.zk_version:
        return ErrorCode.NOT_CONTROLLER
    if already:  # before the partition epoch's fencing: idempotent
        return ErrorCode.NONE
    if change.partition_epoch < state.zk_version:
        return ErrorCode.INVALID_UPDATE_VERSION
    if broker_id not in change.isr or not set(change.isr) <= set(replicas):
        return ErrorCode.INVALID_REQUEST
    added = set(change.isr) - set(state.isr)
    if not added <= c.view.online_replicas(tp, added):
        return ErrorCode.INELIGIBLE_REPLICA
    return ErrorCode.NONE


def shutdown_moves(c: ControllerContext, broker_id: int
                   ) -> tuple[dict[TopicPartition, PartitionState], list[TopicPartition]]:
    """(new leaders, partitions left) for a controlled shutdown: replicated partitions the
    stopping broker leads move to another live in-sync replica where there is one."""
    live = set(c.view.brokers)
    moves: dict[TopicPartition, PartitionState] = {}
    remaining: list[TopicPartition] = []
    for tp, state in c.view.states.items():
        replicas = c.view.assignments[tp[0]][tp[1]]
        if state.leader != broker_id or len(replicas) < 2:
            continue
        new = elect_leader(replicas, state, live, c.epoch, exclude=c.shutting_down)
        if new is None:
            remaining.append(tp)
        else:
            moves[tp] = new
    return moves, remaining


Outcome = dict[TopicPartition, tuple[ErrorCode, str]]
Elections = tuple[dict[TopicPartition, PartitionState], Outcome]


def _online(c: ControllerContext, tp: TopicPartition, replicas: list[int]) -> set[int]:
    """The replicas that may lead: broker live and not shutting down, log dir online."""
    return c.view.online_replicas(tp, replicas) - c.shutting_down


def _refused(c: ControllerContext, tp: TopicPartition) -> tuple[ErrorCode, str] | None:
    """Why no election of either type is held for `tp` (None: one may be)."""
    if c.view.assignments.get(tp[0], {}).get(tp[1]) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition"
    if tp[0] in c.deletions:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted"
    return None


def preferred_elections(c: ControllerContext, partitions: list[TopicPartition] | None
                        ) -> Elections:
    """(new states, errors) for moving `partitions` (None: all) to their preferred
    leader."""
    changes: dict[TopicPartition, PartitionState] = {}
    errors: Outcome = {}
    wanted = partitions if partitions is not None else sorted(c.view.states)
    for tp in wanted:
        replicas = c.view.assignments.get(tp[0], {}).get(tp[1])
        state = c.view.states.get(tp)
        refused = _refused(c, tp)
        if refused is not None or replicas is None or state is None:
            errors[tp] = refused or (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition")
            continue
        preferred = replicas[0]
        if state.leader == preferred:
            errors[tp] = (ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE)
        elif preferred not in _online(c, tp, [preferred]) or preferred not in state.isr:
            errors[tp] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                          f"preferred replica {preferred} is not live and in the ISR")
        else:
            changes[tp] = PartitionState(preferred, state.leader_epoch + 1, list(state.isr),
                                         c.epoch, state.zk_version)
    return changes, errors


def unclean_elections(c: ControllerContext, partitions: list[TopicPartition] | None
                      ) -> Elections:
    """(new states, errors) for an unclean election of `partitions` (None: all), as
    Kafka's KafkaController.processReplicaLeaderElection with ElectionType.UNCLEAN: a
    partition whose leader is live needs none (ELECTION_NOT_NEEDED); one without gets the
    first live replica of its ISR in assignment order, else the first live replica, which
    then forms the ISR alone (elect_leader(unclean=True)); with no live replica it stays
    offline (ELIGIBLE_LEADERS_NOT_AVAILABLE). A replica in an offline log dir or on a
    broker shutting down is not live."""
    changes: dict[TopicPartition, PartitionState] = {}
    errors: Outcome = {}
    wanted = partitions if partitions is not None else sorted(c.view.states)
    for tp in wanted:
        refused = _refused(c, tp)
        if refused is not None:
            errors[tp] = refused
            continue
        replicas = c.view.assignments[tp[0]][tp[1]]
        state = c.view.states.get(tp)
        online = _online(c, tp, replicas)
        if state is not None and state.leader in online:
            errors[tp] = (ErrorCode.ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MESSAGE)
            continue
        new = None if state is None else elect_leader(replicas, state, online, c.epoch,
                                                      unclean=True)
        if new is None:
            errors[tp] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                          f"no replica of {tp[0]}-{tp[1]} is live with its log dir online "
                          f"(replicas {','.join(map(str, replicas))})")
        else:
            changes[tp] = new
    return changes, errors


def imbalanced_partitions(c: ControllerContext, threshold_percent: int) -> list[TopicPartition]:
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
def check_target(c: ControllerContext, tp: TopicPartition,
                 target: list[int] | None) -> tuple[ErrorCode, str]:
    if c.view.assignments.get(tp[0], {}).get(tp[1]) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no such partition"
    if tp[0] in c.deletions:  # Kafka's maybeTriggerPartitionReassignment
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, \
            "the topic is queued for deletion: its partitions are not moved"
    if target is None:
        return ErrorCode.NONE, ""
    if not target or len(set(target)) != len(target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the target must list distinct brokers"
    dead = [b for b in target if b not in c.view.brokers]
    if dead:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"brokers {dead} are not live"
    return ErrorCode.NONE, ""


def start(c: ControllerContext, tp: TopicPartition, target: list[int]) -> list[int] | None:
    """Begin (or replace) a reassignment; the replica set to write, or None when the
    partition already has exactly these replicas."""
    current = c.view.assignments[tp[0]][tp[1]]
    existing = c.reassignments.get(tp)
    original = existing.original if existing is not None else list(current)
    if target == original and existing is None:
        return None
    c.reassignments[tp] = Reassignment(list(target), original)
    # the replicas of the set being replaced stay listed until the reassignment completes,
    # so that completing it (or a cancel, whose target is the original set) stops them
    return list(dict.fromkeys([*target, *original, *current]))


def completion(c: ControllerContext, tp: TopicPartition
               ) -> tuple[list[int], PartitionState] | None:
    """When every target replica is in the ISR: (target replicas, the partition's new
    state: a target replica leads, the ISR keeps only target replicas)."""
    r = c.reassignments.get(tp)
    state = c.view.states.get(tp)
    if r is None or state is None or not set(r.target) <= set(state.isr):
        return None
    isr = [b for b in state.isr if b in r.target]
    leader = state.leader if state.leader in r.target else next(
        (b for b in r.target if b in isr and b in c.view.brokers), None)
    if leader is None:  # no live target replica in the ISR yet: wait
        return None
    return list(r.target), PartitionState(leader, state.leader_epoch + 1, isr, c.epoch,
                                          state.zk_version)


async def write_assignment(c: ControllerContext, topic: str) -> None:
    """The topic znode with its current replica sets and the adding / removing replicas of
    its reassignments in progress (fenced by the controller epoch)."""
    partitions = dict(c.view.assignments[topic])
    adding = {p: r.adding for (t, p), r in c.reassignments.items() if t == topic}
    removing = {p: r.removing for (t, p), r in c.reassignments.items() if t == topic}
    await asyncio.to_thread(controller_zk.update_assignment, c.zk, c.epoch_zk_version, topic,
                            partitions, adding, removing)
    c.check_active()


def resume(c: ControllerContext, assignment: zk_topics.TopicAssignment) -> None:
    """A reassignment an earlier controller began (from the topic znode)."""
    for p, replicas in assignment.partitions.items():
        adding = assignment.adding.get(p, [])
        removing = assignment.removing.get(p, [])
        if adding or removing:
            target = [b for b in replicas if b not in removing]
            original = [b for b in replicas if b not in adding]
            c.reassignments[(assignment.name, p)] = Reassignment(target, original)
            log.info("resuming the reassignment of %s-%d to %s", assignment.name, p, target)


# ---- applied on the controller's event task ---------------------------------------------
async def elect_preferred(c: ControllerContext, partitions: list[TopicPartition] | None
                           ) -> Outcome:
    return await elect_leaders(c, partitions, ElectionType.PREFERRED)


async def elect_leaders(c: ControllerContext, partitions: list[TopicPartition] | None,
                        election_type: ElectionType) -> Outcome:
    """ElectLeaders: hold the elections of `election_type` for `partitions` (None: all);
    the outcome for each."""
    unclean = election_type == ElectionType.UNCLEAN
    changes, outcome = (unclean_elections if unclean else preferred_elections)(c, partitions)
    if changes:
        before = {tp: c.view.states.get(tp) for tp in changes}
        await c.write_states(changes, create=False)
        for tp, state in changes.items():
            now = c.view.states.get(tp)
            ok = now is not None and (now.leader, now.leader_epoch) == (state.leader,
                                                                       state.leader_epoch)
            outcome[tp] = (ErrorCode.NONE, "") if ok else (
                ErrorCode.INVALID_UPDATE_VERSION, "the partition changed meanwhile")
            old = before[tp]
            if ok and unclean and old is not None and state.leader not in old.isr:
                log.warning("unclean leader election: %s-%d is led by replica %d, which was "
                            "not in sync (ISR %s): records only the others had are lost",
                            tp[0], tp[1], state.leader, old.isr)
        c.announce(set(changes), is_new=False)
        log.info("%s leader election: %d partition(s) got a new leader",
                 "unclean" if unclean else "preferred", len(changes))
    return outcome

async def reassign(c: ControllerContext, targets: dict[TopicPartition, list[int] | None]
                    ) -> dict[TopicPartition, tuple[ErrorCode, str]]:
    outcome: dict[TopicPartition, tuple[ErrorCode, str]] = {}
    changed: dict[TopicPartition, PartitionState] = {}
    for tp, target in targets.items():
        code, why = check_target(c, tp, target)
        if code == ErrorCode.NONE and target is None:
            existing = c.reassignments.get(tp)
            if existing is None:
                code, why = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "nothing to cancel"
            else:
                target = existing.original
        outcome[tp] = (code, why)
        if code != ErrorCode.NONE or target is None:
            continue
        replica_set = start(c, tp, target)
        state = c.view.states.get(tp)
        if replica_set is None or state is None:
            continue
        c.view.assignments[tp[0]][tp[1]] = replica_set
        changed[tp] = PartitionState(state.leader, state.leader_epoch + 1,
                                     list(state.isr), c.epoch, state.zk_version)
        log.info("reassigning %s-%d to %s (replicas now %s)", tp[0], tp[1], target,
                 replica_set)
    if changed:
        await c.write_states(changed, create=False)
        for topic in {t for t, _p in changed}:
            await write_assignment(c, topic)
        c.announce(set(changed), is_new=False)
    for tp in list(changed):
        await maybe_complete_reassignment(c, tp)
    return outcome

async def maybe_complete_reassignment(c: ControllerContext, tp: TopicPartition) -> None:
    done = completion(c, tp)
    if done is None:
        return
    target, state = done
    removed = [b for b in c.view.assignments[tp[0]][tp[1]] if b not in target]
    c.view.assignments[tp[0]][tp[1]] = target
    del c.reassignments[tp]
    await c.write_states({tp: state}, create=False)
    await write_assignment(c, tp[0])
    c.announce({tp}, is_new=False)
    for b in removed:
        c.send_stop_replica(b, tp[0], {tp[1]: [b]}, deleting_topic=False)
    log.info("reassignment of %s-%d done: replicas %s", tp[0], tp[1], target)
