"""A follower whose appends fail (a full or read-only disk) retries every
replica.fetch.backoff.ms; the broker log says so like the "Storage error in log dir" line:
the first failure at ERROR at once, then one WARNING per 30 s per log dir with the count
(not one line per retry per partition), and once when appends work again. A failure that
is about one partition (a damaged batch from the leader) is told per partition.

Real Partitions over real Logs; disk errors are simulated by making os.pwrite fail with
ENOSPC (what a full disk answers); the clock is a fake one."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactl.broker.metadata_cache import BrokerEndpoint
from kafkactl.broker.partition import Partition
from kafkactl.broker.replica_fetcher import (
    FetcherSettings,
    ReplicaFetcher,
    ReplicaFetcherManager,
    _Followed,
)
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.log_dir_failure import RepeatedErrorLog
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.builder import RecordBatchBuilder
from tests.log.helpers import Clock

LEADER, LOCAL = 1, 2
LOGGER = "kafkactl.broker.replica_fetcher"



def _batch(base: int, records: int = 5) -> bytes:
    b = RecordBatchBuilder(base_offset=base, partition_leader_epoch=0)
    for i in range(records):
        b.append(1_700_000_000_000 + i, None, b"r%d" % (base + i))
    return b.build()


def _follower(log_dir: Path, topic: str, partition: int) -> Partition:
    part = Partition(topic, partition, Log(log_dir / f"{topic}-{partition}", LogConfig()))
    part.become_follower(LOCAL, LEADER, 0, [LEADER, LOCAL], [LEADER, LOCAL], 0)
    return part


def _response(partition: int, records: bytes, hw: int = 5) -> dict[str, Any]:
    return {"partition_index": partition, "error_code": ErrorCode.NONE,
            "high_watermark": hw, "last_stable_offset": hw, "log_start_offset": 0,
            "records": records}


@contextlib.contextmanager
def _full_disk() -> Iterator[None]:
    def fail(*_args: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real = os.pwrite
    os.pwrite = fail  # type: ignore[assignment]
    try:
        yield
    finally:
        os.pwrite = real


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records
            if r.name == LOGGER and r.levelno >= logging.INFO]


def _run(parts: list[Partition], rounds: list[tuple[float, bool, bytes]], clock: Clock
         ) -> list[bool]:
    """Per round (seconds to advance, a full disk?, records): every partition's part of a
    fetch response handled as the fetcher does; the results."""
    async def run() -> list[bool]:
        cache = ZkMetadataCache("c", BrokerEndpoint(LOCAL, "127.0.0.1", 1))
        manager = ReplicaFetcherManager(LOCAL, cache, FetcherSettings())
        manager.append_errors = RepeatedErrorLog(logging.getLogger(LOGGER), clock=clock)
        fetcher = ReplicaFetcher(LEADER, manager)
        out = []
        try:
            for advance, full, records in rounds:
                clock.now += advance
                with _full_disk() if full else contextlib.nullcontext():
                    for part in parts:
                        out.append(await fetcher._handle(
                            None,  # type: ignore[arg-type]  (no out-of-range here)
                            _Followed(part, truncate_first=False),
                            _response(part.partition, records)))
        finally:
            fetcher.stop()
        return out
    return asyncio.run(run())


def test_full_disk_follower_appends_are_one_line_per_log_dir_per_30s(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    log_dir = tmp_path / "mnt"
    parts = [_follower(log_dir, "r", p) for p in range(50)]
    clock = Clock(500.0)
    # 61 s of retries once a second for 50 partitions, then the disk has room again
    results = _run(parts, [(1.0, True, _batch(0))] * 61 + [(1.0, False, _batch(0))], clock)
    assert results == [False] * 61 * 50 + [True] * 50
    lines = _records(caplog)
    # not 61 x 50 lines: the first, one every 30 s, and the recovery
    assert [lvl for lvl, _m in lines] == [logging.ERROR, logging.WARNING, logging.WARNING,
                                          logging.INFO]
    assert lines[0] == (logging.ERROR, f"Partition(r-0): cannot append the leader's records "
                        f"to log dir {log_dir}: cannot append to r-0: No space left on "
                        "device (ENOSPC)")
    assert lines[1:3] == [
        (logging.WARNING, f"Partition(r-0): cannot append the leader's records to log dir "
                          f"{log_dir}: cannot append to r-0: No space left on device "
                          f"(ENOSPC) (again; {30 * 50 - 1} more like it in the 30 s since "
                          "the last report)")] * 2
    assert lines[3:] == [
        (logging.INFO, f"Partition(r-0): appends of the leader's records to log dir "
                       f"{log_dir} work again (after 49 more errors since the last "
                       "report)")]
    assert all(p.log_end_offset == 5 for p in parts)
    for p in parts:
        p.log.close()


def test_a_damaged_batch_from_the_leader_is_told_per_partition(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    parts = [_follower(tmp_path / "d", "t", p) for p in range(2)]
    damaged = bytearray(_batch(0))
    damaged[-1] ^= 0xFF  # the CRC fails
    clock = Clock(500.0)
    assert _run(parts, [(1.0, False, bytes(damaged))] * 31, clock) == [False] * 62
    lines = _records(caplog)
    assert [(lvl, m.split(":")[0]) for lvl, m in lines] == [
        (logging.ERROR, "Partition(t-0)"), (logging.ERROR, "Partition(t-1)"),
        (logging.WARNING, "Partition(t-0)"), (logging.WARNING, "Partition(t-1)")]
    assert lines[0][1].startswith("Partition(t-0): cannot append the leader's records: ")
    assert lines[2][1].endswith("(again; 29 more like it in the 30 s since the last report)")
    for p in parts:
        p.log.close()
