"""Tombstones and KIP-534's delete horizon: the pass that first keeps a tombstone rewrites
its batch with the horizon (attribute bit 6, now + delete.retention.ms in the base
timestamp) and the records' timestamps unchanged; a later pass removes it only once now >=
that horizon, however old the record's own timestamp is."""

from __future__ import annotations

from pathlib import Path

from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.dump import dump_files
from kafkactl.log.dump_output import Options, Output
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.codecs import Compression
from kafkactl.record.memory_records import RecordBatch, iter_batches
from tests.log.helpers import FakeTime, assert_indexes_agree

DAY_MS = 86_400_000
OLD_TS = 1_000_000  # the records' own timestamps: far older than now - delete.retention.ms


def _config(retention_ms: int = DAY_MS) -> LogConfig:
    return LogConfig.from_properties({
        "cleanup.policy": "compact", "segment.bytes": "1048576",
        "delete.retention.ms": str(retention_ms), "min.cleanable.dirty.ratio": "0.01"})


def _batch(items: list[tuple[bytes, bytes | None]], ts: int = OLD_TS,
           compression: int = Compression.NONE) -> bytes:
    b = RecordBatchBuilder(compression=compression)
    for i, (k, v) in enumerate(items):
        b.append(ts + i, k, v, [("h", b"x")])
    return b.build()


def _log_with_tombstone(tmp_path: Path, clock: FakeTime, retention_ms: int = DAY_MS,
                        compression: int = Compression.NONE) -> Log:
    lg = Log(tmp_path / "tomb-0", _config(retention_ms), time=clock)
    lg.append(_batch([(b"a", b"a1"), (b"b", b"b1")]))
    # a's tombstone (the latest for a) beside a live record, in one batch
    lg.append(_batch([(b"a", None), (b"c", b"c1")], ts=OLD_TS + 10, compression=compression))
    lg.roll()
    lg.append(_batch([(b"d", b"d1")], ts=OLD_TS + 20))  # the active segment
    return lg


def _records(lg: Log) -> list[tuple[int, int, bytes, bytes | None]]:
    return [(r.offset, r.timestamp, bytes(r.key), None if r.value is None else bytes(r.value))
            for bt in lg.iter_batches() if not bt.is_control for r in bt]


def _batch_of(lg: Log, offset: int) -> RecordBatch:
    for bt in lg.iter_batches():
        if isinstance(bt, RecordBatch) and bt.base_offset <= offset <= bt.last_offset:
            return bt
    raise AssertionError(f"no batch holds offset {offset}")


def test_first_clean_keeps_the_tombstone_and_sets_its_delete_horizon(
        tmp_path: Path, clock: FakeTime) -> None:
    lg = _log_with_tombstone(tmp_path, clock)
    now = clock.now_ms
    assert LogCleaner(time=clock).clean(lg, force=True) is not None
    recs = _records(lg)
    # a1 is superseded; a's tombstone stays with its own offset and timestamp
    assert (0, OLD_TS, b"a", b"a1") not in recs
    assert (2, OLD_TS + 10, b"a", None) in recs, "tombstone dropped on the first clean"
    assert (3, OLD_TS + 11, b"c", b"c1") in recs
    bt = _batch_of(lg, 2)
    assert bt.has_delete_horizon and bt.delete_horizon_ms == now + DAY_MS
    assert bt.first_timestamp == now + DAY_MS  # the horizon is in the base timestamp
    assert bt.max_timestamp == OLD_TS + 11  # the max timestamp is still the records'
    assert bt.is_valid() and bt.record_count == 2
    assert [(h, bytes(v or b"")) for r in bt for h, v in r.headers] == [("h", b"x")] * 2
    # the batch without a tombstone is untouched by the horizon
    assert not _batch_of(lg, 1).has_delete_horizon
    for seg in lg.segments[:-1]:
        assert_indexes_agree(seg)


def test_tombstone_goes_only_once_its_horizon_passed(tmp_path: Path, clock: FakeTime) -> None:
    lg = _log_with_tombstone(tmp_path, clock)
    now = clock.now_ms
    LogCleaner(time=clock).clean(lg, force=True)
    # later passes keep it (and its horizon) until now >= horizon
    clock.now_ms = now + DAY_MS - 1
    LogCleaner(time=clock).clean(lg, force=True)
    assert (2, OLD_TS + 10, b"a", None) in _records(lg)
    assert _batch_of(lg, 2).delete_horizon_ms == now + DAY_MS, "the horizon moved"
    clock.now_ms = now + DAY_MS
    LogCleaner(time=clock).clean(lg, force=True)
    recs = _records(lg)
    assert [r for r in recs if r[2] == b"a"] == []
    assert (3, OLD_TS + 11, b"c", b"c1") in recs  # the rest of the batch stays
    # what is left of the batch keeps its horizon bit (Kafka keeps it) and timestamps
    bt = _batch_of(lg, 3)
    assert bt.is_valid() and [r.timestamp for r in bt] == [OLD_TS + 11]
    lg.close()
    reopened = Log(tmp_path / "tomb-0", _config(), time=clock, needs_recovery=True)
    assert _records(reopened) == recs
    reopened.close()


def test_compressed_batch_keeps_codec_and_timestamps(tmp_path: Path, clock: FakeTime) -> None:
    lg = _log_with_tombstone(tmp_path, clock, compression=Compression.GZIP)
    LogCleaner(time=clock).clean(lg, force=True)
    bt = _batch_of(lg, 2)
    assert bt.compression == Compression.GZIP and bt.has_delete_horizon and bt.is_valid()
    assert [(r.offset, r.timestamp, None if r.value is None else bytes(r.value))
            for r in bt] == [(2, OLD_TS + 10, None), (3, OLD_TS + 11, b"c1")]


def test_fetched_bytes_and_dump_log_show_real_timestamps(tmp_path: Path,
                                                         clock: FakeTime) -> None:
    lg = _log_with_tombstone(tmp_path, clock)
    now = clock.now_ms
    LogCleaner(time=clock).clean(lg, force=True)
    # what a consumer gets: the fetched bytes, decoded
    fs = lg.read(0, 1 << 20)
    data = fs.read_bytes()
    seen = [(r.offset, r.timestamp) for bt in iter_batches(memoryview(data)) for r in bt]
    assert (2, OLD_TS + 10) in seen and (3, OLD_TS + 11) in seen
    # dump-log reads the batch, shows the horizon and the records' own timestamps
    opts = Options(deep=True, print_data=True)
    lines: list[str] = []
    errors: list[str] = []
    code = dump_files([lg.segments[0].log_path], opts, Output(opts, lines.append,
                                                             errors.append))
    assert code == 0, errors
    text = "\n".join(lines)
    assert f"deleteHorizonMs: OptionalLong[{now + DAY_MS}] position: 75 CreateTime: " \
        f"{OLD_TS + 11} " in text  # the batch line: its max timestamp
    assert "isvalid: false" not in text
    assert f"| offset: 2 CreateTime: {OLD_TS + 10} keySize: 1 valueSize: -1" in text
    lg.close()


def test_recent_tombstone_also_waits_for_its_horizon(tmp_path: Path, clock: FakeTime) -> None:
    """The horizon counts from the clean that first kept the tombstone, not from its
    timestamp: a tombstone written long after its horizon would have passed stays too."""
    lg = Log(tmp_path / "tomb-0", _config(retention_ms=1000), time=clock)
    lg.append(_batch([(b"a", b"a1")], ts=OLD_TS))
    lg.append(_batch([(b"a", None)], ts=OLD_TS + 1))
    lg.roll()
    lg.append(_batch([(b"z", b"z")], ts=OLD_TS + 2))
    cleaner = LogCleaner(time=clock)
    cleaner.clean(lg, force=True)
    assert [r[3] for r in _records(lg) if r[2] == b"a"] == [None]
    clock.now_ms += 999
    cleaner.clean(lg, force=True)
    assert [r[3] for r in _records(lg) if r[2] == b"a"] == [None]
    clock.now_ms += 1
    cleaner.clean(lg, force=True)
    assert [r for r in _records(lg) if r[2] == b"a"] == []
    lg.close()


def test_zero_delete_retention_keeps_the_tombstone_through_the_first_clean(
        tmp_path: Path, clock: FakeTime) -> None:
    """delete.retention.ms=0: the clean that first sees a tombstone keeps it and stamps the
    horizon (now); a batch with no horizon yet keeps its tombstones (Kafka's
    shouldRetainDeletes). The next clean, with now >= the horizon, removes it."""
    lg = _log_with_tombstone(tmp_path, clock, retention_ms=0)
    now = clock.now_ms
    cleaner = LogCleaner(time=clock)
    assert cleaner.clean(lg, force=True) is not None
    assert (2, OLD_TS + 10, b"a", None) in _records(lg), "tombstone dropped on the first clean"
    assert _batch_of(lg, 2).delete_horizon_ms == now
    cleaner.clean(lg, force=True)  # the same millisecond: now >= the horizon
    recs = _records(lg)
    assert [r for r in recs if r[2] == b"a"] == []
    assert (3, OLD_TS + 11, b"c", b"c1") in recs
    lg.close()
