"""The controller's leadership decisions, as pure functions (no ZooKeeper, no I/O).

Kafka's rules (ZooKeeper mode):
- a new partition's leader is its first live replica in assignment order; the ISR is its
  live replicas;
- an offline partition's leader is the first replica in assignment order that is live and
  in the ISR; if there is none, the partition stays offline (leader -1) unless unclean
  leader election is enabled, which takes the first live replica and may lose data;
- a replica that dies leaves the ISR, except the last member, which stays so that the data
  it holds is known (leader -1 until it or another ISR member returns);
- every change of leader or ISR bumps the leader epoch.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import IntEnum

from kafkactl.cluster.topic_state import NO_LEADER, PartitionState


class ElectionType(IntEnum):
    """ElectLeaders' election_type (KIP-460)."""

    PREFERRED = 0  # the first replica, when it is live and in the ISR
    UNCLEAN = 1  # a partition without a live leader: an in-sync replica, else any live one


# ELECTION_NOT_NEEDED's message, the same from a standalone broker and a cluster's controller
# (Kafka's: Errors.ELECTION_NOT_NEEDED's default message)
ELECTION_NOT_NEEDED_MESSAGE = "Leader election not needed for topic partition."


def new_partition_state(replicas: list[int], live: Collection[int],
                        controller_epoch: int) -> PartitionState | None:
    """The first state of a partition, or None when none of its replicas is live."""
    alive = [r for r in replicas if r in live]
    if not alive:
        return None
    return PartitionState(alive[0], 0, alive, controller_epoch)


def elect_leader(replicas: list[int], state: PartitionState, live: Collection[int],
                 controller_epoch: int, *, unclean: bool = False,
                 exclude: Collection[int] = ()) -> PartitionState | None:
    """A new state with a live leader for a partition whose leader is gone (or is being
    shut down: `exclude`); None when no replica may lead (the partition stays offline)."""
    eligible = [r for r in replicas if r in live and r not in exclude]
    in_isr = [r for r in eligible if r in state.isr]
    if in_isr:
        leader = in_isr[0]
        isr = [r for r in state.isr if r in live and r not in exclude]
    elif unclean and eligible:
        leader = eligible[0]
        isr = [leader]
    else:
        return None
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch,
                          state.zk_version)


def remove_replicas(state: PartitionState, dead: Collection[int],
                    controller_epoch: int) -> PartitionState | None:
    """The state after the replicas `dead` went away: they leave the ISR (the last member
    stays), and a dead leader leaves the partition without one. None: nothing changes."""
    leader = NO_LEADER if state.leader in dead else state.leader
    isr = [r for r in state.isr if r not in dead]
    if not isr and state.isr:
        isr = [state.isr[0]] if state.leader not in state.isr else [state.leader]
    if leader == state.leader and isr == state.isr:
        return None
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch,
                          state.zk_version)
