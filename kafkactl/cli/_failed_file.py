"""`kafkactl produce --failed-file FILE`: the records of this run that were not acknowledged.

The file always tells this run, whatever its end: written whole into a temporary file beside
it, then renamed over it (an empty file when every record was acknowledged), so a retry
script never resends the records of an earlier run, and never sees half a file. A FILE that
is not a regular file (a FIFO), or is a device or descriptor (/dev/stderr), is written in
place. A record too long to ever
be sent (delimited.LongRecord) is not held in memory: the reader streams its bytes to
`spill`, an anonymous temporary file in FILE's directory, and they are copied from there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from kafkactl.client.delimited import LongRecord

COPY = 1 << 20  # a long record is copied from the spill in pieces of this size


class FailedFile:
    """FILE of --failed-file: `spill` for the long records, `write()` at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # a symbolic link is followed: its target is replaced, not the link
        self.target = Path(os.path.realpath(path))
        try:
            st: os.stat_result | None = os.stat(self.target)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "a directory, not a file")
        # (/dev/stdout, /dev/fd/N, /proc/self/fd/N: the open file, whatever it is, is
        # written; replacing the file they lead to would not reach the reader of the fd)
        self.in_place = (st is not None and not stat.S_ISREG(st.st_mode)) or any(
            str(p).startswith(("/dev/", "/proc/")) for p in (os.path.abspath(path),
                                                            self.target))
        self.mode = (stat.S_IMODE(st.st_mode) if st is not None else _default_mode())
        self.stat = st
        spill_dir = None if self.in_place else self.target.parent
        # (OSError when the directory cannot take it; closed by write())
        self.spill: IO[bytes] = tempfile.TemporaryFile(dir=spill_dir)  # noqa: SIM115

    def same_as(self, other: os.stat_result) -> bool:
        """FILE is the file `other` tells of (the input's): replacing it would lose the
        records of the input that a run stopped early has not read."""
        st = self.stat
        return (st is not None and not self.in_place
                and (st.st_dev, st.st_ino) == (other.st_dev, other.st_ino))

    def write(self, records: Iterable[bytes | LongRecord], delimiter: bytes) -> None:
        """Replace FILE with `records`, each followed by `delimiter` (raises OSError)."""
        try:
            if self.in_place:
                with open(self.target, "wb") as out:
                    self._write(out, records, delimiter)
                return
            fd, tmp = tempfile.mkstemp(dir=self.target.parent,
                                       prefix=f".{self.target.name}.", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as out:
                    os.fchmod(out.fileno(), self.mode)
                    self._write(out, records, delimiter)
                os.replace(tmp, self.target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        finally:
            self.spill.close()

    def _write(self, out: IO[bytes], records: Iterable[bytes | LongRecord],
               delimiter: bytes) -> None:
        for raw in records:
            if isinstance(raw, LongRecord):
                self._copy(raw, out)
            else:
                out.write(raw)
            out.write(delimiter)

    def _copy(self, record: LongRecord, out: IO[bytes]) -> None:
        if record.spilled < 0:
            raise OSError(f"a record of {record.length} bytes was not kept")
        spill = self.spill
        spill.flush()
        left = record.length
        at = record.spilled
        while left:
            piece = os.pread(spill.fileno(), min(left, COPY), at)
            if not piece:
                raise OSError("the temporary copy of a long record was cut short")
            out.write(piece)
            left -= len(piece)
            at += len(piece)


def _default_mode() -> int:
    """What open() gives a new file: 0o666 less the umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask

