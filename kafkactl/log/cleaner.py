"""LogCleaner: log compaction for `cleanup.policy=compact` (and `compact,delete`).

For one log: build a map key -> latest offset over the dirty section (from the
cleaner-offset-checkpoint position up to the first uncleanable offset), then rewrite every
cleanable segment keeping a record only if no later record has its key. Offsets never
change (gaps are fine), batches whose records all survive are copied byte for byte, and the
active segment is never touched.

Magic 0/1 message sets (data Kafka 0.10 or older wrote) are cleaned as Kafka cleans them
(MemoryRecords.filterTo): their keys go into the offset map; a message is kept when it has a
key and no later record has it; an uncompressed message is copied as it is or dropped; a
compressed wrapper whose messages all stay is copied as it is, else rewritten with the kept
ones in a wrapper of the same magic and codec (kafkactl.record.legacy_builder); a wrapper
with none left goes. Their tombstones follow Kafka's pre-KIP-534 rule (they carry no delete
horizon): a segment keeps them while its last-modified time is later than that of the last
segment below the first dirty offset less `delete.retention.ms` (none: kept). A cleaned
segment keeps the last-modified time of the last segment it replaces, as Kafka's.

What may be cleaned (Kafka's LogCleanerManager.cleanableOffsets): segments below the
active one, below the first open transaction, and below the first dirty segment whose
largest timestamp is newer than now - `min.compaction.lag.ms`. A log is cleaned when its
dirty ratio is above `min.cleanable.dirty.ratio` (strictly, as Kafka's: 1.0 never cleans
on the ratio alone), or, whatever the ratio, when a dirty
segment's first batch is older than now - `max.compaction.lag.ms` (KIP-354); such logs go
first in a pass.

Tombstones (KIP-534): the pass that first keeps a tombstone rewrites its batch with the
delete horizon (attribute bit 6, the horizon now + `delete.retention.ms` in the base
timestamp, the records' timestamp deltas taken from it so their timestamps are unchanged);
a later pass removes the tombstone once now >= that horizon. A batch whose horizon is not set
yet keeps its tombstones whatever delete.retention.ms is (Kafka's shouldRetainDeletes): with
delete.retention.ms=0 the pass that first sees a tombstone keeps it and stamps the horizon
(now), and the next pass removes it.

Consecutive segments are cleaned into one (Kafka's groupSegmentsBySize: their sizes add up
to at most segment.bytes, each index to at most segment.index.bytes, their offsets span
less than 2^31), so compaction does not leave a trail of tiny segments. A group with
nothing left is deleted, except the log's first segment, which is kept (empty) so the log
start stays where it is.

Crash safety, one group at a time (Kafka's `.cleaned` / `.swap`):
  1. write `<base>.log.cleaned` and fsync it          crash: the loader deletes it
  2. unlink the first segment's index files           crash: the indexes are rebuilt
  3. rename `.cleaned` -> `<base>.log.swap`           (the commit point) crash: the loader
                                                      renames the swap over the old log and
                                                      deletes the other segments it covers
  4. rename the group's other segments to `.deleted`
  5. rename `.swap` -> `<base>.log`, build fresh indexes, swap the LogSegment in.
Open file descriptors of the replaced segments stay valid for in-flight reads and are
closed after `file.delete.delay.ms`.

Transactions (Kafka's CleanedTransactionMetadata): only segments wholly below the first
offset of the earliest open transaction are cleaned (an open transaction's outcome is not
known yet, so read_committed consumers keep seeing what they must). Records of aborted
transactions are removed and take no part in the key map (an aborted value never hides a
committed one). An ABORT marker stays while a pass still removed records of its
transaction; a marker whose transaction has no record left (an ABORT after that pass, a
COMMIT whose records were all compacted away) gets KIP-534's delete horizon (now +
`delete.retention.ms`) and is removed by the first pass after it, so a consumer that
fetched the transaction's records still finds its marker. The .txnindex of each cleaned
segment is rewritten with the aborted transactions that still have records (what recovery
would rebuild from the cleaned log).

Active producers (Kafka's isBatchLastRecordOfProducer over lastRecordsOfActiveProducers):
the batch holding an active producer's last record stays. A replica rebuilt from the log (a
replaced disk, lost .snapshot files) must still know the producer's last sequence and epoch,
or the producer's retry of its last acknowledged batch is appended twice. Which producers
are active, and their last entries, is read from the log's batch headers by the producer
state's replay rules (cleaner_producers; not expired: producer.id.expiration.ms). A data
batch that holds one and keeps no record is written empty (RETAIN_EMPTY: its header only,
record count 0, same offsets, producer id, epoch and base sequence); a batch of an aborted
transaction too, and its marker and .txnindex entry then stay with it (the transaction still
has a batch). When the producer's last entry is a marker of a newer epoch, that marker stays
whole past its delete horizon (Kafka keeps its header only, which a rebuild ignores). An
empty batch that no longer holds a producer's last record goes. Every rewritten batch keeps
its original last offset (Kafka's overrideLastOffset), and with it its last sequence.
"""

from __future__ import annotations

import logging
import os
import time as _time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkactl.log.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_checkpoint, update_checkpoint
from kafkactl.log.cleaner_producers import empty_batch, holds_last_record, log_producers
from kafkactl.log.errors import CheckpointError
from kafkactl.log.offset_index import INT32_MAX
from kafkactl.log.producer_state import LastRecord, mark_snapshots_for_deletion
from kafkactl.log.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment
from kafkactl.log.txn_index import (
    AbortedTxn,
    TxnTracker,
    buffer_txn_events,
    parse_marker,
    reconcile_entries,
    tracker_at,
)
from kafkactl.record.batch import Record
from kafkactl.record.batch_header import DELETE_HORIZON_FLAG, TimestampType
from kafkactl.record.builder import assemble_batch, encode_record
from kafkactl.record.codecs import compress
from kafkactl.record.errors import RecordError
from kafkactl.record.legacy import LegacyBatch
from kafkactl.record.legacy_builder import LegacyRecord, build_legacy_wrapper
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


_LEGACY_ERRORS = (RecordError, UnicodeDecodeError, IndexError, ValueError, OSError, EOFError)


def _legacy_messages(batch: LegacyBatch, lg: Any) -> list[tuple[int, Any]] | None:
    """(offset, message) of a magic 0/1 entry (the inner messages of a wrapper), or None
    (logged) when a wrapper does not decompress or parse: it is kept as it is."""
    try:
        return list(batch.iter_messages())
    except _LEGACY_ERRORS as e:
        where = f"{lg.topic}-{lg.partition}" if lg is not None else "a log"
        log.warning("cleaner: skipping unparseable magic %d message set at offset %d of %s: "
                    "%s", batch.magic, batch.last_offset, where, e)
        return None


def _clean_legacy(batch: LegacyBatch, raw: memoryview, offset_map: dict[bytes, int],
                  retain_deletes: bool, lg: Any) -> tuple[bytes | memoryview | None, int, int]:
    """What stays of one magic 0/1 entry (Kafka's filterTo and shouldRetainRecord): `raw`
    when every message stays, None when none does, else a new wrapper; (that, records in,
    records out). A message without a key goes (Kafka counts it invalid)."""
    messages = _legacy_messages(batch, lg)
    if messages is None:
        return raw, 0, 0
    wrapper = batch.entry.message
    keep = []
    unchanged = True
    for offset, m in messages:
        key = m.key
        if key is None:
            unchanged = False
            continue
        latest = offset_map.get(bytes(key))
        if (latest is not None and latest > offset) or (m.value is None and not retain_deletes):
            unchanged = False
            continue
        if m.magic != wrapper.magic:  # KAFKA-4298: rewritten with the wrapper's magic
            unchanged = False
        keep.append((offset, m))
    if unchanged:
        return raw, len(messages), len(messages)
    if not keep:
        return None, len(messages), 0
    log_append = wrapper.magic == 1 and batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    records: list[LegacyRecord] = [
        (offset, m.timestamp, bytes(m.key), None if m.value is None else bytes(m.value))
        for offset, m in keep]
    built = build_legacy_wrapper(wrapper.magic, wrapper.compression, records,
                                 log_append_time=wrapper.timestamp if log_append else None)
    return built, len(messages), len(keep)


@dataclass
class SegmentSwap:
    segments: list[LogSegment]  # a group of consecutive segments, cleaned into one
    cleaned_path: Path | None  # None: nothing is left, the group is deleted
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int
    txn_entries: list[AbortedTxn] | None = None  # the cleaned segment's .txnindex
    mtime_ns: int | None = None  # the last replaced segment's (the cleaned one keeps it)

    @property
    def segment(self) -> LogSegment:
        """The first segment of the group (the cleaned one takes its base offset)."""
        return self.segments[0]


def _build_batch(batch: RecordBatch, keep: list[Record], horizon_ms: int | None) -> bytes:
    """`batch` again with only the records `keep` (offsets, producer fields, sequence, epoch
    and compression kept). With `horizon_ms`, KIP-534's delete horizon: the attribute bit
    set and the horizon in the base timestamp, the records' timestamp deltas taken from it
    so that their timestamps stay what they were."""
    base_ts = horizon_ms if horizon_ms is not None else keep[0].timestamp
    records = b"".join(
        encode_record(rec.offset - batch.base_offset, rec.timestamp - base_ts,
                      None if rec.key is None else bytes(rec.key),
                      None if rec.value is None else bytes(rec.value),
                      [(k, None if v is None else bytes(v)) for k, v in rec.headers])
        for rec in keep)
    if batch.compression:
        records = compress(batch.compression, records)
    attributes = batch.attributes & ~DELETE_HORIZON_FLAG
    if horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG
    max_ts = (batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME
              else max(rec.timestamp for rec in keep))
    # the original last offset stays (Kafka's overrideLastOffset): with it the producer's
    # last sequence (base sequence + last offset delta) survives the cleaning
    return assemble_batch(
        records, attributes=attributes, last_offset_delta=batch.last_offset_delta,
        base_timestamp=base_ts, max_timestamp=max_ts, producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
        record_count=len(keep), base_offset=batch.base_offset,
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


def _drop_snapshots(segs: Any, d: Path, gone: list[LogSegment], deadline: int) -> None:
    """The producer snapshots at the base offsets of segments the swap removed go with
    them (Kafka's replaceSegments -> deleteProducerSnapshots); the one at the base of the
    segment that replaces them stays."""
    segs.schedule_delete_files(
        mark_snapshots_for_deletion(d, at={s.base_offset for s in gone}), deadline)


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _cleanable(every: Any, first_unstable: int | None, first_uncleanable: int
               ) -> tuple[list[LogSegment], int]:
    """(the inactive segments, empty ones too, wholly below the first open transaction
    and below `first_uncleanable` (a segment base: min.compaction.lag.ms), the offset the
    cleaned range ends at)."""
    segments: list[LogSegment] = []
    end = every[0].base_offset
    for i, seg in enumerate(every[:-1]):
        if seg.base_offset >= first_uncleanable:
            return segments, seg.base_offset
        if first_unstable is not None and seg.next_offset > first_unstable:
            return segments, seg.base_offset  # an open transaction from here: not yet
        segments.append(seg)
        end = every[i + 1].base_offset
    return segments, end


def _group_by_size(segments: list[LogSegment], config: Any, end: int) -> list[list[LogSegment]]:
    """Kafka's groupSegmentsBySize: consecutive segments cleaned into one, while their
    sizes add up to at most segment.bytes, each index to at most segment.index.bytes, and
    the offsets from the group's base to the next segment's (estimated) last one fit in an
    int32. An empty segment joins whatever its offsets."""
    groups: list[list[LogSegment]] = []
    i, n = 0, len(segments)
    while i < n:
        first = segments[i]
        group = [first]
        size = first.size
        index_size = first.offset_index.entry_count * first.offset_index.ENTRY_SIZE
        time_size = first.time_index.entry_count * first.time_index.ENTRY_SIZE
        i += 1
        while i < n:
            seg = segments[i]
            seg_index = seg.offset_index.entry_count * seg.offset_index.ENTRY_SIZE
            seg_time = seg.time_index.entry_count * seg.time_index.ENTRY_SIZE
            last = (segments[i + 1].base_offset if i + 1 < n else end) - 1
            if (size + seg.size > config.segment_bytes
                    or index_size + seg_index > config.segment_index_bytes
                    or time_size + seg_time > config.segment_index_bytes
                    or (seg.size and last - first.base_offset > INT32_MAX)):
                break
            group.append(seg)
            size += seg.size
            index_size += seg_index
            time_size += seg_time
            i += 1
        groups.append(group)
    return groups


def _build_offset_map(segments: list[LogSegment], first_dirty: int,
                      aborted: list[AbortedTxn], lg: Any) -> dict[bytes, int]:
    """Kafka's buildOffsetMap: key -> latest offset over the dirty section (from
    `first_dirty`), records of aborted transactions left out, magic 0/1 messages included."""
    offset_map: dict[bytes, int] = {}
    in_map = TxnFilter(aborted)
    for seg in segments:
        if seg.next_offset <= first_dirty or not seg.size:
            continue
        try:
            data = memoryview(seg.read_bytes(0, seg.size))
            for batch in iter_batches(data):
                if not isinstance(batch, RecordBatch):
                    if isinstance(batch, LegacyBatch) and batch.last_offset >= first_dirty:
                        for off, m in _legacy_messages(batch, lg) or ():
                            if m.key is not None and off >= first_dirty:
                                offset_map[bytes(m.key)] = off
                    continue
                if batch.last_offset < first_dirty:
                    continue
                if batch.is_control:  # ends its producer's transaction, aborted or not
                    in_map.control_batch(
                        batch, data[batch.position:batch.position + batch.size])
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
    return offset_map


@dataclass
class CleanableRange:
    """What a pass over one log would clean (Kafka's LogToClean)."""

    first_dirty: int
    first_uncleanable: int  # a segment base: active, or min.compaction.lag.ms
    clean_bytes: int  # inactive bytes below the first dirty offset
    cleanable_bytes: int  # dirty bytes below the first uncleanable offset
    compaction_delay_ms: int  # how long the oldest dirty record is past max.compaction.lag.ms

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        """max.compaction.lag.ms passed for a dirty record that can be cleaned (KIP-354)."""
        return self.compaction_delay_ms > 0 and self.cleanable_bytes > 0

    def due(self, min_ratio: float) -> bool:
        """Kafka's grabFilthiestCompactedLog test: needCompactionNow, or a cleanable ratio
        strictly above min.cleanable.dirty.ratio."""
        return self.needs_compaction_now or (self.ratio > 0 and self.ratio > min_ratio)


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
        offset = saved.get((lg.topic, lg.partition), 0)
        if offset > lg.log_end_offset:  # past the end (a truncated log): clean it all
            offset = 0
        return max(offset, lg.log_start_offset)

    def _save_checkpoint(self, lg: Any, offset: int) -> None:
        """Under the log's lock, the log open: a deletion (LogManager.delete_log closes
        the log, then drops its entry) never sees the entry written back after it. The
        file's other entries are read and written under the file's lock."""
        update_checkpoint(self.checkpoint_path(lg), update={(lg.topic, lg.partition): offset})

    # ---- deciding ---------------------------------------------------------------------------
    def cleanable_range(self, lg: Any, now_ms: int | None = None) -> CleanableRange:
        """Kafka's cleanableOffsets and maxCompactionDelay: the first uncleanable offset is
        the active segment's base or the base of the first dirty segment whose largest
        timestamp is newer than now - min.compaction.lag.ms, whichever comes first; the
        compaction delay is how far the earliest first-batch timestamp of the dirty
        inactive segments is past now - max.compaction.lag.ms."""
        now = self._now_ms() if now_ms is None else now_ms
        cfg = lg.config
        every = lg.segments
        first_dirty = self.first_dirty_offset(lg)
        inactive = every[:-1]
        dirty = [s for s in inactive if s.next_offset > first_dirty]
        first_uncleanable = every[-1].base_offset
        min_lag = max(cfg.min_compaction_lag_ms, 0)
        if min_lag > 0:
            for seg in dirty:
                if seg.largest_timestamp() > now - min_lag:
                    first_uncleanable = seg.base_offset
                    break
        clean = sum(s.size for s in inactive if s.next_offset <= first_dirty)
        cleanable = sum(s.size for s in dirty if s.base_offset < first_uncleanable)
        delay = 0
        max_lag = max(cfg.max_compaction_lag_ms, 0)
        if dirty and max_lag < now:
            firsts = [t for s in dirty if (t := s.rolling_based_timestamp()) > 0]
            clean_until = now - max_lag
            if firsts and min(firsts) < clean_until:
                delay = clean_until - min(firsts)
        return CleanableRange(first_dirty, max(first_dirty, first_uncleanable), clean,
                              cleanable, delay)

    def dirty_ratio(self, lg: Any) -> float:
        return self.cleanable_range(lg).ratio

    def needs_cleaning(self, lg: Any) -> bool:
        return bool(lg.config.compact) and self.cleanable_range(lg).due(
            lg.config.min_cleanable_dirty_ratio)

    # ---- cleaning -----------------------------------------------------------------------------
    def clean(self, lg: Any, *, force: bool = False) -> CleanerStats | None:
        """Compact the cleanable segments of `lg` (prepare + commit). None: nothing to do.
        `force` cleans whatever the dirty ratio; min.compaction.lag.ms still holds. A log
        closed (deleted) is skipped, as Kafka aborts the cleaning of a log being deleted."""
        if lg.closed:
            return None
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
        now = self._now_ms()
        rng = self.cleanable_range(lg, now)
        first_dirty = rng.first_dirty
        if not force and (rng.cleanable_bytes == 0
                          or not rng.due(lg.config.min_cleanable_dirty_ratio)):
            return None  # decided before reading the log's transactions
        state = log_producers(every, now)
        segments, end = _cleanable(every, state.first_unstable, rng.first_uncleanable)
        if not segments or (not force and first_dirty >= end):
            return None
        stats = CleanerStats(lg.topic, lg.partition, first_dirty, end)
        offset_map = _build_offset_map(segments, first_dirty, state.aborted, lg)
        swaps = []
        txns = TxnFilter(state.aborted)
        # the .txnindex entries of the kept bytes, read from the first segment's base with
        # the transactions its producer snapshot says were open there
        kept = tracker_at(Path(lg.dir), every[0].base_offset, every[0].base_offset)[0]
        keep_first = every[0]  # the log start stays: its segment is never deleted
        # magic 0/1 tombstones: Kafka's legacyDeleteHorizonMs (the last segment below the
        # first dirty offset, its last-modified time less delete.retention.ms)
        clean = [s for s in every if s.base_offset < first_dirty]
        legacy_horizon = (clean[-1].last_modified_ms() - lg.config.delete_retention_ms
                          if clean else 0)
        for group in _group_by_size(segments, lg.config, end):
            swap = self._clean_group(group, offset_map, now, lg, txns, kept,
                                     keep_empty=group[0] is keep_first,
                                     legacy_horizon_ms=legacy_horizon,
                                     last_records=state.last_records)
            if swap is not None:
                swaps.append(swap)
        return stats, swaps

    def _clean_group(self, group: list[LogSegment], offset_map: dict[bytes, int],
                     now_ms: int, lg: Any, txns: TxnFilter, kept: TxnTracker, *,
                     keep_empty: bool = True, legacy_horizon_ms: int = 0,
                     last_records: dict[int, LastRecord] | None = None
                     ) -> SegmentSwap | None:
        """The group rewritten into one segment without superseded records; None when
        nothing changes. A batch whose records cannot be parsed is kept byte for byte
        (logged); a group with an unframeable batch header is left as it is."""
        parts: list[bytes | memoryview] = []
        entries: list[AbortedTxn] = []
        changed = len(group) > 1
        rin = rout = 0
        for seg in group:
            try:
                seg_changed, seg_in, seg_out = self._rewrite_segment(
                    seg, offset_map, now_ms, lg, txns, kept, parts, entries,
                    legacy_horizon_ms=legacy_horizon_ms, last_records=last_records or {})
            except RecordError as e:
                log.warning("cleaner: leaving segment(s) %s of %s as they are: %s",
                            ", ".join(str(s.base_offset) for s in group),
                            seg.log_path.parent.name, e)
                return None
            changed = changed or seg_changed
            rin += seg_in
            rout += seg_out
        first = group[0]
        # what the log cannot contradict below its first segment (no snapshot there) stays
        entries = reconcile_entries([e for seg in group for e in seg.txn_index.entries],
                                    entries, kept)
        if not changed:
            if entries != first.txn_index.entries:
                first.txn_index.replace_entries(entries)  # only the index is stale
            return None
        bytes_in = sum(s.size for s in group)
        if not parts and not keep_empty:  # nothing left: the group goes
            return SegmentSwap(list(group), None, rin, rout, bytes_in, 0, [])
        try:
            mtime_ns: int | None = os.stat(group[-1].log_path).st_mtime_ns
        except FileNotFoundError:
            mtime_ns = None
        cleaned = first.log_path.with_name(first.log_path.name + CLEANED_SUFFIX)
        with open(cleaned, "wb") as f:
            for p in parts:
                f.write(p)
            f.flush()
            os.fsync(f.fileno())
        return SegmentSwap(list(group), cleaned, rin, rout, bytes_in,
                           cleaned.stat().st_size, entries, mtime_ns)

    # C901: one rule per batch kind, in Kafka's order
    def _rewrite_segment(  # noqa: C901
            self, seg: LogSegment, offset_map: dict[bytes, int], now_ms: int, lg: Any,
            txns: TxnFilter, kept: TxnTracker, parts: list[bytes | memoryview],
            entries: list[AbortedTxn], *, legacy_horizon_ms: int = 0,
            last_records: dict[int, LastRecord] | None = None) -> tuple[bool, int, int]:
        """Append what survives of `seg` to `parts` (and the aborted transactions it keeps
        to `entries`); (whether anything changed, records in, records out).
        `legacy_horizon_ms`: magic 0/1 tombstones stay when the segment was modified after
        it (Kafka's retainLegacyDeletesAndTxnMarkers). `last_records`: the active
        producers' last entries (Kafka's lastRecordsOfActiveProducers): the batch holding
        one stays, emptied of its records if none is kept (RETAIN_EMPTY), a marker whole;
        an empty batch that holds none any more goes."""
        last_records = last_records or {}
        if not seg.size:
            return False, 0, 0
        data = memoryview(seg.read_bytes(0, seg.size))
        retention_ms = max(lg.config.delete_retention_ms, 0) if lg is not None else 0
        changed = False
        rin = rout = 0
        retain_legacy_deletes: bool | None = None  # stat'ed at the first magic 0/1 entry

        def keep_events(chunk: bytes | memoryview) -> None:
            """What recovery would read from the kept bytes: the cleaned .txnindex."""
            for event in buffer_txn_events(chunk):
                entry = kept.feed(event)
                if entry is not None:
                    entries.append(entry)

        for batch in iter_batches(data):
            raw = data[batch.position:batch.position + batch.size]
            if not isinstance(batch, RecordBatch):
                if not isinstance(batch, LegacyBatch):
                    parts.append(raw)
                    continue
                if retain_legacy_deletes is None:
                    retain_legacy_deletes = seg.last_modified_ms() > legacy_horizon_ms
                out, legacy_in, legacy_out = _clean_legacy(batch, raw, offset_map,
                                                           retain_legacy_deletes, lg)
                rin += legacy_in
                rout += legacy_out
                if out is not raw:
                    changed = True
                if out is not None:
                    parts.append(out)
                continue
            if batch.is_control:
                if txns.control_batch(batch, raw):  # its transaction has no record left
                    horizon_ms = batch.delete_horizon_ms
                    if horizon_ms is None:  # KIP-534: it goes delete.retention.ms from now
                        markers = _records_or_none(batch, lg)
                        if markers:
                            raw = memoryview(_build_batch(batch, markers,
                                                          now_ms + retention_ms))
                            changed = True
                    elif horizon_ms <= now_ms and not holds_last_record(batch, last_records):
                        changed = True  # the horizon passed: the marker goes
                        rin += 1
                        continue
                    # else the producer's last entry, the only record of its epoch: kept
                    # whole (Kafka keeps its header only, which a rebuild ignores)
                parts.append(raw)
                keep_events(raw)
                continue
            if txns.data_batch(batch):  # a batch of an aborted transaction
                rin += batch.record_count
                if holds_last_record(batch, last_records):
                    # its header stays (the producer's sequence) and with it the
                    # transaction's marker and .txnindex entry (TxnFilter saw a batch)
                    if batch.record_count:
                        raw = memoryview(empty_batch(batch))
                        changed = True
                    parts.append(raw)
                    keep_events(raw)
                else:
                    changed = True
                continue
            parsed = _records_or_none(batch, lg)
            if parsed is None:
                parts.append(raw)
                continue
            records = parsed
            rin += len(records)
            horizon = batch.delete_horizon_ms
            needs_horizon = False
            keep = []
            for rec in records:
                if rec.key is None:  # as Kafka's shouldRetainRecord: no key, not kept
                    continue         # (written before the topic was compacted)
                latest = offset_map.get(bytes(rec.key))
                if latest is not None and latest > rec.offset:
                    continue
                if rec.value is None:  # a tombstone (KIP-534's shouldRetainDeletes)
                    if horizon is None:
                        needs_horizon = True  # kept: this pass stamps the horizon
                    elif now_ms >= horizon:
                        continue  # its delete horizon passed
                keep.append(rec)
            rout += len(keep)
            if not keep and holds_last_record(batch, last_records):
                if records:  # RETAIN_EMPTY: the producer's last sequence survives
                    raw = memoryview(empty_batch(batch))
                    changed = True
                parts.append(raw)
                keep_events(raw)
                continue
            if len(keep) == len(records) and not needs_horizon and records:
                parts.append(raw)
                keep_events(raw)
                continue
            changed = True
            if not keep:  # (an empty batch no longer its producer's last goes too)
                continue
            built = _build_batch(batch, keep, now_ms + retention_ms if needs_horizon
                                 else horizon)
            parts.append(built)
            keep_events(built)
        return changed, rin, rout

    def commit(self, lg: Any, stats: CleanerStats, swaps: list[SegmentSwap], *,
               stop_after: int | None = None) -> None:
        """Swap the cleaned segments in (see the module doc for the crash-safe order).
        `stop_after` (tests) stops after that step of the first swap, as a crash would."""
        with lg._lock:
            if lg.closed:
                for swap in swaps:
                    if swap.cleaned_path is not None:
                        swap.cleaned_path.unlink(missing_ok=True)
                return
            for swap in swaps:
                inactive = lg.segments[:-1]
                if any(s not in inactive for s in swap.segments):
                    if swap.cleaned_path is not None:  # retention removed one of them
                        swap.cleaned_path.unlink(missing_ok=True)
                    continue
                self._swap_in(lg, swap, stop_after)
                if stop_after is not None:
                    return
                stats.segments += len(swap.segments)
                stats.records_in += swap.records_in
                stats.records_out += swap.records_out
                stats.bytes_in += swap.bytes_in
                stats.bytes_out += swap.bytes_out
            # still under the log's lock: a deletion closes the log first (then drops the
            # entry), so a pass never writes a deleted log's entry back
            self._save_checkpoint(lg, stats.end_offset)
        log.info("cleaned %s-%d up to offset %d: %d segment(s), %d -> %d records, "
                 "%d -> %d bytes", stats.topic, stats.partition, stats.end_offset,
                 stats.segments, stats.records_in, stats.records_out, stats.bytes_in,
                 stats.bytes_out)

    def _swap_in(self, lg: Any, swap: SegmentSwap, stop_after: int | None) -> None:
        """Under the log's lock. The log's segment list is changed in one step (readers
        hold a snapshot); replaced segments are renamed `.deleted` at once and closed and
        unlinked after file.delete.delay.ms."""
        segs = lg.segment_store  # copy-on-write list, pending deletions
        deadline = self._now_ms() + lg.config.file_delete_delay_ms
        d = Path(lg.dir)
        if swap.cleaned_path is None:  # nothing left in the group: it goes
            segs.drop(swap.segments, deadline)
            _drop_snapshots(segs, d, swap.segments, deadline)
            _fsync_dir(d)
            return
        old, others = swap.segments[0], swap.segments[1:]
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
        if others:  # after the commit point: the loader deletes what the swap covers
            segs.schedule_delete(others, deadline)
            _drop_snapshots(segs, d, others, deadline)
            _fsync_dir(d)
            if stop_after == 4:
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
        if swap.mtime_ns is not None:  # Kafka's cleaned.setLastModified (legacy tombstones)
            os.utime(log_path, ns=(swap.mtime_ns, swap.mtime_ns))
        gone = {id(s) for s in others}
        segs.replace([new if s is old else s for s in segs.segments if id(s) not in gone])
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
        """One pass over `logs` (compacted ones only). Logs with a record past
        max.compaction.lag.ms go first (the longest overdue first), then the dirtiest."""
        out = []
        for lg in self._by_priority([lg for lg in list(logs) if lg.config.compact]):
            try:
                stats = self.clean(lg, force=force)
            except Exception:
                if lg.closed:  # deleted (or moved) during the pass
                    log.debug("cleaning %s-%d stopped: the log was closed", lg.topic,
                              lg.partition, exc_info=True)
                    continue
                log.exception("cleaning %s-%d failed; it will be retried", lg.topic,
                              lg.partition)
                continue
            if stats is not None:
                out.append(stats)
        self.close_replaced()
        return out

    def _by_priority(self, logs: list[Any]) -> list[Any]:
        now = self._now_ms()

        def rank(lg: Any) -> tuple[int, float]:
            try:
                rng = self.cleanable_range(lg, now)
            except Exception:  # clean() logs what is wrong with it
                return (0, 0.0)
            return (rng.compaction_delay_ms if rng.needs_compaction_now else 0, rng.ratio)

        return sorted(logs, key=rank, reverse=True)

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
