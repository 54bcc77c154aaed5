"""Compaction of magic 0/1 message sets (data Kafka 0.10 or older wrote), as Kafka's
LogCleaner does it (MemoryRecords.filterTo): their keys count in the offset map; superseded
messages go; kept ones keep their offsets and magic; an uncompressed message is copied as it
is, a wrapper whose messages all stay too, and a wrapper that lost some is rewritten (same
magic and codec, magic 1 relative inner offsets, the wrapper at the last kept offset,
Kafka's timestamps); tombstones go by Kafka's legacy delete horizon (segment last-modified
times less delete.retention.ms). Before, magic 0/1 data was never cleaned at all."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.codecs import Compression
from kafkactl.record.legacy import TIMESTAMP_TYPE_MASK, LegacyBatch, build_message_set
from kafkactl.record.memory_records import RecordBatch, iter_batches
from tests import zygote
from tests.broker.wire import Wire
from tests.log.helpers import assert_indexes_agree

LAT_MS = 5_555_555  # the LogAppendTime of the magic 1 LogAppendTime wrappers
# chunk c of 10 keys (k10c..k10c+9 at offsets 10c..) is written in FORMATS[c % 5]:
# (magic, codec, LogAppendTime)
FORMATS = [(0, Compression.NONE, False), (0, Compression.GZIP, False),
           (1, Compression.NONE, False), (1, Compression.LZ4, False),
           (1, Compression.GZIP, True)]
N = 1600
# superseded by v2 records: k0..k200 (whole chunks and the plain k200), k213 (magic 0 gzip),
# k239 (the last of a magic 1 LZ4 wrapper), k245 and k249 (magic 1 LogAppendTime),
# k1111 (magic 0 gzip)
SUPERSEDED = [*range(201), 213, 239, 245, 249, 1111]


def _magic(i: int) -> int:
    return FORMATS[(i // 10) % 5][0]


def legacy_segment(n: int = N) -> bytes:
    parts = []
    for c in range(n // 10):
        magic, codec, lat = FORMATS[c % 5]
        recs = [(1_000 + i if magic else None, b"k%d" % i, b"plain-%d" % i)
                for i in range(10 * c, 10 * c + 10)]
        kw: dict[str, Any] = {"timestamp_type": 1, "log_append_time": LAT_MS} if lat else {}
        if codec == Compression.NONE:
            parts += [build_message_set(magic, [r], base_offset=10 * c + j, **kw)
                      for j, r in enumerate(recs)]
        else:
            parts.append(build_message_set(magic, recs, codec, base_offset=10 * c, **kw))
    return b"".join(parts)


def _config(**extra: str) -> LogConfig:
    return LogConfig.from_properties({"cleanup.policy": "compact",
                                      "min.cleanable.dirty.ratio": "0.01", **extra})


def _legacy_log(d: Path, data: bytes, **extra: str) -> Log:
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(data)
    return Log(d, _config(**extra))


def _v2(items: list[tuple[bytes, bytes | None]], ts: int = 2_000) -> bytes:
    b = RecordBatchBuilder()
    for k, v in items:
        b.append(ts, k, v)
    return b.build()


def _contents(lg: Log) -> list[tuple[int, int, bytes, bytes | None]]:
    """(offset, magic, key, value) of every record, deep."""
    out = []
    for bt in lg.iter_batches():
        if isinstance(bt, LegacyBatch):
            out += [(off, m.magic, bytes(m.key), None if m.value is None else bytes(m.value))
                    for off, m in bt.iter_messages()]
        else:
            out += [(r.offset, 2, bytes(r.key), None if r.value is None else bytes(r.value))
                    for r in bt]
    return out


def _wrapper_at(lg: Log, last_offset: int) -> LegacyBatch:
    for bt in lg.iter_batches():
        if isinstance(bt, LegacyBatch) and bt.last_offset == last_offset:
            return bt
    raise AssertionError(f"no magic 0/1 entry ends at {last_offset}")


def _dump_deep(path: Path) -> str:
    r = zygote.run(["dump-log", str(path), "--deep-iteration", "--print-data-log"], text=True,
                   timeout=60)
    assert r.returncode == 0, r.stderr
    return str(r.stdout)


def test_legacy_and_v2_compacted_together(tmp_path: Path) -> None:
    lg = _legacy_log(tmp_path / "leg-0", legacy_segment())
    raw_before = (tmp_path / "leg-0" / "00000000000000000000.log").read_bytes()
    lg.roll()
    lg.append(_v2([(b"k%d" % i, b"new-%d" % i) for i in SUPERSEDED]))
    lg.roll()
    lg.append(_v2([(b"active", b"x")]))  # the active segment: never cleaned
    stats = LogCleaner().clean(lg, force=True)
    assert stats is not None
    assert stats.records_in == N + len(SUPERSEDED)
    assert stats.records_out == N
    new_at = {i: N + j for j, i in enumerate(SUPERSEDED)}
    expected = sorted(
        [(i, _magic(i), b"k%d" % i, b"plain-%d" % i) for i in range(N) if i not in new_at]
        + [(new_at[i], 2, b"k%d" % i, b"new-%d" % i) for i in SUPERSEDED]
        + [(N + len(SUPERSEDED), 2, b"active", b"x")])
    assert _contents(lg) == expected

    # a partly kept magic 0 wrapper: absolute inner offsets, at its last offset
    w = _wrapper_at(lg, 219)
    assert (w.magic, w.compression) == (0, Compression.GZIP)
    assert [off for off, _m in w.iter_messages()] == [210, 211, 212, *range(214, 220)]
    # a magic 1 LZ4 wrapper that lost its last message: the wrapper moves to 238 and
    # carries the largest kept CreateTime
    w = _wrapper_at(lg, 238)
    assert (w.magic, w.compression, w.max_timestamp) == (1, Compression.LZ4, 1_238)
    assert [off for off, _m in w.iter_messages()] == list(range(230, 239))
    assert not w.entry.message.attributes & TIMESTAMP_TYPE_MASK
    assert [m.timestamp for _o, m in w.iter_messages()] == [1_000 + i for i in range(230, 239)]
    # LogAppendTime: the wrapper and every message keep the wrapper's time
    w = _wrapper_at(lg, 248)
    assert (w.magic, w.compression, w.max_timestamp) == (1, Compression.GZIP, LAT_MS)
    assert w.entry.message.attributes & TIMESTAMP_TYPE_MASK
    assert [off for off, _m in w.iter_messages()] == [240, 241, 242, 243, 244, 246, 247, 248]
    assert {m.timestamp for _o, m in w.iter_messages()} == {LAT_MS}
    assert all(r.timestamp == LAT_MS for r in w)
    assert all(bt.is_valid() for bt in lg.iter_batches())

    # untouched entries (plain messages, fully kept wrappers) are the same bytes
    raw_after = lg.segments[0].read_bytes(0, lg.segments[0].size)
    for start, end in ((260, 300), (1500, 1600)):
        old = [bytes(raw_before[b.position:b.position + b.size])
               for b in iter_batches(raw_before) if start <= b.last_offset < end]
        new = [bytes(raw_after[b.position:b.position + b.size])
               for b in iter_batches(raw_after) if start <= b.last_offset < end]
        assert old == new and old
    for seg in lg.segments:
        assert_indexes_agree(seg)
    # reading from any offset still works (indexes of the cleaned segment)
    got = lg.read(239, 1 << 20)
    assert got is not None

    dump = "".join(_dump_deep(seg.log_path) for seg in lg.segments[:-1])
    assert "isvalid: false" not in dump.lower()
    deep = [ln for ln in dump.splitlines() if ln.startswith("| offset: ")]
    assert len(deep) == N
    assert " key: k0 payload: plain-0" not in dump and " key: k0 payload: new-0" in dump

    # a second pass has nothing to remove, and changes nothing
    lg.roll()
    again = LogCleaner().clean(lg, force=True)
    assert again is None or again.records_out == again.records_in
    assert _contents(lg) == expected
    lg.close()


def test_offsets_after_reopen_and_keyless_messages_go(tmp_path: Path) -> None:
    data = (build_message_set(1, [(1, None, b"no-key"), (2, b"a", b"a1"), (3, b"b", b"b1")],
                              Compression.GZIP)
            + build_message_set(0, [(None, None, b"no-key-0")], base_offset=3)
            + build_message_set(1, [(4, b"a", b"a2")], base_offset=4))
    lg = _legacy_log(tmp_path / "k-0", data)
    lg.roll()
    lg.append(_v2([(b"z", b"z")]))
    assert LogCleaner().clean(lg, force=True) is not None
    assert _contents(lg) == [(2, 1, b"b", b"b1"), (4, 1, b"a", b"a2"), (5, 2, b"z", b"z")]
    w = _wrapper_at(lg, 2)  # b alone: relative offset 0, the wrapper at 2
    assert (w.base_offset, w.record_count, w.max_timestamp) == (2, 1, 3)
    end = lg.log_end_offset
    lg.close()
    lg = Log(tmp_path / "k-0", _config())
    assert lg.log_end_offset == end and _contents(lg)[0][0] == 2
    lg.close()


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_partly_kept_wrapper_rewritten_with_its_codec(tmp_path: Path, magic: int,
                                                      codec: Compression) -> None:
    """Superseded by a later legacy message of the same segment (magic 0 LZ4: Kafka 0.8's
    frame checksum, which the reader checks)."""
    ts = [None if magic == 0 else 100 + i for i in range(6)]
    data = (build_message_set(magic, [(ts[i], b"k%d" % i, b"v%d" % i) for i in range(5)], codec)
            + build_message_set(magic, [(ts[5], b"k2", b"v5")], base_offset=5))
    lg = _legacy_log(tmp_path / "w-0", data)
    lg.roll()
    lg.append(_v2([(b"z", b"z")]))
    assert LogCleaner().clean(lg, force=True) is not None
    assert _contents(lg) == [(0, magic, b"k0", b"v0"), (1, magic, b"k1", b"v1"),
                             (3, magic, b"k3", b"v3"), (4, magic, b"k4", b"v4"),
                             (5, magic, b"k2", b"v5"), (6, 2, b"z", b"z")]
    w = _wrapper_at(lg, 4)
    assert (w.magic, w.compression, w.is_valid()) == (magic, codec, True)
    assert w.max_timestamp == (-1 if magic == 0 else 104)
    assert "isvalid: false" not in _dump_deep(lg.segments[0].log_path).lower()
    lg.close()


def _tombstone_log(d: Path, **extra: str) -> Log:
    data = (build_message_set(0, [(None, b"a", b"a0"), (None, b"b", b"b0")],
                              Compression.GZIP)
            + build_message_set(1, [(5, b"c", b"c0")], base_offset=2)
            # tombstones for a (magic 0, in a wrapper with a live d) and c (magic 1, plain)
            + build_message_set(0, [(None, b"a", None), (None, b"d", b"d0")], Compression.SNAPPY,
                                base_offset=3)
            + build_message_set(1, [(6, b"c", None)], base_offset=5))
    lg = _legacy_log(d, data, **extra)
    lg.roll()
    lg.append(_v2([(b"e", b"e0")]))
    lg.roll()
    lg.append(_v2([(b"f", b"f0")]))
    return lg


def test_legacy_tombstones_removed_after_delete_retention(tmp_path: Path) -> None:
    lg = _tombstone_log(tmp_path / "t-0", **{"delete.retention.ms": "0"})
    mtime = os.stat(lg.segments[1].log_path).st_mtime_ns  # the last one cleaned into seg 0
    # first pass: nothing is clean yet (Kafka's legacy horizon is 0): the tombstones stay
    assert LogCleaner().clean(lg, force=True) is not None
    assert [(o, k, v) for o, _m, k, v in _contents(lg)] == [
        (1, b"b", b"b0"), (3, b"a", None), (4, b"d", b"d0"), (5, b"c", None), (6, b"e", b"e0"),
        (7, b"f", b"f0")]
    # the cleaned segment keeps the replaced segments' last-modified time
    assert os.stat(lg.segments[0].log_path).st_mtime_ns == mtime
    # a later pass: the segment is no newer than the last clean one less 0 ms: they go
    lg.roll()
    lg.append(_v2([(b"g", b"g0")]))
    assert LogCleaner().clean(lg, force=True) is not None
    assert [(o, k, v) for o, _m, k, v in _contents(lg)] == [
        (1, b"b", b"b0"), (4, b"d", b"d0"), (6, b"e", b"e0"), (7, b"f", b"f0"), (8, b"g", b"g0")]
    w = _wrapper_at(lg, 4)
    assert (w.magic, w.compression, w.base_offset) == (0, Compression.SNAPPY, 4)
    assert "isvalid: false" not in _dump_deep(lg.segments[0].log_path).lower()
    lg.close()


def test_legacy_tombstones_kept_within_delete_retention(tmp_path: Path) -> None:
    day = 86_400_000
    lg = _tombstone_log(tmp_path / "t-0", **{"delete.retention.ms": str(day),
                                             "segment.bytes": "200"})
    assert LogCleaner().clean(lg, force=True) is not None
    lg.roll()
    lg.append(_v2([(b"g", b"g0")]))
    assert LogCleaner().clean(lg, force=True) is not None
    tombstones = [(o, k) for o, _m, k, v in _contents(lg) if v is None]
    assert tombstones == [(3, b"a"), (5, b"c")]  # modified less than a day before
    # the tombstones' segment was last modified two days before the last clean one
    segs = lg.segments
    assert segs[0].next_offset <= 6 < segs[-1].base_offset
    old = time.time() - 2 * day / 1000
    os.utime(segs[0].log_path, (old, old))
    lg.roll()
    lg.append(_v2([(b"h", b"h0")]))
    assert LogCleaner().clean(lg, force=True) is not None
    assert [(o, k) for o, _m, k, v in _contents(lg) if v is None] == []
    assert (4, 0, b"d", b"d0") in _contents(lg)
    lg.close()


# ---- a broker: the cleaner runs by itself; old and new fetch versions see the same -------
def _fetched(w: Wire, version: int, end: int) -> list[tuple[int, bytes, bytes]]:
    out: list[tuple[int, bytes, bytes]] = []
    offset = 0
    while offset < end:
        part = w.fetch("leg", offset, version=version)
        assert part["error_code"] == 0
        data = part["records"] or b""
        got = 0
        for bt in iter_batches(data):
            magic = bt.magic
            if version < 2:
                assert magic == 0
            elif version < 4:
                assert magic == 1
            recs = [(r.offset, bytes(r.key), bytes(r.value)) for r in bt
                    if not (isinstance(bt, RecordBatch) and bt.is_control)]
            out += [r for r in recs if r[0] >= offset]
            got = bt.last_offset + 1
        assert got > offset, f"no progress at {offset} (fetch v{version})"
        offset = got
    return out


def test_broker_cleans_legacy_data_and_every_fetch_version_agrees(broker_factory: Any) -> None:
    b = broker_factory(log_cleaner_backoff_ms="100")
    with Wire(b.bootstrap) as w:
        assert w.create_topic("leg", 1, {"cleanup.policy": "compact",
                                         "min.cleanable.dirty.ratio": "0.01",
                                         "segment.bytes": "20000"})["error_code"] == 0
    b.stop()
    part = b.data_dir / "leg-0"
    for f in part.iterdir():
        if f.is_file() and f.name != "partition.metadata":
            f.unlink()
    (part / "00000000000000000000.log").write_bytes(legacy_segment())
    b.start()
    now = int(time.time() * 1000)
    with Wire(b.bootstrap) as w:
        for i in SUPERSEDED:  # one batch each: the segments roll past 20000 bytes
            assert w.produce("leg", _v2([(b"k%d" % i, b"new-%d" % i)], ts=now))[
                "error_code"] == 0
        for i in range(200):  # more segments after them, so theirs is cleanable
            assert w.produce("leg", _v2([(b"pad-%d" % i, b"p" * 200)], ts=now))[
                "error_code"] == 0
        end = N + len(SUPERSEDED) + 200

        def cleaned() -> bool:
            # what the broker serves, not the file: the cleaned segment is on disk under
            # the .log name a moment before the log swaps it in for reads
            return not any(o < N and k == b"k0" for o, k, _v in _fetched(w, 12, end))

        deadline = time.monotonic() + 60
        while not cleaned():
            assert time.monotonic() < deadline, b.log()
            time.sleep(0.2)
        views = {v: _fetched(w, v, end) for v in (0, 2, 4, 12)}
    expected_tail = {(N + j, b"k%d" % i, b"new-%d" % i) for j, i in enumerate(SUPERSEDED)}
    for v, recs in views.items():
        assert recs == views[12], f"fetch v{v} differs"
    recs = views[12]
    offsets = [r[0] for r in recs]
    assert offsets == sorted(set(offsets))
    assert expected_tail <= set(recs)
    kept_legacy = [r for r in recs if r[0] < N]
    assert kept_legacy == [(i, b"k%d" % i, b"plain-%d" % i) for i in range(N)
                           if i not in SUPERSEDED]
    assert "cleaning leg-0 failed" not in b.log()
