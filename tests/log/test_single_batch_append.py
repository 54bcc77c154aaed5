"""Log.append's single-batch fast path (one magic-2 batch in a writable buffer) against the
general loop (the same batches given as read-only bytes), at the edges where the two could
disagree: a segment rolled exactly at, one byte below and one byte above segment.bytes,
index entries at, below and above index.interval.bytes, and LogAppendTime/old formats that
must leave the fast path. Both logs must end byte-identical (segments and both indexes)
and report the same LogAppendInfo."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from tests.hypothesis_profiles import examples
from tests.log.helpers import FakeTime, make_batch


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())
            if p.suffix in (".log", ".index", ".timeindex")}


def run_both(tmp: Path, config: LogConfig, batches: list[bytes]) -> tuple[Log, Log]:
    fast = Log(tmp / "fast-0", config, time=FakeTime())
    general = Log(tmp / "general-0", config, time=FakeTime())
    for b in batches:
        a = fast.append(bytearray(b))       # the single-batch path
        g = general.append(bytes(b))        # read-only: the general loop (copies)
        assert dataclasses.astuple(a) == dataclasses.astuple(g)
    for log in (fast, general):
        log.flush()
    assert [s.base_offset for s in fast.segments] == [s.base_offset for s in general.segments]
    ff, gf = files(fast.dir), files(general.dir)
    assert ff.keys() == gf.keys()
    for name in ff:
        assert ff[name] == gf[name], name
    return fast, general


@pytest.mark.parametrize("slack", [-1, 0, 1])
def test_segment_roll_at_the_boundary(tmp_path: Path, slack: int) -> None:
    batch = make_batch(4, value_size=50)
    size = len(batch)
    config = LogConfig(segment_bytes=3 * size + slack, segment_index_bytes=4096,
                       index_interval_bytes=4096)
    fast, general = run_both(tmp_path, config, [batch] * 10)
    # exactly three batches fit a segment at slack >= 0, two at -1
    per_segment = 3 if slack >= 0 else 2
    assert [s.base_offset for s in fast.segments][:2] == [0, 4 * per_segment]
    fast.close()
    general.close()


@pytest.mark.parametrize("slack", [-1, 0, 1])
def test_index_interval_at_the_boundary(tmp_path: Path, slack: int) -> None:
    batch = make_batch(2, value_size=30)
    config = LogConfig(segment_index_bytes=4096, index_interval_bytes=len(batch) + slack)
    fast, general = run_both(tmp_path, config, [batch] * 12)
    entries = list(fast.segments[0].offset_index.entries())
    assert entries and entries == list(general.segments[0].offset_index.entries())
    fast.close()
    general.close()


def test_what_the_fast_path_must_decline(tmp_path: Path) -> None:
    """Two batches in one buffer, and LogAppendTime, take the general loop either way."""
    b = make_batch(3)
    log = Log(tmp_path / "t-0", LogConfig(segment_index_bytes=4096), time=FakeTime())
    info = log.append(bytearray(b + b))
    assert (info.first_offset, info.last_offset, info.num_records) == (0, 5, 6)
    info = log.append(bytearray(b), log_append_time=123)
    assert info.log_append_time == 123 and info.max_timestamp == 123
    log.close()


@settings(max_examples=examples(25), deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.integers(0, 300)), min_size=1, max_size=25),
       st.integers(-1, 1), st.integers(-1, 1))
def test_random_batches_around_the_edges(tmp_path_factory: pytest.TempPathFactory, shapes,
                                         seg_slack: int, idx_slack: int) -> None:
    batches = [make_batch(count, ts=1_000 + i, value_size=vs)
               for i, (count, vs) in enumerate(shapes)]
    first = len(batches[0])
    # (never below the biggest batch: a log refuses a batch larger than segment.bytes)
    config = LogConfig(segment_bytes=max(first * 2 + seg_slack, first + 1,
                                         max(len(b) for b in batches)),
                       segment_index_bytes=4096, index_interval_bytes=max(first + idx_slack, 1))
    fast, general = run_both(tmp_path_factory.mktemp("edges"), config, batches)
    fast.close()
    general.close()
