"""Controller writes fenced by the controller epoch, on a real ZooKeeper (two controllers
in this process, each on a ZooKeeper session of its own; the brokers they would talk to are
not running, so their requests to brokers are only queued and retried):

- a controller whose session expires is replaced; a write it still had in flight (the
  epoch version it won with) is refused by the epoch check and the new controller's state
  stays;
- a controller whose epoch is bumped under it answers a request (a reassignment) with
  NotControllerError, not a ZooKeeper traceback, and resigns; nothing it decided lands;
- a broker whose own registration is missing for its session does not stand for election.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from kafkactl.cluster import controller_zk, zk_paths
from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster import zookeeper as zkmod
from kafkactl.cluster.broker_registry import registration
from kafkactl.cluster.controller import KafkaController, NotControllerError
from kafkactl.cluster.controller_zk import ControllerMovedError
from kafkactl.cluster.topic_state import PartitionState, TopicAssignment
from kafkactl.cluster.zookeeper import encode_json
from tests.cluster.zk import ZooKeeperServer

DEADLINE_S = 20.0


@pytest.fixture
def connect(zookeeper: ZooKeeperServer) -> str:
    return f"{zookeeper.connect}/fence-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def sessions(connect: str) -> Iterator[list[Any]]:
    """Two ZooKeeper sessions: brokers 1 and 2."""
    clients = [zkmod.connect(connect, timeout_s=10, session_timeout_s=4) for _ in (1, 2)]
    yield clients
    for c in clients:
        zkmod.close(c)


def register(zk: Any, broker_id: int) -> None:
    zk.create(zk_paths.broker(broker_id), encode_json(registration(
        broker_id, "127.0.0.1", 1, [("PLAINTEXT", "127.0.0.1", 1)])),
        ephemeral=True, makepath=True)


def expire_session(connect: str, zk: Any) -> None:
    """End `zk`'s session from another client holding its id and password: the server
    closes it, and `zk` finds it expired (kazoo then makes a new session)."""
    from kazoo.client import KazooClient

    hosts, chroot = zkmod.split_connect(connect)
    thief = KazooClient(hosts=hosts + chroot, client_id=zk.client_id)
    thief.start(timeout=10)
    thief.stop()
    thief.close()


async def until(cond: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while not (got := cond()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
    return got


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


def make_topic(zk: Any) -> None:
    zk_topics.create_topic(zk, TopicAssignment("t", {0: [1, 2]}, uuid.uuid4()), {})


def test_a_deposed_controllers_late_write_is_refused_and_the_new_state_stays(
        connect: str, sessions: list[Any]) -> None:
    zk1, zk2 = sessions
    register(zk1, 1)
    register(zk2, 2)
    make_topic(zk1)

    async def scenario() -> None:
        a, b = KafkaController(zk1, 1), KafkaController(zk2, 2)
        await a.start()
        await until(lambda: a.active and ("t", 0) in a.view.states, "broker 1 controls")
        await b.start()
        await until(lambda: b.controller_id == 1, "broker 2 sees broker 1 as controller")
        stale_version = a.epoch_zk_version
        stale = PartitionState(1, 99, [1, 2], a.epoch, a.view.states[("t", 0)].zk_version)

        expire_session(connect, zk1)  # broker 1's registration and /controller go with it
        await until(lambda: b.active, "broker 2 takes over")
        await until(lambda: not a.active, "broker 1 resigns")
        await until(lambda: b.view.states.get(("t", 0)) is not None and
                    b.view.states[("t", 0)].leader == 2, "broker 2 leads t-0")
        ours = zk_topics.read_partition_state(zk2, "t", 0)
        assert ours is not None and ours.controller_epoch == b.epoch > a.epoch

        # the write broker 1 still had in flight, on its new session
        await until(lambda: zk1.connected, "broker 1's new session")
        stale.zk_version = ours.zk_version  # even at the right partition version
        with pytest.raises(ControllerMovedError):
            await asyncio.to_thread(controller_zk.write_states, zk1, stale_version,
                                    {("t", 0): stale}, create=False)
        assert zk_topics.read_partition_state(zk2, "t", 0) == ours
        # broker 1 is not registered in its new session: it does not stand again
        await until(lambda: a._waiting_registration, "broker 1 waits for its registration")
        assert not a.active
        await a.stop()
        await b.stop()

    run(scenario)


def test_a_controller_whose_epoch_moved_answers_not_controller_and_resigns(
        sessions: list[Any]) -> None:
    zk1, zk2 = sessions
    register(zk1, 1)
    register(zk2, 2)
    make_topic(zk1)

    async def scenario() -> None:
        a = KafkaController(zk1, 1)
        await a.start()
        await until(lambda: a.active and ("t", 0) in a.view.states, "broker 1 controls")
        before = zk_topics.read_assignment(zk2, "t")
        state_before = zk_topics.read_partition_state(zk2, "t", 0)
        # another controller's epoch, as a successor would have written it
        epoch, version = int(zk2.get(zk_paths.CONTROLLER_EPOCH)[0]), a.epoch_zk_version
        zk2.set(zk_paths.CONTROLLER_EPOCH, str(epoch + 1).encode(), version=version)

        with pytest.raises(NotControllerError):
            await a.request("reassign", ({("t", 0): [2, 1]},))
        assert not a.active or a.epoch_zk_version != version
        after = zk_topics.read_assignment(zk2, "t")
        assert before is not None and after is not None
        assert after.partitions == before.partitions == {0: [1, 2]}
        assert zk_topics.read_partition_state(zk2, "t", 0) == state_before
        await a.stop()

    run(scenario)


def test_a_request_to_a_controller_whose_session_expired_is_not_controller(
        connect: str, sessions: list[Any]) -> None:
    zk1, _zk2 = sessions
    register(zk1, 1)
    make_topic(zk1)

    async def scenario() -> None:
        a = KafkaController(zk1, 1)
        await a.start()
        await until(lambda: a.active and ("t", 0) in a.view.states, "broker 1 controls")
        expire_session(connect, zk1)
        await until(lambda: a._sessions_lost > 0, "kazoo reports the session lost")
        with pytest.raises(NotControllerError):
            await a.request("reassign", ({("t", 0): [1]},))
        await until(lambda: not a.active, "broker 1 resigns")
        await a.stop()

    run(scenario)
