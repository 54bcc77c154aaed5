"""What a controller decides about topics: creation, deletion, partition counts, configs.

`TopicAdmin` is the strategy the request handlers call (CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs, Metadata auto-creation). `StandaloneTopicAdmin`
(kafkactl.broker.standalone_topic_admin) is the trivial controller of a one-broker cluster;
in ZooKeeper mode a ZkTopicAdmin writes the decisions to znodes and the controller then
tells each broker which partitions to host (kafkactl.broker.partition_store).

The decisions every controller makes (Kafka's ZkAdminManager and AdminUtils) are functions
here, over the live brokers (a standalone broker: itself), so that both strategies decide
alike and each adds only what truly differs: `plan_new_topic` and `plan_added_partitions`
(request checks, then replica assignment), `requested_overrides`, `check_config_changes`,
`check_new_name`. Failures are `TopicError`s carrying the Kafka error code. Both write
their decisions through a metadata store (kafkactl.cluster.metadata_store).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kafkactl.cluster.assignment import AssignmentError, assign_replicas
from kafkactl.log.config_def import validate_topic_configs
from kafkactl.log.errors import ConfigError
from kafkactl.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
NO_NUM_PARTITIONS = NO_REPLICATION_FACTOR = -1  # CreateTopics: "use the broker default"

ReplicaAssignment = tuple[int, list[int]]  # (partition index, broker ids)


class TopicError(KafkaError):
    """A topic operation that fails with the Kafka error `code`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    replication_factor: int = 1


class TopicAdmin(Protocol):
    """The controller's topic decisions, as the request handlers need them."""

    async def call(self, method: Callable[..., T], *args: Any, timeout_s: float,
                   **kwargs: Any) -> T:
        """`method(*args, **kwargs)` of this admin for a request handler: where it waits on
        ZooKeeper, on a worker thread, so that a slow or absent ZooKeeper holds up this
        request only; TopicError REQUEST_TIMED_OUT after `timeout_s` (at least ten
        seconds: it may still be done)."""

    def topic(self, name: str) -> TopicState | None:
        """The topic's state, or None if it does not exist."""

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     assignments: list[ReplicaAssignment],
                     configs: Sequence[tuple[str, str | None]], *,
                     validate_only: bool = False) -> TopicState:
        """CreateTopics: -1 partitions / replication factor mean the broker defaults;
        `assignments` (partition index, broker ids) replaces both; `configs` are the
        request's (name, value) pairs."""

    def delete_topic(self, name: str) -> TopicState:
        """DeleteTopics: the deleted topic's state."""

    def add_partitions(self, name: str, count: int, assignments: list[list[int]], *,
                       validate_only: bool = False) -> None:
        """CreatePartitions: grow the topic to `count` partitions."""

    def auto_create(self, name: str, num_partitions: int | None = None,
                    configs: Mapping[str, str] | None = None) -> TopicState:
        """A topic the broker creates itself (auto.create.topics.enable, or an internal
        topic such as __consumer_offsets), without a client's request checks."""

    def set_configs(self, name: str, configs: Mapping[str, str], *,
                    validate_only: bool = False) -> None:
        """AlterConfigs: replace the topic's overrides."""

    async def settled(self, created: Sequence[str], deleted: Sequence[str],
                      timeout_ms: int) -> dict[str, ErrorCode]:
        """Wait (at most timeout_ms) until created topics are served and deleted ones are
        gone; the topics still pending, with REQUEST_TIMED_OUT."""


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name is {len(name)} characters; the limit is {MAX_NAME_LENGTH}")
    if not _LEGAL.match(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} may only contain ASCII letters, digits, "
                         "'.', '_' and '-'")


def check_assignments(num_partitions: int, replication_factor: int,
                      assignments: list[ReplicaAssignment]) -> None:
    """A CreateTopics entry gives either assignments or counts, and assignments cover
    partitions 0..N-1, each with as many replicas."""
    if not assignments:
        return
    if num_partitions != NO_NUM_PARTITIONS or replication_factor != NO_REPLICATION_FACTOR:
        raise TopicError(ErrorCode.INVALID_REQUEST, "give either assignments or "
                         "num_partitions/replication_factor, not both")
    indexes = sorted(index for index, _brokers in assignments)
    for expected, index in enumerate(indexes):
        if index != expected:
            if index < 0:
                problem = f"partition {index} is not valid"
            elif index < expected:
                problem = f"partition {index} is assigned twice"
            else:
                problem = f"partition {expected} is missing"
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"the assigned partitions must be a consecutive 0-based "
                             f"sequence 0..{len(indexes) - 1}: {problem}")
    check_same_replication_factor(sorted(assignments, key=lambda a: a[0]))


def check_same_replication_factor(assignments: Sequence[ReplicaAssignment],
                                  expected: int | None = None) -> None:
    """Every partition has as many replicas as `expected` (default: the first listed), as
    Kafka requires (INVALID_REPLICA_ASSIGNMENT otherwise)."""
    if not assignments:
        return
    first, first_brokers = assignments[0]
    if expected is None:
        expected, reference = len(first_brokers), first
    else:
        reference = 0
    for index, brokers in assignments:
        if len(brokers) != expected:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"inconsistent replication factor between partitions: partition "
                             f"{reference} has {expected} replica{'s' if expected != 1 else ''}"
                             f" while partition {index} has {len(brokers)}")


def requested_overrides(configs: Sequence[tuple[str, str | None]]) -> dict[str, str]:
    """The topic configs of a CreateTopics entry: no null values, only known keys with
    valid values."""
    overrides: dict[str, str] = {}
    for key, value in configs:
        if value is None:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"config {key} has a null value")
        overrides[key] = value
    try:
        validate_topic_configs(overrides)
    except ConfigError as e:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from e
    return overrides


def check_config_changes(current: Mapping[str, str], new: Mapping[str, str]) -> None:
    """AlterConfigs: every key set to a new value is known and valid."""
    changed = {k: v for k, v in new.items() if current.get(k) != v}
    try:
        validate_topic_configs(changed)
    except ConfigError as e:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from e


def check_replication_factor(rf: int, live: Collection[int]) -> None:
    if rf < 1:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "the replication factor must be at least 1")
    if rf > len(live):
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"replication factor {rf} is larger than the {len(live)} live "
                         f"broker{'s' if len(live) != 1 else ''}")


def check_broker_ids(assignments: Iterable[ReplicaAssignment], live: Collection[int]) -> None:
    """Every partition's replica list names distinct live brokers."""
    for index, brokers in assignments:
        if not brokers:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"partition {index} is assigned no broker: a replication factor "
                             "of 0")
        if len(set(brokers)) != len(brokers):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"partition {index} names a broker twice in its replicas "
                             f"{brokers}: each replica needs a broker of its own")
        unknown = sorted({b for b in brokers if b not in live})
        if unknown:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"partition {index} is assigned to unknown broker"
                             f"{'s' if len(unknown) != 1 else ''} "
                             f"{', '.join(map(str, unknown))} (live brokers: "
                             f"{', '.join(map(str, sorted(live))) or 'none'})")
        check_replication_factor(len(brokers), live)


def assign(live: Collection[int], count: int, rf: int, *, first: int = 0,
           start_index: int | None = None) -> dict[int, list[int]]:
    """Replicas for partitions first..first+count-1 spread over the live brokers."""
    try:
        return assign_replicas(list(live), count, rf, first_partition=first,
                               start_index=start_index)
    except AssignmentError as e:
        code = ErrorCode.INVALID_PARTITIONS if count < 1 else \
            ErrorCode.INVALID_REPLICATION_FACTOR
        raise TopicError(code, str(e)) from e


def plan_new_topic(num_partitions: int, replication_factor: int,
                   assignments: list[ReplicaAssignment], *, live: Collection[int],
                   default_partitions: int, default_replication_factor: int,
                   check_count: Callable[[int], None] | None = None
                   ) -> dict[int, list[int]]:
    """CreateTopics' replica assignment: the request's own (checked), or the broker
    defaults for -1, spread over the live brokers. `check_count(n)` vets the number of
    partitions before any assignment is built (a fuzzed count of millions is refused
    before millions of lists are made)."""
    check_assignments(num_partitions, replication_factor, assignments)
    if assignments:
        check_broker_ids(sorted(assignments, key=lambda a: a[0]), live)
        if check_count is not None:
            check_count(len(assignments))
        return {i: list(brokers) for i, brokers in assignments}
    if num_partitions == NO_NUM_PARTITIONS:
        num_partitions = default_partitions
    if replication_factor == NO_REPLICATION_FACTOR:
        replication_factor = default_replication_factor
    check_replication_factor(replication_factor, live)
    if num_partitions < 1:
        raise TopicError(ErrorCode.INVALID_PARTITIONS,
                         "the number of partitions must be at least 1")
    if check_count is not None:
        check_count(num_partitions)
    return assign(live, num_partitions, replication_factor)


def plan_added_partitions(name: str, current: Mapping[int, list[int]], count: int,
                          assignments: list[list[int]], *, live: Sequence[int],
                          check_count: Callable[[int], None] | None = None
                          ) -> dict[int, list[int]]:
    """CreatePartitions' new replicas: the request's own (checked), or as many replicas
    as partition 0 has, spread on from partition 0's leader as Kafka's AdminUtils does.
    `check_count(n)` vets the number of new partitions first."""
    have = len(current)
    if count <= have:
        raise TopicError(ErrorCode.INVALID_PARTITIONS,
                         f"topic {name!r} has {have} partitions; the new count {count} "
                         "must be larger")
    if check_count is not None:
        check_count(count - have)
    if assignments:
        if len(assignments) != count - have:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"{len(assignments)} assignments for {count - have} new "
                             "partitions")
        added = [(have + i, list(b)) for i, b in enumerate(assignments)]
        check_broker_ids(added, live)
        # as many replicas as the topic's partitions have (Kafka: partition 0's)
        check_same_replication_factor(added, len(current[0]))
        return dict(added)
    ordered = sorted(live)
    leader0 = current[0][0]
    start = ordered.index(leader0) if leader0 in ordered else None
    rf = len(current[0])
    check_replication_factor(rf, ordered)
    return assign(ordered, count - have, rf, first=have, start_index=start)


def has_collision_chars(name: str) -> bool:
    """Whether `name` may collide with another topic's (Kafka's Topic.hasCollisionChars)."""
    return "." in name or "_" in name


def check_new_name(name: str, existing: Iterable[str]) -> None:
    """A valid name of no existing topic (TOPIC_ALREADY_EXISTS), not colliding with an
    existing topic's ('.' and '_' are one in metric names: INVALID_TOPIC_EXCEPTION), in
    the order of Kafka's AdminZkClient.validateTopicCreate. `existing`: every topic name
    (the caller says first whether the topic is being deleted)."""
    validate_topic_name(name)
    names = existing if isinstance(existing, (set, frozenset, dict)) else set(existing)
    if name in names:
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    if not has_collision_chars(name):
        return
    norm = name.replace(".", "_")
    colliding = sorted(other for other in names if other.replace(".", "_") == norm)
    if colliding:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic {name!r} collides with existing "
                         f"topic{'s' if len(colliding) > 1 else ''} "
                         f"{', '.join(map(repr, colliding))} ('.' and '_' are "
                         "interchangeable in metric names)")
