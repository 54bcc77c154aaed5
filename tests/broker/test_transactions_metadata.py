"""The transaction state machine (Kafka's TransactionMetadata) and the TransactionLog record
format, without a broker: each prepared change and what completing it leaves, the
transitions Kafka forbids, epoch exhaustion and producer id rotation, and records that
round-trip through Kafka's key/value schemas."""

from __future__ import annotations

import dataclasses

import pytest

from kafkactl.broker.coordinator.transaction_metadata import (
    MAX_EPOCH,
    IllegalTransition,
    TxnMetadata,
    TxnState,
    is_epoch_exhausted,
)
from kafkactl.broker.coordinator.transaction_state_manager import (
    decode_txn_record,
    metadata_from_value,
    txn_key,
    txn_value,
)

S = TxnState


def _done(txn: TxnMetadata, new: object) -> TxnMetadata:
    txn.complete_transition(new)  # type: ignore[arg-type]
    return txn


def test_a_transaction_from_init_to_complete_commit() -> None:
    t = TxnMetadata("t", 7, timeout_ms=1000, last_update_ms=1)
    _done(t, t.prepare_increment_epoch(5000, None, 10))
    assert (t.state, t.producer_epoch, t.timeout_ms) == (S.EMPTY, 0, 5000)
    _done(t, t.prepare_add_partitions({("a", 0)}, 20))
    assert (t.state, t.partitions, t.start_ms) == (S.ONGOING, {("a", 0)}, 20)
    _done(t, t.prepare_add_partitions({("b", 1)}, 30))
    assert (t.partitions, t.start_ms, t.last_update_ms) == ({("a", 0), ("b", 1)}, 20, 30)
    _done(t, t.prepare_abort_or_commit(S.PREPARE_COMMIT, 40))
    new = t.prepare_complete(50)
    assert t.pending_state == S.COMPLETE_COMMIT and new.partitions == frozenset()
    _done(t, new)
    assert (t.state, t.partitions, t.pending_state) == (S.COMPLETE_COMMIT, set(), None)
    # the next transaction starts anew
    _done(t, t.prepare_add_partitions({("a", 0)}, 60))
    assert t.start_ms == 60


def test_one_change_at_a_time_and_only_kafkas_transitions() -> None:
    t = TxnMetadata("t", 1, producer_epoch=0)
    t.prepare_add_partitions({("a", 0)}, 1)
    with pytest.raises(IllegalTransition, match="pending"):
        t.prepare_add_partitions({("b", 0)}, 2)
    t.pending_state = None
    for bad in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.PREPARE_EPOCH_FENCE):
        with pytest.raises(IllegalTransition, match="not a valid transition"):
            t.transit(bad, update_ms=3)  # from Empty
    dead = t.prepare_dead()
    with pytest.raises(IllegalTransition, match="completing"):  # not the pending change
        t.complete_transition(dataclasses.replace(dead, state=S.EMPTY))


def test_epoch_bumps_retries_and_fencing() -> None:
    t = TxnMetadata("t", 1, producer_epoch=4, last_producer_epoch=3)
    # the current epoch: bumped; the last one: a lost answer's retry, same epoch again
    assert t.prepare_increment_epoch(1000, 4, 1).producer_epoch == 5
    t.pending_state = None
    retry = t.prepare_increment_epoch(1000, 3, 1)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (4, 3)
    t.pending_state = None
    assert t.prepare_increment_epoch(1000, 2, 1) is None  # fenced
    t.pending_state = None
    _done(t, t.prepare_add_partitions({("a", 0)}, 1))
    fence = t.prepare_fence_epoch()
    assert (fence.state, fence.producer_epoch, fence.last_producer_epoch) == \
        (S.PREPARE_EPOCH_FENCE, 5, -1)
    t.pending_state = None
    t.has_failed_epoch_fence = True  # a fence whose write failed is not bumped again
    assert t.prepare_fence_epoch().producer_epoch == 4


def test_epoch_exhaustion_rotates_the_producer_id() -> None:
    assert not is_epoch_exhausted(MAX_EPOCH - 2) and is_epoch_exhausted(MAX_EPOCH - 1)
    t = TxnMetadata("t", 1, producer_epoch=MAX_EPOCH - 1)
    assert t.epoch_exhausted
    new = t.prepare_producer_id_rotation(99, 1000, 5, record_last_epoch=True)
    assert (new.producer_id, new.last_producer_id, new.producer_epoch,
            new.last_producer_epoch) == (99, 1, 0, MAX_EPOCH - 1)
    _done(t, new)
    assert (t.producer_id, t.producer_epoch) == (99, 0)


def test_records_round_trip_in_kafkas_format() -> None:
    t = TxnMetadata("orders-tx", 42, producer_epoch=3, timeout_ms=60000, last_update_ms=5)
    ongoing = t.prepare_add_partitions({("b", 2), ("a", 0), ("a", 1)}, 10)
    key, value = txn_key("orders-tx"), txn_value(ongoing)
    assert key == b"\x00\x00\x00\x09orders-tx"  # version 0, then the id
    assert value is not None and value[:2] == b"\x00\x00"  # value version 0
    rec = decode_txn_record(key, value)
    assert rec.transactional_id == "orders-tx" and rec.value is not None
    assert rec.value["transaction_partitions"] == [
        {"topic": "a", "partition_ids": [0, 1]}, {"topic": "b", "partition_ids": [2]}]
    back = metadata_from_value("orders-tx", rec.value)
    assert (back.producer_id, back.producer_epoch, back.state, back.partitions,
            back.start_ms, back.last_update_ms, back.timeout_ms) == (
        42, 3, S.ONGOING, {("a", 0), ("a", 1), ("b", 2)}, 10, 10, 60000)
    t.pending_state = None
    empty = decode_txn_record(key, txn_value(t.prepare_increment_epoch(1000, None, 1)))
    assert empty.value is not None and empty.value["transaction_partitions"] is None
    t.pending_state = None
    assert txn_value(t.prepare_dead()) is None  # a tombstone
