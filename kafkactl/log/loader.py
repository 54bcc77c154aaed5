"""Loading a partition directory into segments (Kafka's LogLoader, reduced).

Leftovers of interrupted operations are settled first: `.deleted` files are queued for
deletion, `.cleaned` and `.tmp` files removed, `.swap` files (a finished compaction) renamed
into place, orphan index files removed. Then every `.log` is opened; a segment whose index
files are missing or fail the sanity check is recovered (validated and re-indexed), and so
is every segment from the recovery point on when the log was not shut down cleanly. After
a clean stop the active segment's tail (from its last index entry) is still validated, and
the segment recovered if it is torn. Every truncation is logged at WARNING.
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from kafkactl.log.config import LogConfig
from kafkactl.log.errors import CorruptIndexError
from kafkactl.log.recovery import SegmentRecoveryReport, recover_segment, validate_log_bytes
from kafkactl.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
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


def _settle_leftovers(directory: Path) -> tuple[list[Path], list[str]]:
    """Settle what interrupted operations left; (files to delete later, names now there).
    Plain names and one listing when nothing is left over: this runs for every partition
    at start-up."""
    leftovers: list[Path] = []
    names = sorted(os.listdir(directory))
    changed = False
    for name in names:
        if name.endswith(DELETED_SUFFIX):
            leftovers.append(directory / name)
        elif name.endswith((CLEANED_SUFFIX, ".tmp")):
            (directory / name).unlink(missing_ok=True)
            changed = True
        elif name.endswith(SWAP_SUFFIX):
            os.replace(directory / name, directory / name[: -len(SWAP_SUFFIX)])
            changed = True
    if changed:
        names = sorted(os.listdir(directory))
    present = set(names)
    orphans = False
    for name in names:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            if name.endswith(suffix) and offset_from_filename(name) is not None:
                stem = name[: -len(suffix)]
                if stem + LOG_SUFFIX not in present:
                    (directory / name).unlink(missing_ok=True)
                    orphans = True
    if orphans:
        names = sorted(os.listdir(directory))
    return leftovers, names


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
    leftovers, names = _settle_leftovers(directory)
    present = set(names)
    bases = sorted(
        off for name in names
        if name.endswith(LOG_SUFFIX) and (off := offset_from_filename(name)) is not None
    )
    segments: list[LogSegment] = []
    broken: dict[int, str] = {}  # base offset -> why its indexes are rebuilt
    try:
        for i, base in enumerate(bases):
            stem = f"{base:020d}"
            missing = (stem + INDEX_SUFFIX not in present
                       or stem + TIME_INDEX_SUFFIX not in present)
            seg = LogSegment(directory, base, config, created_ms=now_ms)
            segments.append(seg)
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
            if i >= first_unflushed or seg.base_offset in broken:
                nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
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
            if i < len(segments) - 1:
                seg.on_become_inactive()
        if not segments:
            seg = LogSegment(directory, max(0, log_start_offset), config, created_ms=now_ms,
                             create=True)
            segments.append(seg)
        return result
    except BaseException:
        for seg in segments:
            seg.close()
        raise


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
