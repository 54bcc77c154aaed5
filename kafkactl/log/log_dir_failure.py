"""How the broker tells of a log dir's disk failures (Kafka's LogDirFailureChannel: a
cluster's broker takes the dir offline through `StorageErrorLog.listener`, a standalone
one keeps it online, see kafkactl.log.manager): an OSError described in a few words, the
error of a dir unusable at start, and the once-per-dir broker-log lines of storage errors
(StorageErrorLog; RepeatedErrorLog rate-limits other errors that repeat with every retry
the same way: a segment's failed cut-back, a follower's failed append)."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time as _time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import cast

from kafkactl.log.errors import LogError

STORAGE_ERROR_REPEAT_S = 30.0

log = logging.getLogger("kafkactl.log.manager")  # the manager's messages, as before


def describe_os_error(e: BaseException) -> str:
    """`No space left on device (ENOSPC)` for an OSError; str(e) for anything else."""
    if isinstance(e, OSError) and e.errno:
        name = errno.errorcode.get(e.errno, str(e.errno))
        return f"{e.strerror or os.strerror(e.errno)} ({name})"
    return str(e)


class LogDirUnusableError(LogError):
    """A log dir the broker cannot use at start (its lock file, a partition dir or a
    segment cannot be opened or read)."""

    @classmethod
    def of(cls, log_dir: Path, e: OSError) -> LogDirUnusableError:
        where = f"{e.filename}: " if e.filename and str(e.filename) != str(log_dir) else ""
        return cls(f"Log directory {log_dir} cannot be used: {where}{describe_os_error(e)}.")


class RepeatedErrorLog:
    """One kind of error that repeats with every retry (a client's produce, a follower's
    fetch), told in the broker log per key (a log dir; a partition where the error is about
    one): the first at ERROR at once, repeats at most once per `repeat_s` at WARNING with
    the number of errors since the last report (those in between at DEBUG), and after
    `recovered(key)` the number not reported yet at INFO; the next error is a first one
    again. So thousands of partitions failing in one dir are one line per `repeat_s`, and
    the first error is never lost. Thread-safe; `failing` is cheap, for hot paths."""

    def __init__(self, logger: logging.Logger, repeat_s: float = STORAGE_ERROR_REPEAT_S,
                 clock: Callable[[], float] = _time.monotonic) -> None:
        self.logger = logger
        self.repeat_s = repeat_s
        self.clock = clock
        self._lock = threading.Lock()
        self._state: dict[Hashable, list[float]] = {}  # key -> [last report, unreported]

    @property
    def failing(self) -> bool:
        """Any key with errors not followed by `recovered` yet."""
        return bool(self._state)

    def _tick(self, key: Hashable) -> tuple[int | None, float]:
        """Count an error of `key`: (None: say it at DEBUG only; -1: a first one; N: a
        repeat to report, N more since the last report), and the seconds since it."""
        now = self.clock()
        with self._lock:
            state = self._state.get(key)
            if state is None:
                self._state[key] = [now, 0]
                return -1, 0.0
            if now - state[0] >= self.repeat_s:
                more, since = int(state[1]), now - state[0]
                state[0], state[1] = now, 0
                return more, since
            state[1] += 1
            return None, 0.0

    def _untick(self, key: Hashable) -> int | None:
        """`key` works again: the errors not reported yet, None when it had none."""
        with self._lock:
            state = self._state.pop(key, None)
        return None if state is None else int(state[1])

    def failed(self, key: Hashable, msg: str, *args: object) -> None:
        """An error about `key`: `msg % args` (logging's lazy formatting), logged as above;
        `key` should appear in the message (a repeat may be of another of its files)."""
        more, since = self._tick(key)
        if more is None:
            self.logger.debug(msg, *args)
        elif more < 0:
            self.logger.error(msg, *args)
        else:
            self.logger.warning(msg + " (again; %d more like it in the %.0f s since the "
                                "last report)", *args, more, since)

    def recovered(self, key: Hashable, msg: str, *args: object) -> None:
        """`key` works again: `msg % args` at INFO (with the errors not reported yet) if
        it had errors; its next error is reported at once."""
        more = self._untick(key)
        if more is None:
            return
        if more:
            self.logger.info(msg + " (after %d more errors since the last report)", *args,
                             more)
        else:
            self.logger.info(msg, *args)


class StorageErrorLog(RepeatedErrorLog):
    """What the broker log says about disk errors, per log dir (RepeatedErrorLog's rule,
    in its own words): the first error at ERROR, repeats at most once per `repeat_s` at
    WARNING with the number of errors in between, and the first success after errors at
    INFO. Thread-safe."""

    def __init__(self, repeat_s: float = STORAGE_ERROR_REPEAT_S,
                 clock: Callable[[], float] = _time.monotonic) -> None:
        super().__init__(log, repeat_s, clock)
        # a cluster's broker takes a failing dir offline (Kafka's LogDirFailureChannel):
        # called with the dir and what failed, on the thread of the error, every time
        self.listener: Callable[[Path, str], None] | None = None

    def failing_dirs(self) -> set[Path]:
        """The dirs with errors not followed by a success yet."""
        with self._lock:
            return {cast(Path, d) for d in self._state}  # (its keys are log dirs)

    def failed(self, key: Hashable, msg: str, *args: object) -> None:
        """A disk error in log dir `key`; `msg % args` says what failed."""
        what = msg % args if args else msg
        more, _since = self._tick(key)
        listener = self.listener
        if more is None:
            log.debug("storage error in log dir %s: %s", key, what)
        elif listener is not None:  # it says what follows (the dir goes offline)
            log.error("Storage error in log dir %s: %s.", key, what)
        elif more < 0:
            log.error("Storage error in log dir %s: %s. Its partitions answer produces with "
                      "KAFKA_STORAGE_ERROR (clients retry) until this is fixed (free space, "
                      "permissions), and it takes no new partitions until an append there "
                      "succeeds again; everything else keeps running.", key, what)
        else:
            log.warning("Storage errors continue in log dir %s (%d more since the last "
                        "report): %s", key, more, what)
        if listener is not None:
            listener(cast(Path, key), what)

    def succeeded(self, log_dir: Path, what: str) -> None:
        if self._untick(log_dir) is not None:
            log.info("Log dir %s works again: %s succeeded.", log_dir, what)
