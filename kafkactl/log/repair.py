"""Offline repair of a log dir or one partition dir (what `kafkactl recover` drives).

The broker's own segment recovery (kafkactl.log.recovery) applied to every segment of
every partition found under a path: each .log is cut at its first invalid byte and stale
indexes are rebuilt (the .txnindex files from the transaction markers of the whole
partition, as the broker's recovery rebuilds them: from the producer snapshot at the first
segment's base, which says which transactions were open there; without one, an entry's
offsets below that base cannot be contradicted by the log and are kept). When a segment
is cut short (or a segment in the middle is empty although its indexes say it held
is cut short, every later segment is deleted, as Kafka's loader does: the log stays
contiguous (CutReport names the segments and the offsets lost); `salvage` keeps them
instead (the log then has a gap), except after a damaged batch whose header says it is a
transaction marker: salvage never skips one (the producer's later records would join its
next transaction and take its outcome), it cuts there as a plain recovery does. A segment
in the middle whose .log is missing or empty although its indexes say it held offsets
truncates no byte: as in Kafka's loader only its offsets are lost (a gap;
LostSegmentReport), the later segments are kept. A log that then ends below its
log-start-offset checkpoint is deleted and restarted empty there (LogStartReset), as the
broker's loader does.
Leftovers of interrupted operations (.deleted, .cleaned, .tmp, .swap, orphan index files)
are settled as the broker's loader settles them, unreadable producer snapshots and those
above the log end removed, and the leader-epoch checkpoint and the log dir's
recovery-point and high-watermark checkpoints lowered to the log end. The caller holds
the log dir's `.lock` (lock_log_dir) so a running broker and a repair never meet.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from kafkactl.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    checkpoint_problem,
    fsync_dir,
    salvage_checkpoint,
    write_checkpoint,
)
from kafkactl.log.config import LogConfig
from kafkactl.log.errors import LogError
from kafkactl.log.index_check import MISSING, OFFSET, TIME, IndexProblem
from kafkactl.log.leftovers import (
    DELETE,
    RENAME,
    TRUNCATE,
    FileAction,
    clean_snapshots,
    plan_leftovers,
)
from kafkactl.log.log import parse_topic_partition
from kafkactl.log.manager import CLEAN_SHUTDOWN_MARKER, is_partition_dir
from kafkactl.log.producer_snapshot import SNAPSHOT_SUFFIX
from kafkactl.log.recovery import (
    CutReport,
    LogStartReset,
    LostSegmentReport,
    SegmentRecoveryReport,
    inspect_segment,
    lost_data_reason,
    lost_segments,
    recover_segment,
    salvage_hint,
    salvage_segment_file,
)
from kafkactl.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
    offset_from_filename,
)
from kafkactl.log.txn_index import (
    TXN_INDEX_SUFFIX,
    TransactionIndex,
    expected_txn_entries,
    reconcile_entries,
    scan_entries,
    tracker_at,
)


class RepairError(Exception):
    """The path cannot be repaired (not a log dir, missing...): a sentence for the user."""


def partition_dirs(path: Path) -> tuple[Path, list[Path]]:
    """(the log dir holding the `.lock`, the partition dirs to recover) for PATH (made
    absolute first: "." or "x/.." has no name of its own to tell a partition dir by, nor
    the parent that holds the lock)."""
    path = Path(os.path.abspath(path))
    if not path.exists():
        raise RepairError(f"{path} does not exist.")
    if not path.is_dir():
        raise RepairError(f"{path} is not a directory: give a log dir or a partition dir.")
    if is_partition_dir(path) and segment_files(path):
        return path.parent, [path]
    dirs = [p for p in sorted(path.iterdir()) if is_partition_dir(p)]
    if not dirs:
        if is_partition_dir(path) or segment_files(path):
            # segments in a dir not named <topic>-<partition> (a copy, say): recovered as a
            # partition dir; no log dir checkpoint names it
            return path.parent, [path]
        raise RepairError(
            f"{path} holds no <topic>-<partition> directories and no .log segments; "
            f"give a log dir (log.dirs) or one partition dir."
        )
    return path, dirs


def segment_files(d: Path) -> list[tuple[int, Path]]:
    """(base offset, path) of every .log segment in a partition dir, by base offset."""
    out = []
    for p in d.iterdir():
        if p.name.endswith(LOG_SUFFIX) and (base := offset_from_filename(p.name)) is not None:
            out.append((base, p))
    return sorted(out)


def _planned_segments(segments: list[tuple[int, Path]], actions: list[FileAction]
                      ) -> list[tuple[int, Path]]:
    """The segments as they will be once `actions` are applied (a dry run's view): a
    renamed file (a .swap or a misnamed segment) counted at its target's base offset, the
    files its rename or a deletion removes left out."""
    by_path = {path: base for base, path in segments}
    for a in actions:
        for p in a.also_delete:
            by_path.pop(p, None)
        if a.action == RENAME and a.target is not None and a.target.name.endswith(LOG_SUFFIX):
            by_path.pop(a.target, None)
            by_path.pop(a.path, None)
            if (base := offset_from_filename(a.target.name)) is not None:
                by_path[a.path] = base
        elif a.action == DELETE:
            by_path.pop(a.path, None)
    return sorted((base, path) for path, base in by_path.items())


@dataclass
class PartitionRepair:
    """What recovering one partition dir found and did (or, in a dry run, would do)."""

    partition: str
    segments: list[SegmentRecoveryReport]
    files: list[FileAction] = field(default_factory=list)  # leftovers, snapshots, epochs
    cut: CutReport | None = None
    log_end_offset: int | None = None  # once repaired (None: no segment)
    # without --salvage, the last segment cut before valid batches past its damage: what
    # that loses (see tail_loss; a cut in an earlier segment says it in `cut`)
    tail_loss: str | None = None
    # segments whose .log is missing or lost its bytes: their offsets (a gap)
    lost: list[LostSegmentReport] = field(default_factory=list)
    reset: LogStartReset | None = None  # the log ended below its log start: restarted

    @property
    def needs_repair(self) -> bool:
        return (any(needs_repair(r) for r in self.segments)
                or any(not f.housekeeping for f in self.files)
                or self.cut is not None or bool(self.lost) or self.reset is not None)


def recover_partition(d: Path, *, dry_run: bool, config: LogConfig, salvage: bool = False
                      ) -> list[SegmentRecoveryReport]:
    """The segment reports of repair_partition."""
    return repair_partition(d, dry_run=dry_run, config=config, salvage=salvage).segments


# C901: the loader's order: leftovers, segments, cut, transaction indexes, snapshots
def repair_partition(  # noqa: C901
        d: Path, *, dry_run: bool, config: LogConfig, salvage: bool = False
) -> PartitionRepair:
    """Inspect every segment of a partition dir; unless `dry_run`, repair those that need
    it (cut the invalid tail, rebuild the indexes) and delete the segments after a cut.
    With `salvage`, the valid batches after a corrupt region are kept (offsets as written:
    the log gets a gap) instead of being cut with it (Kafka's rule), and so are the
    segments after it, unless the region holds a transaction marker (the report's
    `lost_marker`; see recovery.plan_salvage). One report per segment."""
    actions = plan_leftovers(d, sorted(os.listdir(d)))
    missing = sorted({a.missing_segment for a in actions if a.missing_segment is not None})
    if not dry_run:
        for a in actions:
            a.apply(delete_queued=True)
        if actions:
            fsync_dir(d)
    segments = _planned_segments(segment_files(d), actions) if dry_run else segment_files(d)
    # (dry run) the files a rename will put in place, and the files the actions remove
    renamed = {a.path for a in actions if dry_run and a.action == RENAME
               and a.target is not None and a.target.name.endswith(LOG_SUFFIX)}
    gone = {p for a in actions for p in a.also_delete}
    reports: list[SegmentRecoveryReport] = []
    cut_at: int | None = None
    reason: str | None = None
    emptied: list[int] = []  # empty segments whose index entries say they held offsets
    for i, (base, path) in enumerate(segments):
        nxt = segments[i + 1][0] if i + 1 < len(segments) else None
        found = inspect_segment(path, index_interval_bytes=config.index_interval_bytes,
                                next_base_offset=nxt, salvage=salvage, base_offset=base)
        if path in renamed:
            _predict_indexes_after_rename(d, base, found, gone)
        if cut_at is not None:
            found.deleted = True
            reports.append(found)
            continue
        if reports:
            prev = reports[-1]
            prev_end = prev.last_offset + 1 if prev.last_offset is not None else prev.base_offset
            if prev_end < base:
                found.gap_before = [prev_end, base - 1]
        if found.original_bytes == 0 and any(
                p.get("index") != "transaction" and p.get("kind") != MISSING
                for p in found.index_problems):
            emptied.append(base)
        report = found
        if not (dry_run or (found.bytes_truncated == 0 and not found.indexes_rebuilt)):
            report = _repair_segment(d, base, path, nxt, found, config, salvage)
        reports.append(report)
        marker = found.lost_marker
        if nxt is not None and salvage and marker is not None:
            # salvage keeps later segments, but not past a lost transaction marker: the
            # producer's later records would join its next transaction (plan_salvage)
            reason = (f"segment {path.name} was cut at position {marker['position']}, where "
                      f"a damaged transaction marker is ({found.error or 'invalid bytes'})")
            cut_at = i
        elif nxt is not None and not salvage:
            reason = lost_data_reason(
                path.name, bytes_truncated=found.bytes_truncated,
                valid_bytes=found.valid_bytes, error=found.error, dry_run=dry_run)
            if reason:
                cut_at = i
    cut = None
    if cut_at is not None and reason is not None:
        kept, deleted = reports[cut_at], reports[cut_at + 1:]
        cut = _cut_report(d.name, kept, deleted, reason, dry_run, salvage)
        if not dry_run:
            for _base, path in segments[cut_at + 1:]:
                stem = path.name[: -len(LOG_SUFFIX)]
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    path.with_name(stem + suffix).unlink(missing_ok=True)
            fsync_dir(d)
        segments_kept = segments[:cut_at + 1]
    else:
        segments_kept = segments
    _check_txn_indexes(d, segments_kept, reports[:len(segments_kept)], dry_run=dry_run,
                       salvage=salvage)
    files = list(actions)
    log_end = None
    lost: list[LostSegmentReport] = []
    reset = None
    if segments_kept:
        last = reports[len(segments_kept) - 1]
        log_end = last.last_offset + 1 if last.last_offset is not None else last.base_offset
        bases = [b for b, _p in segments_kept]
        lost = lost_segments(d.name, bases,  # (above a cut: the cut's report says it)
                             [m for m in missing if cut is None or m < bases[-1]],
                             [b for b in emptied if b in bases], log_end, dry_run=dry_run)
        start = _log_start_checkpoint(d)
        if start is not None and log_end < start:
            reset = LogStartReset(d.name, start, log_end,
                                  [p.name for _b, p in segments_kept], dry_run)
            files += _reset_to_log_start(d, segments_kept, start, config, dry_run=dry_run)
            log_end = start
        else:
            files += clean_snapshots(d, log_end, dry_run=dry_run, warn=False)  # (reported)
            epochs = _leader_epochs_above(d, log_end, dry_run=dry_run)
            if epochs is not None:
                files.append(epochs)
    tail = None
    if cut is None and not salvage and reports:
        tail = tail_loss(d.name, reports[-1], dry_run)
    return PartitionRepair(d.name, reports, files, cut, log_end, tail, lost, reset)


def _predict_indexes_after_rename(d: Path, base: int, found: SegmentRecoveryReport,
                                  gone: set[Path]) -> None:
    """(dry run) A file renamed into place as segment `base` (a .swap, a misnamed segment)
    finds the index files at its new name, those the rename does not remove: an index
    file missing there is reported missing, as the real run reports it (rebuilt)."""
    stem = filename_prefix(base)
    problems: list[dict[str, object]] = []
    for index, suffix in ((OFFSET, INDEX_SUFFIX), (TIME, TIME_INDEX_SUFFIX)):
        target = d / (stem + suffix)
        if target.exists() and target not in gone:
            problems += [p for p in found.index_problems if p.get("index") == index]
        else:
            problems.append(IndexProblem(index, -1, MISSING,
                                         f"{target.name} is missing").to_dict())
    problems += [p for p in found.index_problems if p.get("index") not in (OFFSET, TIME)]
    found.index_problems = problems
    found.indexes_rebuilt = found.indexes_rebuilt or any(
        p.get("kind") == MISSING for p in problems)


def _log_start_checkpoint(d: Path) -> int | None:
    """The partition's log start offset in its log dir's log-start-offset-checkpoint (its
    readable lines), None when there is none."""
    path = d.parent / LOG_START_OFFSET_CHECKPOINT
    try:
        tp = parse_topic_partition(d.name)
        return salvage_checkpoint(path).get(tp) if path.is_file() else None
    except (LogError, OSError):
        return None


def _reset_to_log_start(d: Path, segments: list[tuple[int, Path]], start: int,
                        config: LogConfig, *, dry_run: bool) -> list[FileAction]:
    """Delete every segment of a log that ends below its log start offset `start`, open an
    empty one there, delete the producer snapshots and clear the leader epochs (unless
    `dry_run`): the broker's loader does the same (LogStartReset). Returns the snapshot
    and epoch actions (the segments are in the LogStartReset)."""
    from kafkactl.log.leader_epoch_cache import LeaderEpochCache

    why = f"of the log deleted below its log start offset {start}"
    files = [FileAction(d / n, f"a producer snapshot {why}", DELETE)
             for n in sorted(os.listdir(d)) if n.endswith(SNAPSHOT_SUFFIX)]
    cache = LeaderEpochCache(d)
    if cache.path.exists() and cache.load() and cache.epochs:
        files.append(FileAction(cache.path, "leader epochs " + ", ".join(
            f"{e}@{o}" for e, o in zip(cache.epochs, cache.offsets, strict=True))
            + f" {why}", TRUNCATE))
    if dry_run:
        return files
    for _base, path in segments:
        stem = path.name[: -len(LOG_SUFFIX)]
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            path.with_name(stem + suffix).unlink(missing_ok=True)
    for f in files:
        f.apply()
    if cache.path.exists():
        cache.clear()
    LogSegment(d, start, config, created_ms=0, create=True).close()
    fsync_dir(d)
    return files


def _repair_segment(d: Path, base: int, path: Path, nxt: int | None,
                    found: SegmentRecoveryReport, config: LogConfig, salvage: bool
                    ) -> SegmentRecoveryReport:
    """Cut the invalid tail of one segment (with `salvage`: keep every valid batch) and
    rebuild its indexes; the report of what was done."""
    if salvage:
        salvage_segment_file(path, next_base_offset=nxt)
    seg = LogSegment(d, base, config, created_ms=0)
    try:
        done = recover_segment(seg, next_base_offset=nxt)
        seg.on_become_inactive()  # final time entry, trimmed indexes: a clean state
        seg.flush()
    finally:
        seg.close()
    done.indexes_rebuilt = True
    done.index_problems = found.index_problems  # what was wrong with them
    done.gap_before = found.gap_before
    done.lost_marker = found.lost_marker  # (a salvage's rewrite leaves no damage to see)
    if done.cut_first_offset is None:
        done.cut_first_offset = found.cut_first_offset
    done.batches_past_damage = found.batches_past_damage  # (the cut dropped them)
    done.last_offset_past_damage = found.last_offset_past_damage
    done.salvage_stops = found.salvage_stops
    if salvage:  # as found, before the rewrite
        done.original_bytes, done.error = found.original_bytes, found.error
        done.error_position = found.error_position
        done.salvaged_batches = found.salvaged_batches
        done.cut_first_offset = found.cut_first_offset
    return done


def _cut_report(partition: str, kept: SegmentRecoveryReport,
                deleted: list[SegmentRecoveryReport], reason: str, dry_run: bool,
                salvage: bool) -> CutReport:
    new_end = kept.last_offset + 1 if kept.last_offset is not None else kept.base_offset
    ends = [r.last_offset + 1 if r.last_offset is not None else r.base_offset
            for r in deleted]
    if kept.cut_first_offset is not None:
        ends.append(kept.cut_first_offset + 1)
    # the valid batches past the damage (the kept segment's and the deleted ones'),
    # found by scanning on as --salvage does: they are lost too
    ends += [r.last_offset_past_damage + 1 for r in (kept, *deleted)
             if r.last_offset_past_damage is not None]
    old_end = max([new_end, *ends])
    return CutReport(partition, Path(kept.path).name, reason,
                     [Path(r.path).name for r in deleted], new_end,
                     old_end - 1 if old_end > new_end else None, new_end, dry_run,
                     0 if salvage else salvageable_batches(kept, deleted))


def salvageable_batches(kept: SegmentRecoveryReport, deleted: list[SegmentRecoveryReport]
                        ) -> int:
    """The valid batches after the damage in `kept` that `--salvage` keeps: those past it
    in `kept`, and the later segments' (it keeps them) up to a segment where a damaged
    transaction marker stops it (its later segments are deleted then too)."""
    n = kept.batches_past_damage
    if kept.salvage_stops:
        return n
    for r in deleted:
        n += r.valid_batches + r.batches_past_damage
        if r.salvage_stops:
            break
    return n


def tail_loss(partition: str, r: SegmentRecoveryReport, dry_run: bool) -> str | None:
    """The sentence for the last segment of a partition cut (without --salvage) before
    valid batches that lie past its damage (the cut loses them too), else None."""
    if r.bytes_truncated <= 0 or r.last_offset_past_damage is None:
        return None
    end = r.last_offset + 1 if r.last_offset is not None else r.base_offset
    lost = (f"offset {end}" if r.last_offset_past_damage == end
            else f"offsets {end}..{r.last_offset_past_damage}")
    return (f"{partition}: segment {Path(r.path).name} "
            f"{'would be' if dry_run else 'was'} truncated at position {r.valid_bytes} "
            f"({r.error or 'invalid bytes'}), before valid batches found after the damage: "
            f"{lost} {'would be' if dry_run else 'are'} lost, the log "
            f"{'would end' if dry_run else 'now ends'} at offset {end}"
            f"{salvage_hint(r.batches_past_damage, dry_run)}.")


def _leader_epochs_above(d: Path, log_end: int, *, dry_run: bool) -> FileAction | None:
    """The leader-epoch checkpoint's epochs that start at or above the log end (the
    broker's loader drops them): what to do, and unless `dry_run`, done."""
    from kafkactl.log.leader_epoch_cache import LeaderEpochCache

    cache = LeaderEpochCache(d)
    if not cache.path.exists() or not cache.load():
        return None
    above = [(e, o) for e, o in zip(cache.epochs, cache.offsets, strict=True) if o >= log_end]
    if not above:
        return None
    # one starting at the log end is routine (Kafka's loader drops it at every start: a
    # leader of an empty log assigned it); one above the end is damage
    at_end = all(o == log_end for _e, o in above)
    action = FileAction(cache.path, f"leader epochs {', '.join(f'{e}@{o}' for e, o in above)} "
                        f"start {'at' if at_end else 'at or above'} the log end offset "
                        f"{log_end}", TRUNCATE, housekeeping=at_end)
    if not dry_run:
        cache.truncate_from_end(log_end)
    return action


@dataclass
class _SegmentFile:
    """What reading a segment's transaction markers needs (no index file is opened)."""

    fd: int
    size: int
    base_offset: int
    next_offset: int


def _check_txn_indexes(d: Path, segments: list[tuple[int, Path]],
                       reports: list[SegmentRecoveryReport], *, dry_run: bool,
                       salvage: bool) -> None:
    """Compare each segment's .txnindex with the aborted transactions its markers say
    (read over the valid batches of the whole partition); record what differs in the
    segment's report and, unless `dry_run`, rewrite the file."""
    if not segments:
        return
    files: list[_SegmentFile] = []
    try:
        for (base, path), r in zip(segments, reports, strict=True):
            fd = os.open(path, os.O_RDONLY)
            size = os.fstat(fd).st_size
            if dry_run:  # the bytes recovery would keep from position 0
                size = min(size, r.error_position if salvage and r.error_position is not None
                           else r.valid_bytes)
            nxt = r.last_offset + 1 if r.last_offset is not None else base
            files.append(_SegmentFile(fd, size, base, nxt))
        # the transactions open at the first segment's base: its producer snapshot's
        # (without one, what the log cannot contradict below it is accepted)
        tracker, start = tracker_at(d, segments[0][0], segments[0][0])
        expected = expected_txn_entries(files, 0, tracker, start,
                                        use_mmap=True)  # the log dir is locked
    finally:
        for f in files:
            os.close(f.fd)
    from kafkactl.log.index_check import PARTIAL_ENTRY, txn_index_problems

    for (base, path), r in zip(segments, reports, strict=True):
        txn_path = path.with_name(path.name[: -len(LOG_SUFFIX)] + TXN_INDEX_SUFFIX)
        try:
            data: bytes | None = txn_path.read_bytes()
        except FileNotFoundError:
            data = None
        stored = scan_entries(data)[0] if data is not None else []
        want = reconcile_entries(stored, expected.get(base, []), tracker)
        problems = txn_index_problems(want, data)
        if not problems:
            continue
        damage = scan_entries(data)[1] if data is not None else None
        if damage is not None:  # say what stops the reading: a bad version, a torn entry
            problems = [replace(p, message=f"the transaction index {txn_path.name}: "
                                f"{damage.describe()}") if p.kind == PARTIAL_ENTRY else p
                        for p in problems]
        r.index_problems = list(r.index_problems) + [p.to_dict() for p in problems]
        r.indexes_rebuilt = True
        if not dry_run:
            TransactionIndex(txn_path, base).replace_entries(want)


def needs_repair(r: SegmentRecoveryReport) -> bool:
    """The segment had (or, in a dry run, has) bytes to cut or indexes to rebuild, or it
    follows a cut (deleted)."""
    return r.bytes_truncated > 0 or r.indexes_rebuilt or r.deleted


@dataclass
class CheckpointReport:
    path: str
    problem: str  # why it cannot be read
    entries_kept: int  # well-formed lines kept in the rewritten file
    rewritten: bool  # False in a dry run
    lowered: bool = False  # offsets above a repaired log's end were (would be) lowered

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def repair_checkpoints(log_dir: Path, *, dry_run: bool) -> list[CheckpointReport]:
    """Check every checkpoint file of a log dir (`*-checkpoint`); unless `dry_run`,
    rewrite a damaged one with its well-formed lines (what the broker would otherwise
    ignore whole). A damaged recovery-point file also removes the clean-shutdown marker,
    so the next start recovers every log from the offsets that survived."""
    reports = []
    for path in sorted(log_dir.glob("*checkpoint")):
        if not path.is_file():
            continue
        problem = checkpoint_problem(path)
        if problem is None:
            continue
        entries = salvage_checkpoint(path)
        if not dry_run:
            write_checkpoint(path, entries)
            if path.name == RECOVERY_POINT_CHECKPOINT:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(log_dir / CLEAN_SHUTDOWN_MARKER)
                    fsync_dir(log_dir)
        reports.append(CheckpointReport(str(path), problem, len(entries), not dry_run,
                                        lowered=True))
    return reports


def lower_checkpoints(log_dir: Path, ends: dict[str, int], *, dry_run: bool
                      ) -> list[CheckpointReport]:
    """The recovery points and high watermarks of the log dir's checkpoints that are above
    the log end of a repaired partition (`ends`: partition dir name -> log end offset),
    lowered to it (unless `dry_run`)."""
    by_tp = {}
    for name, end in ends.items():
        try:
            by_tp[parse_topic_partition(name)] = end
        except LogError:
            continue
    reports = []
    for file in (RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        path = log_dir / file
        if not by_tp or not path.is_file():
            continue
        entries = salvage_checkpoint(path)
        high = {tp: off for tp, off in entries.items() if tp in by_tp and off > by_tp[tp]}
        if not high:
            continue
        what = "recovery point" if file == RECOVERY_POINT_CHECKPOINT else "high watermark"
        problem = f"{path} holds a {what} above the log end: " + ", ".join(
            f"{t}-{p} at {off} (the log ends at {by_tp[(t, p)]})"
            for (t, p), off in sorted(high.items())) + "."
        if not dry_run:
            entries.update({tp: by_tp[tp] for tp in high})
            write_checkpoint(path, entries)
        reports.append(CheckpointReport(str(path), problem, len(entries), not dry_run,
                                        lowered=True))
    return reports
