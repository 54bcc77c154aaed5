"""One topic-partition on this broker: its Log plus leader state and producer state.

A standalone broker leads every partition at leader epoch 0; in a ZooKeeper cluster the
controller's LeaderAndIsr sets `is_leader` and `leader_epoch` (stamped into every batch
appended). The high watermark is the log end (one replica). Replication will add follower
state and the ISR here without changing the produce/fetch callers.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkactl.log.errors import CorruptRecordError
from kafkactl.log.producer_state import (
    ProducerStateError,
    ProducerStateManager,
    snapshot_path,
)
from kafkactl.log.validator import BatchInfo
from kafkactl.protocol.errors import ErrorCode

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


class Partition:
    def __init__(self, topic: str, partition: int, log_: Any, *, leader_epoch: int = 0) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log_
        self.leader_epoch = leader_epoch
        self.is_leader = True  # False: a replica the controller made a follower (or offline)
        self.producer_state = ProducerStateManager(Path(log_.dir))

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition})"

    # ---- offsets --------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset  # one replica: everything appended is committed

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark  # no transactions

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
                dup = ps.check(b.producer_id, b.producer_epoch, b.base_sequence, last_seq)
                if dup is not None:
                    if len(batches) != 1:
                        raise ProducerStateError(
                            ErrorCode.DUPLICATE_SEQUENCE_NUMBER, "duplicate batch inside a "
                            "multi-batch produce")
                    return AppendResult(dup.first_offset, dup.last_offset, -1, 0, True)
        info = self.log.append(buf, log_append_time=log_append_time,
                               leader_epoch=self.leader_epoch)
        offset = info.first_offset
        for b in batches:
            last = offset + b.record_count - 1
            if b.producer_id >= 0 and b.base_sequence >= 0:
                ps.update(b.producer_id, b.producer_epoch, b.base_sequence,
                          (b.base_sequence + b.record_count - 1) % INT32_MOD, offset, last,
                          b.max_timestamp)
            offset = last + 1
        lat = info.log_append_time if log_append_time is not None else -1
        return AppendResult(info.first_offset, info.last_offset,
                            -1 if lat is None else lat, len(buf))

    # ---- fetch ----------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool) -> Any:
        return self.log.read(offset, max_bytes, max_offset=self.high_watermark,
                             min_one_batch=min_one_batch)

    # ---- producer state lifecycle -----------------------------------------------------------
    def load_producer_state(self) -> None:
        leo = self.log_end_offset
        start = self.producer_state.load_latest_snapshot(leo)
        start = max(start, self.log_start_offset)
        if start < leo:
            self.producer_state.replay(self._batch_headers(start, leo))
            log.info("%s: rebuilt producer state from offsets %d..%d", self, start, leo)

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
                    yield (batch.producer_id, batch.producer_epoch, batch.base_sequence,
                           batch.base_offset, batch.last_offset, batch.max_timestamp)
                offset = batch.last_offset + 1
            if not progressed:
                return

    def take_snapshot(self) -> None:
        """Snapshot the producer state at the log end. A disk error is logged (the next
        checkpoint tries again; a restart replays the log from the previous snapshot)
        and the partial `.snapshot.tmp` removed to give its space back."""
        leo = self.log_end_offset
        try:
            self.producer_state.take_snapshot(leo)
        except OSError as e:
            tmp = snapshot_path(Path(self.log.dir), leo).with_suffix(".snapshot.tmp")
            with contextlib.suppress(OSError):
                tmp.unlink()
            log.warning("%s: cannot write producer snapshot: %s", self, e)
