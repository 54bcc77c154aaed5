"""Idempotent producer state of one partition (Kafka's ProducerStateManager).

Per producer id: the current epoch and the metadata of its last few batches (sequence range
and the offsets they got). A retried batch that matches one of them is a duplicate and is
acknowledged with its original offsets instead of being appended twice; a gap in the
sequence is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH.

The state survives restarts through `<20-digit offset>.snapshot` files in the partition
directory, in Kafka's layout (version 1, CRC-32C, 46-byte entries; see
reference/kafka-protocol/other/ProducerSnapshot.json); after an unclean stop the batches
between the snapshot and the log end are replayed from their headers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kafkactl.record.crc import crc32c

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
_HEADER = struct.Struct(">hIi")  # version, crc, count
_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
SNAPSHOT_VERSION = 1


class ProducerStateError(Exception):
    """A produce that breaks the idempotence rules; `code_name` is the Kafka error name."""

    def __init__(self, code_name: str, message: str) -> None:
        super().__init__(message)
        self.code_name = code_name


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].timestamp if self.batches else -1


def next_sequence(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.last_snapshot_offset = -1

    # ---- the produce path ---------------------------------------------------------------
    def check(self, producer_id: int, epoch: int, first_seq: int,
              last_seq: int) -> BatchMetadata | None:
        """Validate one batch; return the original batch if it is a duplicate."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return None  # unknown producer (new, or its state expired): accept any sequence
        if epoch < entry.epoch:
            raise ProducerStateError(
                "INVALID_PRODUCER_EPOCH",
                f"producer {producer_id} epoch {epoch} is older than the current {entry.epoch}")
        if epoch > entry.epoch:
            if first_seq != 0:
                raise ProducerStateError(
                    "OUT_OF_ORDER_SEQUENCE_NUMBER",
                    f"producer {producer_id} new epoch {epoch} must start at sequence 0, "
                    f"got {first_seq}")
            return None
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        if entry.batches and first_seq != next_sequence(entry.last_seq):
            raise ProducerStateError(
                "OUT_OF_ORDER_SEQUENCE_NUMBER",
                f"producer {producer_id} sent sequence {first_seq}, expected "
                f"{next_sequence(entry.last_seq)}")
        return None

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int) -> None:
        entry = self.producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = ProducerStateEntry(producer_id, epoch)
            self.producers[producer_id] = entry
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset,
                                           timestamp))

    def truncate(self) -> None:
        self.producers.clear()

    # ---- snapshots ----------------------------------------------------------------------
    def take_snapshot(self, log_end_offset: int) -> Path | None:
        if log_end_offset == self.last_snapshot_offset:
            return None
        body = bytearray(_ENTRY.size * len(self.producers))
        pos = 0
        for entry in self.producers.values():
            last = entry.batches[-1] if entry.batches else None
            _ENTRY.pack_into(
                body, pos, entry.producer_id, entry.epoch,
                last.last_seq if last else -1, last.last_offset if last else -1,
                (last.last_offset - last.first_offset) if last else 0,
                last.timestamp if last else -1, entry.coordinator_epoch, -1)
            pos += _ENTRY.size
        count = struct.pack(">i", len(self.producers))
        crc = crc32c(count + bytes(body))
        data = _HEADER.pack(SNAPSHOT_VERSION, crc, len(self.producers)) + bytes(body)
        path = snapshot_path(self.directory, log_end_offset)
        tmp = path.with_suffix(".snapshot.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self.last_snapshot_offset = log_end_offset
        for old in self.list_snapshots()[:-2]:
            with contextlib.suppress(OSError):
                old.unlink()
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
            self.last_snapshot_offset = offset
            return offset
        self.producers = {}
        return 0

    def replay(self, batches: Iterable[tuple[int, int, int, int, int, int]]) -> None:
        """Rebuild from batch headers (pid, epoch, base_seq, first_off, last_off, max_ts)."""
        for pid, epoch, base_seq, first_offset, last_offset, max_ts in batches:
            if pid < 0 or base_seq < 0:
                continue
            last_seq = (base_seq + (last_offset - first_offset)) % (INT32_MAX + 1)
            self.update(pid, epoch, base_seq, last_seq, first_offset, last_offset, max_ts)


def read_snapshot(path: Path) -> dict[int, ProducerStateEntry]:
    data = path.read_bytes()
    if len(data) < _HEADER.size:
        raise ValueError("shorter than its header")
    version, crc, count = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise ValueError(f"unknown snapshot version {version}")
    if crc32c(data[6:]) != crc:
        raise ValueError("CRC mismatch")
    if len(data) != _HEADER.size + count * _ENTRY.size:
        raise ValueError("length does not match the entry count")
    out: dict[int, ProducerStateEntry] = {}
    for i in range(count):
        pid, epoch, last_seq, last_off, delta, ts, coord, _txn = _ENTRY.unpack_from(
            data, _HEADER.size + i * _ENTRY.size)
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coord)
        if last_seq >= 0:
            entry.batches.append(BatchMetadata(
                (last_seq - delta) % (INT32_MAX + 1), last_seq, last_off - delta, last_off, ts))
        out[pid] = entry
    return out
