"""What makes an index entry wrong: the one definition `kafkactl recover` and `kafkactl
dump-log` both use, so that a log one calls consistent the other does not flag.

The index files are compared with the segment's valid batches (the headers of the run of
whole, CRC-valid batches from position 0 that recovery keeps). Valid means what a Kafka
broker could have written, whatever its index.interval.bytes:

* an offset-index entry (offset, position) points at the start of a valid batch other than
  the first (Kafka never indexes a segment's first batch), carries that batch's last offset,
  and both fields increase from one entry to the next;
* a time-index entry (timestamp, offset) carries the last offset of a valid batch and the
  largest batch timestamp up to it, at the batch where that maximum was first reached (an
  entry anywhere else sends a lookup by time past records it should find); timestamps
  increase and offsets do not decrease;
* the file holds whole entries (its length is a multiple of the entry size).

The entries are those the broker itself counts (AbstractIndex: the slots before the first
all-zero one, unless the last slot is not zero).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kafkactl.log.batch_header import BatchHeader
from kafkactl.log.offset_index import OffsetIndex
from kafkactl.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    offset_from_filename,
)
from kafkactl.log.time_index import NO_TIMESTAMP, TimeIndex
from kafkactl.log.txn_index import AbortedTxn

OFFSET, TIME = "offset", "time"
# kinds of problem
MISMATCH = "mismatch"  # the entry does not point where it says (Kafka's "Mismatches in")
FIRST_BATCH = "first_batch"  # an offset entry at position 0
OUT_OF_ORDER = "out_of_order"  # does not increase over the previous entry
NOT_FOUND = "not_found"  # a time entry whose offset ends no valid batch
PARTIAL_ENTRY = "partial_entry"  # the file ends inside an entry
MISSING = "missing"  # the index file does not exist (recover rebuilds it)


@dataclass(frozen=True)
class IndexProblem:
    """One wrong entry (or, with entry -1, the file itself)."""

    index: str  # OFFSET, TIME or TXN
    entry: int  # entry number, from 0; -1: the file as a whole
    kind: str
    message: str  # a sentence naming the entry and what is wrong with it
    offset: int | None = None  # the entry's offset (both indexes)
    position: int | None = None  # offset index: the entry's position
    timestamp: int | None = None  # time index: the entry's timestamp
    log_offset: int | None = None  # the last offset of the batch the log holds there (-1: none)
    log_timestamp: int | None = None  # time index: the largest timestamp of that batch
    # time index, out of order: the previous entry's timestamp (None: only the offset
    # went back)
    previous_timestamp: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def offset_index_problems(headers: Sequence[BatchHeader],
                          entries: Iterable[tuple[int, int]]) -> list[IndexProblem]:
    """The wrong entries of an offset index over these (valid) batches."""
    by_pos = {h.position: h for h in headers}
    problems: list[IndexProblem] = []
    prev_off, prev_pos = -1, -1
    for n, (off, pos) in enumerate(entries):
        at = by_pos.get(pos)
        found = at.last_offset if at is not None else -1
        where = f"offset index entry {n} (offset {off}, position {pos})"
        if at is None:
            problems.append(IndexProblem(
                OFFSET, n, MISMATCH, f"{where}: position {pos} is not the start of a valid "
                f"batch", offset=off, position=pos, log_offset=found))
        elif found != off:
            problems.append(IndexProblem(
                OFFSET, n, MISMATCH, f"{where}: the batch at that position ends at offset "
                f"{found}", offset=off, position=pos, log_offset=found))
        elif pos == 0:
            problems.append(IndexProblem(
                OFFSET, n, FIRST_BATCH, f"{where}: points at the segment's first batch, "
                f"which is never indexed", offset=off, position=pos, log_offset=found))
        elif off <= prev_off or pos <= prev_pos:
            problems.append(IndexProblem(
                OFFSET, n, OUT_OF_ORDER, f"{where}: does not increase over the previous "
                f"entry (offset {prev_off}, position {prev_pos})", offset=off, position=pos,
                log_offset=found))
        prev_off, prev_pos = off, pos
    return problems


def time_index_problems(headers: Sequence[BatchHeader],
                        entries: Iterable[tuple[int, int]]) -> list[IndexProblem]:
    """The wrong entries of a time index over these (valid) batches.

    DumpLogSegments' two checks are made independently, so one entry can be both: its
    timestamp is not the largest of its own batch (MISMATCH, `log_timestamp` that batch's)
    and it does not increase over the previous entry's (OUT_OF_ORDER, `previous_timestamp`).
    An entry neither catches can still be one no broker writes (its offsets go back, or
    its timestamp is its batch's but not the largest up to it, or that largest was first
    reached at an earlier batch): MISMATCH or OUT_OF_ORDER with only the message to say
    why, as `kafkactl recover` judges it."""
    # per batch last offset: (its own largest timestamp, the largest up to it, the offset
    # where that was first reached)
    batch: dict[int, tuple[int, int, int]] = {}
    max_ts, max_off = NO_TIMESTAMP, -1
    for h in headers:
        if h.max_timestamp > max_ts:
            max_ts, max_off = h.max_timestamp, h.last_offset
        batch[h.last_offset] = (h.max_timestamp, max_ts, max_off)
    lasts = [h.last_offset for h in headers]
    problems: list[IndexProblem] = []
    prev_ts, prev_off = NO_TIMESTAMP - 1, -1
    for n, (ts, off) in enumerate(entries):
        where = f"time index entry {n} (timestamp {ts}, offset {off})"
        found = batch.get(off)
        if found is None:
            reach = next((last for last in lasts if last >= off), -1)
            problems.append(IndexProblem(
                TIME, n, NOT_FOUND, f"{where}: no valid batch ends at offset {off}",
                offset=off, timestamp=ts, log_offset=reach))
            prev_ts, prev_off = ts, off
            continue
        own, up_to, reached = found
        flagged = False
        if ts != own:
            flagged = True
            problems.append(IndexProblem(
                TIME, n, MISMATCH, f"{where}: the largest timestamp of the batch ending "
                f"there is {own}", offset=off, timestamp=ts, log_offset=off,
                log_timestamp=own))
        if ts <= prev_ts:
            flagged = True
            problems.append(IndexProblem(
                TIME, n, OUT_OF_ORDER, f"{where}: its timestamp does not increase over the "
                f"previous entry's (timestamp {prev_ts}, offset {prev_off})", offset=off,
                timestamp=ts, log_offset=off, log_timestamp=own, previous_timestamp=prev_ts))
        if not flagged and off < prev_off:
            problems.append(IndexProblem(
                TIME, n, OUT_OF_ORDER, f"{where}: its offset goes back from the previous "
                f"entry's (timestamp {prev_ts}, offset {prev_off})", offset=off,
                timestamp=ts, log_offset=off, log_timestamp=own))
        elif not flagged and (up_to, reached) != (ts, off):
            why = (f"the largest timestamp up to that offset is {up_to}" if up_to != ts
                   else f"timestamp {ts} was first reached at offset {reached}")
            problems.append(IndexProblem(
                TIME, n, MISMATCH, f"{where}: {why}", offset=off, timestamp=ts,
                log_offset=off, log_timestamp=own))
        prev_ts, prev_off = ts, off
    return problems


def _partial(index: str, path: Path, length: int, size: int) -> list[IndexProblem]:
    if length % size == 0:
        return []
    return [IndexProblem(index, -1, PARTIAL_ENTRY,
                         f"{path.name} is {length} bytes, not a whole number of "
                         f"{size}-byte entries")]


def offset_index_file_problems(path: Path, base_offset: int,
                               headers: Sequence[BatchHeader]) -> list[IndexProblem]:
    """The problems of an .index file over these (valid) batches of its segment."""
    index = OffsetIndex.open_readonly(path, base_offset)
    try:
        return (_partial(OFFSET, path, index.file_length, OffsetIndex.ENTRY_SIZE)
                + offset_index_problems(headers, index.entries()))
    finally:
        index.close()


def time_index_file_problems(path: Path, base_offset: int,
                             headers: Sequence[BatchHeader]) -> list[IndexProblem]:
    """The problems of a .timeindex file over these (valid) batches of its segment."""
    index = TimeIndex.open_readonly(path, base_offset)
    try:
        return (_partial(TIME, path, index.file_length, TimeIndex.ENTRY_SIZE)
                + time_index_problems(headers, index.entries()))
    finally:
        index.close()


def segment_index_problems(log_path: Path, base_offset: int,
                           headers: Sequence[BatchHeader]) -> list[IndexProblem]:
    """Every problem of a segment's two index files (a missing file is one)."""
    stem = log_path.name.split(".", 1)[0]
    problems: list[IndexProblem] = []
    for index, suffix, check in ((OFFSET, INDEX_SUFFIX, offset_index_file_problems),
                                 (TIME, TIME_INDEX_SUFFIX, time_index_file_problems)):
        path = log_path.with_name(stem + suffix)
        if not path.exists():
            problems.append(IndexProblem(index, -1, MISSING, f"{path.name} is missing"))
        else:
            problems += check(path, base_offset, headers)
    return problems


def next_segment_base(log_path: Path) -> int | None:
    """The base offset of the segment after this one in its directory (None: the last)."""
    base = offset_from_filename(log_path.name)
    if base is None:
        return None
    later = [b for p in log_path.parent.glob("*" + LOG_SUFFIX)
             if (b := offset_from_filename(p.name)) is not None and b > base]
    return min(later, default=None)


TXN = "transaction"


def txn_index_problems(expected: Sequence[AbortedTxn], data: bytes | None
                       ) -> list[IndexProblem]:
    """How a segment's .txnindex (its bytes; None: no file) differs from the aborted
    transactions its markers say it holds (`expected`, read from the log as recovery
    rebuilds them)."""
    from kafkactl.log.txn_index import ENTRY_SIZE, parse_entries

    if data is None:
        if not expected:
            return []
        return [IndexProblem(TXN, -1, MISSING, f"the transaction index is missing: the log "
                             f"holds {len(expected)} aborted transaction(s)")]
    problems: list[IndexProblem] = []
    found = parse_entries(data, strict=False)
    whole = len(found) * ENTRY_SIZE
    if whole != len(data):
        problems.append(IndexProblem(
            TXN, len(found), PARTIAL_ENTRY, f"the transaction index ends with {len(data) - whole}"
            f" byte(s) that are not a whole {ENTRY_SIZE}-byte version-0 entry"))
    for n in range(max(len(found), len(expected))):
        have = found[n] if n < len(found) else None
        want = expected[n] if n < len(expected) else None
        if have == want:
            continue
        if have is None:
            assert want is not None
            message = (f"transaction index entry {n} is missing: the log aborts producer "
                       f"{want.producer_id}'s transaction {want.first_offset}..{want.last_offset}"
                       f" (last stable offset {want.last_stable_offset})")
            problems.append(IndexProblem(TXN, n, MISSING, message, offset=want.last_offset))
        elif want is None:
            problems.append(IndexProblem(
                TXN, n, MISMATCH, f"transaction index entry {n} (producer {have.producer_id}, "
                f"offsets {have.first_offset}..{have.last_offset}) matches no abort marker in "
                "the log", offset=have.last_offset, log_offset=-1))
        else:
            problems.append(IndexProblem(
                TXN, n, MISMATCH, f"transaction index entry {n} is {have.describe()}; the log "
                f"says {want.describe()}", offset=have.last_offset,
                log_offset=want.last_offset))
    return problems
