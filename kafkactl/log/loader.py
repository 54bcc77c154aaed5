"""Loading a partition directory into segments (Kafka's LogLoader, reduced).

Leftovers of interrupted operations are settled first (plan_leftovers, shared with
`kafkactl recover`): `.deleted` files are queued for deletion, `.cleaned` and `.tmp` files
removed, a `<base>.log.swap` (a finished compaction) renamed into place once it checks as
whole valid batches (a `.swap` that does not is deleted and the segment it would replace
kept), orphan index files removed (a missing `.log`). Then every `.log` is opened; a
segment whose index files are missing or fail the sanity check is recovered (validated and
re-indexed), and so is every segment from the recovery point on when the log was not shut
down cleanly. After a clean stop the active segment's tail (from its last index entry) is
still validated, and the segment recovered if it is torn. Every truncation is logged at
WARNING.

When recovery cuts a segment short (or a segment in the middle is empty although its
indexes say it held offsets, or its `.log` is missing), every later segment is deleted, as
Kafka's LogLoader.recoverLog does: the log must stay contiguous. The WARNING names the
deleted segments and the offsets lost. Then producer snapshots above the log end and
unreadable ones are deleted (a corrupt one is logged once), and the leader-epoch
checkpoint is cut at the log end.
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from kafkactl.log.config import LogConfig
from kafkactl.log.errors import CorruptIndexError
from kafkactl.log.producer_snapshot import SNAPSHOT_SUFFIX
from kafkactl.log.recovery import (
    CutReport,
    SegmentRecoveryReport,
    lost_data_reason,
    recover_segment,
    validate_file,
    validate_log_bytes,
)
from kafkactl.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
    offset_from_filename,
)
from kafkactl.log.txn_index import TXN_INDEX_SUFFIX

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


DELETE = "delete"
RENAME = "rename"
QUEUE = "queue"  # a .deleted file: the broker deletes it after file.delete.delay.ms
TRUNCATE = "truncate"  # (recover) a file cut at the log end: the leader-epoch checkpoint
_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_SEGMENT_SUFFIXES = (LOG_SUFFIX, *_INDEX_SUFFIXES)


@dataclass
class FileAction:
    """A file of a partition dir that start-up (and `kafkactl recover`) removes or
    renames, and why."""

    path: Path
    problem: str  # what the file is / what is wrong with it (a sentence fragment)
    action: str  # DELETE, RENAME (to `target`) or QUEUE
    target: Path | None = None
    # removed first: the index files of the segment a .swap replaces (rebuilt) and the
    # files of the segments a cleaned group's .swap covers
    also_delete: list[Path] = field(default_factory=list)
    missing_segment: int | None = None  # an orphan index file: the base of the lost .log

    def apply(self, *, delete_queued: bool = False) -> None:
        if (self.action == QUEUE and not delete_queued) or self.action == TRUNCATE:
            return
        for p in self.also_delete:
            p.unlink(missing_ok=True)
        if self.action == RENAME and self.target is not None:
            os.replace(self.path, self.target)
        else:
            self.path.unlink(missing_ok=True)

    def to_dict(self, *, dry_run: bool) -> dict[str, object]:
        verbs = {RENAME: ("would rename", "renamed"),
                 TRUNCATE: ("would truncate", "truncated")}.get(self.action,
                                                                ("would remove", "removed"))
        return {"path": str(self.path), "problem": self.problem,
                "action": verbs[0 if dry_run else 1],
                "target": str(self.target) if self.target is not None else None,
                "also_removed": [str(p) for p in self.also_delete]}


def plan_leftovers(directory: Path, names: list[str]) -> list[FileAction]:
    """What to do with the leftovers of interrupted operations among `names` (a sorted
    listing of `directory`), changing nothing. Cheap when nothing is left over (plain
    suffix tests): this runs for every partition at start-up."""
    actions: list[FileAction] = []
    present = set(names)
    renamed: set[str] = set()  # .log names a .swap will create
    gone: set[Path] = set()  # files a .swap's rename removes
    for name in names:
        path = directory / name
        if name.endswith(DELETED_SUFFIX):
            actions.append(FileAction(path, "left by an interrupted segment deletion", QUEUE))
        elif name.endswith(CLEANED_SUFFIX):
            actions.append(FileAction(path, "left by an interrupted compaction", DELETE))
        elif name.endswith(".tmp"):
            actions.append(FileAction(path, "a temporary file left by an interrupted write",
                                      DELETE))
        elif name.endswith(SWAP_SUFFIX):
            action = _swap_action(directory, name, names)
            if action.action == RENAME and action.target is not None:
                renamed.add(action.target.name)
                gone.update(action.also_delete)
            actions.append(action)
    for name in names:
        for suffix in _INDEX_SUFFIXES:
            if name.endswith(suffix) and (base := offset_from_filename(name)) is not None:
                stem = name[: -len(suffix)]
                if (stem + LOG_SUFFIX not in present and stem + LOG_SUFFIX not in renamed
                        and directory / name not in gone):
                    actions.append(FileAction(
                        directory / name, f"{stem}{LOG_SUFFIX} is missing: an orphan index "
                        f"file", DELETE, missing_segment=base))
    return actions


def _swap_action(directory: Path, name: str, names: list[str]) -> FileAction:
    """Kafka renames a `.swap` (a compacted segment, maybe a cleaned group of segments)
    over the segment it replaces and deletes the files of the segments it covers. Safer: a
    `<base>.log.swap` is renamed only when it is whole valid batches of that segment; one
    that is not is deleted when the segment it would replace exists (that one is kept),
    else renamed (the only copy: recovery cuts it). An index `.swap` is deleted with the
    index files of its segment (rebuilt)."""
    path = directory / name
    target_name = name[: -len(SWAP_SUFFIX)]
    base = offset_from_filename(target_name)
    if base is None:
        return FileAction(path, "a .swap file left by an interrupted compaction", DELETE)
    stem = filename_prefix(base)
    present = set(names)
    indexes = [directory / (stem + s) for s in _INDEX_SUFFIXES if stem + s in present]
    if not target_name.endswith(LOG_SUFFIX):
        return FileAction(path, "an index .swap file left by an interrupted compaction "
                          "(the segment's indexes are rebuilt)", DELETE, also_delete=indexes)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        vp = validate_file(fd, size, base)
    finally:
        os.close(fd)
    target = directory / target_name
    if vp.valid_bytes == size:
        nxt = max(base + 1, vp.headers[-1].last_offset + 1) if vp.headers else base + 1
        covered = sorted(directory / n for n in names
                         if n.endswith(_SEGMENT_SUFFIXES)
                         and (off := offset_from_filename(n)) is not None and base < off < nxt)
        logs = ", ".join(p.name for p in covered if p.name.endswith(LOG_SUFFIX))
        return FileAction(path, f"a compacted segment left by an interrupted swap: it "
                          f"replaces {target_name}"
                          + (f" and the segments it covers ({logs})" if logs else ""),
                          RENAME, target, indexes + covered)
    why = f"{vp.error or 'invalid bytes'} at position {vp.valid_bytes}"
    if target_name in present:
        return FileAction(path, f"not a valid segment ({why}): {target_name} is kept",
                          DELETE)
    return FileAction(path, f"not a valid segment ({why}) but the only copy of "
                      f"{target_name}: renamed into place and recovered", RENAME, target,
                      indexes)


def _settle_leftovers(directory: Path) -> tuple[list[Path], list[str], list[int]]:
    """Settle what interrupted operations left; (files to delete later, names now there,
    base offsets of segments whose .log is missing). One listing when nothing is left
    over: this runs for every partition at start-up."""
    names = sorted(os.listdir(directory))
    actions = plan_leftovers(directory, names)
    leftovers: list[Path] = []
    missing: list[int] = []
    changed = False
    for a in actions:
        if a.action == QUEUE:
            leftovers.append(a.path)
            continue
        if a.missing_segment is not None:
            if a.missing_segment not in missing:
                missing.append(a.missing_segment)
            log.warning("%s: deleting %s: %s", directory.name, a.path.name, a.problem)
        elif a.action == RENAME or a.problem.startswith("not a valid"):
            log.warning("%s: %s is %s", directory.name, a.path.name, a.problem)
        a.apply()
        changed = True
    if changed:
        names = sorted(os.listdir(directory))
    return leftovers, names, sorted(missing)


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
    leftovers, names, missing_logs = _settle_leftovers(directory)
    present = set(names)
    bases = sorted(
        off for name in names
        if name.endswith(LOG_SUFFIX) and (off := offset_from_filename(name)) is not None
    )
    segments: list[LogSegment] = []
    broken: dict[int, str] = {}  # base offset -> why its indexes are rebuilt
    emptied: set[int] = set()  # empty segments in the middle whose indexes say they held data
    try:
        for i, base in enumerate(bases):
            stem = f"{base:020d}"
            missing = (stem + INDEX_SUFFIX not in present
                       or stem + TIME_INDEX_SUFFIX not in present)
            seg = LogSegment(directory, base, config, created_ms=now_ms)
            segments.append(seg)
            if seg.size == 0 and i < len(bases) - 1 and (
                    missing or seg.offset_index.entry_count or seg.time_index.entry_count):
                emptied.add(base)
            if missing:
                broken[base] = "an index file is missing"
                continue
            try:
                seg.offset_index.sanity_check(seg.size)
                if i == len(bases) - 1:  # older segments: at their first lookup
                    seg.offset_index.check_entries(seg.size)
                    seg.index_checked = True
                seg.time_index.sanity_check(seg.size)
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
                error=report.error if report else None,
                empty_with_index_evidence=seg.base_offset in emptied,
                missing_after=next((m for m in missing_logs
                                    if seg.base_offset < m < nxt), None))
            if reason:
                result.cut = cut_later_segments(directory.name, segments, i, reason)
                break
            seg.on_become_inactive()
        if not segments:
            seg = LogSegment(directory, max(0, log_start_offset), config, created_ms=now_ms,
                             create=True)
            segments.append(seg)
        log_end = segments[-1].next_offset
        clean_snapshots(directory, log_end, names=names)
        if result.cut is not None or any(r.bytes_truncated for r in result.reports):
            _truncate_leader_epochs(directory, log_end)
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


def clean_snapshots(directory: Path, log_end: int, *, dry_run: bool = False,
                    names: list[str] | None = None) -> list[FileAction]:
    """Delete the producer snapshots above `log_end` (a cut log) and the unreadable ones
    (logged once at WARNING: Kafka deletes a corrupt snapshot too); with `dry_run`, only
    say which. `names`: the directory's listing, if at hand. Returns what was (would be)
    deleted."""
    from kafkactl.log.producer_state import read_snapshot

    actions = []
    for name in sorted(os.listdir(directory)) if names is None else names:
        if not name.endswith(SNAPSHOT_SUFFIX):
            continue
        offset = offset_from_filename(name)
        if offset is None:
            continue
        path = directory / name
        if offset > log_end:
            actions.append(FileAction(path, f"a producer snapshot above the log end offset "
                                      f"{log_end}", DELETE))
            continue
        try:
            read_snapshot(path)
        except (OSError, ValueError) as e:
            actions.append(FileAction(path, f"not a readable producer snapshot ({e})",
                                      DELETE))
    if not dry_run:
        for a in actions:
            if "readable" in a.problem:
                log.warning("%s: deleting producer snapshot %s: %s", directory.name,
                            a.path.name, a.problem)
            a.apply()
    return actions


def _truncate_leader_epochs(directory: Path, log_end: int) -> None:
    """Drop the leader epochs that start at or above the log end (Kafka's loader does
    truncateFromEnd(logEndOffset) after recovery)."""
    from kafkactl.log.leader_epoch_cache import LeaderEpochCache

    cache = LeaderEpochCache(directory)
    if cache.path.exists() and cache.load():
        cache.truncate_from_end(log_end)


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
    log.warning(
        "Recovery of %s truncated segment %s at position %d: %d of %d bytes cut (%s%s); "
        "%s, the segment now ends at offset %d.",
        partition, Path(r.path).name, r.valid_bytes, r.bytes_truncated, r.original_bytes,
        r.error or "invalid bytes", claims, kept,
        (r.last_offset + 1) if r.last_offset is not None else r.base_offset)
