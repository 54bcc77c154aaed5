"""`kafkactl recover --dry-run` and `kafkactl dump-log` judge index files by one rule
(kafkactl.log.index_check): a damaged index is flagged by both, entry for entry, and an
index both accept is one the broker could have written (issue 30 item 17)."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from tests import zygote
from tests.hypothesis_profiles import examples
from tests.log.helpers import FakeTime, make_batch

SEG = "00000000000000000000"


def kafkactl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), input=stdin, text=True, timeout=120)


def recover_flags(part: Path) -> tuple[int, list[tuple[str, int, str]]]:
    r = kafkactl("recover", str(part), "--dry-run", "--json")
    assert "Traceback" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    return r.returncode, sorted((p["index"], p["entry"], p["kind"])
                                for s in doc["segments"] for p in s["index_problems"])


def dump_flags(*files: Path) -> tuple[int, list[tuple[str, int, str]], str]:
    r = kafkactl("dump-log", *map(str, files), "--verify-index-only", "--json")
    assert "Traceback" not in r.stderr, r.stderr
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    text = kafkactl("dump-log", *map(str, files), "--verify-index-only").stderr
    return r.returncode, sorted((o["index"], o["entry"], o["kind"]) for o in objs
                                if o["type"] == "index_problem"), text


def _entries(path: Path, size: int, fmt: str) -> list[tuple[int, ...]]:
    data = path.read_bytes()
    return [struct.unpack_from(fmt, data, i) for i in range(0, len(data) - size + 1, size)]


def test_a_damaged_index_from_a_broker_is_flagged_by_both(broker_factory: Any) -> None:
    broker = broker_factory(log_index_interval_bytes="200")
    lines = "".join(f"record {i:05d} " + "x" * (i % 50) + "\n" for i in range(3000))
    r = kafkactl("produce", "-b", broker.bootstrap, "-t", "idx", "--batch-size", "400",
                 "-q", stdin=lines)
    assert r.returncode == 0, r.stderr
    assert broker.stop() == 0, broker.log()
    part = broker.data_dir / "idx-0"
    index, time_index = part / f"{SEG}.index", part / f"{SEG}.timeindex"
    offsets = _entries(index, 8, ">ii")
    assert len(offsets) > 10, "the test needs a well-filled offset index"
    # the undamaged log: both call it consistent
    assert kafkactl("recover", str(part), "--dry-run").returncode == 0
    assert kafkactl("dump-log", str(index), str(time_index)).returncode == 0
    # swap two offset entries (each still points at a real batch: out of order) and
    # point a third one at the middle of a batch
    raw = bytearray(index.read_bytes())
    raw[16:24], raw[24:32] = raw[24:32], raw[16:24]
    rel, pos = offsets[6]
    struct.pack_into(">ii", raw, 6 * 8, rel, pos + 5)
    index.write_bytes(bytes(raw))
    # a time entry whose timestamp is not the log's
    traw = bytearray(time_index.read_bytes())
    ts, trel = struct.unpack_from(">qi", traw, 0)
    struct.pack_into(">qi", traw, 0, ts - 1, trel)
    time_index.write_bytes(bytes(traw))

    assert kafkactl("recover", str(part), "--dry-run").returncode == 1
    assert kafkactl("dump-log", str(index), "--verify-index-only").returncode == 1
    drc, dflagged, text = dump_flags(index, time_index)
    assert "does not increase over the previous entry" in text  # the swapped entries
    assert f"Mismatches in :{index.resolve()}" in text
    assert f"Index offset: {offsets[6][0]}, log offset: -1" in text
    assert f"Found timestamp mismatch in :{time_index.resolve()}" in text
    rc, flagged = recover_flags(part)
    assert (rc, drc) == (1, 1)
    assert flagged == dflagged
    assert ("offset", 2, "out_of_order") in flagged or ("offset", 3, "out_of_order") in flagged
    assert ("offset", 6, "mismatch") in flagged and ("time", 0, "mismatch") in flagged
    # the repair makes both agree the log is consistent again
    assert kafkactl("recover", str(part)).returncode == 0
    assert recover_flags(part) == (0, [])
    assert dump_flags(index, time_index)[:2] == (0, [])


def test_a_batch_larger_than_max_message_size_is_no_mismatch(tmp_path: Path) -> None:
    """DumpLogSegments reads --max-message-size bytes at each entry; a larger indexed batch
    made dump-log report a mismatch recover did not see. The check reads whole batches."""
    cfg = LogConfig(index_interval_bytes=100)
    log = Log(tmp_path / "big-0", cfg, time=FakeTime())
    for size in (10, 200, 700_000, 10):
        log.append(make_batch(1, value_size=size))
    log.close()
    part = tmp_path / "big-0"
    index = part / f"{SEG}.index"
    assert (2, 80 + 270) in _entries(index, 8, ">ii")  # the 700 kB batch is indexed
    r = kafkactl("dump-log", str(index), "--max-message-size", "1000")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert recover_flags(part) == (0, [])


def _segment(directory: Path, sizes: list[tuple[int, int, int]]) -> Path:
    cfg = LogConfig(index_interval_bytes=150)
    log = Log(directory, cfg, time=FakeTime())
    for count, ts, value in sizes:
        log.append(make_batch(count, ts=ts, value_size=value))
    log.close()
    return directory


@settings(max_examples=examples(20), deadline=None)
@given(
    batches=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 5000), st.integers(1, 120)),
                     min_size=3, max_size=25),
    damage=st.lists(st.tuples(st.sampled_from(["index", "timeindex"]), st.integers(0, 10**6),
                              st.integers(0, 7), st.booleans()), min_size=1, max_size=3),
)
def test_any_damage_is_judged_alike(tmp_path_factory: pytest.TempPathFactory,
                                    batches: list[tuple[int, int, int]],
                                    damage: list[tuple[str, int, int, bool]]) -> None:
    """Bit flips, zeroed and swapped entries anywhere in either index: the two commands
    flag exactly the same entries (in-process, through the same functions the CLIs call)."""
    from kafkactl.log.dump import Options, Output, dump_files
    from kafkactl.log.recovery import inspect_segment

    part = _segment(tmp_path_factory.mktemp("p") / "t-0", batches)
    for suffix, where, bit, swap in damage:
        path = part / f"{SEG}.{suffix}"
        raw = bytearray(path.read_bytes())
        if not raw:
            continue
        size = 8 if suffix == "index" else 12
        i = where % len(raw)
        if swap and len(raw) >= 2 * size:
            a, b = (i // size) * size, ((i // size + 1) % (len(raw) // size)) * size
            raw[a:a + size], raw[b:b + size] = raw[b:b + size], raw[a:a + size]
        else:
            raw[i] ^= 1 << bit
        path.write_bytes(bytes(raw))
    report = inspect_segment(part / f"{SEG}.log")
    recovered = sorted((p["index"], p["entry"], p["kind"]) for p in report.index_problems)
    lines: list[str] = []
    opts = Options(verify_only=True, as_json=True)
    dump_files([part / f"{SEG}.index", part / f"{SEG}.timeindex"], opts,
               Output(opts, out=lines.append, err=lines.append))
    dumped = sorted((o["index"], o["entry"], o["kind"]) for o in map(json.loads, lines)
                    if o["type"] == "index_problem")
    assert recovered == dumped
    assert report.indexes_rebuilt == bool(recovered)
