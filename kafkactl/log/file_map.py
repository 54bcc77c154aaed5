"""A shared, writable memory map of a file that keeps no file descriptor open.

Python's `mmap.mmap` duplicates the descriptor it maps and holds it until closed (before
3.13's `trackfd=False`): an index would keep an fd for as long as its segment is open, three
per segment with the .log. The kernel needs no open file for a mapping, so this maps with
libc's `mmap` and closes the caller's fd as usual: Kafka does the same (it closes the
index's FileChannel once mapped). The mapping is a ctypes char array: it slices to bytes,
takes slice assignment, and is a buffer for `struct.pack_into`/`unpack_from`.

Elsewhere than Linux, or where libc cannot be loaded, it falls back to `mmap.mmap`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import sys
from typing import Any

_PROT = mmap.PROT_READ | mmap.PROT_WRITE
_MS_SYNC = 4  # Linux's value (mmap.mmap.flush uses it too)
_MAP_FAILED = ctypes.c_void_p(-1).value


def _load_libc() -> Any:
    if not sys.platform.startswith("linux"):  # _MS_SYNC and the call ABI are Linux's
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


_libc = _load_libc()


class FileMap:
    """`data` is the mapped bytes (a ctypes char array, or an mmap.mmap in the fallback);
    drop every reference to it before `close()`."""

    __slots__ = ("_addr", "_length", "data")

    def __init__(self, fd: int, length: int) -> None:
        self._length = length
        self._addr: int | None = None
        if _libc is None:
            self.data: Any = mmap.mmap(fd, length, access=mmap.ACCESS_WRITE)
            return
        addr = _libc.mmap(None, length, _PROT, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, f"mmap failed: {os.strerror(err)}")
        self._addr = addr
        self.data = (ctypes.c_char * length).from_address(addr)

    def flush(self) -> None:
        """msync the whole mapping (OSError on failure)."""
        if self._addr is None:
            if self.data is not None:
                self.data.flush()
            return
        if _libc.msync(self._addr, self._length, _MS_SYNC) != 0:
            err = ctypes.get_errno()
            raise OSError(err, "msync failed")

    def close(self) -> None:
        if self._addr is None:
            if self.data is not None:
                self.data.close()
            self.data = None
            return
        self.data = None
        addr, self._addr = self._addr, None
        _libc.munmap(addr, self._length)
