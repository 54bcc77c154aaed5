"""Kafka's text checkpoint files.

Format (shared by `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint`, `cleaner-offset-checkpoint`): line 1 the version `0`,
line 2 the entry count N, then N lines `<topic> <partition> <offset>`. Written to
`<name>.tmp`, fsynced, then atomically renamed over the old file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kafkactl.log.errors import CheckpointError

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CHECKPOINT_VERSION = 0

TopicPartition = tuple[str, int]


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
    write_atomically(path, data)


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
