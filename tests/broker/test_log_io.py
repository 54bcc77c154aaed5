"""Disk work off the event loop (kafkactl/broker/log_io.py) keeps its results correct.

Real Partitions over real Logs, their producer state built from idempotent batches:
- a producer snapshot holds the state of the moment it was taken (encoded on the loop),
  though it is written later on a log-io thread and records were appended meanwhile;
- a snapshot taken before a truncation is never written after it (it would describe
  records the log no longer has);
- a follower truncation rebuilt on a log-io thread gives the producer state the
  synchronous path gives;
- a partition made leader while its rebuild runs has its state rebuilt at once (a leader
  checks sequences with it), and the late result of the thread is dropped;
- high-watermark checkpoints: an older capture written late never replaces a newer one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kafkactl.broker import log_io
from kafkactl.broker.partition import Partition
from kafkactl.broker.partition_store import (
    HIGH_WATERMARK_CHECKPOINT,
    PartitionStore,
    TopicLogConfigs,
)
from kafkactl.broker.purgatory import FetchPurgatory
from kafkactl.log.checkpoint import read_checkpoint
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.manager import LogManager
from kafkactl.log.producer_state import read_snapshot, snapshot_path
from kafkactl.record.builder import RecordBatchBuilder

LEADER, LOCAL = 1, 2


def _batch(base: int, pid: int, seq: int, records: int) -> memoryview:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq,
                           base_offset=base, partition_leader_epoch=0)
    for i in range(records):
        b.append(int(time.time() * 1000), None, b"v%d" % (seq + i))  # not expired
    return memoryview(b.build())


def _follower(directory: Path) -> Partition:
    part = Partition("t", 0, Log(directory / "t-0", LogConfig()))
    part.become_follower(LOCAL, LEADER, 0, [LEADER, LOCAL], [LEADER, LOCAL], 0)
    return part


def _copy(part: Partition, pid: int, records: int) -> None:
    """The leader's next batch of `pid` (`records` records), appended as a follower."""
    seq = 0
    entry = part.producer_state.producers.get(pid)
    if entry is not None:
        seq = entry.last_seq + 1
    part.append_as_follower(_batch(part.log_end_offset, pid, seq, records), 0)


def _state(part: Partition) -> dict[int, tuple[int, int, int]]:
    return {pid: (e.epoch, e.last_seq, e.last_batch.last_offset if e.last_batch else -1)
            for pid, e in part.producer_state.producers.items()}


def test_a_snapshot_holds_the_state_when_it_was_taken(tmp_path: Path) -> None:
    part = _follower(tmp_path)
    _copy(part, 7, 3)
    _copy(part, 7, 3)
    job = part.snapshot_job()  # encoded now, at log end 6
    assert job is not None
    _copy(part, 7, 3)  # appended while the job waits for its thread
    asyncio.run(log_io.run(job))
    entries = read_snapshot(snapshot_path(part.log.dir, 6))
    assert entries[7].last_seq == 5 and entries[7].last_batch is not None
    assert entries[7].last_batch.last_offset == 5
    assert not snapshot_path(part.log.dir, 9).exists()


def test_a_snapshot_taken_before_a_truncation_is_not_written(tmp_path: Path) -> None:
    part = _follower(tmp_path)
    for _ in range(3):
        _copy(part, 7, 3)
    job = part.snapshot_job()  # at log end 9
    assert job is not None
    part.truncate_to(3)
    asyncio.run(log_io.run(job))
    assert not snapshot_path(part.log.dir, 9).exists()
    assert _state(part) == {7: (0, 2, 2)}


def test_a_rebuild_off_the_loop_matches_the_one_on_it(tmp_path: Path) -> None:
    parts = [_follower(tmp_path / "sync"), _follower(tmp_path / "off")]
    for part in parts:
        _copy(part, 7, 2)
        _copy(part, 8, 2)
        part.take_snapshot()  # at 4: the rebuild starts from it
        for _ in range(4):
            _copy(part, 7, 2)
            _copy(part, 8, 1)
    threads: list[str] = []

    async def run(fn: Callable[..., object], *args: Any) -> object:
        def recorded() -> object:
            threads.append(threading.current_thread().name)
            return fn(*args)
        return await log_io.run(recorded)

    parts[0].truncate_to(10)
    asyncio.run(parts[1].truncate_off_loop(10, run))
    assert threads and all(n.startswith("log-io") for n in threads)
    assert parts[1].log_end_offset == parts[0].log_end_offset == 10
    assert _state(parts[1]) == _state(parts[0]) != {}


def test_made_leader_during_a_rebuild(tmp_path: Path) -> None:
    part = _follower(tmp_path)
    for _ in range(4):
        _copy(part, 7, 2)
    release = asyncio.Event()

    async def held(fn: Callable[..., object], *args: Any) -> object:
        await release.wait()
        return await log_io.run(fn, *args)

    async def scenario() -> None:
        task = asyncio.create_task(part.truncate_off_loop(6, held))
        await asyncio.sleep(0)  # the log is cut; the rebuild waits for `release`
        assert part.log_end_offset == 6 and part.producer_state.producers == {}
        assert part.snapshot_job() is None  # no snapshot of a state being rebuilt
        part.become_leader(LOCAL, 1, [LOCAL], [LEADER, LOCAL], 1, 0.0)
        rebuilt = part.producer_state
        assert _state(part) == {7: (0, 5, 5)}
        release.set()
        await task
        assert part.producer_state is rebuilt  # the thread's late result was dropped

    asyncio.run(scenario())


def test_an_older_high_watermark_capture_never_overwrites_a_newer(tmp_path: Path) -> None:
    manager = LogManager([tmp_path / "data"], LogConfig())
    store = PartitionStore(manager, TopicLogConfigs(LogConfig()), FetchPurgatory())
    part = store.make_partition("t", 0, LogConfig())
    part.become_leader(LOCAL, 1, [LOCAL, LEADER], [LOCAL, LEADER], 1, 0.0)
    for _ in range(2):
        part.log.append(_batch(0, -1, -1, 5), leader_epoch=1)
    part.update_follower(LEADER, 5, part.log_end_offset, 1.0)
    older = store._capture_high_watermarks()
    part.update_follower(LEADER, 10, part.log_end_offset, 2.0)

    async def newer_then_older(run: Callable[..., Awaitable[object]]) -> None:
        await store.checkpoint_high_watermarks_off_loop(run)
        await run(store._write_high_watermarks, *older)

    asyncio.run(newer_then_older(log_io.run))
    path = tmp_path / "data" / HIGH_WATERMARK_CHECKPOINT
    assert read_checkpoint(path) == {("t", 0): 10}
    manager.shutdown()
