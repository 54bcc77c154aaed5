"""One worker process of a multi-process mirror (`python -m kafkactl.mirror.worker`).

The parent (MirrorWorkers) writes one JSON line on its stdin, {"config": ...,
"status_interval": s}, and keeps stdin open: end of file there means the parent is gone,
and the worker stops the way SIGTERM stops it (finish the records in flight, commit, leave
the group); end of file before that line means there is nothing to do (exit 0). The
worker runs one MirrorMaker and writes its status as one JSON line on stdout every
interval, and a last one when it has stopped; it exits 0 when stopped, 1 on failure.
Warnings go to stderr, which the worker shares with the parent.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import sys
import threading
from types import FrameType
from typing import IO, Any

from kafkactl.client.errors import SERVE_ADVICE
from kafkactl.mirror.config import MirrorConfig
from kafkactl.mirror.maker import MirrorMaker
from kafkactl.mirror.status import MirrorStatus

# The client's advice on where to point it names -b/--bootstrap-server, which mirror does
# not take: its warnings and errors name the mirror's options instead.
MIRROR_ADVICE = ("Is `kafkactl serve` running there? Check --source and --target (or "
                 "--source-zookeeper)")


def mirror_advice(text: str) -> str:
    """A client error's text with the mirror's options in its advice (MIRROR_ADVICE)."""
    return text.replace(SERVE_ADVICE, MIRROR_ADVICE)


class _WarningFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return mirror_advice(super().format(record))


def log_warnings() -> None:
    """The mirror's warnings (retries, skipped records) as `warning: ...` lines on stderr,
    naming the mirror's options where a client error advises -b/--bootstrap-server."""
    handler = logging.StreamHandler()
    handler.setFormatter(_WarningFormatter("warning: %(message)s"))
    logger = logging.getLogger("kafkactl.mirror")
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False


class StatusWriter:
    """Status lines on stdout; a parent that went away is not an error (the worker stops)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.lock = threading.Lock()

    def write(self, status: MirrorStatus) -> None:
        line = json.dumps(status.to_json(), separators=(",", ":")) + "\n"
        with self.lock, contextlib.suppress(OSError, ValueError):
            self.out.write(line)
            self.out.flush()


def _follow_parent(maker: MirrorMaker, stdin: IO[str]) -> None:
    """Stop once the parent closes our stdin (it exited or was killed)."""
    with contextlib.suppress(OSError, ValueError):
        while stdin.readline():
            pass
    maker.stop()


def run(stdin: IO[str], stdout: IO[str]) -> int:
    request: dict[str, Any] = json.loads(stdin.readline() or "{}")
    if "config" not in request:
        return 0  # the parent gave up before sending the config
    config = MirrorConfig.from_json(request["config"])
    interval = float(request.get("status_interval", 1.0))
    out = StatusWriter(stdout)
    maker = MirrorMaker(config)

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        maker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)  # Ctrl-C reaches the whole process group
    threading.Thread(target=_follow_parent, args=(maker, stdin), name="mirror-parent",
                     daemon=True).start()
    try:
        maker.start()
    except Exception as e:
        failed = maker.status()
        failed.state, failed.error = "failed", str(e)
        out.write(failed)
        with contextlib.suppress(Exception):
            maker.close()
        return 1
    while not maker.wait(interval):
        out.write(maker.status())
    maker.close()
    final = maker.status()
    out.write(final)
    return 1 if final.error is not None else 0


def main() -> int:
    log_warnings()
    return run(sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
