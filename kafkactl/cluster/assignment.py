"""Replica assignment for new topics and partitions (rack-unaware, as Kafka's
AdminUtils.assignReplicasToBrokers): partition p's first replica is the broker at
(start + p) mod n; followers are placed at a shift that grows by one after every n
partitions, so leaders and followers both spread evenly over the brokers."""

from __future__ import annotations

import random


class AssignmentError(ValueError):
    """The assignment asked for cannot be made (the message says why)."""


def _follower_index(first: int, shift: int, replica: int, n: int) -> int:
    return (first + 1 + (shift + replica) % (n - 1)) % n


def assign_replicas(brokers: list[int], num_partitions: int, replication_factor: int, *,
                    first_partition: int = 0, start_index: int | None = None,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """partition -> replicas (the first is the preferred leader) for partitions
    first_partition .. first_partition + num_partitions - 1."""
    if num_partitions < 1:
        raise AssignmentError("the number of partitions must be at least 1")
    if replication_factor < 1:
        raise AssignmentError("the replication factor must be at least 1")
    ids = sorted(set(brokers))
    n = len(ids)
    if replication_factor > n:
        raise AssignmentError(
            f"replication factor {replication_factor} is larger than the {n} available "
            f"broker{'s' if n != 1 else ''}")
    rng = rng or random.Random()
    start = start_index if start_index is not None else rng.randrange(n)
    shift = start_index if start_index is not None else rng.randrange(n)
    out: dict[int, list[int]] = {}
    for p in range(first_partition, first_partition + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        replicas += [ids[_follower_index(first, shift, j, n)]
                     for j in range(replication_factor - 1)]
        out[p] = replicas
    return out
