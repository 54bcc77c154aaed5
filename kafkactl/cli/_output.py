"""Where every subcommand's output goes: one rule for a closed stdout (EPIPE), one style for
errors, and tables that keep their full width when piped.

The EPIPE rule: when the reader of stdout goes away (`kafkactl ... | head -1`), the command
stops at once, prints nothing more (no traceback, no "Broken pipe" message) and exits
with status 0 (EPIPE_EXIT). Exit 0, not 141 as coreutils (killed by SIGPIPE) report:
the reader chose to stop reading, which is no failure of ours, and `set -o pipefail`
scripts must not fail on `kafkactl consume ... | head`. Commands that print a summary
on stderr (consume) still print it, counting what was written before the pipe closed.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

EPIPE_EXIT = 0


class StdoutClosed(BaseException):  # noqa: N818 - a stop signal like KeyboardInterrupt
    """The reader of stdout went away. A BaseException on purpose: library code that turns
    every Exception into an error message (dump-log's per-file handler) lets it through."""


def is_epipe(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.EPIPE, errno.ECONNRESET)


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
    except OSError as e:
        if not is_epipe(e):
            raise
        silence_stdout()
        raise typer.Exit(EPIPE_EXIT) from None


def flush_stdout() -> bool:
    """Flush Python's stdout buffer; False (and stdout silenced) if the reader went away."""
    try:
        sys.stdout.flush()
        return True
    except OSError as e:
        if not is_epipe(e):
            raise
        silence_stdout()
        return False


def write_line(text: str) -> None:
    """A line to stdout; raises StdoutClosed when the reader went away."""
    try:
        sys.stdout.write(text + "\n")
    except OSError as e:
        if is_epipe(e):
            raise StdoutClosed from None
        raise


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
