"""Session expiry as a barrier, on a real ZooKeeper (two controllers in this process, each
on a session of its own; their brokers are not running, so requests to brokers are only
queued): broker 1's controller session expires while its ISR write is in flight.

- The write, let through only once broker 2 has taken over and kazoo has made broker 1 a
  new session, is refused by the controller epoch check (it runs on the new session, at
  the partition's current version: the epoch alone refuses it); the caller gets
  NotControllerError; broker 2's state stays in ZooKeeper.
- The request queued behind it on the old session is refused without being handled, and
  the first event the controller handles after the in-flight one is the expiry: nothing of
  the new session runs before it resigned.
- Broker 1 stands again only once its own registration is back in its new session; then,
  when broker 2 resigns, it wins with a higher epoch and loads broker 2's state.

The only stand-in: `controller_zk.write_states` is wrapped so that broker 1's write waits
for a signal before running (the real write then runs unchanged); the expiry is real (a
second client takes over the session and closes it)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.cluster import controller_zk
from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster import zookeeper as zkmod
from kafkactl.cluster.controller import KafkaController, NotControllerError
from kafkactl.cluster.controller_context import IsrChange
from kafkactl.cluster.controller_events import AlterPartition, ControllerEvent, Expire
from kafkactl.cluster.controller_zk import ControllerMovedError
from kafkactl.cluster.topic_state import TopicAssignment
from kafkactl.protocol.api_keys import ApiKey
from tests.cluster.test_controller_fencing import expire_session, register, until
from tests.cluster.test_update_metadata_controller import RecordingBroker, partition_indexes
from tests.cluster.test_update_metadata_controller import register as register_at
from tests.cluster.zk import ZooKeeperServer


class RecordingController(KafkaController):
    """A KafkaController that notes each event its event task takes, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handled: list[ControllerEvent] = []

    async def _handle(self, event: ControllerEvent) -> None:
        self.handled.append(event)
        await super()._handle(event)


@pytest.fixture
def connect(zookeeper: ZooKeeperServer) -> str:
    return f"{zookeeper.connect}/barrier-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def sessions(connect: str) -> Iterator[list[Any]]:
    clients = [zkmod.connect(connect, timeout_s=10, session_timeout_s=4) for _ in (1, 2)]
    yield clients
    for c in clients:
        zkmod.close(c)


def test_session_expiry_mid_write_is_a_barrier(connect: str, sessions: list[Any],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    zk1, zk2 = sessions
    register(zk1, 1)
    register(zk2, 2)
    zk_topics.create_topic(zk1, TopicAssignment("t", {0: [1, 2]}, uuid.uuid4()), {})

    entered, release = threading.Event(), threading.Event()
    real_write = controller_zk.write_states

    def gated_write(zk: Any, *args: Any, **kwargs: Any) -> Any:
        if zk is zk1 and not release.is_set():
            entered.set()
            release.wait(60)
        return real_write(zk, *args, **kwargs)

    async def scenario() -> None:
        a, b = RecordingController(zk1, 1), KafkaController(zk2, 2)
        await a.start()
        await until(lambda: a.active and ("t", 0) in a.view.states, "broker 1 controls")
        await b.start()
        await until(lambda: b.controller_id == 1, "broker 2 sees broker 1 as controller")
        old_epoch = a.epoch
        state = a.view.states[("t", 0)]
        assert state.leader == 1 and sorted(state.isr) == [1, 2]
        shrink = IsrChange("t", 0, state.leader_epoch, [1], state.zk_version)

        monkeypatch.setattr(controller_zk, "write_states", gated_write)
        in_flight = asyncio.ensure_future(a.alter_partition(1, [shrink]))
        await until(entered.is_set, "broker 1's ISR write in flight")
        queued = asyncio.ensure_future(a.alter_partition(1, [shrink]))
        await asyncio.sleep(0)  # queued behind the write in flight
        assert not queued.done()

        expire_session(connect, zk1)
        with pytest.raises(NotControllerError):  # drained, never handled
            await asyncio.wait_for(queued, 20)
        await until(lambda: b.active, "broker 2 takes over")
        await until(lambda: b.view.states.get(("t", 0)) is not None
                    and b.view.states[("t", 0)].leader == 2, "broker 2 leads t-0")
        theirs = zk_topics.read_partition_state(zk2, "t", 0)
        assert theirs is not None and theirs.leader == 2 and theirs.isr == [2]
        await until(lambda: zk1.connected, "broker 1's new session")

        # the write goes out now, on the new session, at the partition's current version
        shrink_now = IsrChange("t", 0, state.leader_epoch, [1], theirs.zk_version)
        assert a.active  # still handling the write: the expiry waits behind it
        release.set()
        with pytest.raises((NotControllerError, ControllerMovedError)):
            await asyncio.wait_for(in_flight, 20)
        await until(lambda: not a.active, "broker 1 resigns")
        assert zk_topics.read_partition_state(zk2, "t", 0) == theirs

        # in order: the write, then the expiry; the queued request never ran
        at = next(i for i, e in enumerate(a.handled) if isinstance(e, AlterPartition))
        assert isinstance(a.handled[at + 1], Expire), a.handled
        assert sum(isinstance(e, AlterPartition) for e in a.handled) == 1

        # a request of the new session to broker 1 is refused: it is not the controller
        with pytest.raises(NotControllerError):
            await a.alter_partition(1, [shrink_now])
        # it stands only once registered in its new session, and wins once 2 resigns
        await until(lambda: a._waiting_registration, "broker 1 waits for its registration")
        register(zk1, 1)
        await until(lambda: a.controller_id == 2 and not a._waiting_registration,
                    "broker 1 registered, broker 2 still the controller")
        assert not a.active
        await b.stop()
        await until(lambda: a.active and ("t", 0) in a.view.states,
                    "broker 1 controls again")
        assert a.epoch > b.epoch > old_epoch
        assert a.view.states[("t", 0)].leader in (1, 2)
        now = zk_topics.read_partition_state(zk1, "t", 0)
        assert now is not None and now.leader_epoch >= theirs.leader_epoch
        await a.stop()

    asyncio.run(scenario())


def test_a_controller_whose_load_fails_starts_over(sessions: list[Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """ZooKeeper fails the new controller's load once (ConnectionLoss, as in a short
    outage): it does not stay active with a half-loaded view (its retried Elect would find
    /controller still its own and change nothing, and the brokers would never get the full
    UpdateMetadata and LeaderAndIsr of its epoch); it resigns, and the retry loads
    everything and sends them. Broker 1 is a recording server (it answers every request);
    the only stand-in: `controller_zk.read_topics` raises once before the real read."""
    from kazoo.exceptions import ConnectionLoss

    zk1, _zk2 = sessions
    zk_topics.create_topic(zk1, TopicAssignment("t", {0: [1], 1: [1]}, uuid.uuid4()), {})
    failures: list[Exception] = [ConnectionLoss("injected")]
    real_read = controller_zk.read_topics

    def flaky_read(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return real_read(*args, **kwargs)

    monkeypatch.setattr(controller_zk, "read_topics", flaky_read)

    async def scenario() -> None:
        broker = RecordingBroker(1)
        await broker.start()
        register_at(zk1, 1, broker.port)
        a = KafkaController(zk1, 1)
        await a.start()
        try:
            def full_leader_and_isr() -> bool:
                return any(key == ApiKey.LEADER_AND_ISR and body["type"] == 1
                           and body["controller_epoch"] == a.epoch
                           for key, body in broker.requests)
            await until(full_leader_and_isr, "a full LeaderAndIsr of the controller's epoch")
            assert not failures and a.active
            first = next(body for key, body in broker.requests
                         if key == ApiKey.UPDATE_METADATA
                         and body["controller_epoch"] == a.epoch)
            assert partition_indexes(first) == {"t": [0, 1]}
            assert sorted(a.view.assignments) == ["t"] and a.view.brokers.keys() == {1}
        finally:
            await a.stop()
            await broker.stop()

    asyncio.run(scenario())
