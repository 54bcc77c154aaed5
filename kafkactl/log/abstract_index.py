"""The memory-mapped, fixed-width, sparse index shared by OffsetIndex and TimeIndex.

A writable index is preallocated by `resize(max_index_size)` (rounded down to a multiple
of the entry size) while its segment is active; the unused tail is zeros, which is why the entry
count is "the entries before the first all-zero one". `trim_to_valid_size()` cuts the file
to the real entries when the segment rolls or the broker closes cleanly. Indexes are never
checksummed: after an unclean shutdown they are rebuilt from the .log.

Thread model: one thread appends/truncates; `flush()` (msync) may run on another thread.
Structural changes (resize/trim/close) and flush take `self._lock`.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Self

from kafkactl.log.errors import CorruptIndexError
from kafkactl.log.file_map import FileMap

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024


def base_offset_from_path(path: Path) -> int:
    """`00000000000000001234.index` -> 1234; 0 when the name is not a number."""
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else 0


class AbstractIndex:
    ENTRY_SIZE: ClassVar[int] = 8
    SUFFIX: ClassVar[str] = ".index"

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        *,
        writable: bool = True,
    ) -> None:
        self.path = path if isinstance(path, Path) else Path(path)
        self.base_offset = base_offset
        self.writable = writable
        self.max_index_size = max(self.ENTRY_SIZE, max_index_size)
        self._lock = threading.Lock()
        self._mmap: Any = None  # the mapped bytes (FileMap.data, or mmap.mmap read-only)
        self._file_map: FileMap | None = None
        self._dirty = False  # entries written since the last msync
        self._length = 0
        self._slots = 0
        self._entries = 0
        self.closed = False
        if writable:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        else:
            fd = os.open(self.path, os.O_RDONLY)
        try:
            length = os.fstat(fd).st_size
            self.file_length = length  # as found on open (for sanity checks / dump-log)
            self._map(fd, length)
        finally:
            os.close(fd)
        self._entries = self._count_entries()
        self._entries_changed()

    # ----------------------------------------------------------------- construction
    @classmethod
    def open_readonly(cls, path: Path, base_offset: int | None = None) -> Self:
        """Open any .index/.timeindex file read-only (dump-log, recover --dry-run)."""
        if base_offset is None:
            base_offset = base_offset_from_path(Path(path))
        return cls(Path(path), base_offset, writable=False)

    def _round(self, n: int) -> int:
        return n - n % self.ENTRY_SIZE

    def _map(self, fd: int, length: int) -> None:
        self._length = length
        self._slots = length // self.ENTRY_SIZE
        if length == 0:
            self._mmap = None
            return
        if self.writable:  # no fd kept open (FileMap); read-only tools use mmap.mmap
            self._file_map = FileMap(fd, length)
            self._mmap = self._file_map.data
        else:
            self._mmap = mmap.mmap(fd, length, access=mmap.ACCESS_READ)

    def _msync(self) -> None:
        """msync when entries were written since the last one (an msync costs a disk
        write even when nothing changed: thousands of idle partitions at shutdown)."""
        if self._file_map is not None and self._dirty:
            self._file_map.flush()
            self._dirty = False

    def _unmap(self) -> None:
        fm, self._file_map = self._file_map, None
        mm, self._mmap = self._mmap, None
        if fm is not None:
            del mm
            fm.close()
        elif mm is not None:
            mm.close()

    def _entries_changed(self) -> None:
        """Hook: refresh cached values derived from the last entry."""

    def _is_zero(self, n: int) -> bool:
        assert self._mmap is not None
        s = n * self.ENTRY_SIZE
        return self._mmap[s:s + self.ENTRY_SIZE].count(0) == self.ENTRY_SIZE

    def _count_entries(self) -> int:
        """Entries before the first all-zero entry (the preallocated tail)."""
        slots = self._length // self.ENTRY_SIZE
        if slots == 0 or self._mmap is None:
            return 0
        if not self._is_zero(slots - 1):
            return slots
        lo, hi = 0, slots - 1  # the first zero slot is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_zero(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    # ----------------------------------------------------------------- properties
    @property
    def entry_count(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self._entries >= self._slots

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    @property
    def slot_count(self) -> int:
        """Whole entries in the file, zeros included (what a raw dump shows)."""
        return self._length // self.ENTRY_SIZE

    def __len__(self) -> int:
        return self._entries

    # ----------------------------------------------------------------- entries
    def _unpack(self, n: int) -> tuple[int, int]:
        raise NotImplementedError

    def entry(self, n: int) -> tuple[int, int]:
        if not 0 <= n < self._entries:
            raise IndexError(n)
        return self._unpack(n)

    def entries(self) -> Iterator[tuple[int, int]]:
        for n in range(self._entries):
            yield self._unpack(n)

    def raw_entries(self) -> Iterator[tuple[int, int]]:
        """Every whole slot in the file, including a zero tail."""
        for n in range(self.slot_count):
            yield self._unpack(n)

    def _bisect(self, key_of: int, target: int) -> int:
        """Index of the greatest entry whose key (field `key_of` of the tuple) <= target,
        or -1. Entries are sorted by both fields."""
        lo, hi = 0, self._entries - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self._unpack(mid)[key_of] <= target:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    # ----------------------------------------------------------------- mutation
    def _check_writable(self) -> None:
        if not self.writable or self.closed:
            raise CorruptIndexError(f"Index {self.path} is not open for writing.")

    def _zero_from(self, n: int) -> None:
        """Drop entries n.. (zero their bytes so a reopen counts them right)."""
        if self._mmap is None or n >= self._entries:
            return
        start, end = n * self.ENTRY_SIZE, self._entries * self.ENTRY_SIZE
        self._mmap[start:end] = bytes(end - start)
        self._dirty = True
        self._entries = n
        self._entries_changed()

    def _pack_entry(self, a: int, b: int) -> bytes:
        raise NotImplementedError

    def replace_entries(self, entries: list[tuple[int, int]]) -> None:
        """Drop every entry and write `entries` (already validated), preallocated."""
        self._check_writable()
        self._zero_from(0)
        need = len(entries) * self.ENTRY_SIZE
        self.resize(max(self.max_index_size, need + self.ENTRY_SIZE))
        if entries:
            assert self._mmap is not None
            pack = self._pack_entry
            self._mmap[0:need] = b"".join([pack(a, b) for a, b in entries])
            self._dirty = True
            self._entries = len(entries)
            self._entries_changed()

    def reset(self) -> None:
        """Drop every entry and preallocate again (used when rebuilding)."""
        self._check_writable()
        self._zero_from(0)
        self.resize(self.max_index_size)

    def resize(self, new_size: int) -> None:
        """Set the file length to `new_size` rounded down to whole entries (never below
        the live entries) and remap."""
        self._check_writable()
        length = max(self._round(new_size), self._entries * self.ENTRY_SIZE)
        with self._lock:
            if length == self._length:
                return
            if self._mmap is not None:
                self._msync()
                self._unmap()
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.ftruncate(fd, length)
                self._map(fd, length)
            finally:
                os.close(fd)

    def file_length_is_entries(self) -> bool:
        """The file holds its entries and nothing more (trimmed: an inactive segment)."""
        return self._length == self._entries * self.ENTRY_SIZE

    def trim_to_valid_size(self) -> None:
        self.resize(self._entries * self.ENTRY_SIZE)

    def flush(self) -> None:
        with self._lock:
            if self._mmap is not None and self.writable and not self.closed:
                self._msync()

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            if self._mmap is not None:
                if self.writable:
                    self._msync()
                self._unmap()
            self.closed = True

    def rename_to(self, new_path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, new_path)
        self.path = Path(new_path)

    def sanity_check(self, log_size: int | None = None) -> None:
        """Raise CorruptIndexError if the file cannot be this segment's index."""
        if self.file_length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Index file {self.path} is {self.file_length} bytes, not a multiple of "
                f"the entry size {self.ENTRY_SIZE}."
            )
        self._check_entries(log_size)

    def _check_entries(self, log_size: int | None) -> None:
        raise NotImplementedError
