"""The controller's events (Kafka's sealed ControllerEvent): one frozen dataclass per kind.
ZooKeeper watches and the session listener only queue them; the controller's one event
task takes them in order and alone changes controller state (controller.py `_handle`, one
`match`). Requests from brokers and operators carry the future their answer goes to."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kafkactl.cluster.controller_admin import IsrChange

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Elect:
    """/controller changed, or a new ZooKeeper session began: stand for election."""


@dataclass(frozen=True)
class Expire:
    """This broker's ZooKeeper session expired: resign (queued ahead of everything)."""


@dataclass(frozen=True)
class BrokerChange:
    """/brokers/ids changed."""


@dataclass(frozen=True)
class TopicChange:
    """/brokers/topics changed."""


@dataclass(frozen=True)
class TopicDeletion:
    """/admin/delete_topics changed."""


@dataclass(frozen=True)
class AutoRebalance:
    """leader.imbalance.check.interval.seconds passed."""


@dataclass(frozen=True)
class PartitionModification:
    """A topic znode changed (partitions added)."""

    topic: str


@dataclass(frozen=True)
class ReplicaStopped:
    """A broker answered the StopReplica of a topic deletion."""

    topic: str
    broker_id: int
    response: dict[str, Any] = field(hash=False)


@dataclass(frozen=True)
class ControlledShutdown:
    broker_id: int
    future: asyncio.Future[Any] = field(hash=False, compare=False)


@dataclass(frozen=True)
class AlterPartition:
    broker_id: int
    changes: list[IsrChange] = field(hash=False)
    future: asyncio.Future[Any] = field(hash=False, compare=False)


@dataclass(frozen=True)
class ElectLeaders:
    partitions: list[TopicPartition] | None = field(hash=False)
    future: asyncio.Future[Any] = field(hash=False, compare=False)


@dataclass(frozen=True)
class Reassign:
    targets: dict[TopicPartition, list[int] | None] = field(hash=False)
    future: asyncio.Future[Any] = field(hash=False, compare=False)


PlainEvent = Elect | Expire | BrokerChange | TopicChange | TopicDeletion | AutoRebalance
RequestEvent = ControlledShutdown | AlterPartition | ElectLeaders | Reassign
ControllerEvent = PlainEvent | PartitionModification | ReplicaStopped | RequestEvent
REQUESTS = (ControlledShutdown, AlterPartition, ElectLeaders, Reassign)
PLAIN = (Elect, Expire, BrokerChange, TopicChange, TopicDeletion, AutoRebalance)
