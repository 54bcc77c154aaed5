"""Loading a partition directory into segments (Kafka's LogLoader, reduced).

Leftovers of interrupted operations are settled first (leftovers.py, shared with
`kafkactl recover`): `.deleted` files are queued for deletion, `.cleaned` and `.tmp` files
removed, a `<base>.log.swap` (a finished compaction) renamed into place once it checks as
whole valid batches (a `.swap` that does not is deleted and the segment it would replace
kept), orphan index files removed (a missing `.log`). Then every `.log` is opened; a
segment whose index files are missing or fail the sanity check is recovered (validated and
re-indexed), and so is every segment from the recovery point on when the log was not shut
down cleanly. The sanity check covers the `.txnindex` too, at every start (Kafka's
LogSegment.sanityCheck): one that is not whole version-0 entries (a bad version field, a
truncated file) or whose entries do not fit the segment is logged at WARNING and rebuilt
from the log's markers with the other recovered segments' (Log, rebuild_txn_indexes),
never half-read: the entries after the damage are aborted transactions. After a clean
stop the active segment's tail (from its last index entry) is still validated, and the
segment recovered if it is torn. Every truncation is logged at WARNING.

When recovery cuts a segment short, every later segment is deleted, as Kafka's
LogLoader.recoverLog does: the log must stay contiguous. The WARNING names the deleted
segments and the offsets lost. A segment whose `.log` is missing (its orphan index files
are deleted) or empty although its index entries say it held offsets (its indexes are
rebuilt) truncates no byte: as in Kafka's loader the later segments are kept and only
that segment's offsets are lost, a gap in the log (fetches skip it as they skip a
compaction's gaps); a WARNING names the segment and the offsets lost (LostSegmentReport).
When the log then ends below the log start offset (its checkpoint: a DeleteRecords, then a
crash tore the tail), every segment is deleted and the log restarts empty at the log start
(Kafka's deleteSegmentsIfLogStartGreaterThanLogEnd; LogStartReset), with its producer
snapshots and leader epochs: the offsets below it were handed out already. Then producer
snapshots above the log end, below the first segment (of deleted segments) and unreadable
ones are deleted (a corrupt one is logged once), and the leader-epoch checkpoint is cut at
the log end.
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from kafkactl.log.config import LogConfig
from kafkactl.log.errors import CorruptIndexError
from kafkactl.log.leftovers import clean_snapshots, settle_leftovers, truncate_leader_epochs
from kafkactl.log.producer_snapshot import SNAPSHOT_SUFFIX
from kafkactl.log.recovery import (
    CutReport,
    LogStartReset,
    LostSegmentReport,
    SegmentRecoveryReport,
    lost_data_reason,
    lost_segments,
    recover_segment,
    validate_log_bytes,
)
from kafkactl.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    offset_from_filename,
)

log = logging.getLogger(__name__)


@dataclass
class LoadedSegments:
    segments: list[LogSegment]
    reports: list[SegmentRecoveryReport] = field(default_factory=list)
    leftover_files: list[Path] = field(default_factory=list)
    recovered: bool = False
    # base offset -> the transaction events recovery read from that segment
    txn_events: dict[int, list[tuple[int, ...]]] = field(default_factory=dict)
    cut: CutReport | None = None  # later segments deleted after a cut (see the module doc)
    lost: list[LostSegmentReport] = field(default_factory=list)  # missing/emptied segments
    reset: LogStartReset | None = None  # the log restarted at its log start offset


# C901: LogLoader's order: leftovers, index checks, recovery point, truncation
def load_segments(  # noqa: C901
    directory: Path,
    config: LogConfig,
    *,
    now_ms: int,
    recovery_point: int,
    needs_recovery: bool,
    log_start_offset: int = 0,
) -> LoadedSegments:
    leftovers, names, missing_logs = settle_leftovers(directory)
    present = set(names)
    bases = sorted(
        off for name in names
        if name.endswith(LOG_SUFFIX) and (off := offset_from_filename(name)) is not None
    )
    segments: list[LogSegment] = []
    broken: dict[int, str] = {}  # base offset -> why its indexes are rebuilt
    emptied: set[int] = set()  # empty segments whose indexes say they held data
    try:
        for i, base in enumerate(bases):
            stem = f"{base:020d}"
            missing = (stem + INDEX_SUFFIX not in present
                       or stem + TIME_INDEX_SUFFIX not in present)
            seg = LogSegment(directory, base, config, created_ms=now_ms)
            segments.append(seg)
            # evidence of lost bytes: index entries. Missing index files are none: a
            # compaction's swap leaves its (maybe empty) segment without them (the first
            # segment of a group that compacted to nothing is kept, empty)
            if seg.size == 0 and not missing and (
                    seg.offset_index.entry_count or seg.time_index.entry_count):
                emptied.add(base)
                broken[base] = "the segment is empty but its index files hold entries"
                continue
            if missing:
                broken[base] = "an index file is missing"
                continue
            try:
                seg.offset_index.sanity_check(seg.size)
                if i == len(bases) - 1:  # older segments: at their first lookup
                    seg.offset_index.check_entries(seg.size)
                    seg.index_checked = True
                seg.time_index.sanity_check(seg.size)
                # every segment, clean start or not (as Kafka's LogSegment.sanityCheck): a
                # read_committed fetch trusts these entries; read when the segment opened
                seg.txn_index.sanity_check(bases[i + 1] if i + 1 < len(bases) else None)
            except CorruptIndexError as e:
                broken[base] = str(e)
        result = LoadedSegments(segments, leftover_files=leftovers)
        first_unflushed = len(segments)
        if needs_recovery and segments:
            first_unflushed = max(0, bisect.bisect_right(bases, recovery_point) - 1)
        elif segments and segments[-1].base_offset not in broken:
            problem = tail_problem(segments[-1])
            if problem:  # a torn or damaged tail after a clean stop: recover that segment
                first_unflushed = len(segments) - 1
        for i, seg in enumerate(segments):
            nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
            report = None
            if i >= first_unflushed or seg.base_offset in broken:
                if seg.base_offset in broken:
                    log.warning("%s: rebuilding the indexes of segment %s: %s",
                                directory.name, seg.log_path.name, broken[seg.base_offset])
                events: list[tuple[int, ...]] = []
                report = recover_segment(seg, next_base_offset=nxt, txn_events=events)
                result.txn_events[seg.base_offset] = events
                seg.index_checked = True
                if report.bytes_truncated:
                    log_truncation(directory.name, report)
                result.reports.append(report)
                result.recovered = True
            if nxt is None:
                break
            reason = lost_data_reason(
                seg.log_path.name,
                bytes_truncated=report.bytes_truncated if report else 0,
                valid_bytes=report.valid_bytes if report else seg.size,
                error=report.error if report else None)
            if reason:
                result.cut = cut_later_segments(directory.name, segments, i, reason)
                break
            seg.on_become_inactive()
        if segments:
            kept = [s.base_offset for s in segments]
            result.lost = lost_segments(
                directory.name, kept,  # (above a cut: the cut's report says it)
                [m for m in missing_logs if result.cut is None or m < kept[-1]],
                sorted(b for b in emptied if b in kept), segments[-1].next_offset)
            for lost in result.lost:
                log.warning("Recovery of %s", lost.sentence())
            if segments[-1].next_offset < log_start_offset:
                result.reset = reset_to_log_start(directory.name, segments, log_start_offset)
                result.txn_events.clear()
        if not segments:
            seg = LogSegment(directory, max(0, log_start_offset), config, created_ms=now_ms,
                             create=True)
            segments.append(seg)
        log_end = segments[-1].next_offset
        if result.reset is not None:
            for name in os.listdir(directory):
                if name.endswith(SNAPSHOT_SUFFIX):
                    (directory / name).unlink(missing_ok=True)
            clear_leader_epochs(directory)
        else:
            clean_snapshots(directory, log_end, names=names,
                            first_base=segments[0].base_offset)
        if (result.cut is not None or result.lost
                or any(r.bytes_truncated for r in result.reports)):
            truncate_leader_epochs(directory, log_end)
        return result
    except BaseException:
        for seg in segments:
            seg.close()
        raise


def cut_later_segments(partition: str, segments: list[LogSegment], i: int, reason: str
                       ) -> CutReport:
    """Delete every segment after `segments[i]` (their files too) and say so at WARNING:
    the segments deleted and the offsets lost. `segments` is cut in place."""
    later = segments[i + 1:]
    new_end = segments[i].next_offset
    try:
        old_end = max(new_end, later[-1].next_offset)
    except OSError:
        old_end = max(new_end, later[-1].base_offset)
    names = [s.log_path.name for s in later]
    for s in later:
        s.delete_files()
    del segments[i + 1:]
    cut = CutReport(partition, segments[i].log_path.name, reason, names, new_end,
                    old_end - 1 if old_end > new_end else None, new_end)
    log.warning("Recovery of %s", cut.sentence())
    return cut


def reset_to_log_start(partition: str, segments: list[LogSegment], log_start_offset: int
                       ) -> LogStartReset:
    """The log ends below `log_start_offset`: delete every segment (`segments` is emptied;
    the caller opens a new one there) and say so at WARNING (see LogStartReset)."""
    reset = LogStartReset(partition, log_start_offset, segments[-1].next_offset,
                          [s.log_path.name for s in segments])
    for s in segments:
        s.delete_files()
    segments.clear()
    log.warning("Recovery of %s", reset.sentence())
    return reset


def clear_leader_epochs(directory: Path) -> None:
    """Empty the leader-epoch checkpoint (Kafka's clearAndFlush): the log restarted."""
    from kafkactl.log.leader_epoch_cache import LeaderEpochCache

    cache = LeaderEpochCache(directory)
    if cache.path.exists():
        cache.load()
        cache.clear()


def tail_problem(seg: LogSegment) -> str | None:
    """Why the bytes of `seg` from its last offset-index entry on are not whole, valid
    batches (None: they are). Cheap: at most index.interval.bytes plus one batch."""
    start = seg.offset_index.last_entry.position
    if start > seg.size:
        return f"the last index entry points past the end of {seg.log_path.name}"
    if start == seg.size:
        return None
    data = os.pread(seg.fd, seg.size - start, start)
    vp = validate_log_bytes(memoryview(data), seg.base_offset)
    if vp.error is None and vp.valid_bytes == len(data):
        return None
    return vp.error or "the tail is not whole batches"


def log_truncation(partition: str, r: SegmentRecoveryReport) -> None:
    """One WARNING per truncation: partition, segment, offsets kept and bytes cut."""
    kept = (f"offsets {r.first_offset}..{r.last_offset} kept" if r.last_offset is not None
            else "no valid batch kept")
    claims = (f", the first cut batch claims offset {r.cut_first_offset}"
              if r.cut_first_offset is not None else "")
    m = r.lost_marker
    marker = "" if m is None else (
        f" The cut batch is a transaction marker ({m.get('marker') or 'type unreadable'}) of "
        f"producer {m.get('producer_id') if m.get('producer_id') is not None else '(id cut off)'}"
        ": its transaction is left open (hanging) until `kafkactl transactions abort` ends it.")
    log.warning(
        "Recovery of %s truncated segment %s at position %d: %d of %d bytes cut (%s%s); "
        "%s, the segment now ends at offset %d.%s",
        partition, Path(r.path).name, r.valid_bytes, r.bytes_truncated, r.original_bytes,
        r.error or "invalid bytes", claims, kept,
        (r.last_offset + 1) if r.last_offset is not None else r.base_offset, marker)
