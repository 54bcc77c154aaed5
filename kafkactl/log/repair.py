"""Offline repair of a log dir or one partition dir (what `kafkactl recover` drives).

The broker's own segment recovery (kafkactl.log.recovery) applied to every segment of
every partition found under a path: each .log is cut at its first invalid byte and stale
indexes are rebuilt; valid batches are never removed. The caller holds the log dir's
`.lock` (lock_log_dir) so a running broker and a repair never meet.
"""

from __future__ import annotations

from pathlib import Path

from kafkactl.log.config import LogConfig
from kafkactl.log.manager import is_partition_dir
from kafkactl.log.recovery import (
    SegmentRecoveryReport,
    inspect_segment,
    recover_segment,
    salvage_segment_file,
)
from kafkactl.log.segment import LOG_SUFFIX, LogSegment, offset_from_filename


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
        if salvage:  # as found, before the rewrite
            done.original_bytes, done.error = found.original_bytes, found.error
            done.error_position = found.error_position
            done.salvaged_batches = found.salvaged_batches
        reports.append(done)
    return reports


def needs_repair(r: SegmentRecoveryReport) -> bool:
    """The segment had (or, in a dry run, has) bytes to cut or indexes to rebuild."""
    return r.bytes_truncated > 0 or r.indexes_rebuilt
