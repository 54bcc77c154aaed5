"""The producer snapshot file format (`<20-digit offset>.snapshot`), Kafka's version 1.

    version int16 (=1) | crc uint32 (CRC-32C of everything after it) | count int32 |
    count x entry (46 bytes): producerId int64, producerEpoch int16, lastSequence int32,
        lastOffset int64, offsetDelta int32, timestamp int64, coordinatorEpoch int32,
        currentTxnFirstOffset int64 (-1 = none)

See reference/kafka-protocol/other/ProducerSnapshot.json. ProducerStateManager writes and
loads these files; `kafkactl dump-log` prints them. Both use this module.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from kafkactl.record.crc import crc32c

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, count
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
CRC_START = 6  # the CRC covers the count and the entries


class SnapshotEntry(NamedTuple):
    producer_id: int
    producer_epoch: int
    last_sequence: int  # -1: no batch retained
    last_offset: int
    offset_delta: int  # last offset - first offset of the last batch
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1: none


class SnapshotHeader(NamedTuple):
    version: int
    crc: int
    entry_count: int
    computed_crc: int

    @property
    def is_valid(self) -> bool:
        return self.version == SNAPSHOT_VERSION and self.crc == self.computed_crc


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """A whole snapshot file holding `entries`."""
    items = list(entries)
    body = bytearray(SNAPSHOT_HEADER.size + SNAPSHOT_ENTRY.size * len(items))
    pos = SNAPSHOT_HEADER.size
    for entry in items:
        SNAPSHOT_ENTRY.pack_into(body, pos, *entry)
        pos += SNAPSHOT_ENTRY.size
    struct.pack_into(">i", body, CRC_START, len(items))
    crc = crc32c(memoryview(body)[CRC_START:])
    SNAPSHOT_HEADER.pack_into(body, 0, SNAPSHOT_VERSION, crc, len(items))
    return bytes(body)


def read_snapshot_header(data: bytes) -> SnapshotHeader | None:
    """The header of snapshot bytes and the CRC they should carry; None when truncated."""
    if len(data) < SNAPSHOT_HEADER.size:
        return None
    version, crc, count = SNAPSHOT_HEADER.unpack_from(data)
    return SnapshotHeader(version, crc, count, crc32c(memoryview(data)[CRC_START:]))


def snapshot_problem(data: bytes) -> str | None:
    """Why snapshot bytes cannot be loaded (None: they can), the same checks as loading
    them (producer_state.read_snapshot) in the order that names the damage: a file shorter
    than its header, or than the entries its header counts, is "truncated" (its CRC then
    fails too), not a CRC mismatch."""
    size = len(data)
    if size < SNAPSHOT_HEADER.size:
        return (f"truncated: {size} byte(s), shorter than its {SNAPSHOT_HEADER.size}-byte "
                "header")
    version, crc, count = SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        return f"unknown snapshot version {version}"
    want = SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size
    if count >= 0 and size < want:
        return (f"truncated: {size} bytes, its header counts {count} "
                f"entr{'y' if count == 1 else 'ies'} ({want} bytes)")
    if crc32c(memoryview(data)[CRC_START:]) != crc:
        return "CRC mismatch"
    if size != want:
        return "length does not match the entry count"
    return None


def iter_snapshot_entries(data: bytes, count: int) -> Iterator[SnapshotEntry]:
    """Up to `count` entries after the header; stops at a truncated entry."""
    pos = SNAPSHOT_HEADER.size
    for _ in range(count):
        if pos + SNAPSHOT_ENTRY.size > len(data):
            return
        yield SnapshotEntry._make(SNAPSHOT_ENTRY.unpack_from(data, pos))
        pos += SNAPSHOT_ENTRY.size
