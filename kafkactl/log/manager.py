"""LogManager: the broker's log directories and every partition log in them.

Per log dir: a `.lock` held with `fcntl.flock` while the broker runs (a second broker on
the same dir fails with LogDirInUseError), the clean-shutdown marker `.kafka_cleanshutdown`
(present at start = skip recovery; removed once loaded), and the checkpoint files
`recovery-point-offset-checkpoint` and `log-start-offset-checkpoint`.

`flush_dirty()`, `run_retention()` and `checkpoint()` are plain methods the broker
schedules (flush/retention may run on a worker thread); `shutdown()` flushes, closes
(trimming indexes), checkpoints and writes the marker. A DeleteRecords that moves a log's
start writes the checkpoints at once (Log.on_log_start_moved), before it is answered.

A deleted log's entries leave its dir's per-partition checkpoints (Kafka's asyncDelete), so
that a topic made again under the same name never inherits the old log's start offset,
recovery point, cleaned offset or high watermark, even after a kill -9 before the next
periodic checkpoint: `delete_log` drops its cleaner-offset-checkpoint and
replication-offset-checkpoint entries, and notes it (`_deleted`) for the recovery-point and
log-start-offset checkpoints, which the next write of them leaves out; a log made again
before that (`create_log`) writes them first. (Kafka writes these two at each deletion, or
once per dir for a batch; noted, a topic of many partitions is deleted with one write per
dir, not one per partition.) `load` drops the entries that a crash in the middle of a
deletion left for partitions that have no log any more.

Disk errors (a full disk: ENOSPC; EIO): Kafka marks the log dir offline on its first I/O
error and stops serving its partitions until a restart. A cluster's broker does too
(`take_dir_offline`, driven by kafkactl.broker.log_dir_failure_handler through
`storage_errors.listener`). A standalone broker keeps the dir online instead: a
failed append changes nothing and answers KAFKA_STORAGE_ERROR (clients retry), so produces
succeed again as soon as space is freed, and fetches keep reading what is there; until
an append there succeeds again the dir takes no new partition (`create_log`), and with
every dir failing a creation answers KAFKA_STORAGE_ERROR, as Kafka's offline dirs do. The
background work does each log and each dir on its own (one failing flush or checkpoint
does not stop the others; retention, which frees space, keeps running), and
`storage_errors` says it in the broker log once per dir (then at most every
STORAGE_ERROR_REPEAT_S) instead of a traceback per request. A dir whose logs could not be
flushed or closed at shutdown gets no clean-shutdown marker: the next start recovers it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import threading
import time as _time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from kafkactl.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    fsync_dir,
    read_checkpoint,
    update_checkpoint,
    write_atomically,
    write_checkpoint,
)
from kafkactl.log.config import LogConfig
from kafkactl.log.errors import (
    CheckpointError,
    LogDirInUseError,
    LogDirOfflineError,
    LogError,
)
from kafkactl.log.log import Log, parse_topic_partition
from kafkactl.log.log_dir_failure import (
    LogDirUnusableError,
    StorageErrorLog,
    describe_os_error,
)

__all__ = ["LogDirUnusableError", "LogManager", "StorageErrorLog", "describe_os_error"]

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"  # a log dir move (AlterReplicaLogDirs) a stop interrupted
MAX_DIR_NAME_BYTES = 255

TopicPartition = tuple[str, int]

log = logging.getLogger(__name__)


class CheckpointValues(NamedTuple):
    """Checkpoint contents (dir -> file name -> entries) and when they were taken: values
    older than the last ones written are never written over them."""

    generation: int
    files: dict[Path, dict[str, dict[TopicPartition, int]]]


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


def delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's name for a log dir being deleted: `<topic>-<partition>.<uuid hex>-delete`,
    the topic cut so that the whole name fits in MAX_DIR_NAME_BYTES (a topic may have 249
    characters)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    keep = MAX_DIR_NAME_BYTES - len(suffix)
    return topic.encode()[:keep].decode(errors="ignore") + suffix


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
        self._logs_per_dir: dict[Path, int] = {}  # for create_log's choice (O(1), not O(logs))
        self._lock_fds: dict[Path, int] = {}
        self._lock = threading.RLock()
        self._checkpoint_lock = threading.Lock()
        self._values_taken = 0  # generations of checkpoint_values, taken / written
        self._values_written = 0
        self._pending_dir_deletes: list[Path] = []
        # deleted logs whose entries the dir's recovery-point and log-start checkpoints may
        # still hold: dir -> (topic, partition) -> the checkpoint_values generation then
        self._deleted: dict[Path, dict[TopicPartition, int]] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        self.offline: dict[Path, str] = {}  # offline dirs -> why (KIP-112)
        self.went_offline: set[Path] = set()  # ... of them, those taken offline at runtime
        self._retired: list[Log] = []  # their logs, closed (unwritten) at shutdown
        self.loaded = False
        self.storage_errors = StorageErrorLog()

    def _now_ms(self) -> int:
        return int(self._time.time() * 1000)

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_config(topic) if self._topic_config else self.default_config

    # ----------------------------------------------------------------- load
    def load(self) -> None:
        """Lock every dir and open every `<topic>-<partition>` log in it. A dir that
        cannot be used (its `.lock`, a partition dir or a segment cannot be opened) is
        offline from now to the next start (KIP-112: `offline`, nothing of it open or
        locked), unless it is the first dir, which holds the broker's own metadata (so
        one dir always stays): then LogDirUnusableError, naming the dir and the reason,
        and nothing stays open or locked."""
        try:
            for d in self.log_dirs:
                try:
                    d.mkdir(parents=True, exist_ok=True)
                    self._lock_fds[d] = lock_log_dir(d)
                except OSError as e:
                    self._take_offline(d, e)
            for d in self.online_dirs:
                try:
                    self._load_dir(d)
                except OSError as e:
                    self._take_offline(d, e)
            self._drop_stale_entries()
        except BaseException:
            self._close_logs(clean=False)
            self._release_locks()
            raise
        self.loaded = True

    @property
    def online_dirs(self) -> list[Path]:
        """The log dirs in use: all but those offline since the start (`offline`)."""
        return [d for d in self.log_dirs if d not in self.offline]

    def _take_offline(self, d: Path, e: OSError) -> None:
        """Dir `d` failed at start: forget what was opened of it and go on without it, as
        Kafka's LogManager does; LogDirUnusableError when it is the first dir."""
        error = LogDirUnusableError.of(d, e)
        if d == self.log_dirs[0]:
            raise error from e
        for _tp, lg in self._forget_dir(d, str(error)):
            with contextlib.suppress(Exception):
                lg.close()
        log.error("%s It is offline until the broker restarts with it repaired: its "
                  "partitions are unavailable here (other replicas, if any, lead them), "
                  "and no partition is created in it or again elsewhere.", error)

    def take_dir_offline(self, d: Path, reason: str) -> list[TopicPartition]:
        """A storage error in dir `d` while the broker runs, in a cluster (Kafka's
        handleLogDirFailure): from now to the next start the dir is offline as if it had
        failed at start (`offline`, `went_offline`): its logs are dropped, no log is made
        in it (nor, for a replica that existed, elsewhere), it is not checkpointed and it
        gets no clean-shutdown marker (the next start recovers it). The dropped logs'
        files stay open until shutdown, unwritten: a fetch response being sent may still
        read them. The partitions whose log was there; [] when `d` was offline already."""
        if d in self.offline or d not in self.log_dirs:
            return []
        gone = self._forget_dir(d, reason)
        self.went_offline.add(d)
        self._retired.extend(lg for _tp, lg in gone)
        return [tp for tp, _lg in gone]

    def _forget_dir(self, d: Path, reason: str) -> list[tuple[TopicPartition, Log]]:
        """Mark `d` offline for `reason`, drop its logs (returned, open) and release its
        lock."""
        with self._lock:
            gone = [(tp, self._logs.pop(tp)) for tp, owner in list(self._log_dir_of.items())
                    if owner == d and tp in self._logs]
            for tp, _lg in gone:
                del self._log_dir_of[tp]
            self._logs_per_dir.pop(d, None)
            self.offline[d] = reason
        fd = self._lock_fds.pop(d, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        return gone

    def _load_dir(self, d: Path) -> None:
        marker = d / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        self.had_clean_shutdown[d] = clean
        try:
            recovery_points = read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        except CheckpointError as e:
            log.warning("%s Treating it as absent: every log in %s is recovered from its "
                        "segments (`kafkactl recover %s` rewrites the file offline).", e, d, d)
            recovery_points, clean = {}, False  # unknown: recover everything
        try:
            start_offsets = read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
        except CheckpointError as e:
            log.warning("%s Treating it as absent: each log starts at its first segment "
                        "(`kafkactl recover %s` rewrites the file offline).", e, d)
            start_offsets = {}
        with os.scandir(d) as it:  # names and d_type: no stat or Path per entry
            entries = sorted((e.name, e.is_dir()) for e in it)
        for name, is_dir in entries:
            if not is_dir or name.startswith("."):
                continue
            child = d / name
            if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
                # a -future dir is a move's copy: the replica is whole where it was
                self._pending_dir_deletes.append(child)
                continue
            try:
                tp = parse_topic_partition(name)
            except LogError:
                continue
            if tp in self._logs:
                raise LogError(
                    f"Partition {tp[0]}-{tp[1]} exists in two log directories "
                    f"({self._log_dir_of[tp]} and {d}); remove one copy."
                )
            lg = Log(
                child, self.config_for(tp[0]), recovery_point=recovery_points.get(tp, 0),
                needs_recovery=not clean, time=self._time,
                log_start_offset=start_offsets.get(tp, 0),
            )
            lg.on_log_start_moved = self._log_start_moved
            self._logs[tp] = lg
            self._log_dir_of[tp] = d
            self._logs_per_dir[d] = self._logs_per_dir.get(d, 0) + 1
        if clean:
            marker.unlink()  # from now on the dir is "in use": a crash means recovery
            fsync_dir(d)

    # ----------------------------------------------------------------- logs
    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None, *,
                   is_new: bool = True) -> Log:
        """The log of (topic, partition), created in the least loaded dir if absent.
        A dir with storage errors (KAFKA_STORAGE_ERROR in DescribeLogDirs) takes no new
        log, as Kafka places none in an offline dir: LogError (KAFKA_STORAGE_ERROR) when
        every dir has them. A replica that is not new (`is_new` False: it existed before)
        is not created while a dir is offline, where it may be (Kafka's getOrCreateLog):
        LogError. Thread-safe; the files are made outside the manager's lock (a slow disk
        must not stall the threads that only list the logs)."""
        tp = (topic, partition)
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            deleted = [x for x, tps in self._deleted.items() if tp in tps]
        for x in deleted:
            self._write_without_deleted(x, tp)
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if not is_new and self.offline:
                raise LogDirOfflineError(
                    f"cannot create the log of {topic}-{partition}: it may be in the "
                    f"offline log dir(s) {', '.join(map(str, self.offline))}")
            counts = self._logs_per_dir
            failing = self.storage_errors.failing_dirs() if self.storage_errors.failing \
                else set()
            usable = [x for x in self.online_dirs if x not in failing]
            if not usable:
                raise LogError(
                    f"cannot create the log of {topic}-{partition}: every log dir has "
                    f"storage errors ({', '.join(str(x) for x in self.log_dirs)})")
            d = min(usable, key=lambda x: (counts.get(x, 0), self.log_dirs.index(x)))
            counts[d] = counts.get(d, 0) + 1  # reserved while the files are made
        try:
            log = Log(d / f"{topic}-{partition}", config or self.config_for(topic),
                      needs_recovery=False, time=self._time)
            log.on_log_start_moved = self._log_start_moved
        except BaseException:
            with self._lock:
                counts[d] -= 1
            raise
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:  # made by another thread meanwhile: keep that one
                counts[d] -= 1
                log.close()
                return existing
            self._logs[tp] = log
            self._log_dir_of[tp] = d
            return log

    def _write_without_deleted(self, d: Path, tp: TopicPartition) -> None:
        """Before a log of `tp` is made again: dir `d`'s recovery-point and log-start
        checkpoints, which may still hold the deleted log's entries, are written without
        them (and without those of the other logs deleted there since). LogError
        (KAFKA_STORAGE_ERROR) when they cannot be: no new log over a stale log start."""
        if d in self.write_checkpoints(self.checkpoint_values(only=d)):
            raise LogError(
                f"cannot create the log of {tp[0]}-{tp[1]}: the checkpoints of {d} still "
                f"hold the entries of its deleted log and cannot be written (see the "
                f"storage error above)")

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log and rename its dir to Kafka's `<topic>-<partition>.<uuid>-delete`
        (the topic cut so the name fits 255 bytes), fsynced; the dir is removed later.
        After the rename a restart can no longer open the log. Its checkpoint entries go
        (see the module doc): a log made again under its name inherits none of them."""
        tp = (topic, partition)
        with self._lock:
            lg = self._logs.pop(tp, None)
            owner = self._log_dir_of.pop(tp, None)
            if owner is not None:
                self._logs_per_dir[owner] -= 1
        if lg is None:
            return False
        lg.close()  # waits for a cleaner commit under way; later ones see it closed
        d = owner if owner is not None else lg.dir.parent
        # as Kafka's asyncDelete: the cleaner's entry first (cleaner.updateCheckpoints),
        # then the rename, then the dir's recovery-point and log-start checkpoints (noted:
        # left out of their next write, made before a log of the same name)
        self._drop_entries(d, CLEANER_OFFSET_CHECKPOINT, remove={tp})
        target = lg.dir.with_name(delete_dir_name(topic, partition))
        os.replace(lg.dir, target)
        fsync_dir(target.parent)
        self._pending_dir_deletes.append(target)
        with self._lock:
            self._deleted.setdefault(d, {})[tp] = self._values_taken
        self._drop_entries(d, REPLICATION_OFFSET_CHECKPOINT, remove={tp})
        return True

    def _drop_entries(self, d: Path, name: str, *,
                      remove: frozenset[TopicPartition] | set[TopicPartition] = frozenset(),
                      keep_only: set[TopicPartition] | None = None) -> None:
        """Drop entries of the checkpoint file `name` of dir `d` (see update_checkpoint);
        a write that fails is reported, not raised (the file keeps the entries: their
        log is gone, and the next start drops them)."""
        try:
            update_checkpoint(d / name, remove=remove, keep_only=keep_only)
        except OSError as e:
            self._remove_tmp(d / name)
            self.storage_errors.failed(d, f"cannot write {d / name}: {describe_os_error(e)}")

    def _drop_stale_entries(self) -> None:
        """At load: the checkpoint entries of partitions that have no log (a deletion a
        crash interrupted between its rename and its checkpoint writes) are dropped now,
        before a topic of the same name can be made again and inherit them. Recovery
        points, log starts and cleaned offsets are the dir's own logs'; high watermarks
        are kept for any log of the broker (a log moved between dirs)."""
        with self._lock:
            owners = list(self._log_dir_of.items())
        every = {tp for tp, _d in owners}
        for d in self.online_dirs:
            mine = {tp for tp, owner in owners if owner == d}
            stale: set[TopicPartition] = set()
            for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
                with contextlib.suppress(CheckpointError):  # the load warned about it
                    stale |= set(read_checkpoint(d / name)) - mine
            if stale:  # as deleted logs: should this write fail, create_log retries it
                with self._lock:
                    self._deleted.setdefault(d, {}).update(
                        dict.fromkeys(stale, self._values_taken))
                self.write_checkpoints(self.checkpoint_values(only=d))
            self._drop_entries(d, CLEANER_OFFSET_CHECKPOINT, keep_only=mine)
            self._drop_entries(d, REPLICATION_OFFSET_CHECKPOINT, keep_only=every)

    def replace_log(self, tp: TopicPartition, new_log: Log, log_dir: Path) -> Log | None:
        """`new_log` (in `log_dir`) is now tp's log: a move between log dirs
        (broker/log_dir_mover.py). The old log's partition hooks (snapshot at roll, the
        leader-epoch cache trimmed with the log start) go to the new one. The old log is
        returned, the caller's to close."""
        with self._lock:
            old = self._logs.get(tp)
            if old is not None:
                new_log.on_roll = old.on_roll
                new_log.high_watermark_source = old.high_watermark_source
                new_log.attach_leader_epoch_cache(old.leader_epoch_cache)
            new_log.on_log_start_moved = self._log_start_moved
            old_dir = self._log_dir_of.get(tp)
            if old_dir is not None:
                self._logs_per_dir[old_dir] -= 1
            self._logs[tp] = new_log
            self._log_dir_of[tp] = log_dir
            self._logs_per_dir[log_dir] = self._logs_per_dir.get(log_dir, 0) + 1
        return old

    def delete_stray_logs(self, topic: str) -> int:
        """Delete every log of `topic` found on disk (a deletion a crash interrupted)."""
        found = [p for (t, p) in list(self._logs) if t == topic]
        for p in found:
            self.delete_log(topic, p)
        return len(found)

    def describe_logs(self) -> list[tuple[TopicPartition, Path, Log]]:
        """(topic-partition, its log dir, its log) of every log (DescribeLogDirs)."""
        return self._each_log()

    def offline_dirs(self) -> set[Path]:
        """Log dirs offline since the start or whose last disk operation failed
        (KAFKA_STORAGE_ERROR)."""
        return self.storage_errors.failing_dirs() | set(self.offline)

    # ----------------------------------------------------------------- background work
    def _each_log(self) -> list[tuple[TopicPartition, Path, Log]]:
        with self._lock:
            return [(tp, self._log_dir_of[tp], lg) for tp, lg in self._logs.items()
                    if tp in self._log_dir_of]

    def flush_dirty(self, now_ms: int | None = None) -> int:
        """Flush logs whose flush.ms has passed with unflushed data; returns how many.
        A log that fails to flush is reported (storage_errors) and retried next time; its
        recovery point does not move."""
        now = self._now_ms() if now_ms is None else now_ms
        flushed = 0
        for (topic, p), d, lg in self._each_log():
            try:
                if lg.maybe_flush(now):
                    flushed += 1
                    if self.storage_errors.failing:
                        self.storage_errors.succeeded(d, f"flush of {topic}-{p}")
            except OSError as e:
                self.storage_errors.failed(
                    d, f"cannot flush {topic}-{p}: {describe_os_error(e)}")
        return flushed

    def run_retention(self, now_ms: int | None = None) -> int:
        """Apply retention to every log and delete files whose delay passed. Returns the
        number of segments removed from logs. A log whose retention fails (a roll on a
        full disk) is reported and skipped: the others still free their space."""
        now = self._now_ms() if now_ms is None else now_ms
        removed = 0
        for (topic, p), d, lg in self._each_log():
            try:
                removed += lg.delete_old_segments(now)
            except (OSError, LogError) as e:
                self.storage_errors.failed(
                    d, f"retention of {topic}-{p} failed: {describe_os_error(e)}")
            try:
                lg.delete_pending(now)
            except OSError as e:
                self.storage_errors.failed(
                    d, f"cannot delete old segments of {topic}-{p}: {describe_os_error(e)}")
        dirs, self._pending_dir_deletes = self._pending_dir_deletes, []
        for pending in dirs:
            shutil.rmtree(pending, ignore_errors=True)
        return removed

    def checkpoint(self) -> list[Path]:
        """Write recovery-point and log-start-offset checkpoints for every dir. A dir
        whose files cannot be written keeps its previous ones (reported, retried next
        time); returns the dirs that failed."""
        return self.write_checkpoints(self.checkpoint_values())

    def _log_start_moved(self, _offset: int) -> None:
        """A log's start moved by DeleteRecords (a request or a follower following its
        leader's): the checkpoints are written now, on the caller's thread, not at the next
        log.flush.offset.checkpoint.interval.ms (Kafka's window, in which a crash brings the
        deleted records back). DeleteRecords is rare; a write that fails is reported and
        retried by the next periodic checkpoint."""
        self.checkpoint()

    def checkpoint_values(self, *, only: Path | None = None) -> CheckpointValues:
        """What `checkpoint` writes, per dir and file: cheap, taken on the thread that
        changes the logs; `write_checkpoints` (formatting, fsync) may then run on another.
        `only`: that dir's alone (a deleted log's dir)."""
        with self._lock:
            owners = list(self._log_dir_of.items())
            logs = dict(self._logs)
            self._values_taken += 1
            generation = self._values_taken
        out: dict[Path, dict[str, dict[TopicPartition, int]]] = {}
        for d in self.online_dirs:
            if only is not None and d != only:
                continue
            mine = [(tp, logs[tp]) for tp, owner in owners if owner == d and tp in logs]
            out[d] = {RECOVERY_POINT_CHECKPOINT: {tp: lg.recovery_point for tp, lg in mine},
                      LOG_START_OFFSET_CHECKPOINT: {tp: lg.log_start_offset for tp, lg in mine}}
        return CheckpointValues(generation, out)

    def write_checkpoints(self, values: CheckpointValues) -> list[Path]:
        failed: list[Path] = []
        with self._checkpoint_lock:  # one writer per file (a thread's, then shutdown's)
            if values.generation < self._values_written:
                return failed  # a worker thread late behind newer values (shutdown's)
            self._values_written = values.generation
            for d, files in values.files.items():
                for name, entries in files.items():
                    try:
                        write_checkpoint(d / name, entries)
                    except OSError as e:
                        self._remove_tmp(d / name)
                        self.storage_errors.failed(
                            d, f"cannot write {d / name}: {describe_os_error(e)}")
                        failed.append(d)
                        break
                else:
                    self._written_without_deleted(d, values.generation)
        return failed

    def _written_without_deleted(self, d: Path, generation: int) -> None:
        """Dir `d`'s checkpoints were written with values of `generation`: the logs deleted
        before those values were taken are no longer in them."""
        with self._lock:
            deleted = self._deleted.get(d)
            if not deleted:
                return
            for tp in [tp for tp, taken in deleted.items() if taken < generation]:
                del deleted[tp]
            if not deleted:
                del self._deleted[d]

    @staticmethod
    def _remove_tmp(path: Path) -> None:
        """The `.tmp` file a failed write_atomically(path) left behind (frees its space)."""
        with contextlib.suppress(OSError):
            os.unlink(path.with_name(path.name + ".tmp"))

    # ----------------------------------------------------------------- shutdown
    def shutdown(self) -> None:
        """Flush, close (trimming indexes), checkpoint, write the clean-shutdown marker.
        Disk errors do not stop it: a dir whose logs could not be flushed or closed gets
        no marker (the next start recovers its logs), and one whose marker cannot be
        written is simply recovered too."""
        self._close_retired()
        if not self._lock_fds:
            return
        unclean: set[Path] = set()
        for (topic, p), d, lg in self._each_log():
            try:
                lg.flush()
            except OSError as e:
                unclean.add(d)
                self.storage_errors.failed(
                    d, f"cannot flush {topic}-{p} at shutdown: {describe_os_error(e)}")
        self.checkpoint()
        for (topic, p), d, lg in self._each_log():
            try:
                lg.close()
            except Exception as e:
                unclean.add(d)
                self.storage_errors.failed(
                    d, f"cannot close {topic}-{p} cleanly: {describe_os_error(e)}")
        for (topic, p), d, lg in self._each_log():
            try:
                lg.delete_pending(force=True)
            except OSError as e:
                self.storage_errors.failed(
                    d, f"cannot delete old segments of {topic}-{p}: {describe_os_error(e)}")
        for d in self.online_dirs:
            marker = d / CLEAN_SHUTDOWN_MARKER
            if d in unclean:
                log.warning("Not marking log dir %s as cleanly shut down after the errors "
                            "above: the next start recovers its logs.", d)
                continue
            try:
                write_atomically(marker, json.dumps(
                    {"version": 0, "brokerEpoch": self.broker_epoch}).encode())
            except OSError as e:
                self._remove_tmp(marker)
                log.warning("Cannot write the clean-shutdown marker %s (%s): the next start "
                            "recovers the logs in %s.", marker, describe_os_error(e), d)
        self._release_locks()

    def _close_logs(self, *, clean: bool) -> None:
        for log in list(self._logs.values()):
            with contextlib.suppress(Exception):
                log.close()

    def _close_retired(self) -> None:
        """The files of the logs of dirs taken offline at runtime, closed without a write."""
        retired, self._retired = self._retired, []
        for lg in retired:
            with contextlib.suppress(Exception):
                lg.close_files()

    def _release_locks(self) -> None:
        for fd in self._lock_fds.values():
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        self._lock_fds.clear()
