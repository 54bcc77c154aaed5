"""Where every subcommand's output goes: one rule for a closed stdout (EPIPE), one style for
errors, and tables that keep their full width when piped.

The EPIPE rule: when the reader of stdout goes away (`kafkactl ... | head -1`), the command
stops at once, prints nothing more (no traceback, no "Broken pipe" message) and exits
with status 0 (EPIPE_EXIT). Exit 0, not 141 as coreutils (killed by SIGPIPE) report:
the reader chose to stop reading, which is no failure of ours, and `set -o pipefail`
scripts must not fail on `kafkactl consume ... | head`. Commands that print a summary
on stderr (consume) still print it, counting what was written before the pipe closed.

Any other failed write to stdout (a full disk, /dev/full, stdout closed or read-only) is
an error: one line `error: cannot write to stdout: <why>` and exit status 1 (kcat: "Output
write error"), no traceback. A command started with stdout (or stdin) closed gets
/dev/null opened the wrong way round in its place (reserve_standard_streams): a write
fails as above, a read says stdin is closed, and no file or socket the command opens can
become its fd 1 and receive its output.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

EPIPE_EXIT = 0
STDOUT_FAILED_EXIT = 1


class StdoutClosed(BaseException):  # noqa: N818 - a stop signal like KeyboardInterrupt
    """The reader of stdout went away. A BaseException on purpose: library code that turns
    every Exception into an error message (dump-log's per-file handler) lets it through."""


class StdoutFailed(BaseException):  # noqa: N818 - a stop like StdoutClosed
    """A write to stdout failed, its reader not gone (`error` says why: ENOSPC, EIO,
    EBADF...). A BaseException for the same reason as StdoutClosed."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error

    @property
    def message(self) -> str:
        return stdout_error_message(self.error)


def stdout_error_message(e: OSError) -> str:
    """`cannot write to stdout: No space left on device`."""
    why = e.strerror or str(e)
    if e.errno == errno.EBADF:
        why += " (stdout is closed or not open for writing)"
    return f"cannot write to stdout: {why}"


def is_epipe(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.EPIPE, errno.ECONNRESET)


def _fails_again(e: OSError) -> bool:
    """True when stdout still fails as `e` did: `e` came from writing to it (a write to
    the full stream raises where the command writes, Python's buffer, click's echo, rich,
    not only in our writers). Pending output is flushed again, else nothing is written."""
    out = sys.stdout
    if out is None or e.filename is not None or e.errno is None:
        return False
    try:
        out.flush()
        os.write(out.fileno(), b"")  # /dev/full and a read-only fd fail even this
    except OSError as again:
        return again.errno == e.errno
    except ValueError:
        return False
    return False


def _stdout_failed(e: OSError) -> typer.Exit:
    """The one error line of a failed stdout; stdout silenced for the interpreter's exit."""
    error(stdout_error_message(e))
    silence_stdout()
    return typer.Exit(STDOUT_FAILED_EXIT)


def reserve_standard_streams() -> None:
    """Started with fd 0, 1 or 2 closed (`<&-`, `>&-`, `2>&-`): /dev/null in its place, so
    that nothing the command opens later (a socket, a log segment) takes the fd and gets
    its output. Stdin and stdout are opened the wrong way (write-only, read-only), so that
    reading stdin fails with "stdin is closed" and writing stdout with EBADF (StdoutFailed:
    exit 1): their data cannot silently vanish. A closed stderr discards what is written
    to it, as it did. Python's sys.stdin/stdout/stderr are made for them (None else)."""
    for fd, flags in ((0, os.O_WRONLY), (1, os.O_RDONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            new = os.open(os.devnull, flags)
        except OSError:
            continue
        if new != fd:
            os.dup2(new, fd)
            os.close(new)
        if fd == 0:
            sys.stdin = io.TextIOWrapper(io.BufferedReader(_ClosedStdin()))
        else:
            stream = io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, "w", closefd=False)),
                                      line_buffering=fd == 2)
            setattr(sys, "stdout" if fd == 1 else "stderr", stream)


class StdinClosed(OSError):
    """Read from the stdin of a command started with it closed (`<&-`)."""


class _ClosedStdin(io.RawIOBase):
    """The stdin of a command started with it closed: reading it fails, saying so."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise StdinClosed("cannot read stdin: it is closed")

    def fileno(self) -> int:
        return 0


def silence_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so nothing written later (rich's buffers, the
    interpreter's final flush) raises or prints "Exception ignored ... Broken pipe"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


@contextmanager
def stdout_guard() -> Iterator[None]:
    """Apply the EPIPE rule to everything run inside: a closed stdout ends the command with
    EPIPE_EXIT and no message."""
    try:
        yield
    except StdoutClosed:
        silence_stdout()
        raise typer.Exit(EPIPE_EXIT) from None
    except StdoutFailed as e:
        raise _stdout_failed(e.error) from None
    except StdinClosed as e:  # (a command that reads stdin and does not say it failed)
        error(str(e))
        raise typer.Exit(1) from None
    except OSError as e:
        if not is_epipe(e):
            if _fails_again(e):
                raise _stdout_failed(e) from None
            raise
        silence_stdout()
        raise typer.Exit(EPIPE_EXIT) from None


def flush_stdout() -> bool:
    """Flush Python's stdout buffer; False (and stdout silenced) if the reader went away.
    StdoutFailed if the write failed otherwise."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        return True
    except OSError as e:
        if not is_epipe(e):
            raise StdoutFailed(e) from None
        silence_stdout()
        return False


def finish_stdout(code: int) -> int:
    """The exit status once what stdout still buffers is flushed: `code`; EPIPE_EXIT for 0
    when the reader went away; on another failure, the error line and 1."""
    try:
        if not flush_stdout() and code == 0:
            return EPIPE_EXIT
    except StdoutFailed as e:
        _stdout_failed(e.error)
        return code or STDOUT_FAILED_EXIT
    return code


def write_line(text: str) -> None:
    """A line to stdout; raises StdoutClosed when the reader went away, StdoutFailed when
    the write failed otherwise."""
    try:
        sys.stdout.write(text + "\n")
    except OSError as e:
        if is_epipe(e):
            raise StdoutClosed from None
        raise StdoutFailed(e) from None


def error(message: str) -> None:
    """One error line on stderr, in the one style every command uses: `error: ...`."""
    typer.echo(f"error: {message}", err=True)


def stdout_console() -> Console:
    """A rich console for tables on stdout: wrapped to the terminal on a terminal, full
    width (nothing cut or wrapped) when piped or redirected, so `| grep` and `> file` see
    whole names."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=100_000, soft_wrap=True)
    return console


def print_table(table: Any) -> None:
    """Print a rich table with stdout_console(); trailing padding is trimmed when piped."""
    console = stdout_console()
    if console.is_terminal:
        console.print(table)
        return
    with console.capture() as cap:
        console.print(table)
    for line in cap.get().splitlines():
        write_line(line.rstrip())
