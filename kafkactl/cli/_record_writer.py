"""RecordWriter: `kafkactl consume`'s output, and the count of what was printed.

A group consumer commits the records that were written to stdout, never what was only
fetched: the writer marks a partition's consumed offset (the consumer's `consumed`, what
the group commits) only for records whose bytes all reached the file descriptor. It knows
that exactly also when the write is cut short:

- the reader goes away (`| head`): EPIPE after k bytes, the records wholly inside them;
- the write fails otherwise (a full disk, /dev/full: StdoutFailed), the same way;
- Ctrl-C or SIGTERM while a slow reader keeps the pipe full. The handlers that
  `install_signal_handlers()` sets raise KeyboardInterrupt at once, except while a write
  runs and its bytes are counted: then the signal is kept and raised right after, so it
  can never fall between a write returning and its bytes being counted. (Blocking the
  signals with pthread_sigmask would not do: a signal sent to the process goes to any
  thread that does not block it, the heartbeat thread for one, and Python then runs the
  handler in the main thread wherever it is.) So that no write blocks while signals wait,
  a write to a pipe is no larger than the room the pipe has (F_GETPIPE_SZ minus the unread
  bytes, FIONREAD, minus two pages for the kernel's partly filled pages); with no room the
  writer waits for POLLOUT, signals raising as usual, and then writes at most PIPE_BUF.

A stop signal that comes while the writer waits for room in the middle of a record does
not cut the record: the writer finishes it (the reader sees whole lines and whole JSON
objects) and then stops; a second signal stops it at once. Once the shutdown has begun
(`shutting_down()`), a signal only ends drain()'s wait for the reader: the final commit
and LeaveGroup run to the end (each bounded by its own timeout) and the summary prints.

The records counted are those wholly written; the summary line reports them.

Written is not yet read: a pipe holds up to its size (64 KiB, up to 1 MiB) that its reader
has not taken, and those bytes are lost when the reader dies or stops reading (`| head`).
With `track_reads` (a group consumer on a pipe) a record counts as consumed only once its
bytes have left the pipe: what was written minus what the pipe still holds (FIONREAD, which
answers on the write end too, also after the reader has gone). `settle()` marks what the
reader has taken (the consumer calls it before each commit), `assigned()` drops what is
still in the pipe of partitions rebalanced away (printed again by their new owner rather
than committed by this one), and `drain()`, before the last commit, waits while the reader keeps
reading what is left, since it may go on reading after this process has exited.

A slow reader must not hold a consumer group's rebalance hostage (the other members wait
for this one to rejoin, up to the rebalance timeout): while the writer waits for room it
asks `stop()` (the group wants this member to rejoin) and, when it says so, finishes the
record it is in and gives up the rest: write() returns how many records it did not write,
and the caller puts the consumer back at the first of them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import stat
import sys
import termios
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from kafkactl.cli._output import StdoutClosed, StdoutFailed, flush_stdout, is_epipe

if TYPE_CHECKING:
    from kafkactl.client.topic_reader import Piece, TopicPartition

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# A terminal (flow control) or a socket can stall a write: at most this much at once.
TTY_CHUNK = 65536
PIPE_BUF = select.PIPE_BUF
STOP_CHECK_S = 0.2  # how often a writer waiting for room asks whether to give up
DRAIN_CHECK_S = 0.01  # how often drain() looks at what the pipe still holds
DRAIN_STALL_S = 2.0  # drain() gives up on a reader that took nothing for this long


class _Pending(NamedTuple):
    """A piece written to a pipe, its records not yet all taken by the reader."""

    start: int  # where its first byte is in all that was written
    piece: Piece
    written: int  # its bytes written (fewer than all for a write cut short)


class RecordWriter:
    """Writes rendered records to stdout (fd 1, unbuffered), counts the records written in
    full (`records`) and marks each partition's consumed offset in `consumed`."""

    def __init__(self, consumed: dict[TopicPartition, int] | None = None) -> None:
        if not flush_stdout():  # what print() left in Python's buffer met a closed pipe
            raise StdoutClosed
        self.fd = sys.stdout.fileno() if sys.stdout is not None else 1
        _check_writable(self.fd)
        self.records = 0
        self.consumed: dict[TopicPartition, int] = consumed if consumed is not None else {}
        mode = os.fstat(self.fd).st_mode
        self.pipe = stat.S_ISFIFO(mode)
        # a file, or a device that is no terminal (/dev/null): writes never wait on a reader
        self.unbounded = stat.S_ISREG(mode) or (stat.S_ISCHR(mode) and not os.isatty(self.fd))
        self.page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self.stream = 0  # bytes written in all
        # a group consumer on a pipe: consumed once read, not once written (settle())
        self.track_reads = False
        self.pending: deque[_Pending] = deque()
        # (the fd, a non-blocking file description of that pipe of the writer's own): see
        # _write_fd
        self._own: tuple[int, int] | None = None

    def _write_fd(self) -> int:
        """Where writes go. For a pipe, a file description of it of the writer's own, opened
        non-blocking (Linux: /proc/self/fd; the one shared with the shell stays as it is),
        so that no write ever blocks: a pipe's room is pages (16 of them by default), not
        bytes, and small writes (a poll of a few hundred short records) each take a page of
        their own, so a write the byte count says fits may block, with the stop signals
        held and no rebalance asked about. Without one, `fd` and the byte count (_room)."""
        if not self.pipe:
            return self.fd
        own = self._own
        if own is None or own[0] != self.fd:
            self.close()
            try:
                fd = os.open(f"/proc/self/fd/{self.fd}",
                             os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                fd = -1
            own = self._own = (self.fd, fd)
        return own[1] if own[1] >= 0 else self.fd

    def close(self) -> None:
        """Close the writer's own file description of the pipe (the reader sees the end of
        the output once the process's others are closed too)."""
        own, self._own = self._own, None
        if own is not None and own[1] >= 0:
            with contextlib.suppress(OSError):
                os.close(own[1])

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # (at interpreter exit the fd goes anyway)
            self.close()

    def write(self, pieces: list[Piece], stop: Callable[[], bool] | None = None) -> int:
        """Write `pieces` (a poll's rendered records) in order; returns 0, or when `stop()`
        said so while waiting for room, how many records were left unwritten. Raises
        StdoutClosed when the reader went away, KeyboardInterrupt on Ctrl-C/SIGTERM; in
        every case what was written in full is counted and marked first."""
        parts = [memoryview(p.data).cast("B") for p in pieces]  # written as they are
        total = sum(v.nbytes for v in parts)
        off = 0
        end = total  # where to stop: the next record boundary once stop() said so
        stopping = False  # a stop signal came inside a record: finish it, then stop

        def wait(ask: Callable[[], bool] | None) -> bool:
            nonlocal end, stopping
            try:
                return self._wait_writable(ask)
            except KeyboardInterrupt:
                boundary = _record_boundary(pieces, off)
                if stopping or boundary == off:
                    raise
                stopping, end = True, boundary
                return False

        fd = self._write_fd()
        counted = fd == self.fd  # (no description of its own: count the room in bytes)
        with _SignalsHeld():
            try:
                while off < end:
                    limit = self._room(end - off) if counted else end - off
                    if limit == 0:
                        if wait(stop if end == total else None):
                            end = _record_boundary(pieces, off)
                            continue
                        if off >= end:
                            break
                        limit = min(end - off, PIPE_BUF)
                    try:
                        off += _write_range(fd, parts, off, limit)
                    except BlockingIOError:  # the pipe is full (or a non-blocking stdout)
                        if wait(stop if end == total else None):
                            end = _record_boundary(pieces, off)
                if stopping:
                    raise KeyboardInterrupt
            except OSError as e:
                self._account(pieces, off)
                if not is_epipe(e):
                    raise StdoutFailed(e) from None
                raise StdoutClosed from None
            except BaseException:
                self._account(pieces, off)
                raise
            before = self.records
            self._account(pieces, off)
            return sum(p.records for p in pieces) - (self.records - before)

    def _account(self, pieces: list[Piece], written: int) -> None:
        """Count the records wholly inside the first `written` bytes and mark their
        partitions' consumed offsets (with `track_reads`: once the reader has read them)."""
        base = self.stream
        left = written
        for piece in pieces:
            size = len(piece.data)
            n = min(size, left)
            if n == size:
                self.records += piece.records
            else:
                self.records += _records_within(piece, n)
            if n or not size:
                self._mark(base, piece, n)
            if n < size:
                break
            left -= n
            base += n
        self.stream += written
        if self.pending:
            self.settle()

    def _mark(self, start: int, piece: Piece, written: int) -> None:
        if self.track_reads and self.pipe:
            self.pending.append(_Pending(start, piece, written))
            return
        after = _offset_within(piece, written)
        if after is not None and after > self.consumed.get(piece.tp, -1):
            self.consumed[piece.tp] = after

    def settle(self) -> None:
        """Mark consumed the records whose bytes the pipe's reader has taken."""
        pending = self.pending
        if not pending:
            return
        taken = self.stream - self._unread()
        consumed = self.consumed
        while pending:
            start, piece, written = pending[0]
            got = taken - start
            if got < 0 or (got == 0 and written):
                break
            after = _offset_within(piece, min(got, written))
            # (never back: a reset past what the pipe still holds, auto.offset.reset's
            # after the log start moved, stays what is committed)
            if after is not None and after > consumed.get(piece.tp, -1):
                consumed[piece.tp] = after
            if got < written:
                break
            pending.popleft()

    def assigned(self, tps: Collection[TopicPartition]) -> None:
        """A rebalance gave this member `tps`: what the reader has not taken yet of the
        partitions that moved away is not this member's to commit any more (their new
        owner prints it again: never skipped)."""
        if self.pending:
            self.pending = deque(p for p in self.pending if p.piece.tp in tps)

    def drain(self) -> None:
        """Before the last commit: wait while the reader is still taking what was written
        (until it has all, or has gone away, or took nothing for DRAIN_STALL_S), then
        settle. Ctrl-C or SIGTERM ends the wait: what is left is then printed again by the
        next run rather than skipped. No write follows: the writer's own description of the
        pipe is closed first."""
        self.close()
        if not self.pending:
            return
        poller = select.poll()
        poller.register(self.fd, 0)  # POLLERR (the reader has gone) is always reported
        last, since = self._unread(), time.monotonic()
        with contextlib.suppress(KeyboardInterrupt):  # signals raise here (not held)
            _SignalState.draining = True  # also once the shutdown has begun
            try:
                while last > 0 and not poller.poll(0):
                    time.sleep(DRAIN_CHECK_S)
                    now, unread = time.monotonic(), self._unread()
                    if unread < last:
                        since = now
                    elif now - since >= DRAIN_STALL_S:
                        break
                    last = unread
            finally:
                _SignalState.draining = False
        self.settle()

    def _unread(self) -> int:
        """The bytes the pipe holds that its reader has not taken."""
        try:
            return int.from_bytes(fcntl.ioctl(self.fd, termios.FIONREAD, b"\0" * 4),
                                  sys.byteorder, signed=True)
        except OSError:
            return 0

    def _room(self, wanted: int) -> int:
        """How much one write may take without blocking (0: wait for room first)."""
        if self.pipe:
            try:
                size = fcntl.fcntl(self.fd, fcntl.F_GETPIPE_SZ)
                unread = int.from_bytes(fcntl.ioctl(self.fd, termios.FIONREAD, b"\0" * 4),
                                        sys.byteorder, signed=True)
            except OSError:
                return min(wanted, PIPE_BUF)
            return max(0, min(wanted, size - unread - 2 * self.page))
        if self.unbounded:
            return wanted
        return min(wanted, TTY_CHUNK)

    def _wait_writable(self, stop: Callable[[], bool] | None) -> bool:
        """Wait until the pipe has room (or its reader is gone), with Ctrl-C and SIGTERM let
        through: nothing is being written, so the KeyboardInterrupt they raise here loses
        no count. True when `stop()` said to give up instead."""
        poller = select.poll()
        poller.register(self.fd, select.POLLOUT)
        timeout = None if stop is None else int(STOP_CHECK_S * 1000)
        while True:
            with _signals_let_through():
                if poller.poll(timeout):
                    return False
            if stop is not None and stop():
                return True


def _check_writable(fd: int) -> None:
    """StdoutFailed(EBADF) at once for a stdout that cannot be written (closed, or open
    read-only), before any record is fetched for it."""
    try:
        writable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
    except OSError as e:
        raise StdoutFailed(e) from None
    if not writable:
        raise StdoutFailed(OSError(errno.EBADF, os.strerror(errno.EBADF)))


def _records_within(piece: Piece, n: int) -> int:
    """How many of the piece's records are wholly inside its first `n` bytes (n below its
    size). A batch the kernel rendered knows where each record ends. A batch's lines
    otherwise end each record with a newline: the newlines count the records, unless a
    record holds newlines of its own (then none counts: printed again, never skipped)."""
    if piece.ends is not None:
        return bisect_right(piece.ends, n)
    if piece.records > 1 and n > 0 and piece.data.count(b"\n") == piece.records:
        return piece.data.count(b"\n", 0, n)
    return 0


def _offset_within(piece: Piece, n: int) -> int | None:
    """The offset after the piece's records wholly inside its first `n` bytes (None: no
    record is)."""
    if n >= len(piece.data):
        return piece.next_offset
    return piece.offset_after(_records_within(piece, n))


_IOV_MAX = 512  # buffers per writev (Linux takes 1024)


def _write_range(fd: int, parts: list[memoryview], off: int, limit: int) -> int:
    """One writev of `limit` bytes at most from offset `off` of the parts taken as one
    (no join: a poll's output is not copied again); the bytes written."""
    views: list[memoryview] = []
    base = 0
    for v in parts:
        size = v.nbytes
        if base + size > off and size:
            start = max(off - base, 0)
            take = min(size - start, limit)
            views.append(v[start:start + take])
            limit -= take
            if limit <= 0 or len(views) == _IOV_MAX:
                break
        base += size
    return os.writev(fd, views)


def _record_boundary(pieces: list[Piece], off: int) -> int:
    """The first offset at or after `off` (in the pieces joined) where a record ends."""
    base = 0
    for piece in pieces:
        size = len(piece.data)
        if off < base + size:
            if off == base:
                return off
            if piece.ends is not None:
                return base + piece.ends[bisect_left(piece.ends, off - base)]
            if piece.data[off - base - 1] == 0x0A:  # just after a newline
                return off
            if piece.records > 1 and piece.data.count(b"\n") == piece.records:
                return base + piece.data.index(b"\n", off - base) + 1
            return base + size
        base += size
    return off


class _SignalState:
    deferring = False  # a write and its count are under way: keep the signal for after it
    kept: int | None = None
    # the final commit and LeaveGroup are under way (shutting_down()): a signal no longer
    # stops anything, except the wait of drain() for the pipe's reader
    closing = False
    draining = False
    told = False


def _on_stop_signal(signum: int, frame: Any) -> None:
    if _SignalState.closing and not _SignalState.draining:
        if not _SignalState.told:  # os.write: no buffered stream is reentered
            _SignalState.told = True
            with contextlib.suppress(OSError):
                os.write(2, b"kafkactl: stopping: committing the offsets and leaving the "
                            b"group first (each bounded by its timeout)\n")
        return
    if _SignalState.deferring:
        _SignalState.kept = signum
        return
    raise KeyboardInterrupt


def shutting_down() -> None:
    """The consumer's last steps begin (drain, the final commit, LeaveGroup, the summary):
    from now on Ctrl-C and SIGTERM only end drain()'s wait for the pipe's reader, and never
    cut the commit or the LeaveGroup short, as a JVM's shutdown hook runs them to the end
    (each is bounded by its own timeout)."""
    _SignalState.closing = True
    _SignalState.kept = None


def install_signal_handlers() -> None:
    """Ctrl-C and SIGTERM stop `consume` (KeyboardInterrupt), never inside a write and its
    count (see the module's docstring). Call in the main thread."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_stop_signal)


def _raise_kept() -> None:
    if _SignalState.kept is not None:
        _SignalState.kept = None
        raise KeyboardInterrupt


class _SignalsHeld:
    """A write and its count: a stop signal is kept and raised after (a class: a
    generator-based context manager costs several µs, and a group member writes every
    max.poll.records records)."""

    __slots__ = ()

    def __enter__(self) -> None:
        _SignalState.deferring = True

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        _SignalState.deferring = False
        if exc_type is None:
            _raise_kept()



@contextlib.contextmanager
def _signals_let_through() -> Iterator[None]:
    _SignalState.deferring = False
    try:
        _raise_kept()
        yield
    finally:
        _SignalState.deferring = True
