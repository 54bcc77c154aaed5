"""Offline repair of a log dir or one partition dir (what `kafkactl recover` drives).

The broker's own segment recovery (kafkactl.log.recovery) applied to every segment of
every partition found under a path: each .log is cut at its first invalid byte and stale
indexes are rebuilt (the .txnindex files from the transaction markers of the whole
partition, as the broker's recovery rebuilds them); valid batches are never removed. The
caller holds the log dir's
`.lock` (lock_log_dir) so a running broker and a repair never meet.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from kafkactl.log.checkpoint import (
    RECOVERY_POINT_CHECKPOINT,
    checkpoint_problem,
    fsync_dir,
    salvage_checkpoint,
    write_checkpoint,
)
from kafkactl.log.config import LogConfig
from kafkactl.log.manager import CLEAN_SHUTDOWN_MARKER, is_partition_dir
from kafkactl.log.recovery import (
    SegmentRecoveryReport,
    inspect_segment,
    recover_segment,
    salvage_segment_file,
)
from kafkactl.log.segment import LOG_SUFFIX, LogSegment, offset_from_filename
from kafkactl.log.txn_index import (
    TXN_INDEX_SUFFIX,
    TransactionIndex,
    TxnTracker,
    expected_txn_entries,
)


class RepairError(Exception):
    """The path cannot be repaired (not a log dir, missing...): a sentence for the user."""


def partition_dirs(path: Path) -> tuple[Path, list[Path]]:
    """(the log dir holding the `.lock`, the partition dirs to recover) for PATH."""
    if not path.exists():
        raise RepairError(f"{path} does not exist.")
    if not path.is_dir():
        raise RepairError(f"{path} is not a directory: give a log dir or a partition dir.")
    if is_partition_dir(path) and segment_files(path):
        return path.parent, [path]
    dirs = [p for p in sorted(path.iterdir()) if is_partition_dir(p)]
    if not dirs:
        if is_partition_dir(path):
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


def recover_partition(d: Path, *, dry_run: bool, config: LogConfig, salvage: bool = False
                      ) -> list[SegmentRecoveryReport]:
    """Inspect every segment of a partition dir; unless `dry_run`, repair those that need
    it (cut the invalid tail, rebuild the indexes). With `salvage`, the valid batches after
    a corrupt region are kept (offsets as written: the log gets a gap) instead of being
    cut with it (Kafka's rule). One report per segment."""
    segments = segment_files(d)
    reports = []
    for i, (base, path) in enumerate(segments):
        nxt = segments[i + 1][0] if i + 1 < len(segments) else None
        found = inspect_segment(path, index_interval_bytes=config.index_interval_bytes,
                                next_base_offset=nxt, salvage=salvage)
        if dry_run or (found.bytes_truncated == 0 and not found.indexes_rebuilt):
            reports.append(found)
            continue
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
        if salvage:  # as found, before the rewrite
            done.original_bytes, done.error = found.original_bytes, found.error
            done.error_position = found.error_position
            done.salvaged_batches = found.salvaged_batches
        reports.append(done)
    _check_txn_indexes(d, segments, reports, dry_run=dry_run, salvage=salvage)
    return reports


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
        expected = expected_txn_entries(files, 0, TxnTracker(), segments[0][0],
                                        use_mmap=True)  # the log dir is locked
    finally:
        for f in files:
            os.close(f.fd)
    from kafkactl.log.index_check import txn_index_problems

    for (base, path), r in zip(segments, reports, strict=True):
        txn_path = path.with_name(path.name[: -len(LOG_SUFFIX)] + TXN_INDEX_SUFFIX)
        try:
            data: bytes | None = txn_path.read_bytes()
        except FileNotFoundError:
            data = None
        want = expected.get(base, [])
        problems = txn_index_problems(want, data)
        if not problems:
            continue
        r.index_problems = list(r.index_problems) + [p.to_dict() for p in problems]
        r.indexes_rebuilt = True
        if not dry_run:
            TransactionIndex(txn_path, base).replace_entries(want)


def needs_repair(r: SegmentRecoveryReport) -> bool:
    """The segment had (or, in a dry run, has) bytes to cut or indexes to rebuild."""
    return r.bytes_truncated > 0 or r.indexes_rebuilt


@dataclass
class CheckpointReport:
    path: str
    problem: str  # why it cannot be read
    entries_kept: int  # well-formed lines kept in the rewritten file
    rewritten: bool  # False in a dry run

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
        reports.append(CheckpointReport(str(path), problem, len(entries), not dry_run))
    return reports
