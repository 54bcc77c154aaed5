"""What the cleaner keeps for the producers still active on a log (Kafka's
isBatchLastRecordOfProducer over UnifiedLog.lastRecordsOfActiveProducers, and
MemoryRecords.filterTo's BatchRetention.RETAIN_EMPTY); see kafkactl.log.cleaner.

The active producers are read from the log's batch headers in the same scan as its
transactions, and folded by the producer state's replay rules (LastRecordsReplay,
producer.id.expiration.ms at the pass's time): what a replica rebuilt from this log would
know, and must still know after the pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafkactl.log.producer_state import LastRecord, LastRecordsReplay
from kafkactl.log.txn_index import AbortedTxn, TxnTracker, segment_txn_events
from kafkactl.record.batch_header import (
    CONTROL_FLAG,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
)
from kafkactl.record.builder import assemble_batch
from kafkactl.record.memory_records import RecordBatch


@dataclass
class LogProducers:
    """What the batch headers of the whole log say before a pass (one scan)."""

    aborted: list[AbortedTxn]  # the aborted transactions that still have records
    first_unstable: int | None  # the first offset of the earliest open transaction
    last_records: dict[int, LastRecord]  # Kafka's lastRecordsOfActiveProducers


def log_producers(segments: Any, now_ms: int) -> LogProducers:
    """The transactions and active producers of the log, read from its batch headers in
    one scan (the producer state a replica rebuilt from this log would have: the replay's
    rules and producer.id.expiration.ms, at `now_ms`)."""
    tracker = TxnTracker()
    producers = LastRecordsReplay()
    aborted: list[AbortedTxn] = []
    feed, track = producers.feed, tracker.feed
    for seg in segments:
        for event in segment_txn_events(seg, idempotent=True):
            feed(event)
            if event[6] or event[7] >= 0:  # transactional or a marker
                entry = track(event)
                if entry is not None:
                    aborted.append(entry)
    first = min(tracker.ongoing.values()) if tracker.ongoing else None
    return LogProducers(aborted, first, producers.last_records(now_ms))


def empty_batch(batch: RecordBatch) -> bytes:
    """`batch`'s header with no record (Kafka's BatchRetention.RETAIN_EMPTY and
    DefaultRecordBatch.writeEmptyHeader): the same base offset, last offset delta, producer
    id, epoch, base sequence, leader epoch, max timestamp, timestamp type and
    transactional/control bits; no compression, no base timestamp, a record count of 0."""
    attributes = batch.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG | CONTROL_FLAG)
    return assemble_batch(
        b"", attributes=attributes, last_offset_delta=batch.last_offset_delta,
        base_timestamp=NO_TIMESTAMP, max_timestamp=batch.max_timestamp,
        producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence, record_count=0, base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch)


def holds_last_record(batch: RecordBatch, last_records: dict[int, LastRecord]) -> bool:
    """Kafka's isBatchLastRecordOfProducer: `batch` holds the last entry of an active
    producer, its last data batch (by its last offset) or, when its last entry is a marker
    of a newer epoch, a marker of that epoch. Such a batch is kept, empty if need be."""
    if batch.producer_id < 0:
        return False
    last = last_records.get(batch.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return batch.last_offset == last.last_data_offset
    return batch.is_control and batch.producer_epoch == last.producer_epoch
