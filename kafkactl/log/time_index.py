"""TimeIndex: `<base>.timeindex`, 12-byte entries (int64 timestamp, int32 offset relative
to the segment base), big-endian.

An entry is appended together with an offset-index entry, and only when the max timestamp
seen so far exceeds the last entry's; the offset is the last offset of the batch holding
that max timestamp. When the segment rolls or closes one final entry is forced (if it is
newer). `lookup(ts)` returns the greatest entry whose timestamp <= ts, or (-1, base).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafkactl.log.abstract_index import AbstractIndex
from kafkactl.log.errors import CorruptIndexError, InvalidOffsetError, LogSegmentFullError

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    ENTRY_SIZE = 12
    SUFFIX = ".timeindex"

    def _unpack(self, n: int) -> tuple[int, int]:
        assert self._mmap is not None
        ts, rel = _ENTRY.unpack_from(self._mmap, n * 12)
        return TimestampOffset(ts, self.base_offset + rel)

    @property
    def last_entry(self) -> TimestampOffset:
        return TimestampOffset(self._last_ts, self._last_off)

    @property
    def last_timestamp(self) -> int:
        """The newest timestamp indexed (NO_TIMESTAMP when empty)."""
        return self._last_ts

    def _pack_entry(self, timestamp: int, offset: int) -> bytes:
        return _ENTRY.pack(timestamp, offset - self.base_offset)

    def _entries_changed(self) -> None:
        if self._entries:
            self._last_ts, self._last_off = self._unpack(self._entries - 1)
        else:
            self._last_ts, self._last_off = NO_TIMESTAMP, self.base_offset

    @property
    def is_full(self) -> bool:
        # Kafka keeps one slot free for the entry forced at roll time.
        return self._entries >= self._slots - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append (timestamp, offset) if timestamp is newer than the last entry's."""
        if self.closed or not self.writable:
            self._check_writable()
        n = self._entries
        if not skip_full_check and n >= self._slots - 1:
            raise LogSegmentFullError(f"Time index {self.path} is full.")
        if n and offset < self._last_off:
            raise InvalidOffsetError(
                f"Offset {offset} is smaller than the last time-indexed offset "
                f"{self._last_off} in {self.path}."
            )
        if timestamp <= self._last_ts:
            return False
        if n >= self._slots:
            self.resize((n + 1) * 12)
        _ENTRY.pack_into(self._mmap, n * 12, timestamp, offset - self.base_offset)
        self._dirty = True
        self._entries = n + 1
        self._last_ts, self._last_off = timestamp, offset
        return True

    def lookup(self, timestamp: int) -> TimestampOffset:
        n = self._bisect(0, timestamp)
        if n < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(*self._unpack(n))

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset >= `offset`."""
        n = self._bisect(1, offset - 1)
        self._zero_from(n + 1)

    def _check_entries(self, log_size: int | None) -> None:
        if not self._entries:
            return
        last_ts, last_off = self._unpack(self._entries - 1)
        first_ts, _ = self._unpack(0)
        if last_off < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size "
                f"but the last offset is {last_off} which is less than the base offset "
                f"{self.base_offset}."
            )
        if last_ts < first_ts:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size "
                f"but the last timestamp is {last_ts} which is less than the first "
                f"timestamp {first_ts}."
            )

    def full_check(self) -> list[str]:
        problems: list[str] = []
        prev: tuple[int, int] | None = None
        for n in range(self._entries):
            ts, off = self._unpack(n)
            if prev is not None and (ts <= prev[0] or off < prev[1]):
                problems.append(
                    f"entry {n} (timestamp {ts}, offset {off}) does not increase over the "
                    f"previous entry"
                )
            prev = (ts, off)
        return problems
