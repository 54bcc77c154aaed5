"""Partition assignors run by the group leader (client side, as in Kafka).

* `range` is the seed's consumer rebalancing algorithm, per topic: sort the partitions, sort
  the members subscribed to the topic, give each member a contiguous block of
  size(P) // size(C) partitions, and one extra partition to each of the first
  size(P) % size(C) members (Kafka's RangeAssignor).
* `roundrobin` deals all subscribed partitions, sorted by (topic, partition), to the sorted
  members in turn, skipping members not subscribed to a partition's topic.

Members sort by group.instance.id when they have one, then by member id, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class MemberSubscription:
    member_id: str
    topics: tuple[str, ...]
    group_instance_id: str | None = None
    owned: tuple[TopicPartition, ...] = field(default=())

    @property
    def sort_key(self) -> tuple[int, str, str]:
        if self.group_instance_id:
            return (0, self.group_instance_id, self.member_id)
        return (1, "", self.member_id)


Assignment = dict[str, list[TopicPartition]]


def _sorted_members(members: Sequence[MemberSubscription]) -> list[MemberSubscription]:
    return sorted(members, key=lambda m: m.sort_key)


def range_assign(partitions: Mapping[str, Sequence[int]],
                 members: Sequence[MemberSubscription]) -> Assignment:
    out: Assignment = {m.member_id: [] for m in members}
    topics = sorted({t for m in members for t in m.topics if t in partitions})
    for topic in topics:
        consumers = _sorted_members([m for m in members if topic in m.topics])
        parts = sorted(partitions[topic])
        per, extra = divmod(len(parts), len(consumers))
        for i, m in enumerate(consumers):
            start = per * i + min(i, extra)
            length = per + (1 if i < extra else 0)
            out[m.member_id].extend((topic, p) for p in parts[start:start + length])
    return out


def roundrobin_assign(partitions: Mapping[str, Sequence[int]],
                      members: Sequence[MemberSubscription]) -> Assignment:
    out: Assignment = {m.member_id: [] for m in members}
    ordered = _sorted_members(members)
    if not ordered:
        return out
    topics = sorted({t for m in members for t in m.topics if t in partitions})
    i = 0
    for topic in topics:
        for p in sorted(partitions[topic]):
            for _ in range(len(ordered)):
                m = ordered[i % len(ordered)]
                i += 1
                if topic in m.topics:
                    out[m.member_id].append((topic, p))
                    break
    return out


ASSIGNORS = {"range": range_assign, "roundrobin": roundrobin_assign}

# partition.assignment.strategy names, lowercased -> the assignor of ASSIGNORS that does the
# same: librdkafka's names and the Java client's classes (Kafka's MirrorMaker recommended
# `partition.assignment.strategy=org.apache.kafka.clients.consumer.RoundRobinAssignor`).
# The -X parser (kafkactl.cli._properties) and the mirror's consumer properties read it.
ASSIGNOR_NAMES = {
    "range": "range", "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "roundrobin": "roundrobin", "org.apache.kafka.clients.consumer.roundrobinassignor":
        "roundrobin",
}


def assign(name: str, partitions: Mapping[str, Sequence[int]],
           members: Sequence[MemberSubscription]) -> Assignment:
    try:
        fn = ASSIGNORS[name]
    except KeyError:
        raise ValueError(f"unknown assignor {name!r}; known: {', '.join(ASSIGNORS)}") from None
    return fn(partitions, members)
