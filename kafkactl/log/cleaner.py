"""LogCleaner: log compaction for `cleanup.policy=compact` (and `compact,delete`).

For one log: build a map key -> latest offset over the dirty section (from the
cleaner-offset-checkpoint position up to the active segment), then rewrite every inactive
segment keeping a record only if no later record has its key. Tombstones (null values) are
dropped once their segment is older than `delete.retention.ms`. Offsets never change (gaps
are fine), batches whose records all survive are copied byte for byte, and the active
segment is never touched. Magic 0/1 message sets are kept as they are.

Crash safety, one segment at a time (Kafka's `.cleaned` / `.swap`):
  1. write `<base>.log.cleaned` and fsync it          crash: the loader deletes it
  2. unlink the old segment's index files             crash: the indexes are rebuilt
  3. rename `.cleaned` -> `<base>.log.swap`           (the commit point) crash: the loader
                                                      renames the swap over the old log
  4. rename `.swap` -> `<base>.log`, build fresh indexes, swap the LogSegment in.
Open file descriptors of the replaced segment stay valid for in-flight reads and are closed
after `file.delete.delay.ms`.

Transactions (Kafka's CleanedTransactionMetadata): only segments wholly below the first
offset of the earliest open transaction are cleaned (an open transaction's outcome is not
known yet, so read_committed consumers keep seeing what they must). Records of aborted
transactions are removed and take no part in the key map (an aborted value never hides a
committed one). An ABORT marker stays while a pass still removed records of its
transaction; a marker whose transaction has no record left (an ABORT after that pass, a
COMMIT whose records were all compacted away) gets KIP-534's delete horizon (now +
`delete.retention.ms`, in its base timestamp with the attribute bit) and is removed by the
first pass after it, so a consumer that fetched the transaction's records still finds its
marker. The .txnindex of each cleaned segment is
rewritten with the aborted transactions that still have records (what recovery would
rebuild from the cleaned log).
"""

from __future__ import annotations

import logging
import os
import time as _time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkactl.log.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_checkpoint, write_checkpoint
from kafkactl.log.errors import CheckpointError
from kafkactl.log.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment
from kafkactl.log.txn_index import (
    AbortedTxn,
    TxnTracker,
    buffer_txn_events,
    parse_marker,
    segment_txn_events,
)
from kafkactl.record.batch import Record, RecordBatchBuilder
from kafkactl.record.errors import RecordError
from kafkactl.record.memory_records import RecordBatch, iter_batches

log = logging.getLogger(__name__)


def _records_or_none(batch: Any, lg: Any) -> list[Record] | None:
    """The records of one batch, or None (logged) when its bytes do not parse: the cleaner
    skips such a batch (keeps it as it is) instead of failing the pass on every run."""
    try:
        return list(batch)
    except (RecordError, UnicodeDecodeError, IndexError, ValueError) as e:
        where = f"{lg.topic}-{lg.partition}" if lg is not None else "a log"
        log.warning("cleaner: skipping unparseable batch at offsets %d..%d of %s: %s",
                    batch.base_offset, batch.last_offset, where, e)
        return None


@dataclass
class SegmentSwap:
    segment: LogSegment
    cleaned_path: Path
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int
    txn_entries: list[AbortedTxn] | None = None  # the cleaned segment's .txnindex


def _with_delete_horizon(batch: RecordBatch, raw: memoryview, horizon_ms: int) -> bytes:
    """The control batch again with KIP-534's delete horizon: the attribute bit set and
    the horizon in the base timestamp, the records' timestamp deltas taken from it (their
    timestamps unchanged), offsets, producer fields and epoch kept."""
    from kafkactl.record.batch_header import DELETE_HORIZON_FLAG
    from kafkactl.record.builder import assemble_batch, encode_record

    records = b"".join(
        encode_record(rec.offset - batch.base_offset, rec.timestamp - horizon_ms,
                      None if rec.key is None else bytes(rec.key),
                      None if rec.value is None else bytes(rec.value),
                      [(k, None if v is None else bytes(v)) for k, v in rec.headers])
        for rec in RecordBatch(raw, 0))
    return assemble_batch(
        records, attributes=batch.attributes | DELETE_HORIZON_FLAG,
        last_offset_delta=batch.last_offset - batch.base_offset, base_timestamp=horizon_ms,
        max_timestamp=batch.max_timestamp, producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
        record_count=batch.record_count, base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch)


class TxnFilter:
    """Kafka's CleanedTransactionMetadata: which batches belong to aborted transactions,
    and which markers may go, reading batches in offset order."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda a: a.first_offset)
        self._next = 0
        self._aborted: dict[int, bool] = {}  # pid -> a batch of it was seen this pass
        self._committed: set[int] = set()  # pids with records kept since their txn began

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            self._aborted[pending[self._next].producer_id] = False
            self._next += 1

    def data_batch(self, batch: RecordBatch) -> bool:
        """True when the batch belongs to an aborted transaction (it is removed)."""
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        pid = batch.producer_id
        if pid in self._aborted:
            self._aborted[pid] = True
            return True
        self._committed.add(pid)
        return False

    def control_batch(self, batch: RecordBatch, raw: memoryview) -> bool:
        """True when the marker's transaction has no record left (the marker may go once
        the delete horizon passed)."""
        self._consume_up_to(batch.last_offset)
        marker = parse_marker(raw)
        if marker is None:
            return False  # another control type: kept
        pid = batch.producer_id
        if marker[0] == 0:  # ABORT
            seen = self._aborted.pop(pid, None)
            return not seen
        if pid in self._committed:
            self._committed.discard(pid)
            return False
        return True


@dataclass
class CleanerStats:
    topic: str
    partition: int
    first_dirty: int
    end_offset: int
    segments: int = 0
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _transactions(segments: Any) -> tuple[list[AbortedTxn], int | None]:
    """(the aborted transactions that still have records, the first offset of the
    earliest open transaction or None) read from the batch headers of the whole log."""
    tracker = TxnTracker()
    aborted: list[AbortedTxn] = []
    for seg in segments:
        for event in segment_txn_events(seg):
            entry = tracker.feed(event)
            if entry is not None:
                aborted.append(entry)
    first = min(tracker.ongoing.values()) if tracker.ongoing else None
    return aborted, first


def _cleanable(every: Any, first_unstable: int | None) -> tuple[list[LogSegment], int]:
    """(the non-empty inactive segments wholly below the first open transaction, the
    offset the cleaned range ends at)."""
    segments: list[LogSegment] = []
    end = every[-1].base_offset
    for i, seg in enumerate(every[:-1]):
        if first_unstable is not None and seg.next_offset > first_unstable:
            return segments, seg.base_offset  # an open transaction from here: not yet
        if seg.size:
            segments.append(seg)
        end = every[i + 1].base_offset
    return segments, end


class LogCleaner:
    def __init__(self, *, time: Any = _time) -> None:  # noqa: A002
        self._time = time
        self._to_close: list[tuple[int, LogSegment]] = []

    def _now_ms(self) -> int:
        return int(self._time.time() * 1000)

    # ---- checkpoint -----------------------------------------------------------------------
    @staticmethod
    def checkpoint_path(lg: Any) -> Path:
        return Path(lg.dir).parent / CLEANER_OFFSET_CHECKPOINT

    def first_dirty_offset(self, lg: Any) -> int:
        try:
            saved = read_checkpoint(self.checkpoint_path(lg))
        except CheckpointError:
            saved = {}
        return max(saved.get((lg.topic, lg.partition), 0), lg.log_start_offset)

    def _save_checkpoint(self, lg: Any, offset: int) -> None:
        path = self.checkpoint_path(lg)
        try:
            entries = read_checkpoint(path)
        except CheckpointError:
            entries = {}
        entries[(lg.topic, lg.partition)] = offset
        write_checkpoint(path, entries)

    # ---- deciding ---------------------------------------------------------------------------
    def dirty_ratio(self, lg: Any) -> float:
        segs = [s for s in lg.segments[:-1] if s.size]
        total = sum(s.size for s in segs)
        if not total:
            return 0.0
        first_dirty = self.first_dirty_offset(lg)
        dirty = sum(s.size for s in segs if s.next_offset > first_dirty)
        return dirty / total

    def needs_cleaning(self, lg: Any) -> bool:
        return bool(lg.config.compact) and self.dirty_ratio(lg) >= \
            lg.config.min_cleanable_dirty_ratio and self.dirty_ratio(lg) > 0

    # ---- cleaning -----------------------------------------------------------------------------
    def clean(self, lg: Any, *, force: bool = False) -> CleanerStats | None:
        """Compact the inactive segments of `lg` (prepare + commit). None: nothing to do."""
        plan = self.prepare(lg, force=force)
        if plan is None:
            return None
        stats, swaps = plan
        self.commit(lg, stats, swaps)
        return stats

    def prepare(self, lg: Any, *, force: bool = False
                ) -> tuple[CleanerStats, list[SegmentSwap]] | None:
        """Steps that can run beside appends: the offset map and the `.cleaned` files."""
        every = lg.segments
        first_dirty = self.first_dirty_offset(lg)
        if not force and (first_dirty >= every[-1].base_offset
                          or not self.needs_cleaning(lg)):
            return None  # decided before reading the log's transactions
        aborted, first_unstable = _transactions(every)
        segments, end = _cleanable(every, first_unstable)
        if not segments or (not force and first_dirty >= end):
            return None
        stats = CleanerStats(lg.topic, lg.partition, first_dirty, end)
        offset_map: dict[bytes, int] = {}
        in_map = TxnFilter(aborted)
        for seg in segments:
            if seg.next_offset <= first_dirty:
                continue
            try:
                for batch in iter_batches(memoryview(seg.read_bytes(0, seg.size))):
                    if (not isinstance(batch, RecordBatch) or batch.is_control
                            or batch.last_offset < first_dirty):
                        continue
                    if in_map.data_batch(batch):
                        continue  # an aborted transaction's records hide nothing
                    records = _records_or_none(batch, lg)
                    for rec in records or ():
                        if rec.key is not None and rec.offset >= first_dirty:
                            offset_map[bytes(rec.key)] = rec.offset
            except RecordError as e:  # a header that cannot be framed: the rest is unread
                log.warning("cleaner: %s-%d segment %d cannot be read past an unframeable "
                            "batch: %s", lg.topic, lg.partition, seg.base_offset, e)
        horizon = self._now_ms() - lg.config.delete_retention_ms
        swaps = []
        txns = TxnFilter(aborted)
        kept = TxnTracker()
        for seg in segments:
            swap = self._clean_segment(seg, offset_map, horizon, lg, txns, kept)
            if swap is not None:
                swaps.append(swap)
        return stats, swaps

    def _clean_segment(self, seg: LogSegment, offset_map: dict[bytes, int],
                       horizon: int, lg: Any = None, txns: TxnFilter | None = None,
                       kept: TxnTracker | None = None) -> SegmentSwap | None:
        """The segment rewritten without superseded records; None when nothing changes.
        A batch whose records cannot be parsed is kept byte for byte (logged); a segment
        with an unframeable batch header is left as it is."""
        try:
            return self._rewrite_segment(seg, offset_map, horizon, lg,
                                         txns or TxnFilter([]), kept or TxnTracker())
        except RecordError as e:
            log.warning("cleaner: leaving segment %d of %s as it is: %s", seg.base_offset,
                        seg.log_path.parent.name, e)
            return None

    # C901: one rule per batch kind, in Kafka's order
    def _rewrite_segment(  # noqa: C901
            self, seg: LogSegment, offset_map: dict[bytes, int], horizon: int, lg: Any,
            txns: TxnFilter, kept: TxnTracker) -> SegmentSwap | None:
        data = memoryview(seg.read_bytes(0, seg.size))
        drop_tombstones = seg.largest_timestamp() < horizon
        now_ms = self._now_ms()
        lg_retention_ms = now_ms - horizon  # delete.retention.ms
        parts: list[bytes | memoryview] = []
        changed = False
        rin = rout = 0
        entries: list[AbortedTxn] = []

        def keep_events(chunk: bytes | memoryview) -> None:
            """What recovery would read from the kept bytes: the cleaned .txnindex."""
            for event in buffer_txn_events(chunk):
                entry = kept.feed(event)
                if entry is not None:
                    entries.append(entry)

        for batch in iter_batches(data):
            raw = data[batch.position:batch.position + batch.size]
            if not isinstance(batch, RecordBatch):
                parts.append(raw)
                continue
            if batch.is_control:
                if txns.control_batch(batch, raw):  # its transaction has no record left
                    horizon_ms = batch.delete_horizon_ms
                    if horizon_ms is None:  # KIP-534: it goes delete.retention.ms from now
                        raw = memoryview(_with_delete_horizon(
                            batch, raw, now_ms + lg_retention_ms))
                        changed = True
                    elif horizon_ms <= now_ms:
                        changed = True  # the horizon passed: the marker goes
                        rin += 1
                        continue
                parts.append(raw)
                keep_events(raw)
                continue
            if txns.data_batch(batch):
                changed = True  # a record of an aborted transaction
                rin += batch.record_count
                continue
            keep = []
            parsed = _records_or_none(batch, lg)
            if parsed is None:
                parts.append(raw)
                continue
            records = parsed
            rin += len(records)
            for rec in records:
                if rec.key is not None:
                    latest = offset_map.get(bytes(rec.key))
                    if latest is not None and latest > rec.offset:
                        continue
                    if rec.value is None and drop_tombstones:
                        continue
                keep.append(rec)
            rout += len(keep)
            if len(keep) == len(records):
                parts.append(raw)
                keep_events(raw)
                continue
            changed = True
            if not keep:
                continue
            builder = RecordBatchBuilder(
                compression=batch.compression, timestamp_type=batch.timestamp_type,
                producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence, base_offset=batch.base_offset,
                partition_leader_epoch=batch.partition_leader_epoch,
                is_transactional=batch.is_transactional)
            for rec in keep:
                builder.append_at(rec.offset - batch.base_offset, rec.timestamp,
                                  None if rec.key is None else bytes(rec.key),
                                  None if rec.value is None else bytes(rec.value),
                                  [(k, None if v is None else bytes(v)) for k, v in rec.headers])
            built = builder.build()
            parts.append(built)
            keep_events(built)
        if not changed:
            if entries != seg.txn_index.entries:
                seg.txn_index.replace_entries(entries)  # only the index is stale
            return None
        cleaned = seg.log_path.with_name(seg.log_path.name + CLEANED_SUFFIX)
        with open(cleaned, "wb") as f:
            for p in parts:
                f.write(p)
            f.flush()
            os.fsync(f.fileno())
        return SegmentSwap(seg, cleaned, rin, rout, seg.size, cleaned.stat().st_size,
                           entries)

    def commit(self, lg: Any, stats: CleanerStats, swaps: list[SegmentSwap], *,
               stop_after: int | None = None) -> None:
        """Swap the cleaned segments in (see the module doc for the crash-safe order).
        `stop_after` (tests) stops after that step of the first swap, as a crash would."""
        with lg._lock:
            if getattr(lg, "_closed", False):
                for swap in swaps:
                    swap.cleaned_path.unlink(missing_ok=True)
                return
            for swap in swaps:
                if swap.segment not in lg.segments[:-1]:
                    swap.cleaned_path.unlink(missing_ok=True)  # retention removed it
                    continue
                self._swap_in(lg, swap, stop_after)
                if stop_after is not None:
                    return
                stats.segments += 1
                stats.records_in += swap.records_in
                stats.records_out += swap.records_out
                stats.bytes_in += swap.bytes_in
                stats.bytes_out += swap.bytes_out
        self._save_checkpoint(lg, stats.end_offset)
        log.info("cleaned %s-%d up to offset %d: %d segment(s), %d -> %d records, "
                 "%d -> %d bytes", stats.topic, stats.partition, stats.end_offset,
                 stats.segments, stats.records_in, stats.records_out, stats.bytes_in,
                 stats.bytes_out)

    def _swap_in(self, lg: Any, swap: SegmentSwap, stop_after: int | None) -> None:
        old = swap.segment
        d = Path(lg.dir)
        log_path = d / f"{old.base_offset:020d}.log"
        for index in (old.offset_index, old.time_index, old.txn_index):
            Path(index.path).unlink(missing_ok=True)
        _fsync_dir(d)
        if stop_after == 2:
            return
        swap_path = log_path.with_name(log_path.name + SWAP_SUFFIX)
        os.replace(swap.cleaned_path, swap_path)
        _fsync_dir(d)
        if stop_after == 3:
            return
        os.replace(swap_path, log_path)
        _fsync_dir(d)
        new = LogSegment(d, old.base_offset, lg.config, created_ms=old.created_ms)
        if swap.txn_entries:
            new.txn_index.replace_entries(swap.txn_entries)
        headers = new.headers_from(0)
        new.rebuild_indexes(headers)
        new.on_become_inactive()
        new.flush()
        lg.replace_segment(old, new)
        self._to_close.append((self._now_ms() + lg.config.file_delete_delay_ms, old))

    def close_replaced(self, *, force: bool = False) -> None:
        """Close replaced segments whose delay has passed (their files are already gone)."""
        now = self._now_ms()
        keep = []
        for deadline, seg in self._to_close:
            if force or deadline <= now:
                seg.close()
            else:
                keep.append((deadline, seg))
        self._to_close = keep

    def run(self, logs: Any, *, force: bool = False) -> list[CleanerStats]:
        """One pass over `logs` (compacted ones only)."""
        out = []
        for lg in list(logs):
            if not lg.config.compact:
                continue
            try:
                stats = self.clean(lg, force=force)
            except Exception:
                log.exception("cleaning %s-%d failed; it will be retried", lg.topic,
                              lg.partition)
                continue
            if stats is not None:
                out.append(stats)
        self.close_replaced()
        return out

    async def run_periodically(self, get_logs: Any, interval_s: float) -> None:
        """The broker's background cleaner: a pass every `interval_s` (log.cleaner.backoff.ms)
        in a worker thread, so the event loop keeps serving."""
        import asyncio

        while True:
            await asyncio.sleep(max(interval_s, 0.05))
            try:
                await asyncio.to_thread(self.run, list(get_logs()))
            except Exception:
                log.exception("log cleaner pass failed; will retry")

    def shutdown(self) -> None:
        self.close_replaced(force=True)
