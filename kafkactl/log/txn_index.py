"""The transaction index (`<20-digit base offset>.txnindex`): Kafka's aborted transactions.

One 34-byte entry per transaction that an ABORT marker in this segment ended, in the order
the markers were written (Kafka's AbortedTxn, version 0):

    version int16 (=0) | producerId int64 | firstOffset int64 | lastOffset int64 (the
    marker's offset) | lastStableOffset int64 (the first offset of the earliest other
    transaction still open when the marker was written, else the marker's offset + 1)

The file exists only once a transaction was aborted in the segment (Kafka creates it
lazily too). A read_committed Fetch collects the entries overlapping what it returns
(`collect_aborted`, Kafka's collectAbortedTxns): the consumer drops those producers'
records from `firstOffset` until their marker. Recovery rebuilds the file from the log
(`rebuild_txn_indexes`, from the newest producer snapshot at or below the first segment it
recovers; with none, offsets below the first segment's base are taken as the file has them:
`reconcile_entries`), and so does every start when it is not whole version-0 entries or
its entries do not fit the segment (TransactionIndex.sanity_check, Kafka's sanityCheck);
the cleaner writes the entries whose markers it keeps.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from kafkactl.log.errors import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
TXN_INDEX_VERSION = 0
ENTRY = struct.Struct(">hqqqq")  # version, producerId, firstOffset, lastOffset, LSO
ENTRY_SIZE = ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return ENTRY.pack(TXN_INDEX_VERSION, *self)

    def describe(self) -> str:
        """DumpLogSegments' line for this entry."""
        return (f"version: {TXN_INDEX_VERSION} producerId: {self.producer_id} "
                f"firstOffset: {self.first_offset} lastOffset: {self.last_offset} "
                f"lastStableOffset: {self.last_stable_offset}")


class TxnIndexError(ValueError):
    """A .txnindex that is not whole 34-byte version-0 entries."""


class TxnIndexDamage(NamedTuple):
    """Where a .txnindex stops being whole version-0 entries (see scan_entries)."""

    entry: int  # the number of the first entry that cannot be read (from 0)
    position: int  # its byte position
    version: int | None  # its version field when it is whole (None: a truncated entry)
    trailing: int  # the bytes from `position` to the end of the file

    def describe(self) -> str:
        """What is wrong, as a sentence fragment (the loader's WARNING, recover, dump-log)."""
        if self.version is None:
            return (f"it is truncated: its last {self.trailing} byte(s) (from byte "
                    f"{self.position}) are not a whole {ENTRY_SIZE}-byte entry")
        after, rest = divmod(self.trailing - ENTRY_SIZE, ENTRY_SIZE)
        parts = ([f"{after} entr{'y' if after == 1 else 'ies'}"] if after else []) + (
            [f"{rest} byte(s)"] if rest else [])
        unread = f"it and the {' and '.join(parts)} after it" if parts else "it"
        return (f"entry {self.entry} (at byte {self.position}) has version {self.version}, "
                f"not {TXN_INDEX_VERSION}: {unread} cannot be read")


def scan_entries(data: bytes) -> tuple[list[AbortedTxn], TxnIndexDamage | None]:
    """The whole version-0 entries of a .txnindex's bytes up to the first that is not one,
    and what stopped the reading there (None: the file is whole entries). One pass."""
    out: list[AbortedTxn] = []
    size = len(data)
    whole = size - size % ENTRY_SIZE
    unpack = ENTRY.unpack_from
    for pos in range(0, whole, ENTRY_SIZE):
        version, pid, first, last, lso = unpack(data, pos)
        if version != TXN_INDEX_VERSION:
            return out, TxnIndexDamage(len(out), pos, version, size - pos)
        out.append(AbortedTxn(pid, first, last, lso))
    if whole != size:
        return out, TxnIndexDamage(len(out), whole, None, size - whole)
    return out, None


def parse_entries(data: bytes, *, strict: bool = True) -> list[AbortedTxn]:
    """The entries of a .txnindex's bytes. `strict`: a partial trailing entry or an unknown
    version raises TxnIndexError; otherwise parsing stops there."""
    out, damage = scan_entries(data)
    if strict and damage is not None:
        raise TxnIndexError(damage.describe())
    return out


def entry_problems(entries: list[AbortedTxn], base_offset: int,
                   next_offset: int | None = None) -> list[str]:
    """What is wrong with a segment's entries (Kafka's TransactionIndex.sanityCheck and
    more): markers inside the segment and in order, first <= last, lastStable <= last + 1."""
    problems = []
    prev = -1
    for i, e in enumerate(entries):
        if e.last_offset < base_offset:
            problems.append(f"entry {i}: last offset {e.last_offset} is below the segment's "
                            f"base offset {base_offset}")
        if next_offset is not None and e.last_offset >= next_offset:
            problems.append(f"entry {i}: last offset {e.last_offset} is past the segment's "
                            f"end (offset {next_offset})")
        if e.first_offset > e.last_offset:
            problems.append(f"entry {i}: first offset {e.first_offset} is after its last "
                            f"offset {e.last_offset}")
        if e.last_stable_offset > e.last_offset + 1:
            problems.append(f"entry {i}: last stable offset {e.last_stable_offset} is past "
                            f"its marker's offset + 1 ({e.last_offset + 1})")
        if e.last_offset <= prev:
            problems.append(f"entry {i}: last offset {e.last_offset} does not follow the "
                            f"previous entry's {prev}")
        prev = e.last_offset
    return problems


class TransactionIndex:
    """One segment's .txnindex. Entries are kept in memory (a segment holds few aborted
    transactions) and appended to the file as they come; the file is created on the
    first append."""

    __slots__ = ("_dirty", "base_offset", "damage", "entries", "path")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._dirty = False  # appended since the last flush
        self.entries: list[AbortedTxn] = []
        # where the file stops being whole version-0 entries (the entries before it are
        # kept; the loader checks, see sanity_check, and rebuilds the file)
        self.damage: TxnIndexDamage | None = None
        with contextlib.suppress(FileNotFoundError):
            self.entries, self.damage = scan_entries(path.read_bytes())

    def sanity_check(self, next_base_offset: int | None = None) -> None:
        """Raise CorruptIndexError if the file is not whole version-0 entries or an entry
        does not fit the segment (entry_problems: markers inside it, below
        `next_base_offset`, and in order): Kafka's TransactionIndex.sanityCheck, which the
        loader runs for every segment at every start; the segment is then recovered and
        this file rebuilt from the log. Free when the file is empty or absent (it was read
        when the segment was opened)."""
        if self.damage is not None:
            raise CorruptIndexError(
                f"Corrupt transaction index {self.path.name}: {self.damage.describe()}.")
        if self.entries:
            problems = entry_problems(self.entries, self.base_offset, next_base_offset)
            if problems:
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                raise CorruptIndexError(
                    f"Corrupt transaction index {self.path.name}: {problems[0]}{more}.")

    def append(self, entry: AbortedTxn) -> None:
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise TxnIndexError(
                f"{self.path.name}: aborted transaction ending at {entry.last_offset} does "
                f"not follow the last entry's {self.entries[-1].last_offset}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            data = entry.pack()
            if os.write(fd, data) != len(data):
                raise OSError(f"short write to {self.path}")
        finally:
            os.close(fd)
        self.entries.append(entry)
        self._dirty = True

    def replace_entries(self, entries: Iterable[AbortedTxn]) -> None:
        """Rewrite the file with `entries` (none: the file is removed)."""
        new = list(entries)
        if not new:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            self.entries, self.damage = [], None
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(b"".join(e.pack() for e in new))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.entries, self.damage = new, None

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (Kafka's truncateTo)."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.replace_entries(keep)

    def collect_aborted(self, fetch_offset: int, upper_bound: int
                        ) -> tuple[list[AbortedTxn], bool]:
        """(entries overlapping [fetch_offset, upper_bound), complete): Kafka's
        collectAbortedTxns; `complete` when an entry's last stable offset reaches the upper
        bound (no later segment can hold an overlapping transaction)."""
        out = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def flush(self) -> None:
        """fsync the file if an entry was appended since the last flush (replace_entries
        syncs its own)."""
        if not self._dirty:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def rename_to(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


# ---- reading transaction events from the log (recovery, truncation, checks) -------------
_HEAD = struct.Struct(">qi4xb4xhi8xqqhi")  # base, length, magic, attributes, last delta,
#                                           max ts, producer id, epoch, base sequence
_HEAD_SIZE = 61
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_TXN_OR_CONTROL = _TRANSACTIONAL | _CONTROL
_READ_SIZE = 4096
ABORT, COMMIT = 0, 1


def parse_marker(batch_bytes: bytes | memoryview) -> tuple[int, int] | None:
    """(control type, coordinator epoch) of a control batch's end-transaction marker; None
    when its first record is not one (another control type, or no record)."""
    from kafkactl.record.errors import RecordError
    from kafkactl.record.memory_records import iter_batches

    try:
        for batch in iter_batches(batch_bytes):
            for rec in batch:
                key = bytes(rec.key) if rec.key is not None else b""
                if len(key) < 4:
                    return None
                ctype = struct.unpack_from(">h", key, 2)[0]
                if ctype not in (ABORT, COMMIT):
                    return None
                value = bytes(rec.value) if rec.value is not None else b""
                epoch = struct.unpack_from(">i", value, 2)[0] if len(value) >= 6 else -1
                return ctype, epoch
    except (RecordError, ValueError, IndexError):
        return None
    return None


def segment_txn_events(seg: Any, start_offset: int = -1, *, use_mmap: bool = False,
                       idempotent: bool = False) -> Iterator[tuple[int, ...]]:
    """The transaction events of a segment's magic-2 batches from `start_offset` (its
    transactional and control batches; plain and idempotent ones start or end nothing),
    as ProducerStateManager.replay takes them: (pid, epoch, base sequence, first offset,
    last offset, max timestamp, transactional, marker) with marker -1 for data, else
    `commit | coordinator_epoch << 1`. Only the headers are read, and the records of
    control batches; stops at a torn tail. `use_mmap` (recovery, a repair: nothing
    truncates the file meanwhile, or reading a cut page would be a SIGBUS) reads the
    headers through a read-only mmap, with no system call per batch; otherwise they are
    read in 4 KiB chunks (with big batches, only their headers). `idempotent`: the plain
    idempotent batches too (transactional 0, marker -1: a TxnTracker ignores them), for
    what the producer state would replay (the cleaner's active producers)."""
    size: int = seg.size
    pos = 0
    if start_offset > seg.base_offset:
        h = seg.translate_offset(start_offset)
        if h is None:
            return
        pos = h.position
    if size - pos < _HEAD_SIZE:
        return
    if use_mmap:
        mm = mmap.mmap(seg.fd, size, access=mmap.ACCESS_READ)
        try:  # the mmap itself, not a memoryview of it: slices are copies, close() works
            yield from buffer_txn_events(mm, pos, start_offset, idempotent=idempotent)
        finally:
            mm.close()
        return
    fd: int = seg.fd
    chunk, chunk_pos = b"", 0
    unpack = _HEAD.unpack_from
    while pos + _HEAD_SIZE <= size:
        rel = pos - chunk_pos
        if rel + _HEAD_SIZE > len(chunk):
            chunk, chunk_pos, rel = os.pread(fd, min(_READ_SIZE, size - pos), pos), pos, 0
            if len(chunk) < _HEAD_SIZE:
                return
        base, length, magic, attrs, delta, max_ts, pid, epoch, seq = unpack(chunk, rel)
        if length <= 0:
            return
        total = 12 + length
        if (magic == 2 and pid >= 0 and (idempotent or attrs & _TXN_OR_CONTROL)
                and base + delta >= start_offset):
            marker = -1
            if attrs & _CONTROL:
                parsed = parse_marker(os.pread(fd, total, pos))
                if parsed is None:
                    pos += total
                    continue
                marker = parsed[0] | (max(parsed[1], 0) << 1)
            yield (pid, epoch, seq, base, base + delta, max_ts, 1 if attrs & _TRANSACTIONAL
                   else 0, marker)
        pos += total


def buffer_txn_events(buf: bytes | memoryview | mmap.mmap, pos: int = 0,
                      start_offset: int = -1, end: int | None = None, *,
                      idempotent: bool = False) -> Iterator[tuple[int, ...]]:
    """segment_txn_events over whole batches in memory, from byte `pos` to `end`."""
    end = len(buf) if end is None else end
    unpack = _HEAD.unpack_from
    while pos + _HEAD_SIZE <= end:
        base, length, magic, attrs, delta, max_ts, pid, epoch, seq = unpack(buf, pos)
        if length <= 0:
            return
        total = 12 + length
        if (magic == 2 and pid >= 0 and (idempotent or attrs & _TXN_OR_CONTROL)
                and base + delta >= start_offset):
            marker = -1
            if attrs & _CONTROL:
                parsed = parse_marker(buf[pos:pos + total])
                if parsed is None:
                    pos += total
                    continue
                marker = parsed[0] | (max(parsed[1], 0) << 1)
            yield (pid, epoch, seq, base, base + delta, max_ts, 1 if attrs & _TRANSACTIONAL
                   else 0, marker)
        pos += total


class TxnTracker:
    """Open transactions while reading a log in order: what the .txnindex entries of the
    ABORT markers are (the same rule as ProducerStateManager, without the epochs).

    `ongoing`: the transactions open where the reading starts (a producer snapshot's).
    Without a snapshot, `floor` is where the reading starts knowing nothing of what was
    open there (the first segment's base): a producer's first transaction seen from there
    may have begun below it, and so may another transaction open at any marker; what a
    stored entry says about offsets below the floor cannot be contradicted by the log
    (`reconcile_entries`). `unsure_first`: the marker offsets of entries whose first offset
    may be below the floor; `maybe`: marker offset -> the entry of an ABORT that may have
    ended a transaction begun below the floor (its first offset unknown: -1)."""

    def __init__(self, ongoing: dict[int, int] | None = None, *,
                 floor: int | None = None) -> None:
        self.ongoing: dict[int, int] = dict(ongoing or {})
        self.floor = floor
        self.unsure_first: set[int] = set()
        self.maybe: dict[int, AbortedTxn] = {}
        self._seen: set[int] = set()  # producers with an event since the floor
        self._unsure: set[int] = set()  # ... whose open transaction began at their first

    def feed(self, event: tuple[int, ...]) -> AbortedTxn | None:
        pid, _epoch, _seq, first, last = event[:5]
        transactional = bool(event[6]) if len(event) > 6 else False
        marker = event[7] if len(event) > 7 else -1
        floor = self.floor
        if marker < 0:
            if transactional and pid not in self.ongoing:
                self.ongoing[pid] = first
                if floor is not None and pid not in self._seen:
                    self._unsure.add(pid)
            if floor is not None:
                self._seen.add(pid)
            return None
        started = self.ongoing.pop(pid, None)
        unsure = new = False
        if floor is not None:
            unsure, new = pid in self._unsure, pid not in self._seen
            self._unsure.discard(pid)
            self._seen.add(pid)
        if marker & 1:
            return None
        lso = min(self.ongoing.values()) if self.ongoing else last + 1
        if started is None:
            if new:  # the producer's first event: its transaction may predate the floor
                self.maybe[last] = AbortedTxn(pid, -1, last, lso)
            return None
        if unsure:
            self.unsure_first.add(last)
        return AbortedTxn(pid, started, last, lso)


def reconcile_entries(stored: Sequence[AbortedTxn], expected: list[AbortedTxn],
                      tracker: TxnTracker) -> list[AbortedTxn]:
    """`expected` (a segment's entries as `tracker` read them from the log) with, in their
    place, the `stored` ones the log cannot contradict: read from a floor with no snapshot
    (`tracker.floor`), an entry whose transaction may have begun below it keeps a stored
    first offset below the floor, any entry keeps a stored last stable offset below the
    floor (a transaction open there may have been open at its marker), and an ABORT that may
    have ended a transaction begun below the floor keeps its stored entry. With a known
    start (a snapshot), `expected` as it is."""
    floor = tracker.floor
    if floor is None or not stored:
        return expected
    by_marker = {s.last_offset: s for s in stored}

    def lso_fits(s: AbortedTxn, e: AbortedTxn) -> bool:
        return s.last_stable_offset == e.last_stable_offset or 0 <= s.last_stable_offset < floor

    out: list[AbortedTxn] = []
    for e in expected:
        s = by_marker.get(e.last_offset)
        if (s is not None and s.producer_id == e.producer_id and lso_fits(s, e)
                and (s.first_offset == e.first_offset or (
                    e.last_offset in tracker.unsure_first and 0 <= s.first_offset < floor))):
            e = s
        out.append(e)
    extra = [s for s in stored if (m := tracker.maybe.get(s.last_offset)) is not None
             and s.producer_id == m.producer_id and 0 <= s.first_offset < floor
             and lso_fits(s, m)]
    return sorted(out + extra, key=lambda e: e.last_offset) if extra else out


def tracker_at(directory: Path, offset: int, log_start: int) -> tuple[TxnTracker, int]:
    """A tracker with the transactions open at the newest producer snapshot at or below
    `offset` (and not below `log_start`), and that snapshot's offset; without one, a
    tracker from `log_start` knowing nothing of what was open there (its floor)."""
    from kafkactl.log.producer_snapshot import SNAPSHOT_SUFFIX
    from kafkactl.log.producer_state import read_snapshot

    try:
        names = sorted(p for p in os.listdir(directory) if p.endswith(SNAPSHOT_SUFFIX))
    except OSError:
        names = []
    for name in reversed(names):
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if not stem.isdigit():
            continue
        at = int(stem)
        if at > offset or at < log_start:
            continue
        try:
            producers = read_snapshot(directory / name)
        except (OSError, ValueError):
            continue
        return TxnTracker({pid: e.current_txn_first_offset for pid, e in producers.items()
                           if e.current_txn_first_offset >= 0}), at
    return TxnTracker(floor=log_start), log_start


def expected_txn_entries(segments: Sequence[Any], first: int, tracker: TxnTracker,
                         start: int, *, use_mmap: bool = False,
                         known: dict[int, list[tuple[int, ...]]] | None = None
                         ) -> dict[int, list[AbortedTxn]]:
    """The .txnindex entries segments[first:] should hold, read from the log from offset
    `start` on with `tracker` holding the transactions open there (see tracker_at): base
    offset -> entries."""
    out: dict[int, list[AbortedTxn]] = {}
    for i, seg in enumerate(segments):
        if seg.next_offset <= start:
            continue
        entries: list[AbortedTxn] = []
        read = known.get(seg.base_offset) if known is not None else None
        events: Iterable[tuple[int, ...]] = (
            read if read is not None and start <= seg.base_offset
            else segment_txn_events(seg, start, use_mmap=use_mmap))
        for event in events:
            entry = tracker.feed(event)
            if entry is not None and i >= first:
                entries.append(entry)
        if i >= first:
            out[seg.base_offset] = entries
    for seg in segments[first:]:
        out.setdefault(seg.base_offset, [])
    return out


def rebuild_txn_indexes(segments: Sequence[Any], first: int, directory: Path,
                        log_start: int,
                        known: dict[int, list[tuple[int, ...]]] | None = None) -> int:
    """Rewrite the .txnindex of segments[first:] from the log (recovery, before the log
    serves anything: the files are read through mmap); `known`: base offset -> the
    events recovery already read from that segment (recover_segment's `txn_events`), not
    read again. Returns how many files changed."""
    tracker, start = tracker_at(directory, segments[first].base_offset, log_start)
    expected = expected_txn_entries(segments, first, tracker, start, use_mmap=True,
                                    known=known)
    changed = 0
    for seg in segments[first:]:
        index: TransactionIndex = seg.txn_index
        want = reconcile_entries(index.entries, expected.get(index.base_offset, []), tracker)
        if want != index.entries or index.damage is not None:
            index.replace_entries(want)
            changed += 1
    return changed
