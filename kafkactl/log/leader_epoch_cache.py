"""The leader-epoch cache of one partition log (Kafka's LeaderEpochFileCache, KIP-101): the
first offset written in each leader epoch, kept in `leader-epoch-checkpoint` in the log dir
(Kafka's text layout: a version line `0`, a count line, then `epoch start_offset` lines).

A replica that becomes a follower asks the leader where its last epoch ended
(OffsetForLeaderEpoch) and truncates there, so a former leader never keeps records the new
leader does not have. Entries are added as batches are appended (the partition leader epoch
of each batch header) and cut when the log is truncated; when the log start moves up
(retention, DeleteRecords, a follower following its leader's) the epochs wholly below it go
and the last of them starts at the new log start, as Kafka's UnifiedLog does.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable
from pathlib import Path

from kafkactl.log.checkpoint import write_atomically

log = logging.getLogger(__name__)

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME
        self.epochs: list[int] = []
        self.offsets: list[int] = []  # start offset of each epoch, increasing with it
        self.dirty = False  # changed since the file was written

    # ---- persistence -------------------------------------------------------------------------
    def load(self) -> bool:
        """Read the checkpoint; False when it is absent or damaged (the caller rebuilds the
        cache from the log's batch headers)."""
        try:
            lines = self.path.read_text().split("\n")
        except FileNotFoundError:
            return False
        except (OSError, UnicodeDecodeError) as e:
            log.warning("%s is unreadable (%s): rebuilding it from the log", self.path, e)
            return False
        try:
            if lines[0].strip() != "0":
                raise ValueError(f"version {lines[0]!r}")
            count = int(lines[1])
            pairs = [tuple(int(x) for x in line.split()) for line in lines[2:2 + count]]
            if len(pairs) != count or any(len(p) != 2 for p in pairs):
                raise ValueError("wrong number of entries")
        except (IndexError, ValueError) as e:
            log.warning("%s is damaged (%s): rebuilding it from the log", self.path, e)
            return False
        self.epochs, self.offsets = [], []
        for epoch, offset in pairs:
            self.assign(epoch, offset, flush=False)
        return True

    def flush(self) -> None:
        self.dirty = False
        body = "".join(f"{e} {o}\n" for e, o in zip(self.epochs, self.offsets, strict=True))
        write_atomically(self.path, f"0\n{len(self.epochs)}\n{body}".encode())

    def rebuild(self, batches: Iterable[tuple[int, int]]) -> None:
        """From (partition leader epoch, base offset) of every batch, in log order."""
        self.epochs, self.offsets = [], []
        for epoch, offset in batches:
            if epoch >= 0:
                self.assign(epoch, offset, flush=False)
        if self.epochs or self.path.exists():
            self.flush()
        self.dirty = False

    # ---- updates -----------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset` (a newer epoch than the latest);
        True when the cache changed."""
        if epoch < 0 or (self.epochs and epoch <= self.epochs[-1]):
            return False
        # an epoch cannot start before the previous one: drop entries it overtakes
        while self.offsets and self.offsets[-1] >= start_offset:
            self.epochs.pop()
            self.offsets.pop()
        self.epochs.append(epoch)
        self.offsets.append(start_offset)
        if flush:
            self.flush()
        else:
            self.dirty = True
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut to end before `end_offset`: epochs starting there or later go."""
        cut = bisect.bisect_left(self.offsets, end_offset)
        if cut < len(self.offsets):
            del self.epochs[cut:], self.offsets[cut:]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset` (Kafka's truncateFromStart): the entries
        at or below it go but the last of them, which now starts there; the file is
        rewritten when that changed anything. Called by the log whenever its start moves
        up (Log.attach_leader_epoch_cache)."""
        keep = bisect.bisect_right(self.offsets, start_offset) - 1
        if keep > 0 or (keep == 0 and self.offsets[0] < start_offset):
            del self.epochs[:keep], self.offsets[:keep]
            self.offsets[0] = start_offset
            self.flush()

    def clear(self) -> None:
        self.epochs, self.offsets = [], []
        self.flush()

    # ---- queries -----------------------------------------------------------------------------
    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1] if self.epochs else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose leader wrote `offset` (the last entry starting at or below it);
        -1 when it predates every entry (ListOffsets' leader_epoch, as Kafka's
        epochForOffset)."""
        at = bisect.bisect_right(self.offsets, offset) - 1
        return self.epochs[at] if at >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer for `epoch`: the latest epoch ends at the log end;
        an older one at the start of the next epoch, reported with the largest known epoch
        not above it (or `epoch` itself when it predates them all); an undefined epoch, or
        one newer than every entry, is (-1, -1)."""
        if epoch == UNDEFINED_EPOCH or not self.epochs or epoch > self.epochs[-1]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self.epochs, epoch)
        floor = higher - 1
        return (self.epochs[floor] if floor >= 0 else epoch), self.offsets[higher]
