"""LogCleaner on real Log directories: latest value per key survives, offsets are kept,
tombstones go in a clean after delete.retention.ms, the active segment is untouched, and a crash at
every step of the swap leaves a log that reopens intact."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kafkactl.log.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_checkpoint
from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatchBuilder

KEYS = 1000


def _config(**extra: str) -> LogConfig:
    props = {"cleanup.policy": "compact", "segment.bytes": "65536",
             "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01"}
    props.update(extra)
    return LogConfig.from_properties(props)


def _fill(lg: Log, rounds: int = 4, seed: int = 7) -> dict[bytes, bytes | None]:
    """Many versions of KEYS keys plus tombstones; returns the expected final state."""
    rng = random.Random(seed)
    latest: dict[bytes, bytes | None] = {}
    ts = 1_000_000
    for r in range(rounds):
        order = list(range(KEYS))
        rng.shuffle(order)
        for start in range(0, KEYS, 50):
            b = RecordBatchBuilder()
            for k in order[start:start + 50]:
                key = f"key-{k}".encode()
                value = None if (r == rounds - 1 and k % 10 == 0) else f"v{r}-{k}".encode()
                b.append(ts, key, value)
                latest[key] = value
                ts += 1
            lg.append(b.build())
    # a few records in the active segment that must not be touched
    lg.roll()
    b = RecordBatchBuilder()
    b.append(ts, b"key-1", b"active")
    lg.append(b.build())
    latest[b"key-1"] = b"active"
    return latest


def _state(lg: Log) -> tuple[dict[bytes, bytes | None], list[int]]:
    seen: dict[bytes, bytes | None] = {}
    offsets = []
    for batch in lg.iter_batches():
        for rec in batch:
            offsets.append(rec.offset)
            seen[bytes(rec.key)] = None if rec.value is None else bytes(rec.value)
    return seen, offsets


def _live(state: dict[bytes, bytes | None]) -> dict[bytes, bytes]:
    return {k: v for k, v in state.items() if v is not None}


def test_compaction_keeps_latest_value_per_key(tmp_path: Path) -> None:
    lg = Log(tmp_path / "compacted-0", _config())
    expected = _fill(lg)
    before_end = lg.log_end_offset
    active_bytes = lg.active_segment.read_bytes(0, lg.active_segment.size)
    stats = LogCleaner().clean(lg, force=True)
    assert stats is not None and stats.records_out < stats.records_in
    # the first clean keeps the tombstones and stamps their delete horizon (now +
    # delete.retention.ms=0: KIP-534); the second removes them
    assert LogCleaner().clean(lg, force=True) is not None
    state, offsets = _state(lg)
    assert _live(state) == _live(expected)
    # tombstones are gone; each key appears once
    assert not [k for k, v in state.items() if v is None]
    assert len(offsets) == len(set(offsets)) and offsets == sorted(offsets)
    assert len(offsets) == len(_live(expected)) + 1  # + the older key-1 still in a segment
    assert lg.log_end_offset == before_end
    assert lg.active_segment.read_bytes(0, lg.active_segment.size) == active_bytes
    # surviving offsets are the originals (gaps): the key-5 record of round 3
    for batch in lg.iter_batches():
        for rec in batch:
            if rec.key is not None and bytes(rec.key) == b"key-5":
                assert rec.offset >= 3 * KEYS
    cp = read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert cp[("compacted", 0)] == lg.active_segment.base_offset
    # reads by offset still work across the gaps
    fs = lg.read(0, 1 << 20)
    assert fs.length > 0
    lg.close()
    reopened = Log(tmp_path / "compacted-0", _config(), needs_recovery=True)
    assert _state(reopened)[0] == state
    reopened.close()


def test_tombstones_kept_until_delete_retention(tmp_path: Path) -> None:
    lg = Log(tmp_path / "keep-0", _config(**{"delete.retention.ms": str(10**14)}))
    expected = _fill(lg)
    LogCleaner().clean(lg, force=True)
    state, _ = _state(lg)
    tombstones = {k for k, v in expected.items() if v is None}
    assert tombstones and all(k in state and state[k] is None for k in tombstones)
    assert _live(state) == _live(expected)
    lg.close()


def test_second_clean_only_needs_dirty_part_and_is_idempotent(tmp_path: Path) -> None:
    lg = Log(tmp_path / "twice-0", _config())
    _fill(lg)
    cleaner = LogCleaner()
    cleaner.clean(lg, force=True)
    assert cleaner.clean(lg) is None  # nothing dirty
    cleaner.clean(lg, force=True)  # the tombstones go (their horizon, the first clean's now)
    state1 = _state(lg)
    assert cleaner.clean(lg) is None
    cleaner.clean(lg, force=True)
    assert _state(lg) == state1
    lg.close()


@pytest.mark.parametrize("stop_after", [1, 2, 3])
def test_crash_at_each_swap_step_reopens_intact(tmp_path: Path, stop_after: int) -> None:
    d = tmp_path / "crash-0"
    lg = Log(d, _config())
    expected = _fill(lg)
    cleaner = LogCleaner()
    plan = cleaner.prepare(lg, force=True)
    assert plan is not None
    stats, swaps = plan
    assert swaps
    if stop_after > 1:
        cleaner.commit(lg, stats, swaps, stop_after=stop_after)
    # "crash": no clean close, leftovers (.cleaned / .swap / missing indexes) on disk
    for seg in lg.segments:
        seg.close()
    reopened = Log(d, _config(), needs_recovery=True)
    state, offsets = _state(reopened)
    assert _live(state) == _live(expected)
    assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))
    assert not list(d.glob("*.cleaned")) and not list(d.glob("*.swap"))
    LogCleaner().clean(reopened, force=True)  # and it can still be cleaned
    assert _live(_state(reopened)[0]) == _live(expected)
    reopened.close()


def test_records_without_a_key_are_not_kept(tmp_path: Path) -> None:
    """As Kafka's cleaner (shouldRetainRecord: a record with no key is invalid for
    compaction): keyless records written before the topic was compacted are removed by
    the first clean; the keyed ones keep their latest values; the active segment is kept."""
    lg = Log(tmp_path / "switched-0", _config())
    b = RecordBatchBuilder()
    for i in range(10):  # written while the topic was not compacted
        b.append(1_000 + i, None, b"no-key-%d" % i)
    lg.append(b.build())
    b = RecordBatchBuilder()
    b.append(2_000, b"k", b"old")
    b.append(2_001, None, b"no-key-mixed")
    b.append(2_002, b"k", b"new")
    lg.append(b.build())
    lg.roll()
    b = RecordBatchBuilder()
    b.append(3_000, None, b"active, keyless")
    lg.append(b.build())
    assert LogCleaner().clean(lg, force=True) is not None
    got = [(None if r.key is None else bytes(r.key), bytes(r.value), r.offset)
           for batch in lg.iter_batches() for r in batch]
    assert got == [(b"k", b"new", 12), (None, b"active, keyless", 13)], got
    lg.close()


def _superseded_first_segments(d: Path) -> tuple[Log, dict[bytes, bytes]]:
    """A log of segments of ~16 KiB (one per cleaned group) whose first ones hold only
    values written again later: their group compacts to nothing, and the first segment
    is kept, empty."""
    lg = Log(d, _config(**{"segment.bytes": "16384"}))
    latest: dict[bytes, bytes] = {}
    ts = 1_000
    for version in range(2):
        for k in range(30):
            b = RecordBatchBuilder()
            value = b"%d-%d-" % (version, k) + b"x" * 1000
            b.append(ts, b"key-%d" % k, value)
            latest[b"key-%d" % k] = value
            ts += 1
            lg.append(b.build())
    lg.roll()
    b = RecordBatchBuilder()
    b.append(ts, b"key-0", b"active")
    lg.append(b.build())
    latest[b"key-0"] = b"active"
    return lg, latest


def _crash_and_reopen(lg: Log, d: Path) -> Log:
    for seg in lg.segments:
        seg.close()
    return Log(d, _config(**{"segment.bytes": "16384"}), needs_recovery=True)


@pytest.mark.parametrize("stop_after", [2, 3, 4])
def test_a_crash_while_the_empty_first_segment_is_swapped_loses_nothing(
        tmp_path: Path, stop_after: int) -> None:
    """A SIGKILL while the first group's (empty) result is swapped in: at the next start
    the empty first segment has no index files, which is no evidence of lost bytes (it
    cut every later segment: the whole partition was lost and its offsets restarted at
    0); the same with the first segment already emptied by an earlier clean; and
    `kafkactl recover` of the crashed dir agrees."""
    import shutil

    from kafkactl.log.repair import repair_partition

    d = tmp_path / "superseded-0"
    lg, latest = _superseded_first_segments(d)
    end = lg.log_end_offset
    cleaner = LogCleaner()
    plan = cleaner.prepare(lg, force=True)
    assert plan is not None
    stats, swaps = plan
    assert swaps[0].records_out == 0  # the first group compacts to nothing
    cleaner.commit(lg, stats, swaps, stop_after=stop_after)
    copy = tmp_path / "copy" / d.name
    shutil.copytree(d, copy)  # the dir as the crash left it, for `kafkactl recover`
    first_end, first_latest = end, dict(latest)
    reopened = _crash_and_reopen(lg, d)
    state, offsets = _state(reopened)
    assert {k: v for k, v in state.items() if v is not None} == latest
    assert reopened.log_end_offset == end
    assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))
    LogCleaner().clean(reopened, force=True)  # the first segment is empty now
    assert reopened.segments[0].size == 0
    # more versions, then a crash after the (already empty) first segment's indexes went
    for k in range(30):
        b = RecordBatchBuilder()
        b.append(10_000 + k, b"key-%d" % k, b"again-%d" % k)
        reopened.append(b.build())
        latest[b"key-%d" % k] = b"again-%d" % k
    reopened.roll()
    end = reopened.log_end_offset
    cleaner = LogCleaner()
    plan = cleaner.prepare(reopened, force=True)
    assert plan is not None
    cleaner.commit(reopened, *plan, stop_after=2)
    again = _crash_and_reopen(reopened, d)
    assert {k: v for k, v in _state(again)[0].items() if v is not None} == latest
    assert again.log_end_offset == end
    again.close()
    repaired = repair_partition(copy, dry_run=False, config=_config())
    assert repaired.cut is None
    lg2 = Log(copy, _config(**{"segment.bytes": "16384"}), needs_recovery=True)
    assert lg2.log_end_offset == first_end
    assert {k: v for k, v in _state(lg2)[0].items() if v is not None} == first_latest
    lg2.close()
