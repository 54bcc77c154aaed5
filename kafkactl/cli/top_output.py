"""`kafkactl top`'s output when it runs until stopped: SIGTERM (kill, timeout, systemd) ends
the view as Ctrl-C does, with status 0, as `consume` and `produce` do; and a frame (one
refresh's tables, or one JSON document) is written whole: a stop signal that comes while
one is written ends the view right after it, so a file or pipe never ends in half a frame.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kafkactl.cli._output import StdoutClosed, is_epipe, stdout_console

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Stop:
    writing = False  # a frame is being written: a stop signal waits for its end
    pending = False


def _on_stop(signum: int, frame: Any) -> None:
    if _Stop.writing:
        _Stop.pending = True
        return
    raise KeyboardInterrupt


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt (never inside a frame's write) while
    inside; the handlers before are put back after."""
    try:
        previous = {sig: signal.signal(sig, _on_stop) for sig in STOP_SIGNALS}
    except ValueError:  # not the main thread (a test's runner): left as they are
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _Stop.writing = _Stop.pending = False


def write_frame(text: str) -> None:
    """`text` to stdout, whole and flushed; StdoutClosed when the reader went away, and
    KeyboardInterrupt after it when a stop signal came meanwhile."""
    _Stop.writing = True
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:
        if is_epipe(e):
            raise StdoutClosed from None
        raise
    finally:
        _Stop.writing = False
    if _Stop.pending:
        _Stop.pending = False
        raise KeyboardInterrupt


def plain_text(renderable: Any) -> str:
    """A rich renderable as the lines a pipe gets (full width, no colours or cursor
    movement, no trailing padding), newline-terminated."""
    console = stdout_console()
    with console.capture() as cap:
        console.print(renderable)
    return "".join(line.rstrip() + "\n" for line in cap.get().splitlines())
