"""LogSegments: the segment list of one log and its deleted-but-not-yet-unlinked segments.

The list is a tuple replaced copy-on-write, with the base offsets beside it for floor
lookups, so a reader that took `segments` holds a consistent snapshot while the log rolls,
truncates or deletes. Deleted segments are renamed to `.deleted` at once and closed and
unlinked only after `file.delete.delay.ms`, so a FetchSlice fd stays valid while the broker
sends it. The owning Log serialises every change under its lock.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from kafkactl.log.segment import DELETED_SUFFIX, LogSegment


class LogSegments:
    __slots__ = ("_pending", "bases", "segments")

    def __init__(self, segments: Sequence[LogSegment], leftover_files: Sequence[Path] = ()
                 ) -> None:
        self.segments: tuple[LogSegment, ...] = ()
        self.bases: tuple[int, ...] = ()
        self.replace(segments)
        # (deadline ms, segment or stray file) to close and unlink once the deadline passed
        self._pending: list[tuple[int, LogSegment | Path]] = [(0, p) for p in leftover_files]

    def replace(self, segments: Sequence[LogSegment]) -> None:
        self.segments = tuple(segments)
        self.bases = tuple(s.base_offset for s in self.segments)

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @staticmethod
    def floor_index(bases: Sequence[int], offset: int) -> int:
        """Index of the segment that would hold `offset` (the first one when below all)."""
        return max(0, bisect.bisect_right(bases, offset) - 1)

    # ---- deletion ---------------------------------------------------------------------------
    def schedule_delete(self, segments: Sequence[LogSegment], deadline_ms: int) -> None:
        """Rename to `.deleted` now; close and unlink at `deadline_ms` (delete_due)."""
        for seg in segments:
            seg.add_suffix(DELETED_SUFFIX)
            self._pending.append((deadline_ms, seg))

    def drop(self, segments: Sequence[LogSegment], deadline_ms: int) -> None:
        """Take `segments` out of the list and schedule their deletion."""
        doomed = {id(s) for s in segments}
        self.replace([s for s in self.segments if id(s) not in doomed])
        self.schedule_delete(segments, deadline_ms)

    def schedule_delete_files(self, paths: Sequence[Path], deadline_ms: int) -> None:
        """Unlink `paths` (already renamed `.deleted`: the producer snapshots of deleted
        segments) at `deadline_ms`, with the segments."""
        self._pending.extend((deadline_ms, p) for p in paths)

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def take_due(self, now_ms: int, *, force: bool = False) -> list[LogSegment | Path]:
        """Remove and return the pending deletions whose deadline passed (all with
        `force`); `delete_files` does the slow part outside the log's lock."""
        due = [item for d, item in self._pending if force or d <= now_ms]
        self._pending = [(d, item) for d, item in self._pending if not (force or d <= now_ms)]
        return due

    @staticmethod
    def delete_files(items: Sequence[LogSegment | Path]) -> None:
        """Close and unlink (off the hot path: unlinking is slow on a discard-mounted disk)."""
        for item in items:
            if isinstance(item, LogSegment):
                item.delete_files()
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(item)

    def close_pending(self) -> None:
        """Close the files of segments awaiting deletion (the log is closing)."""
        for _d, item in self._pending:
            if isinstance(item, LogSegment):
                item.close()
