"""Kafka's text checkpoint files.

Format (shared by `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint`, `cleaner-offset-checkpoint`): line 1 the version `0`,
line 2 the entry count N, then N lines `<topic> <partition> <offset>`. Written to
`<name>.tmp`, fsynced, then atomically renamed over the old file.

Every write of a checkpoint file holds that file's lock (`checkpoint_lock`), one per path in
the process: two writers (the log manager's, the cleaner's, the high-watermark one) never
share a `.tmp`, and `update_checkpoint`'s read-modify-write (a partition's entry dropped when
its log is deleted, the cleaner's entry of one log) loses no other writer's update.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection, Mapping
from pathlib import Path

from kafkactl.log.errors import CheckpointError

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]

_locks: dict[str, threading.RLock] = {}
_locks_lock = threading.Lock()


def checkpoint_lock(path: Path) -> threading.RLock:
    """The lock every writer of the checkpoint file `path` holds (one per path)."""
    key = os.path.abspath(path)
    with _locks_lock:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.RLock()
        return lock


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Entries of a checkpoint file; an absent file reads as empty. Anything else that
    is not a well-formed checkpoint (bytes that are not UTF-8, a bad header or line) raises
    CheckpointError."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(
            f"Checkpoint file {path} is not text (byte {e.start} is not UTF-8).") from None
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"Checkpoint file {path} is truncated (fewer than 2 lines).")
    try:
        version = int(lines[0].strip())
        count = int(lines[1].strip())
    except ValueError:
        raise CheckpointError(f"Checkpoint file {path} has a malformed header.") from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"Checkpoint file {path} has unknown version {version}.")
    body = [ln for ln in lines[2:] if ln.strip()]
    if len(body) != count:
        raise CheckpointError(
            f"Checkpoint file {path} announces {count} entries but holds {len(body)}."
        )
    out: dict[TopicPartition, int] = {}
    for ln in body:
        parts = ln.split()
        if len(parts) != 3 or not parts[0].isprintable():
            raise CheckpointError(f"Checkpoint file {path} has a malformed line: {ln!r}.")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CheckpointError(f"Checkpoint file {path} has a malformed line: {ln!r}.") from None
    return out


def write_checkpoint(path: Path, entries: Mapping[TopicPartition, int]) -> None:
    """Write atomically: `<path>.tmp`, fsync, rename, fsync the directory."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    with checkpoint_lock(path):
        write_atomically(path, data)


def update_checkpoint(path: Path, *, remove: Collection[TopicPartition] = (),
                      keep_only: Collection[TopicPartition] | None = None,
                      update: Mapping[TopicPartition, int] | None = None) -> bool:
    """Read-modify-write of one checkpoint file under its lock: the entries of `remove`
    (and, with `keep_only`, of every partition not in it) dropped, then `update` set.
    Written only when that changes something (an absent file stays absent when nothing is
    set); True when written. A file that cannot be read is rewritten from nothing when
    `update` sets entries, else left as it is (its readers treat it as empty anyway).
    OSError when the write fails."""
    with checkpoint_lock(path):
        try:
            entries = read_checkpoint(path)
        except CheckpointError:
            if not update:
                return False
            entries = {}
        new = {tp: o for tp, o in entries.items() if tp not in remove and
               (keep_only is None or tp in keep_only)}
        new.update(update or {})
        if new == entries:
            return False
        write_checkpoint(path, new)
        return True


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def checkpoint_problem(path: Path) -> str | None:
    """Why the checkpoint file cannot be read (None: absent or well-formed)."""
    try:
        read_checkpoint(path)
    except CheckpointError as e:
        return str(e)
    return None


def salvage_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The well-formed `<topic> <partition> <offset>` lines of a damaged checkpoint file;
    headers, counts and anything unreadable are dropped."""
    entries: dict[TopicPartition, int] = {}
    for line in path.read_bytes().splitlines()[2:]:
        try:
            parts = line.decode("utf-8").split()
        except UnicodeDecodeError:
            continue
        if len(parts) == 3 and parts[0].isprintable() and parts[1].isdigit() and \
                parts[2].lstrip("-").isdigit():
            entries[(parts[0], int(parts[1]))] = int(parts[2])
    return entries
