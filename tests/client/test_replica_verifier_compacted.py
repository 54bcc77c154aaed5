"""The record-by-record comparison verify-replicas makes for compacted topics, at its
edges: replicas whose batches differ only by what a cleaner removed agree; a record that
differs at an offset both hold is found there, also when the batches around it match in
number; a log the other lacks the start of is compared where both have records."""

from __future__ import annotations

from typing import Any

from kafkactl.client.replica_verifier import _first_record_difference, verify_partition
from kafkactl.record.batch import RecordBatchBuilder
from tests.client.test_replica_verifier import _Client, _Replica


def _replica(records: list[tuple[int, bytes | None, bytes | None]], per_batch: int,
             hw: int) -> _Replica:
    """A replica holding `records` (offset, key, value), `per_batch` to a batch."""
    r = _Replica(start=0, hw=hw)
    r.batches = []
    for i in range(0, len(records), per_batch):
        chunk = records[i:i + per_batch]
        b = RecordBatchBuilder(base_offset=chunk[0][0])
        for off, key, value in chunk:
            b.append_at(off - chunk[0][0], 1_000 + off, key, value)
        r.batches.append((chunk[0][0], chunk[-1][0], b.build()))
    return r


FULL = [(o, b"k%d" % (o % 3), b"v%d" % o) for o in range(12)]
CLEANED = [rec for rec in FULL if rec[0] >= 9]  # only the last value of each key left


def _check(replicas: dict[int, Any]) -> Any:
    return verify_partition(_Client(replicas), "t", 0, list(replicas),  # type: ignore[arg-type]
                            compacted=True)


def test_a_cleaned_replica_agrees_with_an_uncleaned_one() -> None:
    check = _check({1: _replica(FULL, 4, 12), 2: _replica(CLEANED, 3, 12)})
    assert check.compared and check.ok and check.diverged_at is None
    plain = verify_partition(_Client({1: _replica(FULL, 4, 12),  # type: ignore[arg-type]
                                      2: _replica(CLEANED, 3, 12)}), "t", 0, [1, 2])
    assert plain.diverged_at == 0  # by batch, as for a topic that is not compacted


def test_a_different_record_at_an_offset_both_hold_is_found() -> None:
    changed = [(o, k, b"other" if o == 10 else v) for o, k, v in CLEANED]
    check = _check({1: _replica(FULL, 4, 12), 2: _replica(changed, 3, 12)})
    assert check.diverged_at == 10
    nulled = [(o, k, None if o == 9 else v) for o, k, v in FULL]  # a tombstone vs a value
    assert _check({1: _replica(FULL, 4, 12), 2: _replica(nulled, 4, 12)}).diverged_at == 9
    rekeyed = [(o, b"kx" if o == 11 else k, v) for o, k, v in FULL]
    assert _check({1: _replica(FULL, 4, 12), 2: _replica(rekeyed, 4, 12)}).diverged_at == 11


def test_first_record_difference_at_the_edges() -> None:
    assert _first_record_difference([{}, {}]) is None
    assert _first_record_difference([{0: 1, 1: 2}, {1: 2}]) is None
    assert _first_record_difference([{0: 1, 1: 2}, {0: 1, 1: 3}, {1: 2}]) == 1
    assert _first_record_difference([{5: 1}, {6: 1}]) is None  # nothing held by both
