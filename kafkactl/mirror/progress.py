"""No-loss bookkeeping: which source offsets the target has acknowledged.

Records of one source partition are sent in fetch order, one SentChunk per fetched chunk.
The target acknowledges them per producer batch, possibly out of order (several target
partitions, retries). A partition's committable offset is the end of its longest prefix of
fully acknowledged chunks, so a commit never passes a record the target may not have.
A mirror that stops at a record the target refused commits up to that record once every
batch it sent has had its answer (`committable(settled=True)`): the records before it were
all acknowledged then, though the refused record's chunk never completes.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from operator import itemgetter
from typing import cast

TopicPartition = tuple[str, int]


class SentChunk:
    """Records [first_offset, next_offset) of one source partition. `unacked`: records
    sent minus records acknowledged, counted once the chunk is sealed (acknowledgements may
    arrive before the stream has finished sending the chunk)."""

    __slots__ = ("partition", "first_offset", "next_offset", "unacked", "sealed")

    def __init__(self, partition: PartitionProgress, first_offset: int,
                 next_offset: int) -> None:
        self.partition = partition
        self.first_offset = first_offset
        self.next_offset = next_offset
        self.unacked = 0
        self.sealed = False


class PartitionProgress:
    """One source partition: chunks in send order and the offset safe to commit."""

    __slots__ = ("tp", "chunks", "acked_offset", "committed_offset", "refused_offset")

    def __init__(self, tp: TopicPartition, start_offset: int) -> None:
        self.tp = tp
        self.chunks: deque[SentChunk] = deque()
        self.acked_offset = start_offset  # every record before it is in the target
        self.committed_offset = -1
        self.refused_offset: int | None = None  # the first record the target refused

    def advance(self) -> int:
        """Drop the fully acknowledged chunks at the front; the committable offset."""
        chunks = self.chunks
        while chunks and chunks[0].sealed and chunks[0].unacked == 0:
            self.acked_offset = chunks.popleft().next_offset
        return self.acked_offset

    def refuse(self, offset: int) -> None:
        """The target refused the record at `offset` for good (the mirror stops at it)."""
        if self.refused_offset is None or offset < self.refused_offset:
            self.refused_offset = offset

    def settled_offset(self) -> int:
        """The committable offset once every batch sent has been answered (acknowledged or
        refused): up to the first refused record when it lies in the first chunk not fully
        acknowledged, a sealed one (every record before it was sent, and none of them was
        refused, so the target has them all); else `advance()`'s."""
        offset = self.advance()
        refused = self.refused_offset
        if refused is not None and self.chunks:
            chunk = self.chunks[0]
            if chunk.sealed and chunk.first_offset == offset <= refused < chunk.next_offset:
                return refused
        return offset


class CopiedBatch:
    """The entry of every record of one source batch copied as one target batch (the copy
    path): one object per batch instead of one per record. A target batch split by the
    producer keeps it; the record's index is the split half's `first_index` plus its own."""

    __slots__ = ("chunk", "first_offset")

    def __init__(self, chunk: SentChunk, first_offset: int) -> None:
        self.chunk = chunk
        self.first_offset = first_offset


Entry = tuple[SentChunk, int] | CopiedBatch
_CHUNK = itemgetter(0)


def acknowledge(entries: list[Entry]) -> dict[SentChunk, int]:
    """The target has the records of `entries` (one target batch: (chunk, source offset)
    per record, or one CopiedBatch for all of them); returns the records acknowledged per
    chunk, counted without a Python step per record. The caller holds the trackers' lock."""
    first = entries[0]
    if isinstance(first, CopiedBatch):
        counts: dict[SentChunk, int] = {first.chunk: len(entries)}
    else:
        counts = Counter(map(_CHUNK, cast(list[tuple[SentChunk, int]], entries)))
    for chunk, n in counts.items():
        chunk.unacked -= n
    return counts


def refuse(entries: list[Entry], first_index: int = 0) -> None:
    """The target refused the records of `entries` (one target batch, `first_index` its
    ProducerBatch.first_index) for good: each source partition among them stops at its
    first one (entries of one source partition are in offset order). The caller holds the
    trackers' lock."""
    first = entries[0]
    if isinstance(first, CopiedBatch):
        first.chunk.partition.refuse(first.first_offset + first_index)
        return
    seen: set[PartitionProgress] = set()
    for chunk, offset in cast(list[tuple[SentChunk, int]], entries):
        progress = chunk.partition
        if progress not in seen:
            seen.add(progress)
            progress.refuse(offset)


def first_record(entries: list[Entry], first_index: int = 0) -> tuple[SentChunk, int]:
    """The chunk and source offset of a target batch's first record (`first_index`: the
    batch's ProducerBatch.first_index)."""
    first = entries[0]
    if isinstance(first, CopiedBatch):
        return first.chunk, first.first_offset + first_index
    return first


class ProgressTracker:
    """The source partitions one stream sends from. Chunks are opened and sealed by the
    stream's thread and acknowledged from the producer's sender thread, so every tracker of
    a process shares one lock with the acknowledging callback."""

    def __init__(self, lock: threading.Lock | None = None) -> None:
        self.lock = lock or threading.Lock()
        self.partitions: dict[TopicPartition, PartitionProgress] = {}

    def open_chunk(self, tp: TopicPartition, first_offset: int, next_offset: int) -> SentChunk:
        with self.lock:
            progress = self.partitions.get(tp)
            if progress is None:
                progress = self.partitions[tp] = PartitionProgress(tp, first_offset)
            chunk = SentChunk(progress, first_offset, next_offset)
            progress.chunks.append(chunk)
            return chunk

    def seal(self, chunk: SentChunk, sent: int, next_offset: int | None = None) -> None:
        """The stream sent `sent` records of `chunk` and will send no more; `next_offset`
        cuts the chunk short (the records from there on will be fetched again)."""
        with self.lock:
            if next_offset is not None:
                chunk.next_offset = next_offset
            chunk.unacked += sent
            chunk.sealed = True

    def committable(self, tps: set[TopicPartition] | None = None, *,
                    settled: bool = False) -> dict[TopicPartition, int]:
        """Offsets to commit now: the partitions (of `tps`) that moved since their last
        commit; `mark_committed` records that a commit went through. `settled`: every
        batch sent has been answered (the producer was flushed), so a partition stopped
        at a refused record commits up to it (`PartitionProgress.settled_offset`)."""
        with self.lock:
            out: dict[TopicPartition, int] = {}
            for tp, progress in self.partitions.items():
                if tps is not None and tp not in tps:
                    continue
                offset = progress.settled_offset() if settled else progress.advance()
                if offset != progress.committed_offset:
                    out[tp] = offset
            return out

    def mark_committed(self, offsets: dict[TopicPartition, int]) -> None:
        with self.lock:
            for tp, offset in offsets.items():
                progress = self.partitions.get(tp)
                if progress is not None:
                    progress.committed_offset = offset

    def acked_offsets(self) -> dict[TopicPartition, int]:
        with self.lock:
            return {tp: p.advance() for tp, p in self.partitions.items()}

    def forget(self, tps: set[TopicPartition]) -> None:
        """Partitions this stream no longer owns (after a rebalance)."""
        with self.lock:
            for tp in tps:
                self.partitions.pop(tp, None)
