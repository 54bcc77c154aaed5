"""ProducerIdManager: hands out producer ids for InitProducerId on a standalone broker.

Producer ids come in blocks of 1000; the next block's start is persisted in the data dir
(`producer-id-block`, fsynced) before any id from the block is handed out, so ids are never
reused across restarts; a missing or damaged file is rebuilt from the producer ids in the
logs (never below any id seen). In a ZooKeeper cluster the blocks come from ZooKeeper
instead (kafkactl.cluster.producer_id_block), so no two brokers hand out the same id.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000


class ProducerIdManager:
    """Hands out producer ids from blocks persisted in `path`.

    `highest_seen(full)` returns the highest producer id the logs hold (-1: none); with
    full=False it may answer from memory only (the producer states loaded at start-up),
    with full=True it must look at every batch header too. The first block never starts
    at or below that id: a missing or damaged block file (asked with full=True, and logged)
    or one restored from an old backup cannot make ids start again at 0, where a new
    producer's first batches would be taken for an old producer's and dropped."""

    def __init__(self, path: Path,
                 highest_seen: Callable[[bool], int] = lambda _full: -1,
                 allocate_block: Callable[[int], tuple[int, int]] | None = None) -> None:
        """`allocate_block(floor)`, when given (a cluster), returns a block [start, end]
        no other broker holds, starting at `floor` or above."""
        self.path = path
        self.allocate_block = allocate_block
        start, problem = self._read(path)
        seen = highest_seen(start is None)
        if start is None:
            if problem is not None or seen >= 0:
                log.warning("%s %s: the next producer ids start above the highest id in the "
                            "logs (%d).", path, problem or "is missing", seen)
            start = seen + 1
            try:
                self._persist(start)  # so the logs are scanned at most once
            except OSError as e:
                log.warning("cannot write %s: %s", path, e.strerror or e)
        elif seen >= start:
            log.warning("%s says the next producer id is %d but the logs hold id %d: "
                        "starting above it.", path, start, seen)
            start = seen + 1
        self._next = start
        self._block_end = start

    @staticmethod
    def _read(path: Path) -> tuple[int | None, str | None]:
        """(next block start, None) or (None, why it cannot be used; None when absent)."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None, None
        except OSError as e:
            return None, f"cannot be read ({e.strerror or e})"
        try:
            value = int(raw.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            return None, "is damaged (not a number)"
        if value < 0:
            return None, f"is damaged (negative id {value})"
        return value, None

    def _persist(self, block_end: int) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(f"{block_end}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def next_id(self) -> int:
        if self._next >= self._block_end:
            if self.allocate_block is not None:
                start, end = self.allocate_block(self._next)
                self._next, self._block_end = start, end + 1
            else:
                self._block_end = self._next + BLOCK_SIZE
            self._persist(self._block_end)
        pid = self._next
        self._next += 1
        return pid
