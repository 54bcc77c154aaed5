"""ProducerStateManager: the idempotent producer state of one partition.

Per producer id: the current epoch and the metadata of its last few batches (sequence range
and the offsets they got). A retried batch that matches one of them is a duplicate and is
acknowledged with its original offsets instead of being appended twice; a gap in the
sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH.

The state survives restarts through `<20-digit offset>.snapshot` files in the partition
directory, in Kafka's layout (producer_snapshot.py); after an unclean stop the batches
between the snapshot and the log end are replayed from their headers. A snapshot goes with
the segment at whose base offset it was taken (retention, DeleteRecords, compaction) and so
does any below the log's first segment; a full truncation takes them all (the log calls
`mark_snapshots_for_deletion`, as Kafka's UnifiedLog does). A snapshot at a segment's base
stays while that segment does (others: the two newest): recovery and `kafkactl recover`
check the first segment's `.txnindex` from it (the transactions open there).

Bounded (KIP-854): a producer id whose last batch timestamp is `producer.id.expiration.ms`
(default one day) in the past is forgotten, checked every
`producer.id.expiration.check.interval.ms` (the broker's scheduled task over every
partition, as Kafka's removeExpiredProducers; also on the produce path and at each
snapshot) and on load, unless it has a transaction open (Kafka keeps those). The cleaner
keeps each active producer's last batch (`LastRecordsReplay`: the replay's rules folded for
a scan of the whole log), so that a state rebuilt from the log alone still has it.

Each entry keeps its last batches packed in one bytes object (32 bytes a batch, at most 5),
so a producer costs ~0.2 KB rather than a deque and objects per batch.

Transactions (KIP-98): a transactional batch of a producer with no transaction open starts
one at its first offset (`ongoing`: producer id -> that offset); a non-transactional batch
while one is open is INVALID_TXN_STATE; an end-transaction marker (a control batch, COMMIT
or ABORT, written for the coordinator) ends it and returns a CompletedTxn. A marker of an
older producer epoch is INVALID_PRODUCER_EPOCH, of an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED. The first offset of the earliest open transaction bounds
the last stable offset (the partition's LSO), and an aborted transaction's index entry
carries `last_stable_offset_after(...)`. Snapshots carry each open transaction's first
offset (`currentTxnFirstOffset`).

Violations raise ProducerStateError carrying the Kafka ErrorCode of the answer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import time
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kafkactl.log.producer_snapshot import (
    SNAPSHOT_ENTRY,
    SNAPSHOT_HEADER,
    SNAPSHOT_SUFFIX,
    SNAPSHOT_VERSION,
    SnapshotEntry,
    encode_snapshot,
    iter_snapshot_entries,
    read_snapshot_header,
)
from kafkactl.log.segment import DELETED_SUFFIX, LOG_SUFFIX
from kafkactl.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
NUM_BATCHES_TO_RETAIN = 5
_BATCH = struct.Struct(">iiqqq")  # first_seq, last_seq, first_offset, last_offset, timestamp

# Kafka's defaults (KIP-854); configure() sets them from the broker's config
PRODUCER_ID_EXPIRATION_MS = 86_400_000
PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000
_expiration = {"ms": PRODUCER_ID_EXPIRATION_MS,
               "check_ms": PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS}


def configure(expiration_ms: int, check_interval_ms: int) -> None:
    """`producer.id.expiration.ms` and `producer.id.expiration.check.interval.ms`."""
    _expiration["ms"] = max(1, expiration_ms)
    _expiration["check_ms"] = max(1, check_interval_ms)


class ProducerStateError(KafkaError):
    """A produce that breaks the idempotence rules, answered with `code`."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class LastRecord(NamedTuple):
    """An active producer's last entry in the log (Kafka's LastRecord): the last offset of
    its last data batch (None: its last entry is a marker of a newer epoch), and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: the producer, its first offset, the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateEntry:
    """One producer id: its epoch, its last batches, packed (`_BATCH` each, oldest
    first, at most NUM_BATCHES_TO_RETAIN), and its open transaction's first offset."""

    __slots__ = ("_marker_ts", "_packed", "coordinator_epoch", "current_txn_first_offset",
                 "epoch", "producer_id")

    def __init__(self, producer_id: int, epoch: int, coordinator_epoch: int = -1,
                 current_txn_first_offset: int = -1) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset  # -1: none open
        self._packed = b""
        self._marker_ts = -1  # the timestamp of the last marker (a producer may have no batch)

    @property
    def batches(self) -> list[BatchMetadata]:
        return [BatchMetadata(*t) for t in _BATCH.iter_unpack(self._packed)]

    def add_batch(self, first_seq: int, last_seq: int, first_offset: int, last_offset: int,
                  timestamp: int) -> None:
        keep = self._packed[-_BATCH.size * (NUM_BATCHES_TO_RETAIN - 1):] \
            if len(self._packed) >= _BATCH.size * NUM_BATCHES_TO_RETAIN else self._packed
        self._packed = keep + _BATCH.pack(first_seq, last_seq, first_offset, last_offset,
                                          timestamp)

    @property
    def last_batch(self) -> BatchMetadata | None:
        if not self._packed:
            return None
        return BatchMetadata(*_BATCH.unpack_from(self._packed, len(self._packed) - _BATCH.size))

    @property
    def last_seq(self) -> int:
        last = self.last_batch
        return last.last_seq if last else -1

    @property
    def last_timestamp(self) -> int:
        last = self.last_batch
        return max(last.timestamp if last else -1, self._marker_ts)


def next_sequence(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def mark_snapshots_for_deletion(directory: Path, *, below: int = -1,
                                at: Container[int] = ()) -> list[Path]:
    """Rename to `<offset>.snapshot.deleted` the producer snapshots of `directory` whose
    offset is below `below` or in `at`, and return the new paths, for the caller to unlink
    with the segments it deleted (Kafka's removeAndMarkSnapshotForDeletion: a deleted
    segment's snapshot, at its base offset, goes with it after file.delete.delay.ms). A
    `.deleted` file is invisible to loading and left-over ones are deleted at start-up. A
    snapshot another writer removed meanwhile (write_snapshot's pruning) is skipped, one
    that cannot be renamed left (logged). Lists the directory: for the rare moves of the
    log start, not the produce path."""
    out: list[Path] = []
    try:
        names = [n for n in os.listdir(directory) if n.endswith(SNAPSHOT_SUFFIX)]
    except OSError:
        return out
    for name in names:
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if not stem.isdigit():
            continue
        offset = int(stem)
        if offset < below or offset in at:
            path = directory / name
            target = path.with_name(name + DELETED_SUFFIX)
            try:
                os.replace(path, target)
            except FileNotFoundError:
                continue
            except OSError as e:  # left in place: the next deletion or start takes it
                log.warning("%s: cannot delete producer snapshot %s: %s", directory.name,
                            name, e.strerror or e)
                continue
            out.append(target)
    return out


class ProducerStateManager:
    def __init__(self, directory: Path, *, time_ms: Callable[[], int] | None = None) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        # producer id -> first offset of its open transaction (insertion: by first offset)
        self.ongoing: dict[int, int] = {}
        self.last_snapshot_offset = -1
        # snapshots at or above this offset are kept (the bases of the newest segments:
        # recovery rebuilds their .txnindex from there); others beyond the newest two go
        self.retain_from = -1
        self._time_ms = time_ms or (lambda: int(time.time() * 1000))
        self._last_expiry_check = self._time_ms()

    # ---- expiration (KIP-854) -----------------------------------------------------------
    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget producer ids idle for `producer.id.expiration.ms`; returns how many."""
        now = self._time_ms() if now_ms is None else now_ms
        self._last_expiry_check = now
        horizon = now - _expiration["ms"]
        doomed = [pid for pid, e in self.producers.items()
                  if e.last_timestamp <= horizon and e.current_txn_first_offset < 0]
        for pid in doomed:
            del self.producers[pid]
        if doomed:
            log.debug("%s: expired %d idle producer id(s)", self.directory.name, len(doomed))
        return len(doomed)

    def last_records_of_active_producers(self) -> dict[int, LastRecord]:
        """Producer id -> its last entry, for every producer not expired (Kafka's
        UnifiedLog.lastRecordsOfActiveProducers): the cleaner keeps the batch holding it,
        empty if need be, so that a replica rebuilt from the log still knows the
        producer's last sequence and epoch."""
        out: dict[int, LastRecord] = {}
        for pid, entry in self.producers.items():
            last = entry.last_batch
            out[pid] = LastRecord(last.last_offset if last is not None else None, entry.epoch)
        return out

    def _maybe_expire(self) -> None:
        if self._time_ms() - self._last_expiry_check >= _expiration["check_ms"]:
            self.remove_expired_producers()

    # ---- the produce path ---------------------------------------------------------------
    def check(self, producer_id: int, epoch: int, first_seq: int,
              last_seq: int, transactional: bool = False) -> BatchMetadata | None:
        """Validate one batch; return the original batch if it is a duplicate."""
        self._maybe_expire()
        entry = self.producers.get(producer_id)
        if entry is None:
            return None  # unknown producer (new, or its state expired): accept any sequence
        if not transactional and entry.current_txn_first_offset >= 0 and epoch >= entry.epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_TXN_STATE,
                f"expected a transactional write from producer {producer_id}: its "
                f"transaction from offset {entry.current_txn_first_offset} is open")
        if epoch < entry.epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {epoch} is older than the current {entry.epoch}")
        if epoch > entry.epoch:
            if first_seq != 0:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {producer_id} new epoch {epoch} must start at sequence 0, "
                    f"got {first_seq}")
            return None
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        if entry.batches and first_seq != next_sequence(entry.last_seq):
            raise ProducerStateError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} sent sequence {first_seq}, expected "
                f"{next_sequence(entry.last_seq)}")
        return None

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int,
               transactional: bool = False) -> None:
        entry = self.producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            # a new epoch forgets the batches (not an open transaction: Kafka's
            # maybeUpdateProducerEpoch keeps it, and so the LSO)
            entry = ProducerStateEntry(
                producer_id, epoch,
                entry.coordinator_epoch if entry is not None else -1,
                entry.current_txn_first_offset if entry is not None else -1)
            self.producers[producer_id] = entry
        if first_seq >= 0:
            entry.add_batch(first_seq, last_seq, first_offset, last_offset, timestamp)
        else:
            entry._marker_ts = max(entry._marker_ts, timestamp)
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[producer_id] = first_offset

    # ---- transactions -----------------------------------------------------------------
    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Raise ProducerStateError if an end-transaction marker of `epoch` written for
        coordinator epoch `coordinator_epoch` must be refused (nothing appended then)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker for producer {producer_id} has epoch {epoch}, older than the "
                f"current {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker for producer {producer_id} comes from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch}")

    def complete_txn(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     commit: bool, offset: int, timestamp: int) -> CompletedTxn | None:
        """A marker at `offset` ends the producer's transaction; the transaction it ended
        (None: the producer had none open, e.g. a retried marker)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id, epoch)
            self.producers[producer_id] = entry
        elif epoch > entry.epoch:
            self.update(producer_id, epoch, -1, -1, offset, offset, timestamp)
            entry = self.producers[producer_id]
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry._marker_ts = max(entry._marker_ts, timestamp)
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.ongoing.pop(producer_id, None)
        if first < 0:
            return None
        return CompletedTxn(producer_id, first, offset, not commit)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction (None: none is open)."""
        ongoing = self.ongoing
        if not ongoing:
            return None
        return min(ongoing.values())

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO once `txn` ended (Kafka's lastStableOffset(completedTxn)): the first
        offset of the earliest other open transaction, else the marker's offset + 1."""
        others = [f for pid, f in self.ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def truncate(self) -> None:
        self.producers.clear()
        self.ongoing.clear()

    # ---- snapshots ----------------------------------------------------------------------
    def take_snapshot(self, log_end_offset: int) -> Path | None:
        data = self.snapshot_data(log_end_offset)
        return None if data is None else self.write_snapshot(log_end_offset, data)

    def snapshot_data(self, log_end_offset: int) -> bytes | None:
        """The snapshot's bytes at `log_end_offset` (None: nothing new to write); the
        caller writes them with `write_snapshot`, possibly on another thread."""
        expired = self.remove_expired_producers()
        if (log_end_offset == self.last_snapshot_offset or log_end_offset == 0) and not expired:
            return None  # nothing new, or an empty log (nothing to replay without one)
        return encode_snapshot(_snapshot_entry(e) for e in self.producers.values())

    def write_snapshot(self, log_end_offset: int, data: bytes, *, sync: bool = True) -> Path:
        """Write `data` as the snapshot at `log_end_offset` (fsynced unless `sync` is
        False, renamed into place) and drop all but the two newest, those at or above
        `retain_from` and those at a segment's base offset (a `.log` of that offset is in
        the directory: they go with their segment, as Kafka's; the first segment's tells
        recovery and `recover` which transactions were open there) (thread-safe for one
        writer per directory). An unsynced snapshot lost or torn by a crash fails its CRC
        and is skipped."""
        path = snapshot_path(self.directory, log_end_offset)
        tmp = path.with_suffix(".snapshot.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        self.last_snapshot_offset = log_end_offset
        try:
            names = os.listdir(self.directory)
        except OSError:
            return path
        snapshots = sorted(n for n in names if n.endswith(SNAPSHOT_SUFFIX))
        bases = {n[: -len(LOG_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX)}
        for name in snapshots[:-2]:
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if stem in bases or (stem.isdigit() and int(stem) >= self.retain_from >= 0):
                continue
            with contextlib.suppress(OSError):
                os.unlink(self.directory / name)
        return path

    def list_snapshots(self) -> list[Path]:
        try:
            names = [p for p in self.directory.iterdir() if p.name.endswith(SNAPSHOT_SUFFIX)]
        except OSError:
            return []
        return sorted(names, key=lambda p: p.name)

    def load_latest_snapshot(self, log_end_offset: int) -> int:
        """Load the newest readable snapshot at or below the log end; returns its offset."""
        for path in reversed(self.list_snapshots()):
            try:
                offset = int(path.name[: -len(SNAPSHOT_SUFFIX)])
            except ValueError:
                continue
            if offset > log_end_offset:
                with contextlib.suppress(OSError):
                    path.unlink()  # beyond a truncated log: useless
                continue
            try:
                self.producers = read_snapshot(path)
            except (OSError, ValueError) as e:
                log.warning("ignoring unreadable producer snapshot %s: %s", path, e)
                continue
            self._rebuild_ongoing()
            self.remove_expired_producers()
            self.last_snapshot_offset = offset
            return offset
        self.producers = {}
        self.ongoing = {}
        return 0

    def _rebuild_ongoing(self) -> None:
        self.ongoing = dict(sorted(
            ((pid, e.current_txn_first_offset) for pid, e in self.producers.items()
             if e.current_txn_first_offset >= 0), key=lambda t: t[1]))

    def replay(self, batches: Iterable[tuple[int, ...]]) -> list[CompletedTxn]:
        """Rebuild from batch headers (pid, epoch, base_seq, first_off, last_off, max_ts,
        and optionally transactional, marker) where marker is -1 for a data batch, else
        (commit, coordinator epoch) packed as `commit | coordinator_epoch << 1`. Returns
        the transactions the markers ended."""
        completed = []
        for t in batches:
            pid, epoch, base_seq, first_offset, last_offset, max_ts = t[:6]
            if pid < 0:
                continue
            transactional = bool(t[6]) if len(t) > 6 else False
            marker = t[7] if len(t) > 7 else -1
            if marker >= 0:
                done = self.complete_txn(pid, epoch, marker >> 1, bool(marker & 1),
                                         last_offset, max_ts)
                if done is not None:
                    completed.append(done)
                continue
            if base_seq < 0 and not transactional:
                continue
            last_seq = (base_seq + (last_offset - first_offset)) % (INT32_MAX + 1) \
                if base_seq >= 0 else -1
            self.update(pid, epoch, base_seq, last_seq, first_offset, last_offset, max_ts,
                        transactional)
        self.remove_expired_producers()
        return completed


class LastRecordsReplay:
    """ProducerStateManager.replay(events).last_records_of_active_producers() without the
    entries: the same rules (a data batch of another epoch starts a new entry, a marker of
    a newer epoch one without a batch; an open transaction never expires;
    producer.id.expiration.ms from the last batch's or marker's timestamp), folded into four
    numbers a producer, for the cleaner's scan of a whole log's batch headers."""

    __slots__ = ("_state",)

    def __init__(self) -> None:
        # pid -> [epoch, last data offset (-1: none), its batch's timestamp, the newest
        # marker's timestamp, a transaction open (0/1)]
        self._state: dict[int, list[int]] = {}

    def feed(self, event: tuple[int, ...]) -> None:
        """One event as `replay` takes it."""
        pid, epoch, base_seq, _first, last_offset, max_ts = event[:6]
        if pid < 0:
            return
        transactional = len(event) > 6 and event[6]
        marker = event[7] if len(event) > 7 else -1
        e = self._state.get(pid)
        if marker >= 0:  # complete_txn
            if e is None or epoch > e[0]:
                e = self._state[pid] = [epoch, -1, -1, -1, 0]
            if max_ts > e[3]:
                e[3] = max_ts
            e[4] = 0
            return
        if base_seq < 0 and not transactional:
            return
        if e is None or epoch != e[0]:  # update: a new entry keeps an open transaction
            e = self._state[pid] = [epoch, -1, -1, -1, e[4] if e is not None else 0]
        if base_seq >= 0:
            e[1], e[2] = last_offset, max_ts
        elif max_ts > e[3]:
            e[3] = max_ts
        if transactional:
            e[4] = 1

    def last_records(self, now_ms: int) -> dict[int, LastRecord]:
        """The last entries of the producers not expired at `now_ms`."""
        horizon = now_ms - _expiration["ms"]
        return {pid: LastRecord(e[1] if e[1] >= 0 else None, e[0])
                for pid, e in self._state.items()
                if e[4] or max(e[2] if e[1] >= 0 else -1, e[3]) > horizon}


def _snapshot_entry(entry: ProducerStateEntry) -> SnapshotEntry:
    last = entry.last_batch
    return SnapshotEntry(
        entry.producer_id, entry.epoch, last.last_seq if last else -1,
        last.last_offset if last else -1, (last.last_offset - last.first_offset) if last else 0,
        entry.last_timestamp, entry.coordinator_epoch, entry.current_txn_first_offset)


def read_snapshot(path: Path) -> dict[int, ProducerStateEntry]:
    data = path.read_bytes()
    header = read_snapshot_header(data)
    if header is None:
        raise ValueError("shorter than its header")
    if header.version != SNAPSHOT_VERSION:
        raise ValueError(f"unknown snapshot version {header.version}")
    if header.computed_crc != header.crc:
        raise ValueError("CRC mismatch")
    if len(data) != SNAPSHOT_HEADER.size + header.entry_count * SNAPSHOT_ENTRY.size:
        raise ValueError("length does not match the entry count")
    out: dict[int, ProducerStateEntry] = {}
    for pid, epoch, last_seq, last_off, delta, ts, coord, txn in iter_snapshot_entries(
            data, header.entry_count):
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coord,
                                   current_txn_first_offset=txn if txn >= 0 else -1)
        if last_seq >= 0:
            entry.add_batch((last_seq - delta) % (INT32_MAX + 1), last_seq, last_off - delta,
                            last_off, ts)
        else:
            entry._marker_ts = ts
        out[pid] = entry
    return out
