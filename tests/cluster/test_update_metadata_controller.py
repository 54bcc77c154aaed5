"""What the controller sends (a real KafkaController on a real ZooKeeper; the three brokers
are small servers that decode every request with the real codec, answer it, and keep the
broker's real metadata cache, ZkMetadataCache, up to date from the UpdateMetadata they get):

- its first UpdateMetadata to every broker is full;
- after an ISR change the UpdateMetadata carries that partition only (and every live
  broker); a topic created, its partitions only; a topic deleted, its partitions with
  leader -2 only; a broker leaving or joining, the partitions with a replica on it only,
  and the joining broker a full one;
- after all of it every broker's cache equals a full description of the controller's
  view."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkactl.broker.metadata_cache import BrokerEndpoint
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.cluster import controller_requests as build
from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster import zk_paths
from kafkactl.cluster import zookeeper as zkmod
from kafkactl.cluster.broker_registry import registration
from kafkactl.cluster.controller import KafkaController
from kafkactl.cluster.controller_context import IsrChange
from kafkactl.cluster.topic_state import TopicAssignment
from kafkactl.cluster.zookeeper import encode_json
from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.cluster.test_update_metadata_requests import partition_indexes, snapshot, wire
from tests.cluster.zk import ZooKeeperServer

DEADLINE_S = 20.0


class RecordingBroker:
    """A broker as the controller sees it: every request recorded and answered without
    error; UpdateMetadata applied to a ZkMetadataCache."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.updates: list[dict[str, Any]] = []
        self.requests: list[tuple[int, dict[str, Any]]] = []  # (api key, body), every one
        self.cache = ZkMetadataCache("c", BrokerEndpoint(broker_id, "127.0.0.1", 0))
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                header, pos = codec.decode_request_header(frame)
                body = codec.decode_request(header.api_key, header.api_version, frame, pos)
                writer.write(codec.frame_bytes(codec.encode_response(
                    header.api_key, header.api_version, header.correlation_id,
                    self._answer(header.api_key, body))))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((api_key, body))
        if api_key == ApiKey.UPDATE_METADATA:
            self.updates.append(body)
            self.cache.apply_update_metadata(body)
            return {"error_code": 0}
        if api_key == ApiKey.LEADER_AND_ISR:
            return {"error_code": 0, "topics": []}
        if api_key == ApiKey.STOP_REPLICA:
            return {"error_code": 0, "partition_errors": [
                {"topic_name": t["topic_name"], "partition_index": p["partition_index"],
                 "error_code": 0}
                for t in body["topic_states"] for p in t["partition_states"]]}
        raise AssertionError(f"unexpected request {api_key}")


@pytest.fixture
def sessions(zookeeper: ZooKeeperServer) -> Iterator[list[Any]]:
    """Two ZooKeeper sessions under a chroot of this test: the controller's (broker 1)
    and the other brokers'."""
    connect = f"{zookeeper.connect}/um-{uuid.uuid4().hex[:8]}"
    clients = [zkmod.connect(connect, timeout_s=10, session_timeout_s=6) for _ in (1, 2)]
    yield clients
    for c in clients:
        zkmod.close(c)


def register(zk: Any, broker_id: int, port: int) -> None:
    zk.create(zk_paths.broker(broker_id), encode_json(registration(
        broker_id, "127.0.0.1", port, [("PLAINTEXT", "127.0.0.1", port)])),
        ephemeral=True, makepath=True)


async def until(cond: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while not (got := cond()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
    return got


def rf2(count: int) -> dict[int, list[int]]:
    """Partition p on brokers p%3+1 and (p+1)%3+1."""
    return {p: [p % 3 + 1, (p + 1) % 3 + 1] for p in range(count)}


async def next_update(brokers: dict[int, RecordingBroker], ids: tuple[int, ...],
                      seen: dict[int, int], what: str) -> dict[int, dict[str, Any]]:
    """The next UpdateMetadata each broker in `ids` receives after `seen`."""
    await until(lambda: all(len(brokers[b].updates) > seen[b] for b in ids), what)
    out = {b: brokers[b].updates[seen[b]] for b in ids}
    for b in ids:
        seen[b] += 1
    return out


def test_update_metadata_carries_only_what_changed(sessions: list[Any]) -> None:
    zk1, zk2 = sessions

    async def scenario() -> None:
        brokers = {b: RecordingBroker(b) for b in (1, 2, 3)}
        for r in brokers.values():
            await r.start()
        register(zk1, 1, brokers[1].port)
        for b in (2, 3):
            register(zk2, b, brokers[b].port)
        zk_topics.create_topic(zk1, TopicAssignment("t", rf2(6), uuid.uuid4()), {})
        c = KafkaController(zk1, 1)
        await c.start()
        try:
            seen = {1: 0, 2: 0, 3: 0}
            first = await next_update(brokers, (1, 2, 3), seen, "the first UpdateMetadata")
            for body in first.values():  # a new controller: full to every broker
                assert partition_indexes(body) == {"t": list(range(6))}
            await until(lambda: ("t", 5) in c.view.states, "t's partitions have states")

            # an ISR change: that partition only, and every live broker
            state = c.view.states[("t", 4)]
            (result,) = await c.alter_partition(state.leader, [IsrChange(
                "t", 4, state.leader_epoch, [state.leader], state.zk_version)])
            assert result[1] == ErrorCode.NONE
            for body in (await next_update(brokers, (1, 2, 3), seen, "ISR change")).values():
                assert partition_indexes(body) == {"t": [4]}
                assert body["topic_states"][0]["partition_states"][0]["isr"] == [state.leader]
                assert [b["id"] for b in body["live_brokers"]] == [1, 2, 3]
                assert wire(body)[0] < wire(first[1])[0]

            # a topic created: its partitions only
            zk_topics.create_topic(zk2, TopicAssignment("u", rf2(3), uuid.uuid4()), {})
            for body in (await next_update(brokers, (1, 2, 3), seen, "u created")).values():
                assert partition_indexes(body) == {"u": [0, 1, 2]}

            # a topic deleted: its partitions with leader -2, nothing else
            zk2.create(zk_paths.topic_delete_marker("u"), makepath=True)
            for body in (await next_update(brokers, (1, 2, 3), seen, "u deleted")).values():
                assert partition_indexes(body) == {"u": [0, 1, 2]}
                assert {p["leader"] for p in body["topic_states"][0]["partition_states"]} \
                    == {build.LEADER_DURING_DELETE}
            await until(lambda: zk2.exists(zk_paths.topic("u")) is None, "u's znodes removed")
            assert all(r.cache.topic("u") is None for r in brokers.values())

            # broker 3 leaves: the partitions with a replica on it, to brokers 1 and 2
            on_3 = sorted(p for p, reps in rf2(6).items() if 3 in reps)
            zk2.delete(zk_paths.broker(3))
            for body in (await next_update(brokers, (1, 2), seen, "3 leaves")).values():
                assert partition_indexes(body) == {"t": on_3}
                assert [b["id"] for b in body["live_brokers"]] == [1, 2]
                for p in body["topic_states"][0]["partition_states"]:
                    assert p["offline_replicas"] == [3] and p["leader"] in (1, 2)

            # broker 3 back: a full one to it; the partitions it hosts to the others
            seen[3] = len(brokers[3].updates)
            register(zk2, 3, brokers[3].port)
            back = await next_update(brokers, (1, 2, 3), seen, "3 back")
            assert partition_indexes(back[3]) == {"t": list(range(6))}
            for b in (1, 2):
                assert partition_indexes(back[b]) == {"t": on_3}

            # every broker's cache is what a full description of the view gives
            def agreed() -> bool:
                full = build.update_metadata(c.view, 1)
                reference = ZkMetadataCache("c", BrokerEndpoint(1, "127.0.0.1", 0))
                reference.apply_update_metadata(wire(full)[1])
                return all(snapshot(r.cache) == snapshot(reference)
                           for r in brokers.values())
            await until(agreed, "every cache equals the controller's view")
            assert sorted(c.view.assignments) == ["t"]
        finally:
            await c.stop()
            for r in brokers.values():
                await r.stop()

    asyncio.run(scenario())
