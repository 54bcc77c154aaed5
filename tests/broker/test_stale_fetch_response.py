"""A follower's fetch response is applied only to the partition state it was sent for.

A real broker leads; an in-process ReplicaFetcher follows two of its partitions into local
logs. While a fetch is parked in the leader's long poll, partition 0 is re-added for a new
leader epoch (a LeaderAndIsr); then records are produced to both partitions, which answers
the parked fetch. Partition 0's part of that response was sent for the old epoch and is
dropped, never appended; partition 1's is appended as usual."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from kafkactl.broker.metadata_cache import BrokerEndpoint
from kafkactl.broker.partition import Partition
from kafkactl.broker.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from tests.conftest import BrokerProcess

LEADER_ID, LOCAL_ID = 0, 99


def _kafkactl(*args: str, input: bytes | None = None) -> None:
    r = subprocess.run([sys.executable, "-m", "kafkactl", *args], input=input,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr


async def _until(cond: Any, timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def test_a_response_for_an_old_epoch_is_dropped(broker: BrokerProcess, tmp_path: Path) -> None:
    _kafkactl("topics", "create", "-t", "re", "--partitions", "2", "-b", broker.bootstrap)

    async def scenario() -> None:
        cache = ZkMetadataCache("test", BrokerEndpoint(LOCAL_ID, "127.0.0.1", 1))
        cache.apply_update_metadata({"controller_id": -1, "live_brokers": [
            {"id": LEADER_ID, "endpoints": [
                {"listener": "PLAINTEXT", "host": "127.0.0.1", "port": broker.port}]}]})
        # a long poll that outlasts the test's steps: the fetch stays parked on the leader
        manager = ReplicaFetcherManager(LOCAL_ID, cache, FetcherSettings(max_wait_ms=20_000))
        parts = []
        for p in (0, 1):
            part = Partition("re", p, Log(tmp_path / f"re-{p}", LogConfig()))
            part.become_follower(LOCAL_ID, LEADER_ID, 0, [LEADER_ID, LOCAL_ID],
                                 [LEADER_ID, LOCAL_ID], 0)
            manager.follow(part)
            parts.append(part)
        fetcher = manager.fetchers[LEADER_ID]
        try:
            # truncation done: the fetch for epoch 0 at offset 0 goes out in the same step
            await _until(lambda: not any(f.truncate_first for f in fetcher.partitions.values()),
                         30, "the fetcher's first fetch")
            await asyncio.sleep(0.3)  # the fetch is parked in the leader's long poll
            # LeaderAndIsr: partition 0 for leader epoch 1 (the leader is still at 0, so the
            # new term's truncation is refused and only a stale response could append)
            parts[0].become_follower(LOCAL_ID, LEADER_ID, 1, [LEADER_ID, LOCAL_ID],
                                     [LEADER_ID, LOCAL_ID], 1)
            manager.follow(parts[0])
            for p in (0, 1):
                await asyncio.to_thread(_kafkactl, "produce", "-t", "re", "-p", str(p), "-q",
                                        "-b", broker.bootstrap, input=b"x1\nx2\nx3\n")
            await _until(lambda: parts[1].log_end_offset == 3, 30,
                         "partition 1's records on the follower")
            # partition 0's records came in the same or an earlier response than partition 1's
            assert parts[0].log_end_offset == 0, "a response for epoch 0 was appended"
            assert fetcher.stale_dropped >= 1
        finally:
            manager.shutdown()

    asyncio.run(scenario())
