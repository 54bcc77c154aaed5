"""A large CreateTopics (or CreatePartitions) makes its partitions on the event loop in
slices: other work runs in between, the topic (or its new partitions) enters the metadata
only when whole, a restart finishes an interrupted creation (or growth), and a deletion
stops one. Ordering is asserted, never timing."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkactl.broker import standalone_topic_admin
from kafkactl.broker.topic_admin import TopicError
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.codec import decode_response, encode_request
from kafkactl.protocol.errors import ErrorCode
from tests.broker.test_topic_admin import Standalone, _open
from tests.conftest import BrokerProcess

N = 300


@pytest.fixture
def one_per_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Yield after every partition made; topics of more than 10 partitions go in slices."""
    monkeypatch.setattr(standalone_topic_admin, "CREATE_SLICE_S", 0.0)
    monkeypatch.setattr(standalone_topic_admin, "INLINE_PARTITIONS", 10)


async def _settled_meanwhile(s: Standalone, name: str, seen: list[int],
                             look: Callable[[int], None]) -> dict[str, ErrorCode]:
    """Wait for `name` to settle while another task runs between the slices: it appends
    how many partitions are hosted each time to `seen` and hands the count to `look`."""
    done = asyncio.Event()

    async def other_client() -> None:
        while not done.is_set():
            seen.append(len(s.store.partitions))
            look(seen[-1])
            await asyncio.sleep(0)

    other = asyncio.create_task(other_client())
    late = await s.admin.settled([name], [], 60_000)
    done.set()
    await other
    return late


def test_other_work_runs_between_slices(tmp_path: Path, one_per_slice: None) -> None:
    s = _open(tmp_path)
    seen: list[int] = []

    def look(hosted: int) -> None:
        if hosted < N:  # not in the metadata until whole
            assert s.cache.topic("big") is None

    async def main() -> dict[str, ErrorCode]:
        state = s.admin.create_topic("big", N, 1, [], [])
        assert state.num_partitions == N and s.admin.creating("big")
        assert s.admin.auto_create("big") == state  # no TOPIC_ALREADY_EXISTS meanwhile
        return await _settled_meanwhile(s, "big", seen, look)

    try:
        assert asyncio.run(main()) == {}
        assert any(0 < n < N for n in seen)  # ran while the creation was half done
        meta = s.cache.topic("big")
        assert meta is not None and len(meta.partitions) == N
        assert not s.admin.creating("big")
    finally:
        s.log_manager.shutdown()


async def _until_some_hosted(s: Standalone) -> None:
    while not s.store.partitions:  # the first worker-thread step has finished
        await asyncio.sleep(0.001)


def test_a_restart_makes_what_an_interrupted_creation_left(tmp_path: Path,
                                                           one_per_slice: None) -> None:
    s = _open(tmp_path)

    async def main() -> None:
        s.admin.create_topic("big", N, 1, [], [])
        await _until_some_hosted(s)
        await s.admin.stop_background_work()  # shutdown while it runs

    asyncio.run(main())
    assert 0 < len(s.store.partitions) < N
    assert not s.admin.creating("big")
    s.log_manager.shutdown()
    s = _open(tmp_path)
    try:
        meta = s.cache.topic("big")
        assert meta is not None and len(meta.partitions) == N
        assert len(s.store.partitions) == N
    finally:
        s.log_manager.shutdown()


def test_deleting_a_topic_being_created_stops_it(tmp_path: Path, one_per_slice: None) -> None:
    s = _open(tmp_path)

    async def main() -> dict[str, ErrorCode]:
        s.admin.create_topic("big", N, 1, [], [])
        waiter = asyncio.create_task(s.admin.settled(["big"], [], 60_000))
        await _until_some_hosted(s)
        s.admin.delete_topic("big")
        assert await s.admin.settled([], ["big"], 60_000) == {}
        return await waiter

    try:
        late = asyncio.run(main())
        assert late == {"big": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert not s.store.partitions and s.cache.topic("big") is None
        assert not s.log_manager.logs  # the logs made but not hosted yet went too
        assert "big" not in s.admin.metadata.deleting  # the deletion is finished
    finally:
        s.log_manager.shutdown()
    s = _open(tmp_path)  # and a restart brings nothing back
    try:
        assert s.cache.topic("big") is None and not s.store.partitions
    finally:
        s.log_manager.shutdown()


def test_a_large_deletion_runs_in_the_background(tmp_path: Path, one_per_slice: None) -> None:
    s = _open(tmp_path)
    seen: list[int] = []

    async def main() -> dict[str, ErrorCode]:
        s.admin.create_topic("big", N, 1, [], [])
        await s.admin.settled(["big"], [], 60_000)
        s.admin.delete_topic("big")
        assert s.cache.topic("big") is None  # gone from the metadata at once
        with pytest.raises(TopicError, match="being deleted"):
            s.admin.create_topic("big", 1, 1, [], [])
        done = asyncio.Event()

        async def other_client() -> None:
            while not done.is_set():
                seen.append(len(s.log_manager.logs))
                await asyncio.sleep(0)

        other = asyncio.create_task(other_client())
        late = await s.admin.settled([], ["big"], 60_000)
        done.set()
        await other
        return late

    try:
        assert asyncio.run(main()) == {}
        assert any(0 < n < N for n in seen)  # ran while logs were being deleted
        assert not s.store.partitions and not s.log_manager.logs
        assert "big" not in s.admin.metadata.deleting
    finally:
        s.log_manager.shutdown()


def test_a_restart_finishes_a_stopped_deletion(tmp_path: Path, one_per_slice: None) -> None:
    s = _open(tmp_path)

    async def main() -> None:
        s.admin.create_topic("big", N, 1, [], [])
        await s.admin.settled(["big"], [], 60_000)
        s.admin.delete_topic("big")
        await asyncio.sleep(0)
        await s.admin.stop_background_work()  # shutdown while it runs

    asyncio.run(main())
    assert 0 < len(s.log_manager.logs) < N
    assert "big" in s.admin.metadata.deleting
    s.log_manager.shutdown()
    s = _open(tmp_path)
    try:
        assert s.cache.topic("big") is None and not s.log_manager.logs
        assert not s.admin.metadata.deleting
    finally:
        s.log_manager.shutdown()


# ------------------------------------------------------------------ CreatePartitions
def test_a_large_growth_runs_between_slices_and_shows_when_whole(
        tmp_path: Path, one_per_slice: None) -> None:
    s = _open(tmp_path)
    seen: list[int] = []

    def look(hosted: int) -> None:
        meta = s.cache.topic("g")
        if hosted < 2 + N:  # clients see the old count until all are hosted
            assert meta is not None and len(meta.partitions) == 2

    async def main() -> dict[str, ErrorCode]:
        s.admin.create_topic("g", 2, 1, [], [])
        s.admin.add_partitions("g", 2 + N, [])
        with pytest.raises(TopicError, match="still being made") as refused:
            s.admin.add_partitions("g", 3 + N, [])
        assert refused.value.code == ErrorCode.REASSIGNMENT_IN_PROGRESS
        return await _settled_meanwhile(s, "g", seen, look)

    try:
        assert asyncio.run(main()) == {}
        assert any(2 < n < 2 + N for n in seen)  # ran while the growth was half done
        meta = s.cache.topic("g")
        assert meta is not None and len(meta.partitions) == 2 + N
        s.admin.add_partitions("g", 3 + N, [])  # small: inline, without an event loop
        meta = s.cache.topic("g")
        assert meta is not None and len(meta.partitions) == 3 + N
    finally:
        s.log_manager.shutdown()


def test_a_restart_finishes_an_interrupted_growth(tmp_path: Path, one_per_slice: None) -> None:
    s = _open(tmp_path)

    async def main() -> None:
        s.admin.create_topic("g", 1, 1, [], [])
        s.admin.add_partitions("g", 1 + N, [])
        while len(s.store.partitions) < 2:
            await asyncio.sleep(0.001)
        await s.admin.stop_background_work()  # shutdown while it runs

    asyncio.run(main())
    assert 1 < len(s.store.partitions) < 1 + N
    meta = s.cache.topic("g")
    assert meta is not None and len(meta.partitions) == 1
    s.log_manager.shutdown()
    s = _open(tmp_path)
    try:
        meta = s.cache.topic("g")
        assert meta is not None and len(meta.partitions) == 1 + N
        assert len(s.store.partitions) == 1 + N
    finally:
        s.log_manager.shutdown()


def test_deleting_a_growing_topic_stops_the_growth(tmp_path: Path,
                                                   one_per_slice: None) -> None:
    s = _open(tmp_path)

    async def main() -> dict[str, ErrorCode]:
        s.admin.create_topic("g", 1, 1, [], [])
        s.admin.add_partitions("g", 1 + N, [])
        waiter = asyncio.create_task(s.admin.settled(["g"], [], 60_000))
        while len(s.store.partitions) < 2:
            await asyncio.sleep(0.001)
        s.admin.delete_topic("g")
        assert await s.admin.settled([], ["g"], 60_000) == {}
        return await waiter

    try:
        assert asyncio.run(main()) == {"g": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert not s.store.partitions and s.cache.topic("g") is None
        assert not s.log_manager.logs  # the logs made but not hosted yet went too
        assert "g" not in s.admin.metadata.deleting
    finally:
        s.log_manager.shutdown()


# ------------------------------------------------------------------ against a real broker
def _frame(s: socket.socket) -> bytes:
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    return s.recv(size, socket.MSG_WAITALL)


def _answered_meanwhile(broker: BrokerProcess, conn: socket.socket, request: bytes,
                        started: str, made: str, n: int) -> bytes:
    """Send `request` on `conn`; once the data dir holds `started` (the work has begun),
    an ApiVersions on another connection must be answered while `request`'s answer is not
    there yet and fewer than `n` dirs matching `made` exist. Returns `request`'s answer."""
    versions = encode_request(ApiKey.API_VERSIONS, 0, 3, "t", {})
    with socket.create_connection(("127.0.0.1", broker.port)) as other:
        conn.sendall(request)
        while not (broker.data_dir / started).exists():  # the work has started
            time.sleep(0.001)
        other.sendall(versions)
        assert decode_response(ApiKey.API_VERSIONS, 0, _frame(other))["error_code"] == 0
        so_far = len(list(broker.data_dir.glob(made)))
        conn.setblocking(False)
        with pytest.raises(BlockingIOError):  # the answer is not there yet
            conn.recv(1, socket.MSG_PEEK)
        conn.setblocking(True)
        answer = _frame(conn)
        assert so_far < n  # ApiVersions was answered while partitions were still being made
        return answer


def test_broker_answers_others_while_a_big_create_topics_runs(broker: BrokerProcess) -> None:
    n = 2000
    body = {"topics": [{"name": "big", "num_partitions": n, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": 120_000, "validate_only": False}
    with socket.create_connection(("127.0.0.1", broker.port)) as creator:
        answer = _answered_meanwhile(broker, creator, encode_request(
            ApiKey.CREATE_TOPICS, 5, 1, "t", body), "big-0", "big-*", n)
    assert decode_response(ApiKey.CREATE_TOPICS, 5, answer)["topics"][0]["error_code"] == 0


def test_broker_answers_others_while_a_big_create_partitions_runs(
        broker: BrokerProcess) -> None:
    n = 2000
    made = encode_request(ApiKey.CREATE_TOPICS, 5, 1, "t", {
        "topics": [{"name": "grow", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": []}], "timeout_ms": 30_000,
        "validate_only": False})
    body = {"topics": [{"name": "grow", "count": n, "assignments": None}],
            "timeout_ms": 120_000, "validate_only": False}
    with socket.create_connection(("127.0.0.1", broker.port)) as admin:
        admin.sendall(made)
        assert decode_response(ApiKey.CREATE_TOPICS, 5, _frame(admin))[
            "topics"][0]["error_code"] == 0
        answer = _answered_meanwhile(broker, admin, encode_request(
            ApiKey.CREATE_PARTITIONS, 1, 2, "t", body), "grow-1", "grow-*", n)
        resp = decode_response(ApiKey.CREATE_PARTITIONS, 1, answer)
        assert resp["results"][0]["error_code"] == 0, resp
        admin.sendall(encode_request(ApiKey.METADATA, 1, 4, "t",
                                     {"topics": [{"name": "grow"}]}))
        meta = decode_response(ApiKey.METADATA, 1, _frame(admin))
        assert len(meta["topics"][0]["partitions"]) == n
