"""Log: one partition's segmented log (`<dir>/<topic>-<partition>/`).

Thread model: the broker calls every method from one (asyncio) thread, except `flush()`,
which may run on a worker thread. The segment list is a tuple replaced copy-on-write, so a
reader holds a consistent snapshot; structural changes (roll, truncate, retention) and
flush are serialised by `self._lock`, and each segment guards its files with its own lock.
The segment list and the deletion of dropped segments (renamed to `.deleted`, unlinked by
`delete_pending()` after `file.delete.delay.ms`, so a FetchSlice fd stays valid while the
broker sends it) are LogSegments (segments.py); which segments retention drops is decided
in retention.py; the bytes appended are stamped by record.stamp_batches (Kafka's
LogValidator), so the log never parses a batch header on the append path. As Kafka's
UnifiedLog, deleting segments (retention, DeleteRecords) takes the producer snapshots at
their base offsets with them, and a log start moving up trims the partition's leader-epoch
cache (`attach_leader_epoch_cache`): both only when that happens, never per append.

A disk error while appending (ENOSPC, EFBIG, EIO: in the .log write, an index page, a roll's
new files, or the inline flush of `flush.messages`) raises KafkaStorageError (Kafka's
KAFKA_STORAGE_ERROR, retriable) and appends nothing: the segment cuts its file back, a
half-made new segment is removed, the log end offset stays, and a retry once space is
freed appends at the same offsets.

Transactions: each segment's aborted transactions are in its `.txnindex` (txn_index.py),
appended by the partition when an ABORT marker ends one (`append_aborted_txn`), read by
read_committed fetches (`collect_aborted_transactions` up to `fetch_upper_bound`), and
rebuilt from the markers when a segment is recovered.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import logging
import os
import threading
import time as _time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkactl.log.config import LogConfig
from kafkactl.log.errors import (
    CorruptRecordError,
    InvalidOffsetError,
    KafkaStorageError,
    LogError,
    OffsetOutOfRange,
    RecordBatchTooLargeError,
)
from kafkactl.log.leader_epoch_cache import LeaderEpochCache
from kafkactl.log.loader import load_segments
from kafkactl.log.producer_state import mark_snapshots_for_deletion
from kafkactl.log.retention import segments_below_start, segments_past_retention
from kafkactl.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
)
from kafkactl.log.segments import LogSegments
from kafkactl.log.time_index import NO_TIMESTAMP
from kafkactl.log.txn_index import AbortedTxn, rebuild_txn_indexes
from kafkactl.record.batch import TimestampType
from kafkactl.record.errors import OffsetOrderError, UnstampableBatchError
from kafkactl.record.memory_records import iter_batches
from kafkactl.record.stamp import AppendSummary, stamp_batches

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
_ALL_OFFSETS = 2**63  # above every offset

logger = logging.getLogger(__name__)


# What Log.append reports is what record.stamp_batches returned: first/last offset, max
# timestamp and its offset, log-append time, record count, bytes and the stamped batches
# (one object from the stamping to the caller: the append path is benchmarked).
LogAppendInfo = AppendSummary


@dataclass(slots=True)
class FetchSlice:
    """A byte range of a segment file, ready for `os.sendfile(sock, fd, position, length)`.
    `first_offset` is the base offset of the first batch in the range.
    `first_entry_incomplete`: the first batch did not fit `max_bytes` (read without
    `min_one_batch`), so the range is a cut-off fragment of it (Kafka's FetchDataInfo
    firstEntryIncomplete); a Fetch v3+ sends an empty record set instead."""

    fd: int
    position: int
    length: int
    first_offset: int
    first_entry_incomplete: bool = False

    def read_bytes(self) -> bytes:
        parts: list[bytes] = []
        pos, left = self.position, self.length
        while left > 0:
            chunk = os.pread(self.fd, left, pos)
            if not chunk:
                break
            parts.append(chunk)
            pos += len(chunk)
            left -= len(chunk)
        return b"".join(parts)


def parse_topic_partition(dirname: str) -> tuple[str, int]:
    topic, sep, part = dirname.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise LogError(f"Directory name {dirname!r} is not <topic>-<partition>.")
    return topic, int(part)


class Log:
    def __init__(
        self,
        dir: Path,  # noqa: A002 - the contract's name
        config: LogConfig,
        *,
        recovery_point: int = 0,
        needs_recovery: bool = True,
        time: Any = _time,  # noqa: A002 - anything with .time() (seconds)
        log_start_offset: int = 0,
    ) -> None:
        self.dir = dir if isinstance(dir, Path) else Path(dir)
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        self.config = config
        self._time = time
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self.dir.mkdir(parents=True, exist_ok=True)
        loaded = load_segments(
            self.dir, config, now_ms=self._now_ms(), recovery_point=recovery_point,
            needs_recovery=needs_recovery, log_start_offset=log_start_offset,
        )
        self._segs = LogSegments(loaded.segments, loaded.leftover_files)
        self.recovery_reports = loaded.reports
        active = self._segs.active
        active.resize_indexes(config.segment_index_bytes)
        active._recompute_max_timestamp()
        self._log_end_offset = active.next_offset
        self._log_start_offset = min(max(log_start_offset, self._segs.segments[0].base_offset),
                                     self._log_end_offset)
        if loaded.recovered:
            recovered = {r.base_offset for r in loaded.reports}
            first = next((i for i, s in enumerate(self._segs.segments)
                          if s.base_offset in recovered), None)
            if first is not None:
                # from the first segment's base, not the log start: a transaction that
                # began below a DeleteRecords point still has its records on disk
                rebuild_txn_indexes(self._segs.segments, first, self.dir,
                                    self._segs.segments[0].base_offset,
                                    known=loaded.txn_events)
            self._recovery_point = self._log_end_offset
            self.flush()
        else:
            self._recovery_point = min(recovery_point, self._log_end_offset)
        self._last_flush_ms = self._now_ms()
        self._closed = False
        # called with the new base offset after each roll (the partition snapshots its
        # producer state there, as Kafka does: recovery starts from it)
        self.on_roll: Callable[[int], None] | None = None
        # the partition's leader-epoch cache (attach_leader_epoch_cache): trimmed here
        # when the log start moves up, cleared when the log is truncated fully
        self._epoch_cache: LeaderEpochCache | None = None
        # called (outside the lock) with the new log start after delete_records_before
        # moved it: the log manager writes the log-start-offset checkpoint at once, so a
        # crash does not bring deleted records back
        self.on_log_start_moved: Callable[[int], None] | None = None
        # the partition's high watermark (broker/partition.py sets it): retention deletes
        # no segment above it (Kafka's deletableSegments); None: the log end (no bound)
        self.high_watermark_source: Callable[[], int] | None = None

    # ----------------------------------------------------------------- properties
    def _now_ms(self) -> int:
        return int(self._time.time() * 1000)

    @property
    def topic_partition(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segs.segments

    @property
    def segment_store(self) -> LogSegments:
        """The segment list and its pending deletions, which the cleaner's swap changes
        (holding the log's lock)."""
        return self._segs

    @property
    def active_segment(self) -> LogSegment:
        return self._segs.segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self._recovery_point

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segs.segments)

    # ----------------------------------------------------------------- append
    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        log_append_time: int | None = None,
        leader_epoch: int | None = 0,
    ) -> LogAppendInfo:
        """Append whole batches (already validated by the caller).

        With `assign_offsets` the base offsets (and the partition leader epoch) are stamped
        in place in each batch header; a read-only buffer is copied once first. With
        `log_append_time` each magic-2 batch is switched to LogAppendTime (new CRC).
        Without `assign_offsets` the batches must carry increasing offsets >= the log end.
        The stamping is record.stamp_batches; the segment gets the stamped bytes.
        """
        if isinstance(records, bytearray):
            buf: bytearray | memoryview = records
        elif isinstance(records, memoryview) and not records.readonly:
            buf = records.cast("B") if records.format != "B" else records
        elif assign_offsets or log_append_time is not None:
            buf = bytearray(records)
        else:
            buf = memoryview(records)
        total = len(buf)
        if total == 0:
            raise LogError("Cannot append an empty record set.")
        if total > self.config.segment_bytes and assign_offsets:  # (a leader's append: a
            # follower's fetched chunk may hold many batches the leader took one by one)
            raise RecordBatchTooLargeError(
                f"a record batch of {total} bytes in an append to {self.dir.name} is larger "
                f"than its segment.bytes ({self.config.segment_bytes})")
        try:
            info = stamp_batches(buf, self._log_end_offset, leader_epoch, log_append_time,
                                 assign_offsets=assign_offsets)
        except OffsetOrderError as e:
            raise InvalidOffsetError(str(e)) from None
        except UnstampableBatchError as e:
            raise LogError(str(e)) from None
        first_offset, last_offset = info.first_offset, info.last_offset
        segment = self._segs.segments[-1]
        try:
            if segment.size and segment.should_roll(total, info.max_timestamp, last_offset,
                                                    self._now_ms, self.config):
                segment = self.roll(first_offset)
            segment.append(buf, info.batches)
        except OSError as e:
            raise self._storage_error("append to", e) from e
        self._log_end_offset = last_offset + 1
        if self._log_end_offset - self._recovery_point >= self.config.flush_messages:
            self._flush_appended(first_offset)
        return info

    def _storage_error(self, action: str, e: OSError) -> KafkaStorageError:
        text = e.strerror or (os.strerror(e.errno) if e.errno else str(e))
        name = _errno.errorcode.get(e.errno or 0, "")
        return KafkaStorageError(
            f"cannot {action} {self.topic}-{self.partition}: {text}"
            f"{f' ({name})' if name else ''}", log_dir=self.dir.parent, errno=e.errno)

    def _flush_appended(self, first_offset: int) -> None:
        """The inline flush of flush.messages. If it fails the records from `first_offset`
        (this append) were not made durable as the config promises: take them back and
        raise, so they are not acknowledged. Older unflushed records stay (the recovery
        point did not move: a restart re-validates them)."""
        try:
            self.flush()
        except OSError as e:
            try:
                self.truncate_to(first_offset)
            except OSError as e2:
                logger.error("%s-%d: cannot take back an append that failed to flush: %s",
                             self.topic, self.partition, e2.strerror or e2)
            raise self._storage_error("flush", e) from e

    def _new_segment(self, base: int) -> tuple[LogSegment, Callable[[], None]]:
        """A new, empty segment at `base` with preallocated indexes, and a function that
        closes it and removes the files it created. If creating it fails, those files
        are removed at once and the OSError raised."""
        prefix = filename_prefix(base)
        paths = [self.dir / (prefix + suffix)
                 for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)]
        created = [p for p in paths if not p.exists()]

        def remove_created() -> None:
            for p in created:
                with contextlib.suppress(OSError):
                    os.unlink(p)

        try:
            seg = LogSegment(self.dir, base, self.config, created_ms=self._now_ms(),
                             create=True)
        except BaseException:
            remove_created()
            raise

        def discard() -> None:
            seg.close()
            remove_created()

        try:
            seg.resize_indexes(self.config.segment_index_bytes)
        except BaseException:
            discard()
            raise
        return seg, discard

    def roll(self, new_base_offset: int | None = None) -> LogSegment:
        """Start a new active segment (at the log end offset by default). An OSError
        (full disk) leaves the segment list as it was, without the new files."""
        with self._lock:
            active = self._segs.segments[-1]
            base = self._log_end_offset if new_base_offset is None else new_base_offset
            if active.size == 0 and active.base_offset == base:
                return active
            if base < active.next_offset:
                raise InvalidOffsetError(
                    f"Cannot roll at offset {base}: the active segment ends at "
                    f"{active.next_offset}."
                )
            new, discard = self._new_segment(base)
            try:
                active.on_become_inactive()
                if active.size == 0:
                    # an empty segment before the new one holds nothing: drop it
                    segs = list(self._segs.segments[:-1]) + [new]
                    self._segs.schedule_delete([active], self._delete_deadline())
                else:
                    segs = list(self._segs.segments) + [new]
            except BaseException:
                discard()
                raise
            self._segs.replace(segs)
            if self.on_roll is not None:
                try:
                    self.on_roll(base)
                except OSError as e:  # only a recovery shortcut is lost
                    logger.warning("%s-%d: no producer snapshot at roll offset %d: %s",
                                   self.topic, self.partition, base, e.strerror or e)
            return new

    # ----------------------------------------------------------------- flush
    def flush(self) -> None:
        """fsync every segment with unflushed data and advance the recovery point.
        Safe to call from a worker thread while the owner thread appends."""
        with self._flush_lock:
            target = self._log_end_offset
            segs = self._segs
            segments, bases = segs.segments, segs.bases  # one consistent snapshot
            for seg in segments[segs.floor_index(bases, self._recovery_point):]:
                seg.flush()
            with self._lock:
                if target > self._recovery_point:
                    self._recovery_point = target
                self._last_flush_ms = self._now_ms()

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Flush if `flush.ms` has passed since the last flush and data is unflushed."""
        now = self._now_ms() if now_ms is None else now_ms
        if self.unflushed_messages > 0 and now - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    # ----------------------------------------------------------------- read
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchSlice:
        """The byte range to send for a fetch at `offset` (starting at the batch holding it):
        at most `max_bytes`, cut at the batch holding `max_offset`. With `min_one_batch` the
        first batch is whole even above `max_bytes` (KIP-74); without it a first batch larger
        than `max_bytes` gives a fragment marked `first_entry_incomplete` (Kafka's
        LogSegment.read); later batches that do not fit are cut at `max_bytes` (as Kafka's
        FileRecords.slice: clients drop the partial batch at the end)."""
        segs = self._segs
        segments, bases = segs.segments, segs.bases
        start, end = self._log_start_offset, self._log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRange(
                f"Offset {offset} is out of range for {self.topic}-{self.partition}: "
                f"the log holds [{start}, {end}).",
                log_start_offset=start, log_end_offset=end,
            )
        i = segs.floor_index(bases, offset)
        while i < len(segments):
            seg = segments[i]
            size = seg.size  # snapshot: later appends are not part of this slice
            h = seg.translate_offset(offset) if offset < end else None
            if h is not None:
                if h.position + h.size > size:
                    raise self._torn(seg, h.position, h.size, size, offset)
                limit = size
                if max_offset is not None and max_offset < end:  # else nothing to cut
                    if h.base_offset >= max_offset and h.last_offset >= max_offset:
                        return FetchSlice(seg.fd, h.position, 0, h.base_offset)
                    mh = seg.translate_offset(max_offset, h.position)
                    if mh is not None:
                        limit = mh.position if mh.position > h.position else h.position + h.size
                length = min(max_bytes, limit - h.position)
                first = h.base_offset if h.magic == 2 else h.last_offset
                if length < h.size:  # limit - position >= h.size: max_bytes cut the batch
                    if not min_one_batch:
                        return FetchSlice(seg.fd, h.position, max(0, length), first, True)
                    length = min(h.size, size - h.position)
                return FetchSlice(seg.fd, h.position, max(0, length), first)
            if offset >= end or i == len(segments) - 1:
                break
            i += 1
        last = segments[-1]
        return FetchSlice(last.fd, last.size, 0, end)

    def _torn(self, seg: LogSegment, position: int, batch_size: int, size: int,
              offset: int) -> CorruptRecordError:
        return CorruptRecordError(
            f"{self.topic}-{self.partition}: the batch holding offset {offset} at position "
            f"{position} of {seg.log_path.name} is {batch_size} bytes but the segment ends "
            f"after {size - position}: the segment is torn. Stop the broker and run "
            f"`kafkactl recover {self.dir}`.", offset=offset)

    def iter_batches(self, start_offset: int | None = None) -> Iterator[Any]:
        """Every batch from `start_offset` (default: the log start), read into memory.
        For tools and tests; the broker uses read()."""
        offset = self._log_start_offset if start_offset is None else start_offset
        for seg in self._segs.segments:
            if seg.next_offset <= offset or seg.size == 0:
                continue
            h = seg.translate_offset(offset)
            if h is None:
                continue
            data = seg.read_bytes(h.position, seg.size - h.position)
            yield from iter_batches(memoryview(data))

    # ----------------------------------------------------------------- transactions
    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Record an aborted transaction in the .txnindex of the segment holding its
        marker (normally the active one)."""
        segs = self._segs
        seg = segs.segments[segs.floor_index(segs.bases, entry.last_offset)]
        try:
            seg.txn_index.append(entry)
        except OSError as e:
            raise self._storage_error("write the transaction index of", e) from e

    def collect_aborted_transactions(self, start_offset: int, upper_bound: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound) (Kafka's
        collectAbortedTransactions): from the segment holding `start_offset` on, until an
        entry's last stable offset reaches the upper bound."""
        segs = self._segs
        segments, bases = segs.segments, segs.bases
        out: list[AbortedTxn] = []
        for seg in segments[segs.floor_index(bases, start_offset):]:
            found, complete = seg.txn_index.collect_aborted(start_offset, upper_bound)
            out.extend(found)
            if complete:
                break
        return out

    def fetch_upper_bound(self, first_offset: int, end_position: int, limit: int) -> int:
        """An offset past every record of a fetch slice ending at `end_position` of the
        segment holding `first_offset` (Kafka's fetchUpperBoundOffset: the offset of the
        first index entry at or after that position, else the next segment's base offset
        or the log end), at most `limit`: the aborted transactions a read_committed fetch
        returns start below it."""
        segs = self._segs
        segments = segs.segments
        i = segs.floor_index(segs.bases, first_offset)
        index = segments[i].offset_index
        lo, hi = 0, index.entry_count  # the first entry at or after end_position
        while lo < hi:
            mid = (lo + hi) // 2
            if index.entry(mid)[1] >= end_position:
                hi = mid
            else:
                lo = mid + 1
        if lo < index.entry_count:
            return min(limit, index.entry(lo)[0])
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else self._log_end_offset
        return min(limit, nxt)

    def aborted_transactions(self) -> list[AbortedTxn]:
        """Every .txnindex entry of the log, in marker order."""
        return [e for seg in self._segs.segments for e in seg.txn_index]

    # ----------------------------------------------------------------- time lookup
    def fetch_offset_by_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ts (ListOffsets).
        -2 = earliest, -1 = latest, -3 = the record with the max timestamp."""
        segments = self._segs.segments
        if ts == EARLIEST_TIMESTAMP:
            return (self._log_start_offset, NO_TIMESTAMP)
        if ts == LATEST_TIMESTAMP:
            return (self._log_end_offset, NO_TIMESTAMP)
        if ts == MAX_TIMESTAMP:
            best = max(segments, key=lambda s: s.max_timestamp_so_far)
            if best.max_timestamp_so_far < 0:
                return None
            return (best.offset_of_max_timestamp_so_far, best.max_timestamp_so_far)
        start = self._log_start_offset
        for seg in segments:
            if seg.size == 0 or seg.max_timestamp_so_far < ts:
                continue
            tentry = seg.time_index.lookup(ts)
            pos = seg.offset_index.lookup(max(tentry.offset, start)).position
            for h in seg.headers_from(pos):
                if h.max_timestamp < ts or h.last_offset < start:
                    continue
                data = seg.read_bytes(h.position, h.size)
                for batch in iter_batches(memoryview(data)):
                    log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
                    for rec in batch:
                        rts = batch.max_timestamp if log_append else rec.timestamp
                        if rts >= ts and rec.offset >= start:
                            return (rec.offset, rts)
        return None

    # ----------------------------------------------------------------- truncation
    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= `offset` (the batch holding `offset`
        is removed whole)."""
        with self._lock:
            if offset >= self._log_end_offset:
                return
            if offset < 0:
                raise LogError(f"Cannot truncate to negative offset {offset}.")
            segments = self._segs.segments
            if offset <= segments[0].base_offset:
                self._truncate_fully_and_start_at(offset)
                return
            self._segs.drop([s for s in segments if s.base_offset >= offset],
                            self._delete_deadline())
            active = self._segs.active
            active.truncate_to(offset)
            active.resize_indexes(self.config.segment_index_bytes)
            self._log_end_offset = active.next_offset
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self._log_start_offset = min(self._log_start_offset, self._log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every record and continue at `offset` (a follower behind its leader's log
        start)."""
        with self._lock:
            self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        """Every segment, producer snapshot and leader epoch goes (Kafka's
        truncateFullyAndStartAt: a snapshot would describe records no longer here)."""
        old = list(self._segs.segments)
        same = [s for s in old if s.base_offset == offset]
        deadline = self._delete_deadline()
        # rename the others to .deleted first, so the new segment's file name is free
        self._segs.schedule_delete([s for s in old if s.base_offset != offset], deadline)
        self._segs.schedule_delete_files(
            mark_snapshots_for_deletion(self.dir, below=_ALL_OFFSETS), deadline)
        if same:
            segment = same[0]
            segment.truncate_bytes(0)
            segment.rebuild_indexes([])
        else:
            segment = LogSegment(self.dir, offset, self.config, created_ms=self._now_ms(),
                                 create=True)
        segment.resize_indexes(self.config.segment_index_bytes)
        self._segs.replace([segment])
        self._log_end_offset = offset
        self._log_start_offset = offset
        self._recovery_point = min(self._recovery_point, offset)
        cache = self._epoch_cache
        if cache is not None:
            try:
                cache.clear()
            except OSError as e:  # cleared in memory; the file follows at its next write
                logger.warning("%s-%d: cannot rewrite %s after truncating the log fully: "
                               "%s", self.topic, self.partition, cache.path.name,
                               e.strerror or e)

    # ----------------------------------------------------------------- leader epochs
    @property
    def leader_epoch_cache(self) -> LeaderEpochCache | None:
        return self._epoch_cache

    def attach_leader_epoch_cache(self, cache: LeaderEpochCache | None) -> None:
        """The partition's leader-epoch cache, loaded. From now on the log trims it from
        the start whenever its log start moves up (retention, DeleteRecords, a follower
        following its leader's log start), as Kafka's UnifiedLog does (truncateFromStart in
        maybeIncrementLogStartOffset), and clears it when it truncates fully. Trimmed to
        the log start at once, as Kafka's LogLoader does: retention may have moved it
        before the partition was made, or a crash lost the last trim's checkpoint."""
        with self._lock:
            self._epoch_cache = cache
            if cache is not None:
                self._trim_epochs(self._log_start_offset)

    def _trim_epochs(self, start: int) -> None:
        cache = self._epoch_cache
        if cache is None:
            return
        try:
            cache.truncate_from_start(start)
        except OSError as e:  # trimmed in memory; the file at its next write or start
            logger.warning("%s-%d: cannot rewrite %s after the log start moved to %d: %s",
                           self.topic, self.partition, cache.path.name, start,
                           e.strerror or e)

    def _advance_log_start(self, offset: int) -> None:
        """Under the lock: the log start moves up to `offset` (never down), and the
        leader epochs wholly below it leave the cache."""
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._trim_epochs(offset)

    # ----------------------------------------------------------------- retention
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords (and a follower following its leader's log start): advance the log
        start offset; returns the new log start. When it moved, `on_log_start_moved` is
        called before this returns (the checkpoint is written before the answer)."""
        with self._lock:
            if offset > self._log_end_offset or offset < 0:
                raise OffsetOutOfRange(
                    f"Cannot delete records before {offset}: the log ends at "
                    f"{self._log_end_offset}.",
                    log_start_offset=self._log_start_offset,
                    log_end_offset=self._log_end_offset,
                )
            before = self._log_start_offset
            self._advance_log_start(offset)
            self._delete_segments_below_start()
            start = self._log_start_offset
        hook = self.on_log_start_moved
        if start > before and hook is not None:
            hook(start)
        return start

    def _delete_segments_below_start(self) -> int:
        n = segments_below_start(self._segs.segments, self._log_start_offset)
        if n:
            self._drop_oldest(n)
        return n

    def _drop_oldest(self, n: int) -> None:
        """Under the lock: delete the `n` oldest segments (renamed `.deleted` now,
        unlinked after file.delete.delay.ms) and with them the producer snapshots at their
        base offsets (Kafka's deleteSegments -> deleteProducerSnapshots) and any other
        below the first segment left (taken at a log end inside a deleted segment). The
        snapshot at that segment's base stays: recovery rebuilds its .txnindex from it,
        even when the log start is further in (DeleteRecords)."""
        deadline = self._delete_deadline()
        self._segs.drop(self._segs.segments[:n], deadline)
        self._segs.schedule_delete_files(
            mark_snapshots_for_deletion(self.dir, below=self._segs.segments[0].base_offset),
            deadline)

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: delete whole segments past retention.ms / retention.bytes or below
        the log start offset, none above the high watermark (`high_watermark_source`).
        Returns how many segments were deleted."""
        now = self._now_ms() if now_ms is None else now_ms
        source = self.high_watermark_source
        high_watermark = None if source is None else source()  # (outside the lock)
        with self._lock:
            deleted = self._delete_segments_below_start()
            if not self.config.delete:
                return deleted
            segs = self._segs.segments
            doomed = segments_past_retention(segs, self.config, now, high_watermark,
                                             self._log_end_offset)
            if doomed == 0:
                return deleted
            if doomed >= len(segs):
                # the active segment goes too: roll first so the log keeps a segment
                if segs[-1].size > 0:
                    self.roll()
                    segs = self._segs.segments
                doomed = len(segs) - 1
            if doomed <= 0:
                return deleted
            self._drop_oldest(doomed)
            self._advance_log_start(self._segs.segments[0].base_offset)
            return deleted + doomed

    def _delete_deadline(self) -> int:
        return self._now_ms() + self.config.file_delete_delay_ms

    @property
    def pending_deletes(self) -> int:
        return self._segs.pending_count

    def delete_pending(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Close and unlink `.deleted` files whose delay has passed (off the hot path:
        unlinking is slow on a discard-mounted disk). Returns files deleted."""
        now = self._now_ms() if now_ms is None else now_ms
        with self._lock:
            due = self._segs.take_due(now, force=force)
        self._segs.delete_files(due)
        return len(due)

    # ----------------------------------------------------------------- lifecycle
    @property
    def closed(self) -> bool:
        """Closed (deleted, moved, or the broker stopping): the cleaner leaves it."""
        return self._closed

    def close(self) -> None:
        """Clean close: final time-index entries, trimmed indexes, files closed."""
        with self._flush_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            for seg in self._segs.segments:
                seg.close_clean()
            self._segs.close_pending()

    def close_files(self) -> None:
        """Close the files without writing to them (no final index entries, no trim):
        the log of a dir that failed. Each segment's files are closed even if another's
        close fails."""
        with self._lock:
            self._closed = True
            segments = list(self._segs.segments)
        for seg in segments:
            with contextlib.suppress(OSError):
                seg.close()
        with contextlib.suppress(OSError):
            self._segs.close_pending()

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        import shutil

        self.close()
        self.delete_pending(force=True)
        shutil.rmtree(self.dir, ignore_errors=True)
