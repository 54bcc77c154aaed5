"""Segment recovery: validate every batch, cut at the first invalid byte, rebuild indexes.

Shared by `Log` (at open after an unclean shutdown) and `kafkactl recover`. Validation is
`kafkactl.record.scan` (length inside the file, magic, CRC, increasing offsets, no
per-record work for magic 2), plus the segment's own rules: offsets are >= the segment's
base offset, fit 4 bytes relative to it, and stay below the next segment's base offset.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kafkactl.log.abstract_index import base_offset_from_path
from kafkactl.log.batch_header import V2_FIELDS, BatchHeader, parse_header, read_header
from kafkactl.log.checkpoint import fsync_dir
from kafkactl.log.index_check import (
    offset_index_problems,
    segment_index_problems,
    time_index_problems,
)
from kafkactl.log.offset_index import INT32_MAX
from kafkactl.log.segment import SWAP_SUFFIX, LogSegment, index_entries_for
from kafkactl.log.txn_index import COMMIT, buffer_txn_events, parse_marker
from kafkactl.record.batch import LOG_OVERHEAD, MAGIC_OFFSET, RECORD_BATCH_OVERHEAD
from kafkactl.record.memory_records import scan

_OFFSET_LENGTH = struct.Struct(">qi")
_TXN_MARKER_ATTRS = 0x30  # transactional | control: an end-transaction marker's batch


@dataclass
class LostMarker:
    """A batch recovery cuts (or a salvage would skip) whose header says it is a
    transaction marker: magic 2, the transactional and control attribute bits (and a
    producer id, when that much of the header is on disk). Its CRC failed (or the batch is
    torn), so the header is taken at its word when it reads as a marker's; losing the batch
    loses the end of that producer's transaction."""

    position: int
    offset: int  # the base offset its header claims
    producer_id: int | None  # None: the header is cut before it
    producer_epoch: int | None  # None: the header is cut before it
    marker: str | None  # "ABORT"/"COMMIT" as its damaged record reads; None: unreadable


# how much of a magic-2 header tells a transaction marker: up to the attributes, and
# the producer id and epoch (the rest of the 61-byte header is not needed)
_ATTRS_END = 23
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_AT, _PRODUCER_EPOCH_AT = 43, 51
_PRODUCER_EPOCH = struct.Struct(">h")


def damaged_marker_at(buf: memoryview | bytes | mmap.mmap, pos: int, end: int
                      ) -> LostMarker | None:
    """The transaction marker whose header starts at `pos` (see LostMarker), or None. A
    torn header is read as far as it goes: its attributes (the first 23 bytes) tell a
    marker, the producer id and epoch are None when cut off."""
    if end - pos < _ATTRS_END:
        return None
    base, length = _OFFSET_LENGTH.unpack_from(buf, pos)
    magic = buf[pos + MAGIC_OFFSET]
    attrs = struct.unpack_from(">h", buf, pos + _ATTRS_END - 2)[0]
    if magic != 2 or attrs & _TXN_MARKER_ATTRS != _TXN_MARKER_ATTRS:
        return None
    pid = epoch = None
    if end - pos >= _PRODUCER_EPOCH_AT:
        pid = _PRODUCER_ID.unpack_from(buf, pos + _PRODUCER_ID_AT)[0]
        if pid < 0:
            return None  # no producer: not a marker (garbage that read as one)
    if end - pos >= _PRODUCER_EPOCH_AT + _PRODUCER_EPOCH.size:
        epoch = _PRODUCER_EPOCH.unpack_from(buf, pos + _PRODUCER_EPOCH_AT)[0]
    kind = None
    size = LOG_OVERHEAD + length
    if size >= RECORD_BATCH_OVERHEAD and pos + size <= end:
        parsed = parse_marker(bytes(buf[pos:pos + size]))
        if parsed is not None:
            kind = "COMMIT" if parsed[0] == COMMIT else "ABORT"
    return LostMarker(pos, base, pid, epoch, kind)


def _marker_in_region(buf: memoryview | bytes | mmap.mmap, pos: int, end: int
                      ) -> LostMarker | None:
    """The first transaction marker among the batches of a damaged region [pos, end),
    walked by their length fields as long as those frame batches inside it."""
    while end - pos >= RECORD_BATCH_OVERHEAD:
        found = damaged_marker_at(buf, pos, end)
        if found is not None:
            return found
        length = _OFFSET_LENGTH.unpack_from(buf, pos)[1]
        if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or pos + LOG_OVERHEAD + length > end:
            return None
        pos += LOG_OVERHEAD + length
    return None


@dataclass
class SegmentRecoveryReport:
    path: str
    base_offset: int
    original_bytes: int
    valid_bytes: int
    valid_batches: int
    first_offset: int | None
    last_offset: int | None
    error: str | None  # why the tail was cut (None: the whole file is valid)
    error_position: int | None
    indexes_rebuilt: bool  # the index files were (or, in a dry run, would be) rewritten
    offset_index_entries: int
    time_index_entries: int
    dry_run: bool = False
    salvaged_batches: int = 0  # valid batches kept after a corrupt region (--salvage)
    cut_first_offset: int | None = None  # the offset the first cut batch's header claims
    # what lies past the first invalid byte, found by scanning on as --salvage does (also
    # without it, so a cut can say what it loses): the valid batches a salvage keeps there
    # (it stops at a damaged transaction marker: `salvage_stops`), and the last offset of
    # any valid batch there, also past such a marker (None: none found)
    batches_past_damage: int = 0
    last_offset_past_damage: int | None = None
    salvage_stops: bool = False
    # what is wrong with the index files as found (kafkactl.log.index_check; a dry run)
    index_problems: list[dict[str, object]] = field(default_factory=list)
    # the segment follows the segment the log was cut in: it was (or, in a dry run, would
    # be) deleted whole, so the log stays contiguous (see CutReport)
    deleted: bool = False
    # [first, last] offsets no segment holds between the previous segment's end and this
    # base offset (a compaction leaves such gaps; None: none)
    gap_before: list[int] | None = None
    # the cut batch is a transaction marker (a LostMarker's fields; None: it is not): its
    # producer's transaction is left open
    lost_marker: dict[str, object] | None = None

    @property
    def bytes_truncated(self) -> int:
        return self.original_bytes - self.valid_bytes

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["bytes_truncated"] = self.bytes_truncated
        return d


@dataclass
class CutReport:
    """The log of a partition was cut in one segment (its tail was invalid, or it lost
    its bytes): every later segment is deleted, as Kafka's LogLoader.recoverLog does, so the
    log stays contiguous (producer state, leader epochs and the high watermark assume it)."""

    partition: str
    segment: str  # the file name of the segment the log now ends in
    reason: str  # why the log was cut there (a sentence fragment)
    deleted_segments: list[str]  # the file names of the later segments' .log files
    first_lost_offset: int  # the new log end: offsets from here on are gone
    last_lost_offset: int | None  # the last offset the deleted segments held (None: none)
    log_end_offset: int  # the log end once cut
    dry_run: bool = False
    # valid batches after the cut that `kafkactl recover --salvage` would keep (0: none)
    salvageable_batches: int = 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @property
    def lost_range(self) -> str:
        if self.last_lost_offset is None or self.last_lost_offset < self.first_lost_offset:
            return "no offset"
        if self.last_lost_offset == self.first_lost_offset:
            return f"offset {self.first_lost_offset}"
        return f"offsets {self.first_lost_offset}..{self.last_lost_offset}"

    def sentence(self) -> str:
        """One line for the broker's WARNING and recover's text report."""
        deleted = ", ".join(self.deleted_segments) or "none"
        verb = ("would delete" if self.dry_run else "deleted")
        lost = "would be lost" if self.dry_run else "are lost"
        return (f"{self.partition}: {self.reason}; {verb} the {len(self.deleted_segments)} "
                f"later segment(s) so the log stays contiguous ({deleted}): "
                f"{self.lost_range} {lost}, the log "
                f"{'would end' if self.dry_run else 'now ends'} at offset "
                f"{self.log_end_offset}{salvage_hint(self.salvageable_batches, self.dry_run)}.")


def salvage_hint(batches: int, dry_run: bool) -> str:
    """`; --salvage would keep the 10 valid batches found after the damage` (a dry run
    that would lose valid batches past the damage), else nothing."""
    if not (dry_run and batches > 0):
        return ""
    what = "the valid batch" if batches == 1 else f"the {batches} valid batches"
    return f"; --salvage would keep {what} found after the damage"


def lost_data_reason(name: str, *, bytes_truncated: int, valid_bytes: int,
                     error: str | None, dry_run: bool = False) -> str | None:
    """Why the log must be cut after the segment `name` (not the last one), or None: its
    tail was (in a dry run: would be) cut. Kafka's loader deletes the later segments only
    then (LogLoader.recoverLog: bytes truncated); a segment whose `.log` is missing or
    empty truncates no byte: its offsets are lost (LostSegmentReport), the later segments
    kept."""
    if bytes_truncated > 0:
        return (f"segment {name} {'would be' if dry_run else 'was'} truncated at position "
                f"{valid_bytes} ({error or 'invalid bytes'})")
    return None


MISSING_LOG = "is missing (its index files were left)"
EMPTIED_LOG = "is empty but its index files say it held offsets (its bytes are lost)"


@dataclass
class LostSegmentReport:
    """A segment lost its bytes: its `.log` is missing (orphan index files are left) or
    empty although its index entries say it held offsets. As Kafka's loader, nothing else
    goes: the orphan index files are deleted (an empty segment's indexes rebuilt) and the
    later segments kept, so only this segment's offsets are lost (a gap in the log, which
    fetches skip as they skip a compaction's gaps)."""

    partition: str
    segment: str  # the .log file name
    reason: str  # MISSING_LOG or EMPTIED_LOG
    first_lost_offset: int  # the segment's base offset
    last_lost_offset: int | None  # below the next segment's base (None: it was the last)
    log_end_offset: int  # the log end once loaded
    dry_run: bool = False

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @property
    def lost_range(self) -> str:
        if self.last_lost_offset is None:
            return f"offsets from {self.first_lost_offset} on"
        if self.last_lost_offset == self.first_lost_offset:
            return f"offset {self.first_lost_offset}"
        return f"offsets {self.first_lost_offset}..{self.last_lost_offset}"

    def sentence(self) -> str:
        """One line for the broker's WARNING and recover's text report."""
        lost = "would be lost" if self.dry_run else "are lost"
        if self.last_lost_offset is None:
            after = (f"the log {'would end' if self.dry_run else 'now ends'} at offset "
                     f"{self.log_end_offset}")
        else:
            after = (f"the later segments {'would be' if self.dry_run else 'are'} kept, as "
                     f"Kafka's loader keeps them: the log has a gap there, which consumers "
                     f"skip")
        return (f"{self.partition}: segment {self.segment} {self.reason}: {self.lost_range} "
                f"{lost}; {after}.")


def lost_segments(partition: str, bases: list[int], missing: list[int],
                  emptied: list[int], log_end: int, *, dry_run: bool = False
                  ) -> list[LostSegmentReport]:
    """The reports of the segments whose `.log` is `missing` and of those `emptied` (base
    offsets), among the segments at `bases` (the `.log` files there, emptied ones too):
    each lost the offsets from its base to the next segment's (a missing or an existing
    one)."""
    every = sorted(set(bases) | set(missing))
    out = []
    for base, reason in sorted([(m, MISSING_LOG) for m in missing]
                               + [(e, EMPTIED_LOG) for e in emptied]):
        i = every.index(base)
        last = every[i + 1] - 1 if i + 1 < len(every) else None
        out.append(LostSegmentReport(partition, f"{base:020d}.log", reason, base, last,
                                     log_end, dry_run))
    return out


@dataclass
class LogStartReset:
    """Recovery left the log end below the log start offset (its checkpoint: records up to
    there were deleted, a DeleteRecords say, before a crash tore the tail). As Kafka's
    LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd: every segment is deleted and the
    log restarts empty at the log start, so offsets already handed out are never given
    again; the leader-epoch cache and producer snapshots go with the segments."""

    partition: str
    log_start_offset: int  # the checkpoint's: the log restarts there
    log_end_found: int  # the log end recovery left
    deleted_segments: list[str]  # the file names of the deleted segments' .log files
    dry_run: bool = False

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def sentence(self) -> str:
        deleted = ", ".join(self.deleted_segments) or "none"
        return (f"{self.partition}: the log ends at offset {self.log_end_found} after "
                f"recovery, below its log start offset {self.log_start_offset} (the "
                f"log-start-offset checkpoint: the records below it were deleted already); "
                f"{'would delete' if self.dry_run else 'deleted'} all "
                f"{len(self.deleted_segments)} segment(s) ({deleted}) and "
                f"{'would restart' if self.dry_run else 'restarted'} the log empty at "
                f"offset {self.log_start_offset}, as Kafka's loader does, so no offset is "
                f"handed out twice.")


@dataclass
class ValidPrefix:
    valid_bytes: int
    headers: list[BatchHeader]
    error: str | None
    error_position: int | None
    lost_marker: LostMarker | None = None  # the batch cut there is a transaction marker


def validate_log_bytes(
    buf: memoryview | bytes, base_offset: int, next_base_offset: int | None = None, *,
    start: int = 0, expected_offset: int | None = None,
) -> ValidPrefix:
    """The valid run of a segment's bytes from `start` and the headers of its batches;
    `valid_bytes` is the (absolute) position of the first invalid byte. The first batch's
    offsets must be >= `expected_offset` (default: the segment's base offset)."""
    res = scan(buf, start, expected_offset=base_offset if expected_offset is None
               else expected_offset)
    valid = start + res.valid_bytes
    error, error_pos = res.error, res.error_position
    headers: list[BatchHeader] = []
    append = headers.append
    v2 = V2_FIELDS.unpack_from
    limit = INT32_MAX + base_offset
    next_base = next_base_offset if next_base_offset is not None else 2**63
    pos = start
    while pos < valid:
        if buf[pos + MAGIC_OFFSET] == 2:
            base, length, _magic, delta, ts, count = v2(buf, pos)
            last = base + delta
            if last <= limit and last < next_base:
                append(BatchHeader(pos, LOG_OVERHEAD + length, 2, base, last, ts, count))
                pos += LOG_OVERHEAD + length
                continue
        h = parse_header(buf, pos, pos)
        assert h is not None  # scan framed it
        problem = None
        if h.last_offset - base_offset > INT32_MAX:
            problem = (f"offset {h.last_offset} at position {pos} does not fit relative to "
                       f"the segment base offset {base_offset}")
        elif next_base_offset is not None and h.last_offset >= next_base_offset:
            problem = (f"offset {h.last_offset} at position {pos} belongs to the next "
                       f"segment (base offset {next_base_offset})")
        if problem:
            valid, error, error_pos = pos, problem, pos
            break
        append(h)
        pos += h.size
    return ValidPrefix(valid, headers, error, error_pos)


@dataclass
class PastDamage:
    """What a segment holds past its first invalid byte (see SegmentRecoveryReport)."""

    batches: int = 0  # valid batches a salvage keeps there
    last_offset: int | None = None  # of the last valid batch there, also past a marker
    salvage_stops: bool = False  # a damaged transaction marker stops a salvage there


def past_damage(raw: mmap.mmap | bytes, mv: memoryview, base_offset: int,
                next_base_offset: int | None, vp: ValidPrefix, *, salvaged: bool
                ) -> PastDamage:
    """Scan past the first invalid byte of a segment as a salvage does. `vp`: the file's
    valid prefix, or with `salvaged` its salvage plan (plan_salvage)."""
    if vp.error_position is None:
        return PastDamage()
    plan = vp if salvaged else plan_salvage(raw, mv, base_offset, next_base_offset, first=vp)
    found = PastDamage(salvaged_count(plan), salvage_stops=plan.lost_marker is not None)
    if plan.lost_marker is not None:  # what a cut loses: everything valid, past it too
        plan = plan_salvage(raw, mv, base_offset, next_base_offset, past_markers=True,
                            first=None if salvaged else vp)
    after = [h for h in plan.headers if h.position > vp.error_position]
    if after:
        found.last_offset = after[-1].last_offset
    return found


def validate_file(fd: int, size: int, base_offset: int,
                  next_base_offset: int | None = None, *, salvage: bool = False,
                  txn_events: list[tuple[int, ...]] | None = None,
                  past: list[PastDamage] | None = None) -> ValidPrefix:
    """The valid prefix of a segment file; with `salvage`, every valid batch (see
    plan_salvage): then `valid_bytes` counts the bytes kept. `txn_events` gets the
    transaction events of the valid prefix (txn_index.buffer_txn_events), read while the
    pages are mapped; `past` gets what lies past the first invalid byte (past_damage)."""
    if size == 0:
        if past is not None:
            past.append(PastDamage())
        return ValidPrefix(0, [], None, None)
    mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    try:
        with memoryview(mm) as mv:
            if salvage:
                vp = plan_salvage(mm, mv, base_offset, next_base_offset)
                if past is not None:
                    past.append(past_damage(mm, mv, base_offset, next_base_offset, vp,
                                            salvaged=True))
                return vp
            vp = validate_log_bytes(mv, base_offset, next_base_offset)
            if vp.valid_bytes < size:
                vp.lost_marker = damaged_marker_at(mv, vp.valid_bytes, size)
            if past is not None:
                past.append(past_damage(mm, mv, base_offset, next_base_offset, vp,
                                        salvaged=False))
        if txn_events is not None:
            txn_events.extend(buffer_txn_events(mm, 0, -1, vp.valid_bytes))
        return vp
    except BaseException as e:
        # The frames the error unwound through still hold their locals, views into the map
        # among them: drop those so that close() below can unmap rather than raise a
        # BufferError ("cannot close exported pointers exist") that hides the real error.
        traceback.clear_frames(e.__traceback__)
        raise
    finally:
        _close_map(mm)


def _close_map(mm: mmap.mmap) -> None:
    """Unmap; with a view still exported (held by a caller's error), leave the unmapping
    to the garbage collector rather than replace the error in flight by a BufferError."""
    try:
        mm.close()
    except BufferError:
        if sys.exc_info()[1] is None:
            raise


def plan_salvage(raw: mmap.mmap | bytes, mv: memoryview, base_offset: int,
                 next_base_offset: int | None, *, first: ValidPrefix | None = None,
                 past_markers: bool = False) -> ValidPrefix:
    """Every valid batch of a segment, also those after a corrupt region (`kafkactl recover
    --salvage`): after the first bad byte, look for the next position where a CRC-valid
    batch starts whose offsets follow the last valid one, and go on from there. Offsets
    stay as written (the log then has a gap). The headers keep their original positions;
    `valid_bytes` is the bytes they hold, `error` the first problem found.

    A corrupt region holding a batch whose header says it is a transaction marker is never
    skipped: the salvage stops there (`lost_marker`), as a plain recovery would cut. Its
    producer's records after it would otherwise join that producer's next transaction
    and take its outcome (an aborted transaction committed by the next COMMIT).

    `first`: the valid prefix, when already known. `past_markers`: scan on past such a
    marker too (the first one is still returned): every valid batch of the file, to tell
    what a cut loses."""
    if first is None:
        first = validate_log_bytes(mv, base_offset, next_base_offset)
    headers = list(first.headers)
    pos = first.valid_bytes
    end = len(mv)
    lost = None
    while pos < end:
        last = headers[-1].last_offset if headers else base_offset - 1
        nxt = _next_valid_batch(raw, mv, pos + 1, last + 1, base_offset, next_base_offset)
        if lost is None or not past_markers:
            lost = _marker_in_region(mv, pos, end if nxt is None else nxt)
        if nxt is None or (lost is not None and not past_markers):
            break
        run = validate_log_bytes(mv, base_offset, next_base_offset, start=nxt,
                                 expected_offset=last + 1)
        headers += run.headers
        pos = run.valid_bytes
    kept = sum(h.size for h in headers)
    return ValidPrefix(kept, headers, first.error, first.error_position, lost)


def _next_valid_batch(raw: mmap.mmap | bytes, mv: memoryview, pos: int, min_offset: int,
                      base_offset: int, next_base_offset: int | None) -> int | None:
    """The first position >= `pos` where a whole, CRC-valid magic-2 batch starts whose
    offsets are >= `min_offset` and belong to this segment."""
    end = len(mv)
    top = min(base_offset + INT32_MAX,
              (next_base_offset if next_base_offset is not None else 2**63) - 1)
    i = pos + MAGIC_OFFSET
    while True:
        i = raw.find(b"\x02", i, end)
        if i < 0:
            return None
        p = i - MAGIC_OFFSET
        i += 1
        if end - p < RECORD_BATCH_OVERHEAD:
            return None
        offset, length = _OFFSET_LENGTH.unpack_from(mv, p)
        size = LOG_OVERHEAD + length
        if (min_offset <= offset <= top and size >= RECORD_BATCH_OVERHEAD
                and p + size <= end
                and scan(mv[p:p + size], 0, expected_offset=min_offset).valid_bytes == size):
            return p


expected_index_entries = index_entries_for  # the name the tests and tools use


def recover_segment(segment: LogSegment, *, next_base_offset: int | None = None,
                    txn_events: list[tuple[int, ...]] | None = None
                    ) -> SegmentRecoveryReport:
    """Validate `segment`, truncate it at the first invalid byte, rebuild its indexes
    (the .txnindex needs the partition's history: the caller rebuilds it, from
    `txn_events` when given)."""
    original = segment.size
    vp = validate_file(segment.fd, original, segment.base_offset, next_base_offset,
                       txn_events=txn_events)
    cut_offset = None
    if vp.valid_bytes != original:
        cut_offset = claimed_offset(segment.fd, vp.valid_bytes, segment.base_offset)
        segment.truncate_bytes(vp.valid_bytes)
    segment.rebuild_indexes(vp.headers)
    report = _report(segment.log_path, segment.base_offset, original, vp, True,
                     segment.offset_index.entry_count, segment.time_index.entry_count, False)
    report.cut_first_offset = cut_offset
    return report


def claimed_offset(fd: int, position: int, base_offset: int) -> int | None:
    """The base offset the batch at `position` claims (its first 8 bytes: readable even
    when the batch is cut short or its header damaged), or None when fewer than 8 bytes
    are left or the claim is below the segment's base offset (garbage)."""
    h = read_header(fd, position)
    if h is not None:
        offset = h.base_offset
    else:
        data = os.pread(fd, 8, position)
        if len(data) < 8:
            return None
        offset = struct.unpack(">q", data)[0]
    return offset if offset >= base_offset else None


def inspect_segment(log_path: Path, *, index_interval_bytes: int = 4096,
                    next_base_offset: int | None = None, salvage: bool = False,
                    base_offset: int | None = None) -> SegmentRecoveryReport:
    """What `recover_segment` (or, with `salvage`, salvage_segment_file and then
    recover_segment) would do, without changing any byte (dry run). `base_offset`: the
    segment's base when it is not its file name's (a file a dry run would rename)."""
    base = base_offset_from_path(log_path) if base_offset is None else base_offset
    fd = os.open(log_path, os.O_RDONLY)
    cut_offset = None
    past: list[PastDamage] = []
    try:
        size = os.fstat(fd).st_size
        vp = validate_file(fd, size, base, next_base_offset, salvage=salvage, past=past)
        first_bad = vp.error_position if salvage else vp.valid_bytes
        if first_bad is not None and first_bad < size:
            cut_offset = claimed_offset(fd, first_bad, base)
    finally:
        os.close(fd)
    gaps = has_gaps(vp.headers)
    headers = relocated(vp.headers) if gaps else vp.headers
    offsets, times, _ts, _off = expected_index_entries(headers, base, index_interval_bytes)
    problems = segment_index_problems(log_path, base, vp.headers)
    stale = gaps or bool(problems)
    report = _report(log_path, base, size, vp, stale, len(offsets), len(times), True)
    report.salvaged_batches = salvaged_count(vp)
    report.index_problems = [p.to_dict() for p in problems]
    report.cut_first_offset = cut_offset
    report.batches_past_damage = past[0].batches
    report.last_offset_past_damage = past[0].last_offset
    report.salvage_stops = past[0].salvage_stops
    return report


def has_gaps(headers: list[BatchHeader]) -> bool:
    """The batches do not follow each other from position 0 (a salvage skipped bytes)."""
    pos = 0
    for h in headers:
        if h.position != pos:
            return True
        pos += h.size
    return False


def relocated(headers: list[BatchHeader]) -> list[BatchHeader]:
    """The headers at the positions they get once written one after the other."""
    out, pos = [], 0
    for h in headers:
        out.append(h._replace(position=pos))
        pos += h.size
    return out


def salvaged_count(vp: ValidPrefix) -> int:
    """Batches kept after the first invalid byte (by a salvage)."""
    if vp.error_position is None:
        return 0
    return sum(1 for h in vp.headers if h.position > vp.error_position)


def salvage_segment_file(log_path: Path, *, next_base_offset: int | None = None
                         ) -> ValidPrefix | None:
    """Rewrite a segment file with every valid batch, also those after a corrupt region
    (offsets as written, so the log gets a gap). The new bytes go to `<name>.swap`
    (fsynced), which then replaces the file: a crash in between leaves either the old
    file or the swap file, which the broker's loader renames into place. Returns the plan
    when the file was rewritten, None when there was nothing after the first bad byte to
    keep (plain recovery does the rest)."""
    base = base_offset_from_path(log_path)
    fd = os.open(log_path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        vp = validate_file(fd, size, base, next_base_offset, salvage=True)
        if not has_gaps(vp.headers):
            return None
        swap = log_path.with_name(log_path.name + SWAP_SUFFIX)
        out = os.open(swap, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            written = 0
            for h in vp.headers:
                data = os.pread(fd, h.size, h.position)
                while data:
                    n = os.pwrite(out, data, written)
                    written += n
                    data = data[n:]
            os.fsync(out)
        finally:
            os.close(out)
    finally:
        os.close(fd)
    os.replace(swap, log_path)
    fsync_dir(log_path.parent)
    return vp


def index_problems(
    headers: list[BatchHeader],
    offset_entries: list[tuple[int, int]],
    time_entries: list[tuple[int, int]],
) -> list[str]:
    """Why these index entries are not a valid index of these batches (empty: valid);
    the rules are kafkactl.log.index_check's, which dump-log applies too."""
    return [p.message for p in offset_index_problems(headers, offset_entries)
            + time_index_problems(headers, time_entries)]


def _report(path: Path, base: int, original: int, vp: ValidPrefix, rebuilt: bool,
            n_off: int, n_time: int, dry_run: bool) -> SegmentRecoveryReport:
    return SegmentRecoveryReport(
        path=str(path), base_offset=base, original_bytes=original,
        valid_bytes=vp.valid_bytes, valid_batches=len(vp.headers),
        first_offset=_first_offset(vp.headers), last_offset=
        vp.headers[-1].last_offset if vp.headers else None,
        error=vp.error, error_position=vp.error_position, indexes_rebuilt=rebuilt,
        offset_index_entries=n_off, time_index_entries=n_time, dry_run=dry_run,
        lost_marker=asdict(vp.lost_marker) if vp.lost_marker is not None else None,
    )


def _first_offset(headers: list[BatchHeader]) -> int | None:
    if not headers:
        return None
    h = headers[0]
    return h.base_offset if h.magic == 2 or h.record_count == 1 else h.last_offset
