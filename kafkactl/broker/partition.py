"""One topic-partition on this broker: its Log plus leader state and producer state.

A standalone broker leads every partition at leader epoch 0 and its high watermark is the
log end. In a ZooKeeper cluster the controller's LeaderAndIsr makes the partition a leader
or a follower for an epoch (stamped into every batch the leader appends). A leader of a
replicated partition tracks each follower's log end (from its fetches) and when it was last
caught up; the high watermark is the smallest log end over the maximal ISR (the in-sync
replicas plus those of an ISR change still with the controller, KIP-497: a follower whose
join is in flight already holds the high watermark back, and one being dropped still does
until the controller answers), and only records below it are served to consumers or
acknowledge acks=all. A follower appends the
leader's batches as they are (offsets, epochs, CRCs), takes the leader's high watermark and
moves its log start up to the leader's (records removed by DeleteRecords or retention on the
leader go here too); the leader tracks each follower's log start from its fetches, and the
smallest over the live replicas (the low watermark) is what a DeleteRecords waits for.
The leader-epoch cache (log.leader_epoch_cache) follows every append and truncation.

Transactions (KIP-98): the producer state tracks each producer's open transaction; an
end-transaction marker (`append_control_batch`, written for the transaction coordinator)
ends it, an ABORT one with an entry in the segment's .txnindex; followers do the same from
the leader's batches. The last stable offset is what read_committed consumers read up to.

Disk work that can take long runs on the shared `log-io` executor (kafkactl/broker/log_io.py),
not on the event loop: a producer-state snapshot is encoded on the loop (a consistent point)
and written and fsynced there (`snapshot_job`); after a follower's truncation the producer
state is rebuilt there from the latest snapshot and a scan of the log (`truncate_off_loop`).
One lock per partition keeps a single writer of its snapshot files at a time, and a
generation counter bumped by each truncation drops a snapshot taken before it.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import threading
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkactl.log.errors import CorruptRecordError
from kafkactl.log.leader_epoch_cache import LeaderEpochCache
from kafkactl.log.producer_state import (
    CompletedTxn,
    ProducerStateError,
    ProducerStateManager,
    snapshot_path,
)
from kafkactl.log.txn_index import AbortedTxn, parse_marker
from kafkactl.log.validator import BatchInfo
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.errors import CorruptRecordError as RecordCorrupt
from kafkactl.record.memory_records import iter_batches

log = logging.getLogger(__name__)

REPLAY_CHUNK_BYTES = 8 * 1024 * 1024
INT32_MOD = 2**31


@dataclass(slots=True)
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time: int
    appended_bytes: int
    duplicate: bool = False


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower replica."""

    log_end_offset: int = -1  # unknown until its first fetch
    last_caught_up_ms: float = 0.0
    log_start_offset: int = -1  # its Fetch's log_start_offset; unknown until the first


class Partition:
    def __init__(self, topic: str, partition: int, log_: Any, *, leader_epoch: int = 0,
                 high_watermark: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log_
        self.leader_epoch = leader_epoch
        self.is_leader = True  # False: a replica the controller made a follower (or offline)
        self.producer_state = ProducerStateManager(Path(log_.dir))
        self.epochs = LeaderEpochCache(Path(log_.dir))
        log_.on_roll = self._snapshot_at_roll
        if not self.epochs.load():
            self.epochs.rebuild(self._epochs_in_log())
        log_.attach_leader_epoch_cache(self.epochs)  # trimmed as the log start moves
        # retention deletes no segment above the high watermark (Kafka's deletableSegments)
        log_.high_watermark_source = lambda: self.high_watermark
        # replication (a cluster): set by the controller's LeaderAndIsr
        self.local_id = -1
        self.leader_id = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.partition_epoch = 0
        # the log end when this leader's epoch began (Kafka's leaderEpochStartOffsetOpt):
        # a follower joins the ISR only once it has all of the previous epochs
        self.leader_epoch_start_offset = 0
        self.followers: dict[int, FollowerState] = {}
        # the ISR proposed to the controller and not yet answered (IsrChanger)
        self.pending_isr: list[int] | None = None
        self.role_set = False  # a LeaderAndIsr has said leader or follower
        # None: the log end (this broker is the only replica); else the leader's view
        self._hw: int | None = None
        self._hw_checkpoint = high_watermark
        # off-loop disk work: one writer of the snapshot files at a time; each truncation
        # bumps the generation (a snapshot of an older generation is not written); the
        # generation of a producer-state rebuild running off the loop, if any
        self._disk_lock = threading.Lock()
        self._disk_generation = 0
        self._rebuilding: int | None = None
        # ended transactions whose marker is not yet below the high watermark:
        # (first offset, marker offset); they still bound the LSO (Kafka's unreplicatedTxns)
        self._unreplicated_txns: list[tuple[int, int]] = []

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition})"

    def _epochs_in_log(self) -> list[tuple[int, int]]:
        """(leader epoch, base offset) of the log's batches, for a log without a
        leader-epoch checkpoint (one written before there were epochs, or a damaged file).
        When the first and the last batch have the same epoch (every log of a standalone
        broker: epoch 0) that is the only entry, found without reading the log."""
        start, end = self.log_start_offset, self.log_end_offset
        if start >= end:
            return []
        try:
            first = _batch_epochs(memoryview(
                self.log.read(start, 64, min_one_batch=True).read_bytes()))
            last = _batch_epochs(memoryview(
                self.log.read(end - 1, 64, min_one_batch=True).read_bytes()))
        except (CorruptRecordError, OSError):
            first = last = []
        if first and last and first[0][0] == last[-1][0]:
            return first[:1]
        return [(getattr(b, "partition_leader_epoch", -1), b.base_offset)
                for b in self.log.iter_batches()]

    # ---- offsets --------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def high_watermark(self) -> int:
        leo = self.log_end_offset
        return leo if self._hw is None else min(self._hw, leo)

    @property
    def replicated(self) -> bool:
        return len(self.replicas) > 1

    @property
    def isr_change_pending(self) -> bool:
        """An ISR change is with the controller (one at a time per partition)."""
        return self.pending_isr is not None

    @isr_change_pending.setter
    def isr_change_pending(self, pending: bool) -> None:
        if not pending:  # answered, refused or lost: the committed ISR alone again
            self.pending_isr = None
        elif self.pending_isr is None:
            self.pending_isr = list(self.isr)

    def propose_isr(self, isr: list[int]) -> None:
        """`isr` goes to the controller: until it answers, the high watermark counts the
        union of the committed ISR and `isr` (Kafka's maximal ISR)."""
        self.pending_isr = list(isr)

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the high watermark waits for: the committed one plus the members of an
        ISR change in flight (a joiner counts from its proposal, a leaver until the
        controller's answer)."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + [r for r in self.pending_isr if r not in self.isr]

    # ---- leadership (LeaderAndIsr) -----------------------------------------------------------
    def become_leader(self, local_id: int, epoch: int, isr: list[int], replicas: list[int],
                      partition_epoch: int, now_ms: float) -> None:
        """Lead from `epoch`: the epoch starts at the log end; followers start unknown (the
        high watermark waits for each in-sync follower's first fetch)."""
        new_term = not self.role_set or not self.is_leader or epoch != self.leader_epoch
        if self._rebuilding is not None:  # a leader checks sequences: finish it here
            self._disk_generation += 1
            self._rebuilding = None
            self.producer_state.truncate()
            self.load_producer_state()
        self._set_replicas(local_id, local_id, epoch, isr, replicas, partition_epoch)
        self.is_leader = True
        self.role_set = True
        if new_term:
            self.followers = {r: FollowerState(-1, now_ms if r in isr else 0.0)
                              for r in replicas if r != local_id}
            self.leader_epoch_start_offset = self.log_end_offset
        if self.replicated:
            if self._hw is None:
                known = self._hw_checkpoint if self._hw_checkpoint is not None else 0
                self._hw = max(self.log_start_offset, min(known, self.log_end_offset))
        else:
            self._hw = None
        # written with the epoch's first batch: a leader that never appends leaves no trace
        self.epochs.assign(epoch, self.log_end_offset, flush=False)
        # a cluster of one (a standalone broker) leads every partition: no line each
        log.log(logging.INFO if self.replicated else logging.DEBUG,
                "%s: leader at epoch %d (log end %d, high watermark %d, ISR %s)", self,
                epoch, self.log_end_offset, self.high_watermark, isr)

    def become_follower(self, local_id: int, leader_id: int, epoch: int, isr: list[int],
                        replicas: list[int], partition_epoch: int) -> None:
        if self._hw is None:
            if self.role_set:  # it was the only replica: its whole log is committed
                known = self.log_end_offset
            else:
                # just hosted, none checkpointed (a new replica, a topic made again): the
                # log start, as Kafka (the leader's fetch answers raise it); never the log
                # end, which may hold records the ISR does not have, were this replica to
                # lead before a fetch
                known = self._hw_checkpoint if self._hw_checkpoint is not None else 0
            self._hw = max(self.log_start_offset, min(known, self.log_end_offset))
        self._set_replicas(local_id, leader_id, epoch, isr, replicas, partition_epoch)
        self.is_leader = False
        self.role_set = True
        log.info("%s: follower of broker %d at epoch %d (log end %d)", self, leader_id, epoch,
                 self.log_end_offset)
        self.followers = {}

    def _set_replicas(self, local_id: int, leader_id: int, epoch: int, isr: list[int],
                      replicas: list[int], partition_epoch: int) -> None:
        self.local_id, self.leader_id, self.leader_epoch = local_id, leader_id, epoch
        self.isr, self.replicas = list(isr), list(replicas)
        self.partition_epoch = partition_epoch
        self.pending_isr = None

    def set_isr(self, isr: list[int], partition_epoch: int) -> bool:
        """The controller accepted an ISR change; True when the high watermark moved."""
        self.isr, self.partition_epoch = list(isr), partition_epoch
        self.pending_isr = None
        return self.maybe_advance_high_watermark()

    # ---- the leader's view of its followers ---------------------------------------------------
    def update_follower(self, replica_id: int, fetch_offset: int, leader_end_at_read: int,
                        now_ms: float, log_start_offset: int = -1) -> bool:
        """A follower fetched from `fetch_offset` (its log end) and said its log starts at
        `log_start_offset`; True when the high watermark moved."""
        state = self.followers.get(replica_id)
        if state is None or not self.is_leader:
            return False
        state.log_end_offset = fetch_offset
        state.log_start_offset = log_start_offset
        if fetch_offset >= leader_end_at_read:
            state.last_caught_up_ms = now_ms
        return self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> bool:
        if self._hw is None or not self.is_leader:
            return False
        ends = [self.log_end_offset]
        for r in self.maximal_isr:
            if r != self.local_id:
                state = self.followers.get(r)
                ends.append(state.log_end_offset if state is not None else -1)
        new = min(ends)
        if new > self._hw:
            self._hw = new
            return True
        return False

    def low_watermark(self, live: Container[int]) -> int:
        """Kafka's lowWatermarkIfLeader: the smallest log start offset over this replica
        and the followers on `live` brokers (-1 while one of them has not fetched in this
        leader term). A DeleteRecords answers once it reaches the requested offset."""
        low = self.log_start_offset
        for r, state in self.followers.items():
            if state.log_start_offset < low and r in live and r in self.replicas:
                low = state.log_start_offset
        return low

    def follow_leader_log_start(self, leader_log_start: int) -> bool:
        """A follower's log starts where its leader's does (Kafka's
        maybeIncrementLogStartOffset with LeaderOffsetIncremented): records the leader
        removed (DeleteRecords, retention) are removed here too, segments wholly below the
        new start deleted as retention deletes them. Only up to this replica's high
        watermark, which it has and knows committed (Kafka refuses a log start above it);
        never backwards. True when the log start moved."""
        new = min(leader_log_start, self.high_watermark)
        if new <= self.log_start_offset:
            return False
        self.log.delete_records_before(new)
        log.info("%s: incremented log start offset to %d: the leader's "
                 "(LeaderOffsetIncremented)", self, new)
        return True

    def needs_expand_isr(self, replica_id: int) -> bool:
        """Whether follower `replica_id`, which has just fetched, should join the ISR
        (Kafka's needsExpandIsr, asked for the fetching follower alone: one that stopped
        fetching is never added on another's fetch): it is out of the ISR, no ISR change
        is with the controller, and it is in sync (isFollowerInSync): its log end has
        reached the high watermark and the start of this leader's epoch."""
        if replica_id in self.isr or self.pending_isr is not None:
            return False
        state = self.followers.get(replica_id)
        if state is None:
            return False
        end = state.log_end_offset
        return end >= self.leader_epoch_start_offset and end >= self.high_watermark

    def isr_to_remove(self, now_ms: float, max_lag_ms: float) -> list[int]:
        """In-sync followers not caught up for longer than replica.lag.time.max.ms."""
        return [r for r in self.isr if r != self.local_id and r in self.followers
                and now_ms - self.followers[r].last_caught_up_ms > max_lag_ms]

    @property
    def last_stable_offset(self) -> int:
        """The LSO: below it every transaction has ended (and its marker is replicated);
        read_committed consumers read up to it. min(HW, first offset of the earliest open
        transaction or of an ended one whose marker is not yet below the HW)."""
        hw = self.high_watermark
        lso = hw
        first = self.producer_state.first_unstable_offset()
        if first is not None and first < lso:
            lso = first
        pending = self._unreplicated_txns
        if pending:
            pending[:] = [t for t in pending if t[1] >= hw]
            for first_offset, _marker in pending:
                if first_offset < lso:
                    lso = first_offset
        return max(lso, self.log_start_offset) if lso < hw else hw

    def append_control_batch(self, producer_id: int, producer_epoch: int,
                             coordinator_epoch: int, commit: bool) -> int:
        """Append an end-transaction marker (COMMIT or ABORT) for `producer_id` as leader;
        returns its offset. Ends the producer's open transaction (the LSO moves) and, for
        an abort, writes its .txnindex entry. A marker of an older producer epoch is
        refused with INVALID_PRODUCER_EPOCH, of an older coordinator epoch with
        TRANSACTION_COORDINATOR_FENCED (ProducerStateError; nothing appended)."""
        from kafkactl.record.builder import RecordBatchBuilder

        if not self.is_leader:
            raise ProducerStateError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                     f"{self} is not led by this broker")
        ps = self.producer_state
        ps.check_marker(producer_id, producer_epoch, coordinator_epoch)
        builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                                     is_transactional=True, is_control=True)
        builder.append(None, _MARKER_KEY.pack(0, 1 if commit else 0),
                       _MARKER_VALUE.pack(0, coordinator_epoch))
        data = bytearray(builder.build())
        info = self.log.append(data, leader_epoch=self.leader_epoch)
        if self.epochs.latest_epoch < self.leader_epoch:
            self.epochs.assign(self.leader_epoch, info.first_offset)
        elif self.epochs.dirty:
            self.epochs.flush()
        offset = int(info.first_offset)
        self._end_txn(ps.complete_txn(producer_id, producer_epoch, coordinator_epoch, commit,
                                      offset, int(info.max_timestamp)))
        return offset

    def _snapshot_at_roll(self, base: int) -> None:
        """The log rolled at `base`: snapshot the producer state there (Kafka does), unsynced
        (a torn one fails its CRC), so that a crash's recovery rebuilds the newest segments'
        .txnindex from it instead of reading the log from its start. Snapshots at the bases
        of the two newest segments are kept. Skipped while the log-io thread writes one."""
        ps = self.producer_state
        prev = self.log.segments[-2].base_offset if len(self.log.segments) > 1 else base
        ps.retain_from = prev
        if self._rebuilding is not None:
            return  # the state is being rebuilt off the loop: not a state to snapshot
        if not self._disk_lock.acquire(blocking=False):
            return
        try:
            data = ps.snapshot_data(base)
            if data is not None:
                ps.write_snapshot(base, data, sync=False)
        finally:
            self._disk_lock.release()

    def _end_txn(self, done: CompletedTxn | None) -> None:
        """A marker ended `done`: its abort entry, and the LSO waits for the marker's
        replication."""
        if done is None:
            return
        if done.is_aborted:
            self.log.append_aborted_txn(AbortedTxn(
                done.producer_id, done.first_offset, done.last_offset,
                self.producer_state.last_stable_offset_after(done)))
        if done.last_offset >= self.high_watermark:
            self._unreplicated_txns.append((done.first_offset, done.last_offset))

    def aborted_transactions(self, start_offset: int, upper_bound: int
                             ) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping
        [start_offset, upper_bound): a read_committed Fetch's aborted_transactions."""
        return [(e.producer_id, e.first_offset)
                for e in self.log.collect_aborted_transactions(start_offset, upper_bound)]

    # ---- produce --------------------------------------------------------------------------
    def append_as_leader(self, buf: memoryview, batches: list[BatchInfo], *,
                         log_append_time: int | None) -> AppendResult:
        """Append validated batches; a retried idempotent batch returns its first offsets.

        Raises ProducerStateError for sequence/epoch violations (nothing is appended).
        """
        ps = self.producer_state
        for b in batches:
            if b.producer_id >= 0 and b.base_sequence >= 0:
                last_seq = (b.base_sequence + b.record_count - 1) % INT32_MOD
                dup = ps.check(b.producer_id, b.producer_epoch, b.base_sequence, last_seq,
                               b.is_transactional)
                if dup is not None:
                    if len(batches) != 1:
                        raise ProducerStateError(
                            ErrorCode.DUPLICATE_SEQUENCE_NUMBER, "duplicate batch inside a "
                            "multi-batch produce")
                    return AppendResult(dup.first_offset, dup.last_offset, -1, 0, True)
        info = self.log.append(buf, log_append_time=log_append_time,
                               leader_epoch=self.leader_epoch)
        if self.epochs.latest_epoch < self.leader_epoch:
            self.epochs.assign(self.leader_epoch, info.first_offset)
        elif self.epochs.dirty:
            self.epochs.flush()
        offset = info.first_offset
        for b in batches:
            last = offset + b.record_count - 1
            if b.producer_id >= 0 and b.base_sequence >= 0:
                ps.update(b.producer_id, b.producer_epoch, b.base_sequence,
                          (b.base_sequence + b.record_count - 1) % INT32_MOD, offset, last,
                          b.max_timestamp, b.is_transactional)
            offset = last + 1
        lat = info.log_append_time if log_append_time is not None else -1
        return AppendResult(info.first_offset, info.last_offset,
                            -1 if lat is None else lat, len(buf))

    def append_as_follower(self, records: memoryview, leader_high_watermark: int) -> int:
        """Append the leader's batches as they are (whole batches only: a cut last one is
        fetched again); producer state and epochs follow. Returns the bytes appended.

        Each batch's CRC is checked first (the bytes crossed a network and the leader's
        disk): the batches before a damaged one are stored, the damaged one and what
        follows are not, and CorruptRecordError names its offset (the fetcher fetches it
        again: a damaged copy is never stored)."""
        size, damaged = _valid_prefix(records[:_whole_batches(records)])
        if size:
            info = self.log.append(records[:size], assign_offsets=False, leader_epoch=None)
            pos = 0
            for b in info.batches:
                if b.producer_id >= 0:
                    attrs = records[pos + 22] if b.size > 22 else 0
                    if attrs & _CONTROL_FLAG:
                        marker = parse_marker(records[pos:pos + b.size])
                        if marker is not None:
                            self._end_txn(self.producer_state.complete_txn(
                                b.producer_id, b.producer_epoch, marker[1], marker[0] == 1,
                                b.last_offset, b.max_timestamp))
                    elif b.base_sequence >= 0:
                        self.producer_state.update(
                            b.producer_id, b.producer_epoch, b.base_sequence,
                            (b.base_sequence + b.last_offset - b.base_offset) % INT32_MOD,
                            b.base_offset,
                            b.last_offset, b.max_timestamp, bool(attrs & _TRANSACTIONAL_FLAG))
                pos += b.size
            for epoch, base in _batch_epochs(records[:size]):
                if epoch > self.epochs.latest_epoch:
                    self.epochs.assign(epoch, base)
        self._hw = max(self.log_start_offset, min(leader_high_watermark, self.log_end_offset))
        if damaged is not None:
            raise CorruptRecordError(
                f"{self}: the leader's batch at offset {damaged} fails its CRC check; not "
                "stored (fetched again)", offset=damaged)
        return size

    def truncate_to(self, offset: int) -> None:
        """Cut the log (a follower's divergent suffix); producer state is rebuilt."""
        if self._cut(offset):
            self.load_producer_state()

    async def truncate_off_loop(self, offset: int,
                                run: Callable[..., Awaitable[object]]) -> None:
        """`truncate_to`, with the producer state's rebuild (a snapshot read and a scan of
        the log after it) done by `run` (the log-io executor) into a fresh manager, put in
        place back on the loop unless another truncation came meanwhile. Records appended
        meanwhile (none while the fetcher waits for this) are replayed on the loop."""
        if not self._cut(offset):
            return
        generation, end = self._disk_generation, self.log_end_offset
        fresh: ProducerStateManager | None = ProducerStateManager(Path(self.log.dir))
        self._rebuilding = generation
        try:
            await run(self._rebuild_into, fresh, end)
        except (OSError, CorruptRecordError) as e:
            log.warning("%s: producer state rebuild off the loop failed (%s); rebuilding "
                        "here", self, e)
            fresh = None
        finally:
            if self._rebuilding == generation:
                self._rebuilding = None
        if generation != self._disk_generation:
            return  # cut again, or made leader: that path rebuilt the state
        if fresh is None:
            self.producer_state.truncate()
            self.load_producer_state()
            return
        if self.log_end_offset > end:
            fresh.replay(self._batch_headers(end, self.log_end_offset))
        self.producer_state = fresh

    def _cut(self, offset: int) -> bool:
        """The log, epochs and high watermark cut at `offset`; False if nothing to cut.
        The producer state is emptied (the caller rebuilds it)."""
        if offset >= self.log_end_offset:
            return False
        log.info("%s: truncating from %d to %d", self, self.log_end_offset, offset)
        self._disk_generation += 1
        self.log.truncate_to(offset)
        self.epochs.truncate_from_end(offset)
        if self._hw is not None:
            self._hw = min(self._hw, offset)
        self._unreplicated_txns.clear()
        self.producer_state.truncate()
        return True

    def _rebuild_into(self, ps: ProducerStateManager, end: int) -> None:
        """The producer state at `end` into `ps` (on a log-io thread after a truncation):
        its latest snapshot at or below `end` (snapshots beyond it deleted, under the lock:
        no snapshot write lands in between), then the batches after it."""
        with self._disk_lock:
            start = ps.load_latest_snapshot(end)
        start = max(start, self.log_start_offset)
        if start < end:
            ps.replay(self._batch_headers(start, end))
            log.info("%s: rebuilt producer state from offsets %d..%d", self, start, end)

    def restart_at(self, offset: int) -> None:
        """Drop the whole log and continue at `offset` (the leader's log starts later)."""
        self._disk_generation += 1
        self.log.truncate_fully_and_start_at(offset)
        self.epochs.clear()
        self._hw = offset
        self._unreplicated_txns.clear()
        self.producer_state.truncate()
        self.load_producer_state()

    # ---- fetch ----------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool,
             committed_only: bool = True, read_committed: bool = False) -> Any:
        """Records from `offset`: below the high watermark for consumers (below the LSO
        with `read_committed`); up to the log end for a follower (`committed_only=False`)."""
        if not committed_only:
            limit = None
        else:
            limit = self.last_stable_offset if read_committed else self.high_watermark
        return self.log.read(offset, max_bytes, max_offset=limit,
                             min_one_batch=min_one_batch)

    # ---- producer state lifecycle -----------------------------------------------------------
    def load_producer_state(self) -> None:
        self._rebuild_into(self.producer_state, self.log_end_offset)

    def _batch_headers(self, start: int, end: int) -> Any:
        from kafkactl.record.memory_records import RecordBatch, iter_batches

        offset = start
        while offset < end:
            try:
                fs = self.log.read(offset, REPLAY_CHUNK_BYTES, min_one_batch=True)
            except CorruptRecordError as e:  # a torn older segment: replay what is whole
                log.warning("%s: producer state replay stops at offset %d: %s", self,
                            offset, e)
                return
            if fs.length <= 0:
                return
            data = memoryview(fs.read_bytes())
            progressed = False
            for batch in iter_batches(data):
                if batch.last_offset < offset:
                    continue
                progressed = True
                if isinstance(batch, RecordBatch):
                    marker = -1
                    if batch.is_control:
                        parsed = parse_marker(data[batch.position:batch.position
                                                   + batch.size]) \
                            if batch.producer_id >= 0 else None
                        if parsed is None:
                            offset = batch.last_offset + 1
                            continue
                        marker = parsed[0] | (max(parsed[1], 0) << 1)
                    yield (batch.producer_id, batch.producer_epoch, batch.base_sequence,
                           batch.base_offset, batch.last_offset, batch.max_timestamp,
                           1 if batch.is_transactional else 0, marker)
                offset = batch.last_offset + 1
            if not progressed:
                return

    def take_snapshot(self) -> None:
        """Snapshot the producer state at the log end, here and now (shutdown)."""
        job = self.snapshot_job()
        if job is not None:
            job()

    def snapshot_job(self) -> Callable[[], None] | None:
        """The producer state at the log end, encoded now (on the loop: a consistent
        point), and a job that writes it (file, fsync, rename: on the log-io executor);
        None when there is nothing new or a rebuild is running. The job writes nothing if
        the log was truncated since. A disk error is logged (the next checkpoint tries
        again; a restart replays the log from the previous snapshot) and the partial
        `.snapshot.tmp` removed to give its space back."""
        if self._rebuilding is not None:
            return None
        leo = self.log_end_offset
        ps = self.producer_state
        data = ps.snapshot_data(leo)
        if data is None:
            return None
        generation = self._disk_generation

        def write() -> None:
            with self._disk_lock:
                if generation != self._disk_generation or ps is not self.producer_state:
                    return
                try:
                    ps.write_snapshot(leo, data)
                except OSError as e:
                    tmp = snapshot_path(Path(self.log.dir), leo).with_suffix(".snapshot.tmp")
                    with contextlib.suppress(OSError):
                        tmp.unlink()
                    log.warning("%s: cannot write producer snapshot: %s", self, e)
        return write


_LENGTH_END = 12  # base offset (8) + batch length (4)
_MARKER_KEY = struct.Struct(">hh")  # EndTransactionMarker key: version, type (0 abort, 1 commit)
_MARKER_VALUE = struct.Struct(">hi")  # value: version, coordinator epoch
_TRANSACTIONAL_FLAG = 0x10  # the low byte of the attributes (batch byte 22)
_CONTROL_FLAG = 0x20
_EPOCH = struct.Struct(">i")  # the partition leader epoch follows the length (magic 2)


def _valid_prefix(records: memoryview) -> tuple[int, int | None]:
    """(bytes of the whole batches at the start of `records` whose CRC matches, the base
    offset of the first that does not, or None)."""
    pos = 0
    try:
        for batch in iter_batches(records):
            if not batch.is_valid():
                return pos, int(batch.base_offset)
            pos += _LENGTH_END + int.from_bytes(records[pos + 8:pos + 12], "big")
    except RecordCorrupt:  # a header that does not even frame
        return pos, int.from_bytes(records[pos:pos + 8], "big", signed=True)
    return pos, None


def _whole_batches(records: memoryview) -> int:
    """The bytes of the whole batches at the start of `records`."""
    pos, end = 0, len(records)
    while pos + _LENGTH_END <= end:
        size = int.from_bytes(records[pos + 8:pos + 12], "big", signed=True)
        if size <= 0 or pos + _LENGTH_END + size > end:
            break
        pos += _LENGTH_END + size
    return pos


def _batch_epochs(records: memoryview) -> list[tuple[int, int]]:
    """(partition leader epoch, base offset) of each magic-2 batch in `records`."""
    out = []
    pos, end = 0, len(records)
    while pos + 17 <= end:
        size = int.from_bytes(records[pos + 8:pos + 12], "big", signed=True)
        if records[pos + 16] >= 2:
            out.append((_EPOCH.unpack_from(records, pos + 12)[0],
                        int.from_bytes(records[pos:pos + 8], "big", signed=True)))
        pos += _LENGTH_END + size
    return out
