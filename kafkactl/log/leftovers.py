"""The leftovers of interrupted operations in a partition dir, and the files a cut log
leaves behind (shared by the broker's start-up, loader.py, and `kafkactl recover`).

plan_leftovers decides, changing nothing: `.deleted` files are queued for deletion,
`.cleaned` and `.tmp` files removed, a `<base>.log.swap` (a finished compaction, maybe of a
group of segments) renamed into place once it checks as whole valid batches (a `.swap`
that does not is deleted and the segment it would replace kept; so is every `.swap` at or
above the offset of a `.cleaned` file, as Kafka's loader deletes it (KAFKA-6264: the
replacement was not finished), the originals kept); a renamed `.swap` takes with it every
file of the segments it covers, their producer snapshots too (as Kafka's), orphan index files
removed (a missing `.log`), and a segment whose name is above its first batch's offset
(but after the previous segment) renamed to that offset, its indexes rebuilt: Kafka's loader
rewrites such a segment into ones named by their real offsets (splitOverflowedSegment)
instead of taking its records for damage and cutting the log there.
settle_leftovers carries it out. clean_snapshots deletes the
producer snapshots above a log end and the unreadable ones; truncate_leader_epochs cuts
the leader-epoch checkpoint at a log end.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from kafkactl.log.batch_header import read_header
from kafkactl.log.producer_snapshot import SNAPSHOT_SUFFIX, snapshot_problem
from kafkactl.log.recovery import validate_file
from kafkactl.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    filename_prefix,
    offset_from_filename,
)
from kafkactl.log.txn_index import TXN_INDEX_SUFFIX
from kafkactl.record.batch_header import LOG_OVERHEAD

log = logging.getLogger(__name__)

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
    # routine: the broker's start-up does it on a healthy log too (a queued .deleted file,
    # a leader epoch starting at the log end), so it is no repair
    housekeeping: bool = False
    covers_to: int | None = None  # a valid .log.swap: the offset after its last batch

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
                "also_removed": [str(p) for p in self.also_delete],
                "housekeeping": self.housekeeping}


def plan_leftovers(directory: Path, names: list[str]) -> list[FileAction]:
    """What to do with the leftovers of interrupted operations among `names` (a sorted
    listing of `directory`), changing nothing. Cheap when nothing is left over (plain
    suffix tests): this runs for every partition at start-up."""
    actions: list[FileAction] = []
    present = set(names)
    renamed: set[str] = set()  # .log names a .swap will create
    gone: set[Path] = set()  # files a .swap's rename removes
    # Kafka's removeTempFilesAndCollectSwapFiles: a .swap at or above the lowest .cleaned
    # file's offset belongs to a replacement that did not finish (KAFKA-6264)
    min_cleaned = min((off for n in names if n.endswith(CLEANED_SUFFIX)
                       and (off := offset_from_filename(n)) is not None), default=None)
    for name in names:
        path = directory / name
        if name.endswith(DELETED_SUFFIX):
            actions.append(FileAction(path, "left by an interrupted segment deletion", QUEUE,
                                      housekeeping=True))
        elif name.endswith(CLEANED_SUFFIX):
            actions.append(FileAction(path, "left by an interrupted compaction", DELETE))
        elif name.endswith(".tmp"):
            actions.append(FileAction(path, "a temporary file left by an interrupted write",
                                      DELETE))
        elif name.endswith(SWAP_SUFFIX):
            off = offset_from_filename(name)
            action = _swap_action(directory, name, names)
            if (min_cleaned is not None and off is not None and off >= min_cleaned
                    and action.action == RENAME and _originals_whole(action, names)):
                actions.append(FileAction(
                    path, f"a .swap file of an unfinished segment replacement (a .cleaned "
                    f"file at offset {min_cleaned} is left, at or below it): the original "
                    f"segments are kept, as Kafka's loader keeps them", DELETE))
                continue
            if action.action == RENAME and action.target is not None:
                renamed.add(action.target.name)
                gone.update(action.also_delete)
            actions.append(action)
    actions += _misnamed_segments(directory, names, renamed)
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
                         if n.endswith((*_SEGMENT_SUFFIXES, SNAPSHOT_SUFFIX))
                         and (off := offset_from_filename(n)) is not None and base < off < nxt)
        logs = ", ".join(p.name for p in covered if p.name.endswith(LOG_SUFFIX))
        return FileAction(path, f"a compacted segment left by an interrupted swap: it "
                          f"replaces {target_name}"
                          + (f" and the segments it covers ({logs})" if logs else ""),
                          RENAME, target, indexes + covered, covers_to=nxt)
    why = f"{vp.error or 'invalid bytes'} at position {vp.valid_bytes}"
    if target_name in present:
        return FileAction(path, f"not a valid segment ({why}): {target_name} is kept",
                          DELETE)
    return FileAction(path, f"not a valid segment ({why}) but the only copy of "
                      f"{target_name}: renamed into place and recovered", RENAME, target,
                      indexes)


def _originals_whole(action: FileAction, names: list[str]) -> bool:
    """The segment a `.swap` replaces is there and none of those it covers was deleted yet
    (no `.deleted` file in its range): deleting the `.swap` loses nothing. (Kafka deletes
    such a `.swap` without looking: its replacement deletes the originals only after every
    `.cleaned` file became a `.swap`.)"""
    if action.target is None or action.target.name not in names or action.covers_to is None:
        return False
    base = offset_from_filename(action.target.name)
    return base is not None and not any(
        n.endswith(DELETED_SUFFIX) and (off := offset_from_filename(n)) is not None
        and base <= off < action.covers_to for n in names)


def _first_and_last(path: Path, *, last: bool) -> tuple[int | None, int | None]:
    """(first batch's base offset, with `last` the last batch's last offset) of a .log,
    from the batch headers only (log.batch_header: a magic 0/1 entry's offset is its last
    inner one). None when the file holds no whole header."""
    first = end = None
    try:
        with open(path, "rb") as f:
            fd = f.fileno()
            size = os.fstat(fd).st_size
            pos = 0
            while (h := read_header(fd, pos)) is not None and pos + h.size <= size \
                    and h.size > LOG_OVERHEAD:
                if first is None:
                    first = h.base_offset
                    if not last:
                        break
                end = h.last_offset
                pos += h.size
    except OSError:
        return None, None
    return first, end


def _misnamed_segments(directory: Path, names: list[str], renamed: set[str]
                       ) -> list[FileAction]:
    """Segments named above their first batch's offset, that begin after the previous
    segment ends: renamed to that offset (their indexes, relative to the name, go: rebuilt).
    Only the first batch is read of a segment that is named right."""
    logs = sorted((b, n) for n in names if n.endswith(LOG_SUFFIX)
                  and (b := offset_from_filename(n)) is not None)
    present = set(names) | renamed
    out: list[FileAction] = []
    for i, (base, name) in enumerate(logs):
        first, _ = _first_and_last(directory / name, last=False)
        if first is None or first >= base or first < 0:
            continue
        prev_end = None
        if i:
            _, prev_end = _first_and_last(directory / logs[i - 1][1], last=True)
            if prev_end is None:
                prev_end = logs[i - 1][0] - 1
        if prev_end is not None and first <= prev_end:
            continue  # overlaps the previous segment: damage, for recovery to judge
        target = filename_prefix(first) + LOG_SUFFIX
        if target in present:
            continue
        stem = name[: -len(LOG_SUFFIX)]
        out.append(FileAction(
            directory / name, f"named {base} but its first batch starts at offset {first}, "
            f"after the previous segment ({'none' if prev_end is None else prev_end}): "
            f"renamed to {target}, its indexes rebuilt", RENAME, directory / target,
            also_delete=[directory / (stem + s) for s in _INDEX_SUFFIXES
                         if stem + s in present]))
        renamed.add(target)
    return out


def settle_leftovers(directory: Path) -> tuple[list[Path], list[str], list[int]]:
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



def clean_snapshots(directory: Path, log_end: int, *, dry_run: bool = False,
                    names: list[str] | None = None, warn: bool = True,
                    first_base: int = -1) -> list[FileAction]:
    """Delete the producer snapshots above `log_end` (a cut log), those below
    `first_base` (the base offset of the log's first segment: theirs were deleted, the
    snapshot deletion with them was cut short by a crash) and the unreadable ones (logged
    once at WARNING, unless not `warn`: `kafkactl recover` reports the actions itself;
    Kafka deletes a corrupt snapshot too); with `dry_run`, only say which. `names`: the
    directory's listing, if at hand. Returns what was (would be) deleted."""
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
        if offset < first_base:
            actions.append(FileAction(path, f"a producer snapshot below the first segment "
                                      f"(base offset {first_base}), of a deleted segment",
                                      DELETE))
            continue
        try:
            problem = snapshot_problem(path.read_bytes())
        except OSError as e:
            problem = e.strerror or str(e)
        if problem is not None:
            actions.append(FileAction(path, f"not a readable producer snapshot ({problem})",
                                      DELETE))
    if not dry_run:
        for a in actions:
            if warn and "readable" in a.problem:
                log.warning("%s: deleting producer snapshot %s: %s", directory.name,
                            a.path.name, a.problem)
            a.apply()
    return actions


def truncate_leader_epochs(directory: Path, log_end: int) -> None:
    """Drop the leader epochs that start at or above the log end (Kafka's loader does
    truncateFromEnd(logEndOffset) after recovery)."""
    from kafkactl.log.leader_epoch_cache import LeaderEpochCache

    cache = LeaderEpochCache(directory)
    if cache.path.exists() and cache.load():
        cache.truncate_from_end(log_end)
