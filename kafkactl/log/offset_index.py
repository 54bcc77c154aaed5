"""OffsetIndex: `<base>.index`, 8-byte entries (int32 offset relative to the segment base,
int32 byte position in the .log), big-endian.

Kafka's semantics: an entry carries a batch's LAST offset and its START position; the first
batch of a segment is never indexed. `lookup(target)` returns the greatest entry whose
offset <= target (or (base_offset, 0)); the caller scans forward from that position.
"""

from __future__ import annotations

import struct
import sys
from array import array
from operator import lt
from typing import NamedTuple

from kafkactl.log.abstract_index import AbstractIndex
from kafkactl.log.errors import CorruptIndexError, InvalidOffsetError, LogSegmentFullError

_ENTRY = struct.Struct(">ii")
INT32_MAX = 2**31 - 1


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    ENTRY_SIZE = 8
    SUFFIX = ".index"

    def _unpack(self, n: int) -> tuple[int, int]:
        assert self._mmap is not None
        rel, pos = _ENTRY.unpack_from(self._mmap, n * 8)
        return OffsetPosition(self.base_offset + rel, pos)

    def _pack_entry(self, offset: int, position: int) -> bytes:
        return _ENTRY.pack(offset - self.base_offset, position)

    def relative_entry(self, n: int) -> tuple[int, int]:
        """The stored (relative offset, position) of entry n."""
        assert self._mmap is not None
        return _ENTRY.unpack_from(self._mmap, n * 8)

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when empty."""
        return self._unpack(self._entries - 1)[0] if self._entries else self.base_offset

    @property
    def last_entry(self) -> OffsetPosition:
        if self._entries:
            return OffsetPosition(*self._unpack(self._entries - 1))
        return OffsetPosition(self.base_offset, 0)

    def _entries_changed(self) -> None:
        self._last_rel = self.relative_entry(self._entries - 1)[0] if self._entries else -1

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets must increase. (Hot path: few checks.)"""
        n = self._entries
        rel = offset - self.base_offset
        if n >= self._slots or self.closed or not self.writable:
            self._check_writable()
            raise LogSegmentFullError(f"Offset index {self.path} is full.")
        if rel <= self._last_rel:
            raise InvalidOffsetError(
                f"Offset {offset} is not larger than the last indexed offset "
                f"{self.last_offset} in {self.path}."
            )
        if rel > INT32_MAX:
            raise LogSegmentFullError(
                f"Offset {offset} does not fit relative to base {self.base_offset}."
            )
        _ENTRY.pack_into(self._mmap, n * 8, rel, position)
        self._dirty = True
        self._entries = n + 1
        self._last_rel = rel

    def lookup(self, target: int) -> OffsetPosition:
        n = self._bisect(0, target)
        if n < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(*self._unpack(n))

    def lookup_position(self, position: int) -> OffsetPosition:
        """Greatest entry whose position <= `position`."""
        n = self._bisect(1, position)
        if n < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(*self._unpack(n))

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset >= `offset`."""
        n = self._bisect(0, offset - 1)
        self._zero_from(n + 1)

    def _check_entries(self, log_size: int | None) -> None:
        if not self._entries:
            return
        last_rel, last_pos = self.relative_entry(self._entries - 1)
        if last_rel <= 0:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the "
                f"last offset is {self.base_offset + last_rel} which is less than or equal "
                f"to the base offset {self.base_offset}."
            )
        if log_size is not None and last_pos >= log_size:
            raise CorruptIndexError(
                f"Index file {self.path} points at position {last_pos}, past the end of "
                f"the {log_size}-byte log."
            )

    def check_entries(self, log_size: int, next_base_offset: int | None = None) -> None:
        """Raise CorruptIndexError unless every entry is inside the segment (offsets above
        the base and below the next segment's, positions inside the log) and both fields
        strictly increase. C-speed: one array over the mapped entries."""
        n = self._entries
        if not n:
            return
        assert self._mmap is not None
        arr = array("i")
        arr.frombytes(self._mmap[:n * 8])
        if sys.byteorder == "little":
            arr.byteswap()
        rels, poss = arr[0::2], arr[1::2]
        top = INT32_MAX if next_base_offset is None else next_base_offset - self.base_offset
        problem = None
        if rels[0] <= 0 or poss[0] <= 0:
            problem = "its first entry does not point past the segment's first batch"
        elif rels[-1] >= top or poss[-1] >= log_size:
            problem = "its last entry points outside the segment"
        elif not all(map(lt, rels, rels[1:])) or not all(map(lt, poss, poss[1:])):
            problem = "its entries do not increase"
        if problem:
            raise CorruptIndexError(f"Corrupt index {self.path}: {problem}.")

    def full_check(self) -> list[str]:
        """Every problem found walking all entries (offsets and positions must increase)."""
        problems: list[str] = []
        prev_rel, prev_pos = 0, 0
        for n in range(self._entries):
            rel, pos = self.relative_entry(n)
            if rel <= prev_rel or (n and pos <= prev_pos):
                problems.append(
                    f"entry {n} (offset {self.base_offset + rel}, position {pos}) does not "
                    f"increase over the previous entry"
                )
            prev_rel, prev_pos = rel, pos
        return problems
