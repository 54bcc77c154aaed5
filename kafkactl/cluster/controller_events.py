"""The controller's events (Kafka's sealed ControllerEvent): one frozen dataclass per kind.
ZooKeeper watches and the session listener only queue them; the controller's one event
task takes them in order and alone changes controller state (controller.py `_handle`, one
`match`). Requests from brokers and operators carry the future their answer goes to."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kafkactl.cluster.controller_context import IsrChange
from kafkactl.cluster.partition_election import ElectionType

log = logging.getLogger("kafkactl.controller")

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
class LogDirEventNotification:
    """/log_dir_event_notification changed: a broker took a log dir offline."""


@dataclass(frozen=True)
class AutoRebalance:
    """leader.imbalance.check.interval.seconds passed."""


@dataclass(frozen=True)
class UncleanLeaderElectionEnable:
    """This broker's dynamic config (the cluster default or its own) changed: if its
    unclean.leader.election.enable is true, elect a leader for every offline partition
    that may now have one (Kafka's UncleanLeaderElectionEnable)."""


@dataclass(frozen=True)
class TopicUncleanLeaderElectionEnable:
    """A topic's configs changed, not setting unclean.leader.election.enable false: elect a
    leader for its offline partitions that may now have one (Kafka's
    TopicUncleanLeaderElectionEnable, sent when the topic sets it true)."""

    topic: str


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
class ReplicasOffline:
    """A broker answered LeaderAndIsr with KAFKA_STORAGE_ERROR for these partitions: their
    replica there is in a log dir it has offline (KIP-112)."""

    broker_id: int
    broker_epoch: int
    partitions: frozenset[TopicPartition]


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
    election_type: ElectionType
    future: asyncio.Future[Any] = field(hash=False, compare=False)


@dataclass(frozen=True)
class Reassign:
    targets: dict[TopicPartition, list[int] | None] = field(hash=False)
    future: asyncio.Future[Any] = field(hash=False, compare=False)


PlainEvent = (Elect | Expire | BrokerChange | TopicChange | TopicDeletion | AutoRebalance
              | UncleanLeaderElectionEnable | LogDirEventNotification)
RequestEvent = ControlledShutdown | AlterPartition | ElectLeaders | Reassign
ControllerEvent = (PlainEvent | PartitionModification | TopicUncleanLeaderElectionEnable
                   | ReplicaStopped | ReplicasOffline | RequestEvent)
REQUESTS = (ControlledShutdown, AlterPartition, ElectLeaders, Reassign)
PLAIN = (Elect, Expire, BrokerChange, TopicChange, TopicDeletion, AutoRebalance,
         UncleanLeaderElectionEnable)


def request_event(kind: str, args: tuple[Any, ...], future: asyncio.Future[Any]
                  ) -> RequestEvent:
    """The event of a request by name (controlled_shutdown, alter_partition,
    elect_leaders, reassign) and its arguments."""
    if kind == "controlled_shutdown":
        return ControlledShutdown(args[0], future)
    if kind == "alter_partition":
        return AlterPartition(args[0], args[1], future)
    if kind == "elect_leaders":  # (partitions or None for all, ElectionType)
        return ElectLeaders(args[0], ElectionType(args[1]), future)
    if kind == "reassign":
        return Reassign(args[0], future)
    raise ValueError(f"unknown controller request {kind!r}")


class EventManager:
    """Kafka's ControllerEventManager: one queue, one consumer task. `put` may be called
    from any thread (kazoo's); a plain event already queued is not queued twice.
    `clear_and_put` (session expiry) refuses everything queued and puts its event first.
    A handler that raises is reported to `failed`; when that asks for it the event is
    queued again after `retry_after_s` by a timer, so the events behind it do not wait."""

    def __init__(self, handle: Callable[[ControllerEvent], Awaitable[None]],
                 failed: Callable[[ControllerEvent, Exception], bool],
                 refuse: Callable[[RequestEvent, str], None], retry_after_s: float) -> None:
        self._handle = handle
        self._failed = failed
        self._refuse = refuse
        self.retry_after_s = retry_after_s
        self._queue: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._pending: set[type] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._retries: set[asyncio.TimerHandle] = set()

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        if self._task is None:
            self._task = loop.create_task(self._run())

    def stop(self) -> None:
        """Stop consuming: the request in hand and every queued one are refused."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()
        self.drain()

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the event loop (from any thread)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn)

    def put(self, event: ControllerEvent) -> None:
        def put() -> None:
            if isinstance(event, PLAIN):
                if type(event) in self._pending:
                    return
                self._pending.add(type(event))
            self._queue.put_nowait(event)
        if self._loop is None or self._loop.is_closed():
            return
        try:
            if asyncio.get_running_loop() is self._loop:
                put()
                return
        except RuntimeError:
            pass
        self._loop.call_soon_threadsafe(put)

    def clear_and_put(self, event: ControllerEvent) -> None:
        """(on the loop) Nothing queued before `event` runs after it."""
        self.drain()
        self.put(event)

    def drain(self) -> None:
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if isinstance(event, REQUESTS):
                self._refuse(event, "")
        self._pending.clear()

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            if isinstance(event, PLAIN):
                self._pending.discard(type(event))
            try:
                await self._handle(event)
            except asyncio.CancelledError:  # stop(): the request in hand is answered too
                if isinstance(event, REQUESTS):
                    self._refuse(event, "the controller is stopping")
                raise
            except Exception as e:
                if self._failed(event, e):
                    self._retry(event)

    def _retry(self, event: ControllerEvent) -> None:
        assert self._loop is not None

        def again() -> None:
            self._retries.discard(handle)
            self.put(event)
        handle = self._loop.call_later(self.retry_after_s, again)
        self._retries.add(handle)
