"""Moving a replica to another log dir of its broker (AlterReplicaLogDirs, KIP-113).

As Kafka does it, the replica is built anew as a *future* log in the destination,
`<dir>/<topic>-<partition>.<uuid>-future`, while the partition keeps serving from where it
is; once the future has caught up it is swapped in and the old directory goes. The moved
replica is byte for byte what it was (the same segments, the same batches):

1. File copies, on a worker thread: every sealed segment not yet copied (or changed since)
   is copied with its indexes, and fsynced. Sealed segments do not change in place: a
   truncation drops the segments after the truncation point, retention drops old ones and
   the cleaner puts new segment objects in their place; each segment is known by identity
   and size, and the segment that followed the ones brought in (the *anchor*) must still
   be in the log, else a truncation went into copied data and the copy starts over. An
   active segment bigger than FINAL_MAX_BYTES is rolled first (on the event loop, as every
   append), so that the last step stays short.
2. Once every sealed segment is copied, the future log is opened on them (a worker
   thread: the cost of opening many segments is not paid with appends paused). Segments
   sealed since are brought in on the worker as Kafka's future log catches up: each
   starts a segment of its own base offset in the future log and gets its batches as they
   are (no offset or epoch stamped) and its aborted transactions. When more than
   RECOPY_BYTES were sealed meanwhile, the future log is closed, their files copied, and
   it is opened again.
3. The last step, on the event loop (where every append and truncation runs, so none can
   come in between), once what is left is at most FINAL_MAX_BYTES (in fewer than
   FINAL_MAX_SEGMENTS segments): the rest (the active
   segment and any sealed since) is appended the same way and fsynced, the partition's
   other files (producer snapshots, leader-epoch-checkpoint, partition.metadata) are
   copied, the future log's dir is renamed to `<topic>-<partition>` in the destination
   (its open files follow), the future log is put in the partition and the log manager in
   place of the old one, and the old dir is renamed `<topic>-<partition>.<uuid>-delete`.
   The old log's files stay open until file.delete.delay.ms has passed (a fetch being
   sent from them completes), then the old dir is removed. Retention and the cleaner are
   kept out meanwhile by the log's lock, a producer-snapshot write by the partition's disk
   lock (neither is waited for: if one is busy, the step is tried again shortly).

A stop during a move leaves the `-future` dir: the next start deletes it (the replica it
was copying is whole where it was), and the move has to be asked for again. A move to
another destination while one runs replaces it, as in Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kafkactl.log.checkpoint import fsync_dir
from kafkactl.log.log import Log
from kafkactl.log.segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX

if TYPE_CHECKING:
    from kafkactl.broker.partition import Partition
    from kafkactl.broker.services import BrokerServices
    from kafkactl.log.config import LogConfig
    from kafkactl.log.segment import LogSegment

log = logging.getLogger("kafkactl.broker")

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
FINAL_MAX_BYTES = 1 << 20  # copied in the last step, with the partition's appends paused
FINAL_MAX_SEGMENTS = 4  # and at most this many segments (each is a roll and an fsync)
RETRY_S = 0.05  # the last step's next try when the log or the partition is busy
MAX_ROUNDS = 50  # then the last step brings in whatever is left (a longer pause)
TEMP_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX, ".tmp")
SEGMENT_SUFFIXES = frozenset({"log", "index", "timeindex", "txnindex"})
CHUNK_BYTES = 8 << 20  # batches read from a segment at a time
RECOPY_BYTES = 16 << 20  # more sealed since the future log was opened: copy files again
BATCH_HEADER = 12  # base offset (8) and batch length (4)

TopicPartition = tuple[str, int]


@dataclass
class Move:
    tp: TopicPartition
    destination: Path  # a log dir of this broker
    future: Path  # <destination>/<topic>-<partition>.<uuid>-future
    # segments brought in (copied, or appended to the future log), by identity: (segment,
    # its size then, the files copied)
    copied: dict[int, tuple[LogSegment, int, list[str]]] = field(default_factory=dict)
    anchor: LogSegment | None = None  # the log's segment after those brought in
    staged: Log | None = None  # the future log, opened once every sealed segment is copied
    copied_bytes: int = 0
    task: asyncio.Task[None] | None = None
    restarts: int = 0

    @property
    def staging(self) -> Path:
        """The future log's own dir, named as a log dir must be (in the -future dir, which
        a restart deletes whole)."""
        return self.future / f"{self.tp[0]}-{self.tp[1]}"


class LogDirMover:
    """The moves of one broker, each an asyncio task."""

    def __init__(self, services: BrokerServices) -> None:
        self.services = services
        self.moves: dict[TopicPartition, Move] = {}
        self.last_pause_s: float | None = None  # the last step's length (event loop time)

    # ---- requests ------------------------------------------------------------------------
    def start(self, tp: TopicPartition, destination: Path) -> None:
        """Move the replica of `tp` (hosted here, in another dir) to `destination`;
        nothing when it is there already or moving there."""
        current = self.moves.get(tp)
        if current is not None:
            if current.destination == destination:
                return
            self.cancel(tp)
        part = self._partition(tp)
        if part is None or Path(part.log.dir).parent == destination:
            return
        future = destination / f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"
        move = Move(tp, destination, future)
        self.moves[tp] = move
        move.task = asyncio.get_running_loop().create_task(self._run(move))
        log.info("moving %s-%d from %s to %s", tp[0], tp[1], Path(part.log.dir).parent,
                 destination)

    def cancel(self, tp: TopicPartition) -> None:
        move = self.moves.pop(tp, None)
        if move is not None and move.task is not None:
            move.task.cancel()

    def futures(self) -> list[tuple[TopicPartition, Path, int, int]]:
        """(partition, destination, bytes copied, offset lag) of each move in progress:
        DescribeLogDirs' is_future_key entries."""
        out = []
        for tp, move in list(self.moves.items()):
            part = self._partition(tp)
            if part is None:
                continue
            copied_end = max((s.next_offset for s, _size, _f in list(move.copied.values())),
                             default=part.log.log_start_offset)
            out.append((tp, move.destination, move.copied_bytes,
                        max(0, part.log.log_end_offset - copied_end)))
        return out

    # ---- the move ------------------------------------------------------------------------
    def _partition(self, tp: TopicPartition) -> Partition | None:
        return self.services.partitions.get_partition(*tp)

    async def _run(self, move: Move) -> None:
        done = False
        try:
            await asyncio.to_thread(move.staging.mkdir, parents=True)
            rounds = 0
            while True:
                part = self._partition(move.tp)
                if part is None:
                    log.info("move of %s-%d dropped: the partition is no longer hosted here",
                             *move.tp)
                    break
                current = part.log
                if current.active_segment.size > FINAL_MAX_BYTES:
                    current.roll()  # on the loop, like every append
                if self._truncated(move, current):
                    await asyncio.to_thread(self._start_over, move)
                    continue
                todo, left = self._todo(move, current)
                if move.staged is None:
                    if sum(s.size for s in todo) > FINAL_MAX_BYTES:  # a round of copies
                        move.anchor = current.segments[-1]  # the first not brought in
                        await asyncio.to_thread(self._copy_segments, move, todo)
                        continue
                    # (nearly) every sealed segment copied: open the future log on them
                    move.anchor = _after_copied(move, current.segments)
                    move.staged = await asyncio.to_thread(
                        self._open_staged, move, current.config,
                        min(current.log_start_offset, move.anchor.base_offset))
                    continue
                if (left <= FINAL_MAX_BYTES and len(todo) < FINAL_MAX_SEGMENTS and rounds) \
                        or rounds >= MAX_ROUNDS:
                    if self._finish(move, part):
                        done = True
                        break
                    await asyncio.sleep(RETRY_S)
                    continue
                move.anchor = current.segments[-1]
                if sum(s.size for s in todo) > RECOPY_BYTES:
                    # much sealed since the future log was opened: file copies are faster
                    # than appends; it is opened again once they are done
                    staged, move.staged = move.staged, None
                    await asyncio.to_thread(staged.close)
                    continue
                await asyncio.to_thread(self._append_segments, move, todo, True)
                rounds += 1
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.error("moving %s-%d to %s failed (%s: %s); it stays where it is", *move.tp,
                      move.destination, type(e).__name__, e)
        finally:
            if self.moves.get(move.tp) is move:
                del self.moves[move.tp]
            if not done:  # (a cancelled move's too: this needs no loop)
                self._start_over(move)
                shutil.rmtree(move.future, ignore_errors=True)

    def _truncated(self, move: Move, current: Log) -> bool:
        """A truncation reached what was brought in: the anchor (the segment after it) is
        gone from the log."""
        return move.anchor is not None and not any(s is move.anchor for s in current.segments)

    def _start_over(self, move: Move) -> None:
        """(worker thread) Drop what was brought in."""
        if move.anchor is not None:
            move.restarts += 1
            log.info("move of %s-%d: the log was truncated into copied data, or the move "
                     "ended; dropping the copy", *move.tp)
        if move.staged is not None:
            with contextlib.suppress(Exception):  # (a cancelled round may still be writing)
                move.staged.close()
            move.staged = None
        shutil.rmtree(move.staging, ignore_errors=True)
        with contextlib.suppress(FileExistsError):
            move.staging.mkdir(parents=True)
        move.copied.clear()
        move.anchor = None
        move.copied_bytes = 0

    def _todo(self, move: Move, current: Log) -> tuple[list[LogSegment], int]:
        """(sealed segments to bring in, bytes the last step would bring in now). Before
        the future log is opened: those not copied yet, or changed since (the cleaner's
        replacements are copied over the files they replace); after: the anchor and the
        sealed segments after it (a replacement of a segment already in is left: what is in
        holds the same records and more)."""
        segments = current.segments
        if move.staged is None or move.anchor is None:
            todo = [s for s in segments[:-1] if not _copied(move, s)]
        else:
            base = move.anchor.base_offset
            todo = [s for s in segments[:-1] if s.base_offset >= base]
        return todo, sum(s.size for s in todo) + segments[-1].size

    def _copy_segments(self, move: Move, todo: list[LogSegment]) -> None:
        """(worker thread) Copy and fsync these segments' files."""
        for seg in todo:
            size = seg.size
            names = _copy_files(_segment_files(seg, size), move.staging)
            if names is None:
                continue  # deleted meanwhile (retention): not in the log any more
            move.copied[id(seg)] = (seg, size, names)
            move.copied_bytes += size

    def _open_staged(self, move: Move, config: LogConfig, log_start_offset: int) -> Log:
        """(worker thread) The future log, opened on the copied segments (all fsynced)."""
        return Log(move.staging, config, recovery_point=1 << 62, needs_recovery=False,
                   log_start_offset=log_start_offset)

    def _append_segments(self, move: Move, todo: list[LogSegment], sealed: bool) -> None:
        """Bring these segments (the anchor and those after it) into the future log: each
        starts a segment there at its own base offset and gets its batches as they are
        (no offset or epoch stamped) and its aborted transactions, so the .log files come
        out byte for byte. On a worker thread for sealed segments; in the last step, on the
        loop, for the rest."""
        moved = move.staged
        assert moved is not None
        for seg in todo:
            size = seg.size
            moved.roll(seg.base_offset)
            for chunk in _batch_chunks(seg, size):
                moved.append(chunk, assign_offsets=False, leader_epoch=None)
            for entry in list(seg.txn_index.entries):
                moved.append_aborted_txn(entry)
            if sealed:
                move.copied[id(seg)] = (seg, size, [])
            move.copied_bytes += size
        if sealed:
            moved.flush()

    def _finish(self, move: Move, part: Partition) -> bool:
        """The last step, on the event loop; False when the log or the partition is busy
        (tried again), or when a truncation reached copied data (copied again)."""
        current = part.log
        disk_lock = getattr(part, "_disk_lock", None)
        if getattr(part, "_rebuilding", None) is not None or self._truncated(move, current):
            return False
        if disk_lock is not None and not disk_lock.acquire(blocking=False):
            return False
        try:
            if not current._lock.acquire(blocking=False):
                return False
            try:
                started = time.perf_counter()
                self._swap(move, part, current)
                self.last_pause_s = time.perf_counter() - started
                log.info("moved %s-%d to %s: %d bytes brought in by the worker, the last "
                         "step (appends paused) took %.1f ms", *move.tp, move.destination,
                         move.copied_bytes, self.last_pause_s * 1000)
                return True
            finally:
                current._lock.release()
        finally:
            if disk_lock is not None:
                disk_lock.release()

    def _swap(self, move: Move, part: Partition, current: Log) -> None:
        moved = move.staged
        assert moved is not None and move.anchor is not None
        base = move.anchor.base_offset
        self._append_segments(move, [s for s in current.segments if s.base_offset >= base],
                              False)
        if current.log_start_offset > moved.log_start_offset:
            moved.delete_records_before(current.log_start_offset)  # retention meanwhile
        if moved.log_end_offset != current.log_end_offset:
            raise OSError(f"the moved log ends at {moved.log_end_offset}, the log at "
                          f"{current.log_end_offset}")
        moved.flush()
        segment_names = {p.name for s in current.segments for p in s.paths}
        src = Path(current.dir)
        with os.scandir(src) as it:
            others = [Path(e.path) for e in it if e.is_file() and e.name not in segment_names
                      and not e.name.endswith(TEMP_SUFFIXES) and not _is_segment_file(e.name)]
        _copy_files([(p, None) for p in others], move.staging)
        fsync_dir(move.staging)
        target = move.destination / src.name
        os.rename(move.staging, target)
        fsync_dir(move.destination)
        _relocate(moved, target)
        move.staged = None  # the partition's now
        with contextlib.suppress(OSError):
            os.rmdir(move.future)
        part.log = moved
        part.producer_state.directory = target
        part.epochs.path = target / part.epochs.path.name
        self.services.log_manager.replace_log(move.tp, moved, move.destination)
        doomed = src.with_name(f"{src.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        os.rename(src, doomed)
        fsync_dir(src.parent)
        delay_s = current.config.file_delete_delay_ms / 1000
        asyncio.get_running_loop().call_later(delay_s, _close_later, current, doomed)


def _after_copied(move: Move, segments: tuple[LogSegment, ...]) -> LogSegment:
    """The segment after the last one copied (the active one at most)."""
    last = -1
    for i, seg in enumerate(segments[:-1]):
        if _copied(move, seg):
            last = i
    return segments[last + 1]


def _is_segment_file(name: str) -> bool:
    """A segment's file (`<20 digits>.log|.index|.timeindex|.txnindex`): a segment the
    log no longer lists (a retention or cleaner leftover) is not a partition file."""
    stem, dot, suffix = name.partition(".")
    return bool(dot) and len(stem) == 20 and stem.isdigit() and suffix in SEGMENT_SUFFIXES


def _batch_chunks(seg: LogSegment, size: int) -> Iterator[bytearray]:
    """The segment's first `size` bytes in pieces of whole batches (about CHUNK_BYTES)."""
    position = 0
    while position < size:
        data = bytearray(seg.read_bytes(position, min(CHUNK_BYTES, size - position)))
        end = 0
        while end + BATCH_HEADER <= len(data):
            length = BATCH_HEADER + int.from_bytes(data[end + 8:end + 12], "big")
            if end + length > len(data):
                break
            end += length
        if end == 0:  # one batch bigger than a chunk
            length = BATCH_HEADER + int.from_bytes(data[8:12], "big")
            data = bytearray(seg.read_bytes(position, length))
            end = len(data)
            if end < length:
                raise OSError(f"{seg} ends inside a batch at {position}")
        yield data[:end]
        position += end


def _relocate(moved: Log, target: Path) -> None:
    """The future log's directory was renamed to `target`: its files' paths follow (the
    open files are the same)."""
    moved.dir = target
    segments: list[LogSegment] = list(moved.segments)
    for _deadline, item in moved._segs._pending:
        if not isinstance(item, Path):
            segments.append(item)
    for seg in segments:
        seg.dir = target
        seg.log_path = target / seg.log_path.name
        for index in (seg.offset_index, seg.time_index, seg.txn_index):
            index.path = target / index.path.name
    moved._segs._pending = [(d, target / item.name if isinstance(item, Path) else item)
                            for d, item in moved._segs._pending]


def _copied(move: Move, seg: LogSegment) -> bool:
    found = move.copied.get(id(seg))
    return found is not None and found[0] is seg and found[1] == seg.size


def _segment_files(seg: LogSegment, size: int) -> list[tuple[Path, int | None]]:
    """A segment's files and how much of each to copy: the .log up to `size`, the indexes'
    entries (not the zeros an active segment's are preallocated with: the moved log sizes
    them again), the whole transaction index."""
    return [(seg.log_path, size),
            (seg.offset_index.path, seg.offset_index.size_in_bytes),
            (seg.time_index.path, seg.time_index.size_in_bytes),
            (seg.txn_index.path, None)]


def _copy_files(files: list[tuple[Path, int | None]], dest_dir: Path) -> list[str] | None:
    """Copy each existing file (its first `limit` bytes, or all of it) into `dest_dir`,
    fsynced; the names copied, or None when the first one (a segment's .log) is gone. A
    missing later file is skipped (an empty transaction index is never made)."""
    names = []
    for i, (path, limit) in enumerate(files):
        try:
            src = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            if i == 0:
                return None
            continue
        try:
            dst = os.open(dest_dir / path.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _copy_fd(src, dst, os.fstat(src).st_size if limit is None else limit)
                os.fsync(dst)
            finally:
                os.close(dst)
        finally:
            os.close(src)
        names.append(path.name)
    return names


def _copy_fd(src: int, dst: int, length: int) -> None:
    """`length` bytes (fewer at the end of the file) from src to dst, in the kernel."""
    offset = 0
    while offset < length:
        n = os.copy_file_range(src, dst, min(length - offset, 1 << 24), offset, offset)
        if n == 0:
            return
        offset += n


def _close_later(old: Log, doomed: Path) -> None:
    """After file.delete.delay.ms: the old log's files closed, its dir removed."""
    def close() -> None:
        for seg in old.segments:  # plain closes: the files are in the doomed dir now
            with contextlib.suppress(OSError):
                seg.close()
        with contextlib.suppress(OSError):
            old._segs.close_pending()  # segments it had dropped, waiting for their delay
        shutil.rmtree(doomed, ignore_errors=True)

    with contextlib.suppress(RuntimeError):  # the loop is closing: the next start does it
        asyncio.get_running_loop().run_in_executor(None, close)


_MOVERS: dict[int, LogDirMover] = {}


def mover_for(services: BrokerServices) -> LogDirMover:
    """The broker's mover (made at the first AlterReplicaLogDirs)."""
    found = _MOVERS.get(id(services))
    if found is None or found.services is not services:
        found = _MOVERS[id(services)] = LogDirMover(services)
    return found


def moves_of(services: BrokerServices) -> LogDirMover | None:
    found = _MOVERS.get(id(services))
    return found if found is not None and found.services is services else None
