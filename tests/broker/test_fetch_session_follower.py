"""The replica fetcher's side of a fetch session (Kafka's FetchSessionHandler), against a
real leader: an in-process ReplicaFetcher follows three partitions of a real broker. After
its first full fetch it has a session and its fetches are incremental; a partition it stops
following is forgotten; when the leader evicts its session (a new one takes the only slot)
its next fetch is answered FETCH_SESSION_ID_NOT_FOUND and it starts over with a full fetch;
when the leader restarts it starts over too; records keep arriving throughout."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from kafkactl.broker.metadata_cache import BrokerEndpoint
from kafkactl.broker.partition import Partition
from kafkactl.broker.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log

from .test_fetch_session import fetch, produce
from .wire import Wire

LEADER_ID, LOCAL_ID = 0, 99
TOPIC = "fs"


async def _until(cond: Any, timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def _produce(bootstrap: str, p: int) -> None:
    with Wire(bootstrap) as w:
        produce(w, p)


def test_the_follower_keeps_a_session_and_starts_over_when_it_is_lost(
        broker_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kafkactl.broker.replica_fetcher")
    b = broker_factory(max_incremental_fetch_session_cache_slots="1",
                       min_incremental_fetch_session_eviction_ms="0")
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, partitions=3)["error_code"] == 0

    async def scenario() -> None:
        cache = ZkMetadataCache("test", BrokerEndpoint(LOCAL_ID, "127.0.0.1", 1))
        cache.apply_update_metadata({"controller_id": -1, "live_brokers": [
            {"id": LEADER_ID, "endpoints": [
                {"listener": "PLAINTEXT", "host": "127.0.0.1", "port": b.port}]}]})
        manager = ReplicaFetcherManager(LOCAL_ID, cache, FetcherSettings(
            max_wait_ms=200, backoff_ms=100))
        parts = []
        for p in range(3):
            part = Partition(TOPIC, p, Log(tmp_path / f"{TOPIC}-{p}", LogConfig()))
            part.become_follower(LOCAL_ID, LEADER_ID, 0, [LEADER_ID, LOCAL_ID],
                                 [LEADER_ID, LOCAL_ID], 0)
            manager.follow(part)
            parts.append(part)
        fetcher = manager.fetchers[LEADER_ID]
        session = fetcher.session
        try:
            await asyncio.to_thread(_produce, b.bootstrap, 0)
            await _until(lambda: parts[0].log_end_offset == 1, 30, "the first record")
            await _until(lambda: session.session_id != 0 and session.incremental_fetches >= 2,
                         30, "incremental fetches of a session")
            first = session.session_id
            assert session.full_fetches == 1
            # partition 2 unfollowed: forgotten in the leader's session
            manager.unfollow((TOPIC, 2))
            await _until(lambda: (TOPIC, 2) not in session.partitions, 30,
                         "partition 2 forgotten")
            # a consumer's full fetch takes the only slot (the follower's session is stale
            # with min.incremental.fetch.session.eviction.ms=0): the follower's next
            # incremental fetch is answered FETCH_SESSION_ID_NOT_FOUND
            with Wire(b.bootstrap) as w:
                assert fetch(w, 0, 0, {0: 0})["session_id"] != 0
            await _until(lambda: "FETCH_SESSION_ID_NOT_FOUND" in caplog.text, 30,
                         "the follower told its session is gone")
            await _until(lambda: session.session_id not in (0, first), 30, "a new session")
            assert session.full_fetches >= 2
            await asyncio.to_thread(_produce, b.bootstrap, 1)
            await _until(lambda: parts[1].log_end_offset == 1, 30, "a record after that")
            # the leader restarts: its sessions are gone; the follower starts over
            again = session.full_fetches
            await asyncio.to_thread(b.stop)
            await asyncio.to_thread(b.start)
            await asyncio.to_thread(_produce, b.bootstrap, 0)
            await _until(lambda: parts[0].log_end_offset == 2, 60,
                         "a record from the restarted leader")
            assert session.full_fetches > again and session.session_id != 0
            assert parts[2].log_end_offset == 0  # unfollowed: nothing fetched
        finally:
            manager.shutdown()

    asyncio.run(scenario())
