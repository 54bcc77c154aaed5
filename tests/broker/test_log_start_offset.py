"""A partition's log start offset across its replicas (DeleteRecords, retention).

- A follower moves its log start up to the leader's from each fetch response (Kafka's
  ReplicaFetcherThread.processPartitionData -> maybeIncrementLogStartOffset with
  LeaderOffsetIncremented), only up to its high watermark and never back; segments wholly
  below the new start are deleted. Records removed on the leader do not come back when the
  follower leads.
- A fetch offset below the leader's log start (OFFSET_OUT_OF_RANGE) still starts the
  follower's log over at the leader's start.
- The leader tracks each follower's log start from its fetches; the low watermark (the
  smallest over this replica and the followers on live brokers) is what DeleteRecords waits
  for, answered by the DeleteRecords purgatory or timed out.

Real Partitions over real Logs; the fetcher's response handling is driven with the
responses a leader sends.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from kafkactl.broker.metadata_cache import BrokerEndpoint
from kafkactl.broker.partition import Partition
from kafkactl.broker.replica_fetcher import (
    EARLIEST,
    FetcherSettings,
    ReplicaFetcher,
    ReplicaFetcherManager,
    _Followed,
)
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.builder import RecordBatchBuilder

LEADER, LOCAL, OTHER = 1, 2, 3
SEGMENT_BYTES = 600  # a few batches a segment


def _batch(base: int, records: int = 10) -> bytes:
    b = RecordBatchBuilder(base_offset=base, partition_leader_epoch=0)
    for i in range(records):
        b.append(int(time.time() * 1000), None, b"r%d" % (base + i))
    return b.build()


def _follower(tmp_path: Path, records: int = 100, leader_hw: int = 100) -> Partition:
    """A follower holding offsets 0..records-1 (batches of 10) over several segments."""
    part = Partition("t", 0, Log(tmp_path / "t-0", LogConfig(segment_bytes=SEGMENT_BYTES)))
    part.become_follower(LOCAL, LEADER, 0, [LEADER, LOCAL], [LEADER, LOCAL], 0)
    for base in range(0, records, 10):
        part.append_as_follower(memoryview(_batch(base)), leader_hw)
    return part


def _response(leader_start: int, hw: int, records: bytes = b"",
              code: ErrorCode = ErrorCode.NONE) -> dict[str, Any]:
    return {"partition_index": 0, "error_code": code, "high_watermark": hw,
            "last_stable_offset": hw, "log_start_offset": leader_start, "records": records}


class _Leader:
    """The leader's side of the connection, for the out-of-range reset (ListOffsets)."""

    def __init__(self, start: int, end: int) -> None:
        self.offsets = {EARLIEST: start, -1: end}
        self.asked: list[ApiKey] = []

    async def request(self, api_key: ApiKey, version: int, body: dict[str, Any],
                      timeout: float) -> dict[str, Any]:
        self.asked.append(api_key)
        ts = body["topics"][0]["partitions"][0]["timestamp"]
        return {"topics": [{"name": "t", "partitions": [{
            "partition_index": 0, "error_code": 0, "offset": self.offsets[ts]}]}]}


def _handle(part: Partition, response: dict[str, Any], leader: _Leader | None = None) -> bool:
    """The fetcher's handling of one partition's part of a fetch response."""
    async def run() -> bool:
        cache = ZkMetadataCache("c", BrokerEndpoint(LOCAL, "127.0.0.1", 1))
        fetcher = ReplicaFetcher(LEADER, ReplicaFetcherManager(LOCAL, cache,
                                                               FetcherSettings()))
        try:
            return await fetcher._handle(leader or _Leader(0, 0),  # type: ignore[arg-type]
                                         _Followed(part, truncate_first=False), response)
        finally:
            fetcher.stop()
    return asyncio.run(run())


def _first_record_offset(part: Partition) -> int:
    fs = part.log.read(part.log_start_offset, 1 << 20, min_one_batch=True)
    from kafkactl.record.memory_records import iter_batches

    return int(next(iter(iter_batches(memoryview(fs.read_bytes())))).base_offset)


# ---- the follower ------------------------------------------------------------------------------
def test_a_follower_moves_its_log_start_to_the_leaders_from_a_fetch_response(
        tmp_path: Path) -> None:
    part = _follower(tmp_path)
    segments = len(part.log.segments)
    assert segments > 3 and part.log_start_offset == 0
    # the leader's DeleteRecords before 50: the next (empty) response says so
    assert _handle(part, _response(leader_start=50, hw=100))
    assert part.log_start_offset == 50
    # segments wholly below the new start are gone, as retention deletes them
    assert len(part.log.segments) < segments
    assert part.log.segments[0].base_offset <= 50 < part.log.segments[1].base_offset
    # this replica, made leader, serves from 50: records below it do not come back
    part.become_leader(LOCAL, 1, [LEADER, LOCAL], [LEADER, LOCAL], 1, 0.0)
    assert part.log_start_offset == 50
    assert _first_record_offset(part) == 50


def test_a_follower_log_start_follows_with_records_and_never_moves_back(
        tmp_path: Path) -> None:
    part = _follower(tmp_path)
    assert _handle(part, _response(leader_start=30, hw=110, records=_batch(100)))
    assert (part.log_end_offset, part.log_start_offset, part.high_watermark) == (110, 30, 110)
    assert _handle(part, _response(leader_start=20, hw=110))  # an older answer: no move
    assert part.log_start_offset == 30
    assert _handle(part, _response(leader_start=0, hw=110))
    assert part.log_start_offset == 30


def test_a_follower_log_start_moves_only_up_to_its_high_watermark(tmp_path: Path) -> None:
    part = _follower(tmp_path, leader_hw=80)
    assert part.high_watermark == 80
    part.follow_leader_log_start(95)
    assert part.log_start_offset == 80  # not past what it knows committed
    assert part.log_end_offset == 100  # nothing above the high watermark goes


def test_a_fetch_below_the_leaders_log_start_starts_the_log_over_there(
        tmp_path: Path) -> None:
    """OFFSET_OUT_OF_RANGE: the follower's log ends before the leader's starts (it was away
    while the leader's log start passed it): it starts over at the leader's log start."""
    part = _follower(tmp_path, records=40, leader_hw=40)
    leader = _Leader(start=70, end=120)
    assert _handle(part, _response(-1, -1, code=ErrorCode.OFFSET_OUT_OF_RANGE), leader)
    assert leader.asked == [ApiKey.LIST_OFFSETS, ApiKey.LIST_OFFSETS]
    assert (part.log_start_offset, part.log_end_offset) == (70, 70)
    # and replicates on from there, its log start the leader's
    assert _handle(part, _response(leader_start=70, hw=120, records=_batch(70)))
    assert (part.log_start_offset, part.log_end_offset) == (70, 80)


# ---- the leader --------------------------------------------------------------------------------
def _leader(tmp_path: Path) -> Partition:
    part = Partition("t", 0, Log(tmp_path / "t-0", LogConfig()))
    part.become_leader(LEADER, epoch=1, isr=[LEADER, LOCAL, OTHER],
                       replicas=[LEADER, LOCAL, OTHER], partition_epoch=1, now_ms=0.0)
    for base in range(0, 100, 10):
        part.log.append(_batch(base), leader_epoch=1)
    return part


def test_the_low_watermark_is_the_smallest_log_start_over_the_live_replicas(
        tmp_path: Path) -> None:
    part = _leader(tmp_path)
    live = {LEADER, LOCAL, OTHER}
    part.update_follower(LOCAL, 100, 100, 1.0, log_start_offset=0)
    part.update_follower(OTHER, 100, 100, 1.0, log_start_offset=0)
    part.log.delete_records_before(50)  # the leader's DeleteRecords
    assert part.low_watermark(live) == 0
    part.update_follower(LOCAL, 100, 100, 2.0, log_start_offset=50)
    assert part.low_watermark(live) == 0  # OTHER still starts at 0
    assert part.low_watermark({LEADER, LOCAL}) == 50  # unless its broker is gone
    part.update_follower(OTHER, 100, 100, 2.0, log_start_offset=50)
    assert part.low_watermark(live) == 50
    # a new leader term: the followers' log starts are unknown until they fetch again
    part.become_leader(LEADER, epoch=2, isr=[LEADER, LOCAL, OTHER],
                       replicas=[LEADER, LOCAL, OTHER], partition_epoch=2, now_ms=3.0)
    assert part.low_watermark(live) == -1


def test_delete_records_waits_for_the_low_watermark_or_times_out() -> None:
    from kafkactl.broker.purgatory import DeleteRecordsPurgatory

    async def run() -> None:
        purgatory = DeleteRecordsPurgatory()
        assert not purgatory.waiting
        key, other = ("t", 0), ("t", 1)
        op = purgatory.watch({key: 50, other: 50})
        assert purgatory.waiting and purgatory.watching(key)
        purgatory.low_watermark(key, 20)  # one follower still starts lower
        assert not op.future.done()
        purgatory.low_watermark(key, 50)
        purgatory.low_watermark(other, 60)
        assert await purgatory.wait_for(op, 5) == {key: 50, other: 60}
        assert not purgatory.waiting
        late = purgatory.watch({key: 70})
        t0 = time.monotonic()
        assert await purgatory.wait_for(late, 0.05) == {}  # REQUEST_TIMED_OUT
        assert time.monotonic() - t0 < 2 and not purgatory.waiting
    asyncio.run(run())
