""".index and .timeindex files for `kafkactl dump-log` (DumpLogSegments' formats).

Each entry is printed (unless --verify-index-only), then the entries are checked against
the segment's valid batches with kafkactl.log.index_check, the same rules `kafkactl
recover` applies, and what is wrong goes to stderr in DumpLogSegments' words
("Mismatches in :<file>", "Found timestamp mismatch in :<file>", ...). With --json each
finding is also one `index_problem` object, the same fields `recover --json` reports.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkactl.log.batch_header import BatchHeader
from kafkactl.log.dump_output import Options, Output
from kafkactl.log.errors import CorruptIndexError
from kafkactl.log.index_check import (
    MISMATCH,
    NOT_FOUND,
    OUT_OF_ORDER,
    IndexProblem,
    next_segment_base,
    offset_index_file_problems,
    time_index_file_problems,
)
from kafkactl.log.offset_index import OffsetIndex
from kafkactl.log.recovery import validate_file
from kafkactl.log.time_index import TimeIndex


def segment_headers(log_path: Path, base_offset: int) -> list[BatchHeader] | None:
    """The valid batches of a segment, as recovery finds them (None: there is no .log)."""
    try:
        fd = os.open(log_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        return validate_file(fd, size, base_offset, next_segment_base(log_path)).headers
    finally:
        os.close(fd)


def _log_path(path: Path) -> Path:
    return path.with_name(path.name.split(".", 1)[0] + ".log")


def _no_log(path: Path, out: Output) -> bool:
    """An index without its segment's .log cannot be checked: say so (DumpLogSegments
    stops there with java.nio.file.NoSuchFileException naming the .log) rather than
    report every entry as pointing nowhere. False: the segment is damaged."""
    log_path = _log_path(path).resolve()
    out.error(f"Cannot check {path} against its log: {log_path} does not exist "
              f"(NoSuchFileException)",
              {"type": "error", "file": str(path), "log_file": str(log_path),
               "message": "log file not found"})
    return False


def dump_offset_index(path: Path, opts: Options, out: Output) -> bool:
    index = OffsetIndex.open_readonly(path)
    try:
        if index.entry_count == 0:
            out.line(f"{path} is empty.", {"type": "index_empty", "file": str(path)})
            problems = offset_index_file_problems(path, index.base_offset, [])
            _report(path, opts, out, problems)  # only a partial entry can be wrong
            return not problems
        if opts.sanity_only:
            log_path = _log_path(path)
            log_size = log_path.stat().st_size if log_path.exists() else None
            return _sanity_check(path, out, lambda: index.sanity_check(log_size))
        if not opts.verify_only:
            for offset, position in index.entries():
                out.line(f"offset: {offset} position: {position}",
                         {"type": "index_entry", "offset": offset, "position": position})
        base = index.base_offset
    finally:
        index.close()
    headers = segment_headers(_log_path(path), base)
    if headers is None:
        return _no_log(path, out)
    problems = offset_index_file_problems(path, base, headers)
    _report(path, opts, out, problems)
    return not problems


def dump_time_index(path: Path, opts: Options, out: Output) -> bool:
    index = TimeIndex.open_readonly(path)
    try:
        if opts.sanity_only:
            return _sanity_check(path, out, index.sanity_check)
        if not opts.verify_only:
            for ts, offset in index.entries():
                out.line(f"timestamp: {ts} offset: {offset}",
                         {"type": "time_index_entry", "timestamp": ts, "offset": offset})
        base = index.base_offset
    finally:
        index.close()
    headers = segment_headers(_log_path(path), base)
    if headers is None:
        return _no_log(path, out)
    problems = time_index_file_problems(path, base, headers)
    _report(path, opts, out, problems)
    return not problems


def _sanity_check(path: Path, out: Output, check: Callable[[], None]) -> bool:
    """DumpLogSegments' --index-sanity-check: "<file> passed sanity check.", or (where
    Kafka's tool dies with the broker's CorruptIndexException) why it failed, on stderr.
    False: the index is damaged (exit 1, as any damage found)."""
    try:
        check()
    except CorruptIndexError as e:
        out.error(f"{path} failed sanity check: {e}",
                  {"type": "sanity_check", "file": str(path), "passed": False,
                   "message": str(e)})
        return False
    out.line(f"{path} passed sanity check.",
             {"type": "sanity_check", "file": str(path), "passed": True})
    return True


# DumpLogSegments' groups: (which problems, the JSON error name, title, one line each)
_Group = tuple[Callable[[IndexProblem], bool], str, str, Callable[[IndexProblem], str]]
_OFFSET_GROUPS: list[_Group] = [
    (lambda p: p.kind == MISMATCH, "", "Mismatches in :{file}",
     lambda p: f"  Index offset: {p.offset}, log offset: {p.log_offset}"),
]
_TIME_GROUPS: list[_Group] = [
    (lambda p: p.kind == MISMATCH and p.log_timestamp != p.timestamp, "timestamp mismatch",
     "Found timestamp mismatch in :{file}",
     lambda p: f"  Index timestamp: {p.timestamp}, log timestamp: {p.log_timestamp}"),
    (lambda p: p.kind == OUT_OF_ORDER and p.previous_timestamp is not None,
     "out of order timestamp",
     "Found out of order timestamp in :{file}",
     lambda p: f"  Index timestamp: {p.timestamp}, Previously indexed timestamp: "
               f"{p.previous_timestamp}"),
    (lambda p: p.kind == NOT_FOUND, "offsets not found",
     "The following indexed offsets are not found in the log.",
     lambda p: f"Indexed offset: {p.offset}, found log offset: {p.log_offset}"),
]


def _report(path: Path, opts: Options, out: Output, problems: list[IndexProblem]) -> None:
    """Every problem, grouped as DumpLogSegments prints them; what it has no words for
    (an entry at the first batch, offsets out of order, a partial entry, a time entry
    Kafka's two checks pass but no broker writes) under "Found invalid index entries in"."""
    if not problems:
        return
    abs_path = str(path.resolve())
    is_time = path.suffix == ".timeindex"
    groups = _TIME_GROUPS if is_time else _OFFSET_GROUPS
    left = list(problems)
    for match, error, title, detail in groups:
        found = [p for p in left if match(p)]
        left = [p for p in left if not match(p)]
        if not found:
            continue
        if opts.as_json:
            obj: dict[str, Any] = (
                {"type": "time_index_error", "error": error, "file": abs_path} if is_time
                else {"type": "index_mismatches", "file": abs_path})
            obj["pairs"] = [_pair(p) for p in found]
            out.json_line(obj)
            continue
        out.err(title.format(file=abs_path))
        # DumpLogSegments lists the offset index's mismatches last entry first
        for p in (reversed(found) if not is_time else found):
            out.err(detail(p))
    if left and not opts.as_json:
        out.err(f"Found invalid index entries in :{abs_path}")
        for p in left:
            out.err(f"  {p.message}")
    if opts.as_json:
        for p in problems:
            out.json_line({"type": "index_problem", "file": abs_path, **p.to_dict()})


def _pair(p: IndexProblem) -> list[int | None]:
    if p.index == "offset":
        return [p.offset, p.log_offset]
    if p.kind == OUT_OF_ORDER:
        return [p.timestamp, p.previous_timestamp]
    if p.kind == NOT_FOUND:
        return [p.offset, p.log_offset]
    return [p.timestamp, p.log_timestamp]
