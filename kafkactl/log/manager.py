"""LogManager: the broker's log directories and every partition log in them.

Per log dir: a `.lock` held with `fcntl.flock` while the broker runs (a second broker on
the same dir fails with LogDirInUseError), the clean-shutdown marker `.kafka_cleanshutdown`
(present at start = skip recovery; removed once loaded), and the checkpoint files
`recovery-point-offset-checkpoint` and `log-start-offset-checkpoint`.

`flush_dirty()`, `run_retention()` and `checkpoint()` are plain methods the broker
schedules (flush/retention may run on a worker thread); `shutdown()` flushes, closes
(trimming indexes), checkpoints and writes the marker.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import threading
import time as _time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkactl.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    fsync_dir,
    read_checkpoint,
    write_atomically,
    write_checkpoint,
)
from kafkactl.log.config import LogConfig
from kafkactl.log.errors import CheckpointError, LogDirInUseError, LogError
from kafkactl.log.log import Log, parse_topic_partition

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"

TopicPartition = tuple[str, int]


def lock_log_dir(directory: Path) -> int:
    """Take the exclusive `.lock` of a log dir; returns the fd (keep it open)."""
    path = directory / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirInUseError(
            f"Log directory {directory} is in use by another process (its {LOCK_FILE} is "
            f"locked). Stop the other broker or tool, or point log.dirs somewhere else."
        ) from None
    return fd


def is_partition_dir(path: Path) -> bool:
    if not path.is_dir() or path.name.startswith("."):
        return False
    try:
        parse_topic_partition(path.name)
    except LogError:
        return False
    return True


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        *,
        topic_config: Callable[[str], LogConfig] | None = None,
        time: Any = _time,  # noqa: A002
        broker_epoch: int = 0,
    ) -> None:
        if not log_dirs:
            raise LogError("At least one log directory is needed (log.dirs).")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._topic_config = topic_config
        self._time = time
        self.broker_epoch = broker_epoch
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._lock_fds: dict[Path, int] = {}
        self._lock = threading.RLock()
        self._pending_dir_deletes: list[Path] = []
        self.had_clean_shutdown: dict[Path, bool] = {}
        self.loaded = False

    def _now_ms(self) -> int:
        return int(self._time.time() * 1000)

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_config(topic) if self._topic_config else self.default_config

    # ----------------------------------------------------------------- load
    def load(self) -> None:
        """Lock every dir and open every `<topic>-<partition>` log in it."""
        try:
            for d in self.log_dirs:
                d.mkdir(parents=True, exist_ok=True)
                self._lock_fds[d] = lock_log_dir(d)
            for d in self.log_dirs:
                self._load_dir(d)
        except BaseException:
            self._close_logs(clean=False)
            self._release_locks()
            raise
        self.loaded = True

    def _load_dir(self, d: Path) -> None:
        marker = d / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        self.had_clean_shutdown[d] = clean
        try:
            recovery_points = read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        except CheckpointError:
            recovery_points, clean = {}, False  # unknown: recover everything
        try:
            start_offsets = read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
        except CheckpointError:
            start_offsets = {}
        for child in sorted(d.iterdir()):
            if child.is_dir() and child.name.endswith(DELETE_DIR_SUFFIX):
                self._pending_dir_deletes.append(child)
                continue
            if not is_partition_dir(child):
                continue
            tp = parse_topic_partition(child.name)
            if tp in self._logs:
                raise LogError(
                    f"Partition {tp[0]}-{tp[1]} exists in two log directories "
                    f"({self._log_dir_of[tp]} and {d}); remove one copy."
                )
            log = Log(
                child, self.config_for(tp[0]), recovery_point=recovery_points.get(tp, 0),
                needs_recovery=not clean, time=self._time,
                log_start_offset=start_offsets.get(tp, 0),
            )
            self._logs[tp] = log
            self._log_dir_of[tp] = d
        if clean:
            marker.unlink()  # from now on the dir is "in use": a crash means recovery
            fsync_dir(d)

    # ----------------------------------------------------------------- logs
    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The log of (topic, partition), created in the least loaded dir if absent."""
        tp = (topic, partition)
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            counts = {d: 0 for d in self.log_dirs}
            for owner in self._log_dir_of.values():
                counts[owner] += 1
            d = min(self.log_dirs, key=lambda x: (counts[x], self.log_dirs.index(x)))
            log = Log(d / f"{topic}-{partition}", config or self.config_for(topic),
                      needs_recovery=False, time=self._time)
            self._logs[tp] = log
            self._log_dir_of[tp] = d
            return log

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log and rename its dir to `<tp>.<uuid>-delete` (removed later)."""
        tp = (topic, partition)
        with self._lock:
            log = self._logs.pop(tp, None)
            self._log_dir_of.pop(tp, None)
        if log is None:
            return False
        log.close()
        target = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(log.dir, target)
        self._pending_dir_deletes.append(target)
        return True

    # ----------------------------------------------------------------- background work
    def flush_dirty(self, now_ms: int | None = None) -> int:
        """Flush logs whose flush.ms has passed with unflushed data; returns how many."""
        now = self._now_ms() if now_ms is None else now_ms
        return sum(1 for log in list(self._logs.values()) if log.maybe_flush(now))

    def run_retention(self, now_ms: int | None = None) -> int:
        """Apply retention to every log and delete files whose delay passed. Returns the
        number of segments removed from logs."""
        now = self._now_ms() if now_ms is None else now_ms
        removed = 0
        for log in list(self._logs.values()):
            removed += log.delete_old_segments(now)
            log.delete_pending(now)
        dirs, self._pending_dir_deletes = self._pending_dir_deletes, []
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
        return removed

    def checkpoint(self) -> None:
        """Write recovery-point and log-start-offset checkpoints for every dir."""
        for d in self.log_dirs:
            tps = [tp for tp, owner in self._log_dir_of.items() if owner == d]
            logs = [(tp, self._logs[tp]) for tp in tps if tp in self._logs]
            write_checkpoint(d / RECOVERY_POINT_CHECKPOINT,
                             {tp: log.recovery_point for tp, log in logs})
            write_checkpoint(d / LOG_START_OFFSET_CHECKPOINT,
                             {tp: log.log_start_offset for tp, log in logs})

    # ----------------------------------------------------------------- shutdown
    def shutdown(self) -> None:
        """Flush, close (trimming indexes), checkpoint, write the clean-shutdown marker."""
        if not self._lock_fds:
            return
        for log in list(self._logs.values()):
            log.flush()
        self.checkpoint()
        self._close_logs(clean=True)
        for log in list(self._logs.values()):
            log.delete_pending(force=True)
        for d in self.log_dirs:
            write_atomically(d / CLEAN_SHUTDOWN_MARKER,
                             json.dumps({"version": 0, "brokerEpoch": self.broker_epoch})
                             .encode())
        self._release_locks()

    def _close_logs(self, *, clean: bool) -> None:
        for log in list(self._logs.values()):
            with contextlib.suppress(Exception):
                log.close()

    def _release_locks(self) -> None:
        for fd in self._lock_fds.values():
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        self._lock_fds.clear()
