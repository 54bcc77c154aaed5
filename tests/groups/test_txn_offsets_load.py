"""Replaying __consumer_offsets with transactional offset commits (KIP-98, KIP-447): a
TxnOffsetCommit batch is pending until its transaction's marker; COMMIT materializes it
(unless a plain commit was written after it), ABORT drops it, no marker keeps it pending
(OffsetFetch with require_stable then answers UNSTABLE_OFFSET_COMMIT). The log here is a
real Log with the batches a broker writes; the manager replays it as after a restart."""

from __future__ import annotations

from pathlib import Path

from kafkactl.broker.coordinator.group import GroupMetadata, OffsetAndMetadata
from kafkactl.broker.coordinator.group_metadata_manager import (
    GroupMetadataManager,
    offset_key,
    offset_value,
)
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatchBuilder

GROUP = "g"


def _offsets_batch(commits: dict[tuple[str, int], int], producer_id: int = -1,
                   epoch: int = -1) -> bytes:
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch,
                           is_transactional=producer_id >= 0)
    for (t, p), off in commits.items():
        b.append(1_000, offset_key(GROUP, t, p), offset_value(OffsetAndMetadata(off, -1, "",
                                                                                 1_000)))
    return b.build()


def _marker(producer_id: int, epoch: int, commit: bool) -> bytes:
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch,
                           is_transactional=True, is_control=True)
    # ControlRecordKey v0 (version int16, type int16); EndTransactionMarker value v0
    # (version int16, coordinator epoch int32)
    b.append(1_000, b"\x00\x00" + (b"\x00\x01" if commit else b"\x00\x00"),
             b"\x00\x00\x00\x00\x00\x05")
    return b.build()


def _replay(tmp_path: Path, batches: list[bytes]) -> GroupMetadata:
    log = Log(tmp_path / "__consumer_offsets-0", LogConfig.from_properties({}))
    for raw in batches:
        log.append(raw)
    manager = GroupMetadataManager.__new__(GroupMetadataManager)
    manager.groups = {}
    manager.num_partitions = 1
    manager.on_group_loaded = None
    manager._apply(GroupMetadataManager._read_partition(log))
    log.close()
    return manager.groups[GROUP]


def test_committed_transaction_materializes_aborted_never_appears(tmp_path: Path) -> None:
    group = _replay(tmp_path, [
        _offsets_batch({("t", 0): 5}),
        _offsets_batch({("t", 0): 10, ("t", 1): 3}, producer_id=7, epoch=0),
        _offsets_batch({("t", 2): 99}, producer_id=8, epoch=0),
        _marker(8, 0, commit=False),
        _marker(7, 0, commit=True),
    ])
    assert {tp: o.offset for tp, o in group.offsets.items()} == {("t", 0): 10, ("t", 1): 3}
    assert not group.pending_txn_offsets


def test_transaction_without_marker_stays_pending(tmp_path: Path) -> None:
    group = _replay(tmp_path, [
        _offsets_batch({("t", 0): 5}),
        _offsets_batch({("t", 0): 10}, producer_id=7, epoch=0),
    ])
    assert group.offsets[("t", 0)].offset == 5
    assert group.has_pending_txn_offsets(("t", 0))
    assert not group.has_pending_txn_offsets(("t", 1))
    assert group.complete_txn_offsets(7, commit=True) == 1
    assert group.offsets[("t", 0)].offset == 10


def test_plain_commit_after_the_transactional_one_wins(tmp_path: Path) -> None:
    """Kafka's olderThan: the marker completes a transactional commit written before a
    plain commit of the same partition; the later plain commit stays."""
    group = _replay(tmp_path, [
        _offsets_batch({("t", 0): 10}, producer_id=7, epoch=0),
        _offsets_batch({("t", 0): 20}),
        _marker(7, 0, commit=True),
    ])
    assert group.offsets[("t", 0)].offset == 20


def test_a_marker_of_another_producer_leaves_pending_ones(tmp_path: Path) -> None:
    group = _replay(tmp_path, [
        _offsets_batch({("t", 0): 10}, producer_id=7, epoch=0),
        _offsets_batch({("t", 1): 4}, producer_id=9, epoch=2),
        _marker(9, 2, commit=True),
    ])
    assert {tp: o.offset for tp, o in group.offsets.items()} == {("t", 1): 4}
    assert set(group.pending_txn_offsets) == {7}


def _manager() -> GroupMetadataManager:
    manager = GroupMetadataManager.__new__(GroupMetadataManager)
    manager.groups = {}
    manager.num_partitions = 1
    manager.on_group_loaded = None
    return manager


def test_a_marker_appended_while_loading_is_caught_up(tmp_path: Path) -> None:
    """The load reads the log in a thread; a marker appended meanwhile is read from where
    that read ended (on the event loop) and completes the offsets it found pending."""
    import asyncio

    log = Log(tmp_path / "__consumer_offsets-0", LogConfig.from_properties({}))
    log.append(_offsets_batch({("t", 0): 10}, producer_id=7, epoch=0))
    manager = _manager()
    entries, end = GroupMetadataManager._read_batches(log, None)
    manager._apply(entries)
    assert end == 1 and manager.groups[GROUP].has_pending_txn_offsets(("t", 0))
    log.append(_marker(7, 0, commit=True))  # written during the load
    tail, end = GroupMetadataManager._read_batches(log, end)
    manager._apply(tail)
    assert end == 2 and manager.groups[GROUP].offsets[("t", 0)].offset == 10
    assert not manager.groups[GROUP].pending_txn_offsets
    again = _manager()  # _replay does both steps
    assert asyncio.run(again._replay(log)) == 2
    assert again.groups[GROUP].offsets[("t", 0)].offset == 10
    log.close()
