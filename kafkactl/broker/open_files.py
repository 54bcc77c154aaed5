"""Open files (RLIMIT_NOFILE) for logs and connections.

Each open segment keeps one descriptor, its .log: the .index and .timeindex are mapped
without one (kafkactl.log.file_map). At start the broker raises its soft limit to the hard
one, as Kafka's packaging and many servers do, then counts the segments on disk and warns
when the limit leaves too little room for them and the connections (and when their index
mappings come near vm.max_map_count). CreateTopics and
CreatePartitions refuse partitions the limit cannot hold (`check_open_file_room`).
"""

from __future__ import annotations

import logging
import os
import resource
from collections.abc import Iterable
from pathlib import Path

from kafkactl.broker.topic_admin import TopicError
from kafkactl.protocol.errors import ErrorCode

FILES_PER_PARTITION = 1  # the active segment's .log (indexes are mapped without an fd)
RESERVED_FILES = 512  # connections, checkpoints, snapshots, the Python runtime
MAPS_PER_SEGMENT = 2  # its .index and .timeindex
RESERVED_MAPS = 2048  # the interpreter, libraries, thread stacks
MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")

log = logging.getLogger(__name__)


def raise_soft_limit() -> tuple[int, int]:
    """Raise the soft open-files limit to the hard one; (soft before, soft now)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or soft == resource.RLIM_INFINITY:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        log.warning("cannot raise the open files limit from %d to %d: %s", soft, hard, e)
        return soft, soft
    return soft, hard


def segments_on_disk(log_dirs: Iterable[Path]) -> int:
    """The .log files in every partition dir (one scandir per dir: cheap at start)."""
    count = 0
    for d in log_dirs:
        try:
            children = list(os.scandir(d))
        except OSError:
            continue
        for child in children:
            if not child.is_dir() or child.name.startswith(".") or "-" not in child.name:
                continue
            try:
                with os.scandir(child.path) as it:
                    count += sum(1 for e in it if e.name.endswith(".log"))
            except OSError:
                continue
    return count


def check_start_limit(log_dirs: Iterable[Path]) -> int:
    """Raise the soft limit, count the segments on disk and warn when the limit leaves less
    than RESERVED_FILES for connections once they are open. Returns the segment count."""
    before, soft = raise_soft_limit()
    if before != soft:
        log.info("raised the open files limit (soft) from %d to the hard limit %d",
                 before, soft)
    segments = segments_on_disk(log_dirs)
    if soft != resource.RLIM_INFINITY and segments + RESERVED_FILES > soft:
        log.warning(
            "The logs on disk have %d segments, each keeping an open file, but the open "
            "files limit is %d: the broker may fail to open them or to accept connections. "
            "Raise it (`ulimit -n %d` or more, LimitNOFILE= in a systemd unit) and restart.",
            segments, soft, segments + RESERVED_FILES + 1024)
    check_map_count(segments)
    return segments


def check_map_count(segments: int, path: Path = MAX_MAP_COUNT) -> None:
    """Warn when the segments' index mappings come near vm.max_map_count (Linux)."""
    try:
        limit = int(path.read_text())
    except (OSError, ValueError):
        return
    need = segments * MAPS_PER_SEGMENT + RESERVED_MAPS
    if need > limit:
        log.warning(
            "The logs on disk have %d segments, each mapping its 2 index files, but "
            "vm.max_map_count is %d: opening them may fail. Raise it (sysctl "
            "vm.max_map_count=%d, as Kafka's docs also advise) and restart.",
            segments, limit, need * 2)


def check_open_file_room(new_partitions: int) -> None:
    """Refuse (INVALID_PARTITIONS, before anything is made) partitions the process could
    not hold open: each keeps FILES_PER_PARTITION descriptors, and running out of them
    mid-request would stall the broker for as long as it takes to undo the work."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_now = 0
    room = (soft - RESERVED_FILES - open_now) // FILES_PER_PARTITION
    if new_partitions > room:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"{new_partitions} new partitions need about "
            f"{new_partitions * FILES_PER_PARTITION} open files; this broker has room for "
            f"{max(room, 0)} more partitions (open files limit {soft}: raise `ulimit -n` "
            f"or ask for fewer)")
