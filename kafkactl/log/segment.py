"""LogSegment: one `<20-digit base offset>.log` with its `.index`, `.timeindex` and, once a
transaction was aborted in it, `.txnindex` (txn_index.py).

Appends are not thread-safe (one writer, the Log's); `flush()` may run on another thread
and is serialised against close/rename/index resizing by `self._io_lock`.

I/O errors (a full disk: ENOSPC; EFBIG, EIO) leave the segment as it was: a failed or
short write is cut off the file again (ftruncate to `size`) before the OSError propagates,
and nothing (size, indexes, next offset, max timestamp) counts the batch. The indexes are
mmap'ed over preallocated, sparse files; writing a page the disk cannot back would kill
the process with SIGBUS, so the pages an index entry lands on are allocated
(posix_fallocate) ahead of use, INDEX_RESERVE_ENTRIES entries at a time: a full disk
then shows up as an OSError before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from kafkactl.log.batch_header import HEADER_READ_SIZE, BatchHeader, parse_header, read_header
from kafkactl.log.config import LogConfig
from kafkactl.log.errors import CorruptIndexError
from kafkactl.log.log_dir_failure import RepeatedErrorLog
from kafkactl.log.offset_index import INT32_MAX, OffsetIndex
from kafkactl.log.time_index import NO_TIMESTAMP, TimeIndex
from kafkactl.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from kafkactl.record.stamp import StampedBatch

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

# index entries whose pages are allocated at once (8 KiB of .index, 12 KiB of .timeindex)
INDEX_RESERVE_ENTRIES = 1024

log = logging.getLogger(__name__)
# failed cut-backs (a read-only file system), per log dir: a client retries its produce
# many times a second, and every partition of the dir fails alike
cut_back_errors = RepeatedErrorLog(log)


def allocate(path: Path, start: int, end: int) -> None:
    """Back bytes [start, end) of the file with real blocks (extending it if shorter), so
    writing them through an mmap cannot fault on a full disk. Raises OSError (ENOSPC...);
    a file system without fallocate support is left as it is."""
    if end <= start:
        return
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, start, end - start)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    finally:
        os.close(fd)


def filename_prefix(offset: int) -> str:
    """Kafka's 20-digit zero-padded segment name."""
    return f"{offset:020d}"


def offset_from_filename(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if stem.isdigit() and len(stem) == 20 else None


def index_entries_for(
    headers: list[BatchHeader], base_offset: int, interval: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int, int]:
    """(offset entries, time entries, max timestamp, its offset) as Kafka builds them: an
    entry when more than `interval` bytes passed since the last one (tested before the
    batch is counted), carrying the batch's last offset and start position; a time entry
    with it when the max timestamp so far grew."""
    offsets: list[tuple[int, int]] = []
    times: list[tuple[int, int]] = []
    since = 0
    max_ts, max_off = NO_TIMESTAMP, base_offset
    last_time = NO_TIMESTAMP
    for h in headers:
        ts = h[5]
        if ts > max_ts:
            max_ts, max_off = ts, h[4]
        if since > interval:
            offsets.append((h[4], h[0]))
            if max_ts > last_time:
                times.append((max_ts, max_off))
                last_time = max_ts
            since = 0
        since += h[1]
    return offsets, times, max_ts, max_off


TRANSLATE_READ_SIZE = 16384  # bytes of batch headers read at once when locating an offset
RECENT_STARTS = 64  # batch starts remembered per segment (translate_offset's shortcut)


def trim_sparse_index_tail(path: str, entry_size: int) -> None:
    """Cut an index file back to its entries if its preallocated tail is a hole (the
    active segment of a log that was not closed cleanly), finding them with pread. On
    tmpfs even reading a hole through a shared mmap allocates a page: with the disk full,
    opening such an index would kill the process with SIGBUS. One stat when not sparse."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if st.st_blocks * 512 >= st.st_size:
        return
    fd = os.open(path, os.O_RDWR)
    try:
        zero = bytes(entry_size)

        def is_zero(n: int) -> bool:
            return os.pread(fd, entry_size, n * entry_size) == zero

        slots = st.st_size // entry_size
        if slots == 0 or not is_zero(slots - 1):
            return
        lo, hi = 0, slots - 1  # the first zero slot is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if is_zero(mid):
                hi = mid
            else:
                lo = mid + 1
        os.ftruncate(fd, lo * entry_size)
    finally:
        os.close(fd)


_jitter = random.Random()


def roll_jitter(config: LogConfig) -> int:
    """Kafka's LogConfig.randomSegmentJitter: 0 without segment.jitter.ms, else a random
    number of ms below min(segment.jitter.ms, segment.ms)."""
    if config.segment_jitter_ms <= 0:
        return 0
    return _jitter.randrange(min(config.segment_jitter_ms, config.segment_ms))


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        created_ms: int,
        create: bool = False,
    ) -> None:
        self.dir = directory if isinstance(directory, Path) else Path(directory)
        self.base_offset = base_offset
        self.config = config
        prefix = filename_prefix(base_offset)
        self.log_path = self.dir / (prefix + LOG_SUFFIX)
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self.fd = os.open(self.log_path, flags, 0o644)
        self.size = os.fstat(self.fd).st_size
        try:
            if not create:  # (str paths: this runs for every segment at start-up)
                stem = os.path.join(str(self.dir), prefix)
                trim_sparse_index_tail(stem + INDEX_SUFFIX, OffsetIndex.ENTRY_SIZE)
                trim_sparse_index_tail(stem + TIME_INDEX_SUFFIX, TimeIndex.ENTRY_SIZE)
            self.offset_index = OffsetIndex(
                self.dir / (prefix + INDEX_SUFFIX), base_offset, config.segment_index_bytes
            )
            self.time_index = TimeIndex(
                self.dir / (prefix + TIME_INDEX_SUFFIX), base_offset, config.segment_index_bytes
            )
            self.txn_index = TransactionIndex(self.dir / (prefix + TXN_INDEX_SUFFIX),
                                              base_offset)
        except BaseException:
            os.close(self.fd)
            raise
        self.created_ms = created_ms
        # Kafka's rollJitterMs: drawn once per segment, below min(segment.jitter.ms,
        # segment.ms), so the logs of many partitions do not all roll at one moment
        self.roll_jitter_ms = roll_jitter(config)
        self.closed = False
        self._io_lock = threading.Lock()
        # as a rebuild would leave it: bytes from the last indexed batch to the end
        self._bytes_since_last_index_entry = self.size - self.offset_index.last_entry.position
        self._max_ts: int | None = None
        self._offset_of_max_ts = base_offset
        self._next_offset: int | None = None if self.size else base_offset
        self._rolling_ts: int | None = None
        self._flushed_size = self.size
        self._index_interval = config.index_interval_bytes
        self._index_room = 0  # index entries that fit in allocated index pages
        self._tail_dirty = False  # a failed write could not be cut off the file
        # offset -> position of the first batch whose last offset is >= it, for batches
        # appended lately: followers and tailing consumers fetch exactly where an append
        # began, and find it without scanning headers from an index entry
        self._recent_starts: dict[int, int] = {}
        # the offset index passed check_entries (the loader checks the active segment's;
        # an older segment's is checked at its first lookup, so a start stays cheap)
        self.index_checked = create

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"

    # ----------------------------------------------------------------- state
    @property
    def max_timestamp_so_far(self) -> int:
        if self._max_ts is None:
            ts, off = self.time_index.last_entry
            self._max_ts, self._offset_of_max_ts = ts, off
        return self._max_ts

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        _ = self.max_timestamp_so_far
        return self._offset_of_max_ts

    def set_max_timestamp(self, ts: int, offset: int) -> None:
        self._max_ts, self._offset_of_max_ts = ts, offset

    def largest_timestamp(self) -> int:
        """Max timestamp in the segment, or the .log mtime when it has none (retention)."""
        ts = self.max_timestamp_so_far
        if ts > NO_TIMESTAMP:
            return ts
        return self.last_modified_ms()

    def last_modified_ms(self) -> int:
        """The .log file's last-modified time in ms (0 when it is gone, as Java's
        File.lastModified): retention of segments without timestamps, the cleaner's
        legacy tombstones, ListOffsets v0."""
        try:
            return os.stat(self.log_path).st_mtime_ns // 1_000_000
        except OSError:
            return 0

    @property
    def next_offset(self) -> int:
        """One past the last offset in the segment (base offset when empty)."""
        if self._next_offset is None:
            self._next_offset = self._read_next_offset()
        return self._next_offset

    def _read_next_offset(self) -> int:
        nxt = self.base_offset
        pos = self.offset_index.last_entry.position
        while pos < self.size:
            h = read_header(self.fd, pos)
            if h is None or h.size <= 0:
                break
            nxt = max(nxt, h.last_offset + 1)
            pos += h.size
        return nxt

    def rolling_based_timestamp(self) -> int:
        """Max timestamp of the first batch (segment.ms counts from it), or -1."""
        if self._rolling_ts is None and self.size:
            h = read_header(self.fd, 0)
            self._rolling_ts = h.max_timestamp if h is not None else NO_TIMESTAMP
        return self._rolling_ts if self._rolling_ts is not None else NO_TIMESTAMP

    def should_roll(self, incoming_bytes: int, max_ts: int, last_offset: int,
                    now_ms: Callable[[], int], config: LogConfig | None = None) -> bool:
        """Kafka's roll conditions (checked before every append, so kept lean): the file
        would pass segment.bytes, segment.ms (less this segment's random jitter) has
        passed since the first
        batch's max timestamp (or creation), an index is full, or the offset would not fit
        relative to the base offset. `config` is the log's config now (Kafka's RollParams):
        a topic's segment.bytes / segment.ms changed at run time apply to the active
        segment at its next append; the segment's own config is that of its creation."""
        size = self.size
        if size == 0:
            return False
        cfg = self.config if config is None else config
        if size > cfg.segment_bytes - incoming_bytes:
            return True
        first_ts = self._rolling_ts
        if first_ts is None:
            first_ts = self.rolling_based_timestamp()
        waited = (max_ts - first_ts if first_ts >= 0 and max_ts >= 0
                  else now_ms() - self.created_ms)
        if waited > cfg.segment_ms - self.roll_jitter_ms:
            return True
        # Kafka's maxSegmentMs: a compacted log rolls by max.compaction.lag.ms too, so its
        # records can be cleaned that soon (the active segment never is)
        if cfg.compact and waited > cfg.max_compaction_lag_ms - self.roll_jitter_ms:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > INT32_MAX

    # ----------------------------------------------------------------- append
    def append(self, data: memoryview | bytearray, batches: Sequence[StampedBatch]) -> None:
        """Write `data` (whole batches, stamped by record.stamp_batches, which describes
        each in `batches`) at the end and index them, Kafka's way: an entry
        when more than index.interval.bytes were written since the last one, tested before
        the batch is counted, pointing at the batch's last offset and start position.
        All or nothing: an OSError leaves the segment as it was."""
        if self._index_room < len(batches):
            self._reserve_index_room(len(batches))
        self.write(data)
        for b in batches:
            self.index_batch(b.last_offset, b.max_timestamp, b.size)

    def write(self, data: memoryview | bytearray) -> None:
        """Write whole batches at the end of the file (index them with index_batch).
        On an OSError the file is cut back to `size` and the error raised."""
        pos = self.size
        total = len(data)
        try:
            written = os.pwrite(self.fd, data, pos)
            while written < total:
                written += os.pwrite(self.fd, memoryview(data)[written:], pos + written)
        except BaseException:
            self._cut_back()
            raise
        if cut_back_errors.failing:
            cut_back_errors.recovered(self.dir.parent, "segments in %s take writes again",
                                      self.dir.parent)

    def _cut_back(self) -> None:
        """Drop bytes written past `size` by a failed append."""
        try:
            os.ftruncate(self.fd, self.size)
        except OSError as e:
            # Not counted, so never served; the next write overwrites them. Rolling or
            # closing this segment retries the cut (and fails if it still cannot).
            self._tail_dirty = True
            cut_back_errors.failed(self.dir.parent, "cannot cut a failed write off %s at %d "
                                   "bytes: %s", self.log_path, self.size, e.strerror or e)
        else:
            self._tail_dirty = False
            if cut_back_errors.failing:
                cut_back_errors.recovered(self.dir.parent, "failed writes are cut off "
                                          "segments in %s again", self.dir.parent)

    def _reserve_index_room(self, entries: int) -> None:
        """Allocate the index pages of the next `entries` index entries or more (a time
        index keeps one more for the entry forced at roll). Raises OSError, changing
        nothing else."""
        oi, ti = self.offset_index, self.time_index
        n, t = oi.entry_count, ti.entry_count
        want = max(entries, INDEX_RESERVE_ENTRIES)
        o_end = min(n + want, oi.max_entries)
        t_end = min(t + want + 1, ti.max_entries)
        self._index_room = 0
        allocate(oi.path, n * oi.ENTRY_SIZE, o_end * oi.ENTRY_SIZE)
        allocate(ti.path, t * ti.ENTRY_SIZE, t_end * ti.ENTRY_SIZE)
        self._index_room = max(0, min(o_end - n, t_end - 1 - t))

    def index_batch(self, last_offset: int, max_timestamp: int, size: int) -> None:
        """Account for one batch just written at `self.size` (see append). If its index
        pages cannot be allocated the batch is cut off the file and the OSError raised."""
        pos = self.size
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self.max_timestamp_so_far
        if self._bytes_since_last_index_entry > self._index_interval:
            if self._index_room <= 0:
                try:
                    self._reserve_index_room(1)
                except BaseException:
                    self._cut_back()
                    raise
            self._index_room -= 1
            if max_timestamp > max_ts:
                self._max_ts = max_ts = max_timestamp
                self._offset_of_max_ts = last_offset
            self.offset_index.append(last_offset, pos)
            time_index = self.time_index
            if max_ts > time_index.last_timestamp:  # else maybe_append would skip it
                time_index.maybe_append(max_ts, self._offset_of_max_ts)
            self._bytes_since_last_index_entry = size
        else:
            if max_timestamp > max_ts:
                self._max_ts = max_timestamp
                self._offset_of_max_ts = last_offset
            self._bytes_since_last_index_entry += size
        self.size = pos + size
        start = self._next_offset
        if start is not None:
            starts = self._recent_starts
            starts[start] = pos
            if len(starts) > RECENT_STARTS:
                del starts[next(iter(starts))]
        self._next_offset = last_offset + 1
        if pos == 0:
            self._rolling_ts = max_timestamp

    def rebuild_indexes(self, headers: list[BatchHeader]) -> None:
        """Replace both indexes with the entries Kafka would build for `headers`."""
        offsets, times, max_ts, max_off = index_entries_for(
            headers, self.base_offset, self.config.index_interval_bytes)
        self._index_room = 0
        # back the entries (and the time entry a roll forces) with real blocks first:
        # on a full disk this is an OSError, not a SIGBUS while writing the mmap
        allocate(self.offset_index.path, 0, (len(offsets) + 1) * self.offset_index.ENTRY_SIZE)
        allocate(self.time_index.path, 0, (len(times) + 1) * self.time_index.ENTRY_SIZE)
        with self._io_lock:
            self.offset_index.replace_entries(offsets)
            self.time_index.replace_entries(times)
        self.index_checked = True
        last_pos = offsets[-1][1] if offsets else 0
        self._bytes_since_last_index_entry = (
            headers[-1].position + headers[-1].size - last_pos if headers else 0)
        self._max_ts, self._offset_of_max_ts = max_ts, max_off
        self._next_offset = headers[-1].last_offset + 1 if headers else self.base_offset
        self._recent_starts.clear()
        self._rolling_ts = headers[0].max_timestamp if headers else None

    # ----------------------------------------------------------------- reads
    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """The first batch at or after `start_position` whose last offset >= `offset`."""
        if not self.index_checked:
            self.check_offset_index()
        recent = self._recent_starts.get(offset)
        if recent is not None and recent >= start_position:
            h = read_header(self.fd, recent)
            if h is not None and h.size > 0 and h.last_offset >= offset:
                return h
        entry = self.offset_index.lookup(offset)
        pos = max(entry.position, start_position)
        size = self.size
        fd = self.fd
        # The target is usually within index.interval.bytes of the entry: read the headers
        # there with one pread per TRANSLATE_READ_SIZE bytes, not one per batch.
        chunk = b""
        chunk_pos = pos
        check = entry.position > 0 and pos == entry.position  # the entry's batch is first
        while pos < size:
            rel = pos - chunk_pos
            if rel + HEADER_READ_SIZE > len(chunk):
                chunk = os.pread(fd, min(TRANSLATE_READ_SIZE, size - pos), pos)
                chunk_pos, rel = pos, 0
            h = parse_header(chunk, rel, pos)
            if check:
                check = False
                if h is None or not h.base_offset <= entry.offset <= h.last_offset:
                    self._rebuild_offset_index(entry.offset, entry.position)
                    entry = self.offset_index.lookup(offset)
                    pos = chunk_pos = max(entry.position, start_position)
                    chunk = b""
                    continue
            if h is None or h.size <= 0:
                return None
            if h.last_offset >= offset:
                return h
            pos += h.size
        return None

    def check_offset_index(self, next_base_offset: int | None = None) -> None:
        """Check every offset-index entry (inside the segment, increasing); rebuild both
        indexes from the batch headers if one fails (logged at WARNING)."""
        try:
            self.offset_index.check_entries(self.size, next_base_offset)
        except CorruptIndexError as e:
            log.warning("%s Rebuilding the indexes from %s.", e, self.log_path.name)
            self._rebuild_indexes_from_headers()
        self.index_checked = True

    def _rebuild_offset_index(self, offset: int, position: int) -> None:
        """An index entry that does not point at the batch holding its offset: the index
        is corrupt (Kafka rebuilds such an index); rebuild both from the batch headers."""
        log.warning("Corrupt index %s: its entry for offset %d points at position %d, which "
                    "is not the start of the batch holding that offset; rebuilding the "
                    "indexes from %s.", self.offset_index.path.name, offset, position,
                    self.log_path.name)
        self._rebuild_indexes_from_headers()

    def _rebuild_indexes_from_headers(self) -> None:
        trimmed = self.offset_index.file_length_is_entries()
        self.rebuild_indexes(self.headers_from(0))
        if trimmed:  # an inactive segment: keep its indexes trimmed
            with self._io_lock:
                self.offset_index.trim_to_valid_size()
                self.time_index.trim_to_valid_size()

    def headers_from(self, position: int, end: int | None = None) -> list[BatchHeader]:
        out: list[BatchHeader] = []
        end = self.size if end is None else end
        while position < end:
            h = read_header(self.fd, position)
            if h is None or h.size <= 0:
                break
            out.append(h)
            position += h.size
        return out

    def read_bytes(self, position: int, length: int) -> bytes:
        parts: list[bytes] = []
        while length > 0:
            chunk = os.pread(self.fd, length, position)
            if not chunk:
                break
            parts.append(chunk)
            position += len(chunk)
            length -= len(chunk)
        return b"".join(parts)

    # ----------------------------------------------------------------- truncation
    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding `offset` and everything after; returns bytes removed."""
        h = self.translate_offset(offset)
        if h is None:
            return 0
        removed = self.size - h.position
        self._index_room = 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(h.base_offset)
        os.ftruncate(self.fd, h.position)
        self._recent_starts.clear()
        self.size = h.position
        self._flushed_size = min(self._flushed_size, self.size)
        self._bytes_since_last_index_entry = self.size - self.offset_index.last_entry.position
        self._next_offset = None
        if self.size == 0:
            self._rolling_ts = None
        self._recompute_max_timestamp()
        return removed

    def _recompute_max_timestamp(self) -> None:
        """Max timestamp = the last time-index entry, or newer batches after it."""
        max_ts, max_off = self.time_index.last_entry
        start = self.offset_index.lookup(max_off).position if max_ts >= 0 else 0
        for h in self.headers_from(start):
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, h.last_offset
        self._max_ts, self._offset_of_max_ts = max_ts, max_off

    def truncate_bytes(self, size: int) -> None:
        """Cut the .log file to `size` bytes (recovery)."""
        os.ftruncate(self.fd, size)
        if size == 0:
            self.txn_index.replace_entries([])
        self._recent_starts.clear()
        self.size = size
        self._flushed_size = min(self._flushed_size, size)

    # ----------------------------------------------------------------- lifecycle
    def resize_indexes(self, size: int) -> None:
        self._index_room = 0  # grown files are sparse again
        with self._io_lock:
            self.offset_index.resize(size)
            self.time_index.resize(size)

    def on_become_inactive(self) -> None:
        """The segment rolled: force the final time-index entry, trim both indexes.
        Raises OSError (a full disk) before changing anything if that entry's page cannot
        be allocated or an earlier failed write cannot be cut off."""
        if self._tail_dirty:
            os.ftruncate(self.fd, self.size)
            self._tail_dirty = False
            if cut_back_errors.failing:
                cut_back_errors.recovered(self.dir.parent, "failed writes are cut off "
                                          "segments in %s again", self.dir.parent)
        if self.size:
            ts = self.max_timestamp_so_far
            time_index = self.time_index
            if ts > time_index.last_timestamp:
                n = time_index.entry_count
                allocate(time_index.path, n * time_index.ENTRY_SIZE,
                         (n + 1) * time_index.ENTRY_SIZE)
                time_index.maybe_append(ts, self._offset_of_max_ts, skip_full_check=True)
        with self._io_lock:
            self.offset_index.trim_to_valid_size()
            self.time_index.trim_to_valid_size()

    def flush(self) -> None:
        with self._io_lock:
            if self.closed:
                return
            size = self.size
            if size != self._flushed_size:
                os.fsync(self.fd)
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
            self._flushed_size = size

    def close(self) -> None:
        with self._io_lock:
            if self.closed:
                return
            self.closed = True
            self.offset_index.close()
            self.time_index.close()
            os.close(self.fd)

    def close_clean(self) -> None:
        """Clean close (shutdown): final time-index entry, trimmed indexes, closed files.
        The files are closed even when the first part fails (the error is raised)."""
        try:
            if not self.closed:
                self.on_become_inactive()
        finally:
            self.close()

    @property
    def paths(self) -> list[Path]:
        return [self.log_path, self.offset_index.path, self.time_index.path,
                self.txn_index.path]

    def add_suffix(self, suffix: str) -> None:
        """Rename the three files with `suffix` (e.g. `.deleted`); fds stay valid."""
        with self._io_lock:
            new = self.log_path.with_name(self.log_path.name + suffix)
            with contextlib.suppress(FileNotFoundError):
                os.replace(self.log_path, new)
            self.log_path = new
            for index in (self.offset_index, self.time_index):
                index.rename_to(index.path.with_name(index.path.name + suffix))
            txn = self.txn_index
            txn.rename_to(txn.path.with_name(txn.path.name + suffix))

    def delete_files(self) -> None:
        self.close()
        for p in self.paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
