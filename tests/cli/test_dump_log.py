"""Golden-output tests for `kafkactl dump-log` (Kafka DumpLogSegments' line formats).

Segments are built with our RecordBatchBuilder / build_message_set and the log package's
index classes, dumped by a real `python -m kafkactl dump-log` process, and compared with
the expected text in tests/cli/golden/ (the segment directory is written as {DIR}).
Set KAFKACTL_REGEN_GOLDEN=1 to rewrite the golden files after a deliberate format change.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

from kafkactl.log.dump import Options, Output, dump_files
from kafkactl.log.offset_index import OffsetIndex
from kafkactl.log.time_index import TimeIndex
from kafkactl.record.batch import (
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    set_log_append_time,
)
from kafkactl.record.codecs import Compression
from kafkactl.record.legacy import build_message_set
from tests import zygote

GOLDEN = Path(__file__).parent / "golden"
SEG = "00000000000000000000"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(["dump-log", *args], text=True, timeout=60)


def check_golden(name: str, text: str, directory: Path) -> None:
    text = text.replace(str(directory.resolve()), "{DIR}").replace(str(directory), "{DIR}")
    path = GOLDEN / name
    if os.environ.get("KAFKACTL_REGEN_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def v2_segment() -> list[bytes]:
    """Four batches: plain, idempotent with headers, LogAppendTime, a COMMIT marker."""
    b1 = RecordBatchBuilder(partition_leader_epoch=0)
    b1.append(1524709879130, b"key", b"value")
    b2 = RecordBatchBuilder(base_offset=1, partition_leader_epoch=0, producer_id=4000,
                            producer_epoch=0, base_sequence=0)
    b2.append(1700000000123, b"a", b"hello")
    b2.append(1700000000456, None, b"world", [("trace", b"1"), ("span", None)])
    b3 = RecordBatchBuilder(base_offset=3, partition_leader_epoch=1)
    b3.append(1700000001000, b"k", b"")
    b3.append(1700000001001, b"k", None)
    raw3 = bytearray(b3.build())
    set_log_append_time(raw3, 0, 1700000009999)
    b4 = RecordBatchBuilder(base_offset=5, partition_leader_epoch=1, producer_id=4001,
                            producer_epoch=2, is_transactional=True, is_control=True)
    b4.append(1700000002000, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 7))
    return [b1.build(), b2.build(), bytes(raw3), b4.build()]


@pytest.fixture
def v2_dir(tmp_path: Path) -> Path:
    (tmp_path / f"{SEG}.log").write_bytes(b"".join(v2_segment()))
    return tmp_path


def test_batch_lines(v2_dir: Path) -> None:
    r = run(str(v2_dir / f"{SEG}.log"))
    assert r.returncode == 0 and r.stderr == ""
    check_golden("v2_batches.txt", r.stdout, v2_dir)


def test_print_data_log(v2_dir: Path) -> None:
    r = run(str(v2_dir / f"{SEG}.log"), "--print-data-log")
    assert r.returncode == 0, r.stderr
    check_golden("v2_print_data_log.txt", r.stdout, v2_dir)
    # the control batch gets its marker but never a key or payload
    marker = [ln for ln in r.stdout.splitlines() if "endTxnMarker" in ln]
    assert marker == ["| offset: 5 CreateTime: 1700000002000 keySize: 4 valueSize: 6 "
                      "sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 7"]


def test_skip_record_metadata(v2_dir: Path) -> None:
    r = run(str(v2_dir / f"{SEG}.log"), "--print-data-log", "--skip-record-metadata")
    assert r.returncode == 0, r.stderr
    check_golden("v2_skip_metadata.txt", r.stdout, v2_dir)


def test_deep_iteration_without_data(v2_dir: Path) -> None:
    r = run(str(v2_dir / f"{SEG}.log"), "--deep-iteration")
    lines = r.stdout.splitlines()
    assert sum(ln.startswith("| offset: ") for ln in lines) == 6
    assert not any("payload" in ln for ln in lines)


def test_trailing_garbage_is_reported_with_its_size(v2_dir: Path) -> None:
    log = v2_dir / f"{SEG}.log"
    good = log.read_bytes()
    log.write_bytes(good + b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00garbage")
    r = run(str(log))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stdout.splitlines()[-1] == f"Found 19 invalid bytes at the end of {SEG}.log"
    # --max-bytes cuts the read and silences the trailing report, as upstream
    r = run(str(log), "--max-bytes", str(len(good) - 1))
    assert "invalid bytes" not in r.stdout
    assert r.stdout.count("baseOffset:") == 3


def test_truncated_tail_at_every_byte_never_tracebacks(tmp_path: Path) -> None:
    batches = v2_segment()
    data = b"".join(batches)
    ends = [sum(len(b) for b in batches[: i + 1]) for i in range(len(batches))]
    log = tmp_path / f"{SEG}.log"
    opts = Options(print_data=True, deep=True)
    for cut in range(ends[2] + 1, ends[3]):  # every cut inside the last batch, in-process
        log.write_bytes(data[:cut])
        lines: list[str] = []
        errors: list[str] = []
        code = dump_files([log], opts, Output(opts, lines.append, errors.append))
        assert code == 1 and errors == []
        assert sum(ln.startswith("baseOffset:") for ln in lines) == 3
        assert lines[-1] == f"Found {cut - ends[2]} invalid bytes at the end of {SEG}.log"
    log.write_bytes(data[: ends[2] + 30])  # and once through the real CLI
    r = run(str(log))
    assert "Traceback" not in r.stderr and r.returncode == 1
    assert r.stdout.splitlines()[-1] == f"Found 30 invalid bytes at the end of {SEG}.log"


def test_flipped_bit_shows_isvalid_false(v2_dir: Path) -> None:
    log = v2_dir / f"{SEG}.log"
    buf = bytearray(log.read_bytes())
    buf[76 + 70] ^= 0x01  # inside batch 2's records
    log.write_bytes(bytes(buf))
    r = run(str(log), "--print-data-log")
    assert "Traceback" not in r.stderr
    batch_lines = [ln for ln in r.stdout.splitlines() if ln.startswith("baseOffset")]
    assert [ln.endswith("isvalid: true") for ln in batch_lines] == [True, False, True, True]
    assert r.returncode == 1


def test_legacy_segment(tmp_path: Path) -> None:
    data = (
        build_message_set(0, [(None, b"key", b"value")])
        + build_message_set(0, [(None, None, b"value")], base_offset=1)
        + build_message_set(1, [(1524709879130, b"key", b"value")], base_offset=2)
        + build_message_set(1, [(10, b"x", b"1"), (12, None, b"2")], Compression.NONE,
                            base_offset=3, timestamp_type=TimestampType.LOG_APPEND_TIME,
                            log_append_time=99)
    )
    (tmp_path / f"{SEG}.log").write_bytes(data)
    r = run(str(tmp_path / f"{SEG}.log"), "--print-data-log")
    assert r.returncode == 0, r.stderr
    check_golden("legacy.txt", r.stdout, tmp_path)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_compressed_wrapper_deep_iteration(tmp_path: Path, magic: int,
                                                  codec: Compression) -> None:
    data = build_message_set(magic, [(10 + i, b"k%d" % i, b"v%d" % i) for i in range(3)],
                             codec, base_offset=1028)
    (tmp_path / f"{SEG}.log").write_bytes(data)
    r = run(str(tmp_path / f"{SEG}.log"), "--print-data-log")
    lines = r.stdout.splitlines()
    assert r.returncode == 0, r.stderr
    assert lines[2].startswith("offset: 1030 position: 0 ")
    assert f"magic: {magic} compresscodec: {codec.java_name} " in lines[2]
    offsets = [int(ln.split()[2]) for ln in lines[3:]]
    assert offsets == [1028, 1029, 1030]
    assert lines[3].endswith("} key: k0 payload: v0")


def test_compressed_v2_batches(tmp_path: Path) -> None:
    parts = []
    for i, codec in enumerate(Compression):
        b = RecordBatchBuilder(compression=codec, base_offset=2 * i)
        b.append(1000 + i, b"k", b"v" * 50)
        b.append(1000 + i, None, b"w")
        parts.append(b.build())
    (tmp_path / f"{SEG}.log").write_bytes(b"".join(parts))
    r = run(str(tmp_path / f"{SEG}.log"), "--print-data-log")
    assert r.returncode == 0, r.stderr
    codecs = [ln.split("compresscodec: ")[1].split()[0] for ln in r.stdout.splitlines()
              if ln.startswith("baseOffset")]
    assert codecs == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert r.stdout.count("payload: " + "v" * 50) == 5


def _write_indexes(directory: Path, batches: list[bytes], entries: list[tuple[int, int]],
                   times: list[tuple[int, int]]) -> None:
    (directory / f"{SEG}.log").write_bytes(b"".join(batches))
    idx = OffsetIndex(directory / f"{SEG}.index", 0, 1024)
    idx.resize(1024)
    for off, pos in entries:
        idx.append(off, pos)
    idx.trim_to_valid_size()
    idx.close()
    tidx = TimeIndex(directory / f"{SEG}.timeindex", 0, 1200)
    tidx.resize(1200)
    for ts, off in times:
        tidx.maybe_append(ts, off)
    tidx.trim_to_valid_size()
    tidx.close()


def test_index_and_timeindex(v2_dir: Path) -> None:
    batches = v2_segment()
    pos = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    last = [RecordBatch(b).last_offset for b in batches]
    _write_indexes(v2_dir, batches, [(last[1], pos[1]), (last[3], pos[3])],
                   [(1700000000456, last[1]), (1700000009999, last[2])])
    r = run(str(v2_dir / f"{SEG}.index"), str(v2_dir / f"{SEG}.timeindex"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    check_golden("indexes.txt", r.stdout, v2_dir)
    r = run(str(v2_dir / f"{SEG}.index"), "--verify-index-only")
    assert r.returncode == 0 and r.stdout == f"Dumping {v2_dir / SEG}.index\n"
    r = run(str(v2_dir / f"{SEG}.index"), str(v2_dir / f"{SEG}.timeindex"),
            "--index-sanity-check")
    assert r.stdout.splitlines()[1] == f"{v2_dir / SEG}.index passed sanity check."
    assert r.stdout.splitlines()[3] == f"{v2_dir / SEG}.timeindex passed sanity check."


def test_index_mismatches_go_to_stderr(v2_dir: Path) -> None:
    batches = v2_segment()
    pos = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    # entry 1 names the batch's base offset instead of its last offset (a classic bug)
    _write_indexes(v2_dir, batches, [(1, pos[1]), (5, pos[3])],
                   [(1700000000400, 2), (1700000000300, 4)])
    r = run(str(v2_dir / f"{SEG}.index"), str(v2_dir / f"{SEG}.timeindex"))
    assert "Traceback" not in r.stderr
    assert r.returncode == 1
    check_golden("index_mismatch.stderr.txt", r.stderr, v2_dir)


def test_empty_index(tmp_path: Path) -> None:
    (tmp_path / f"{SEG}.log").write_bytes(b"")
    (tmp_path / f"{SEG}.index").write_bytes(b"")
    r = run(str(tmp_path / f"{SEG}.index"))
    assert r.stdout.splitlines() == [f"Dumping {tmp_path / SEG}.index",
                                     f"{tmp_path / SEG}.index is empty."]


def test_json_lines(v2_dir: Path) -> None:
    r = run(str(v2_dir / f"{SEG}.log"), "--print-data-log", "--json")
    objs = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert [o["type"] for o in objs][:4] == ["file", "log", "batch", "record"]
    batches = [o for o in objs if o["type"] == "batch"]
    assert batches[0]["crc"] == 2857248333 and batches[0]["size"] == 76
    assert batches[2]["timestamp_type"] == "LogAppendTime"
    recs = [o for o in objs if o["type"] == "record"]
    assert recs[0]["key"] == "key" and recs[0]["payload"] == "value"
    assert recs[2]["header_keys"] == ["trace", "span"]


def test_bad_input_is_a_sentence_not_a_traceback(tmp_path: Path) -> None:
    r = run(str(tmp_path / "missing.log"), str(tmp_path / "notes.txt"))
    assert "Traceback" not in r.stderr
    assert r.returncode == 2
    assert f"Ignoring unknown file {tmp_path / 'notes.txt'}" in r.stderr
    assert "file not found" in r.stderr
    odd = tmp_path / f"{SEG}.index"
    odd.write_bytes(b"\x00" * 7)
    (tmp_path / f"{SEG}.log").write_bytes(b"")
    r = run(str(odd), "--index-sanity-check")
    assert "Traceback" not in r.stderr
    noise = tmp_path / "00000000000000000042.log"
    noise.write_bytes(os.urandom(300))
    r = run(str(noise), "--print-data-log")
    assert "Traceback" not in r.stderr
    assert r.stdout.splitlines()[1] == "Log starting offset: 42"


def test_nothing_dumped_is_an_error(tmp_path: Path) -> None:
    """A directory or a file that is no segment: the "Ignoring" note, then one error line
    and a non-zero exit, so scripts see that nothing was dumped."""
    notes = tmp_path / "notalog.txt"
    notes.write_text("x")
    for target in (tmp_path, notes):
        r = run(str(target))
        assert r.returncode == 2, (target, r.stderr)
        assert f"Ignoring unknown file {target}" in r.stderr
        assert "error: nothing was dumped" in r.stderr
        assert r.stdout == f"Dumping {target}\n"
    r = run(str(tmp_path))
    assert f"{tmp_path / '*.log'}" in r.stderr  # a directory: how to name its files


def test_errors_use_the_one_error_style(tmp_path: Path) -> None:
    r = run(str(tmp_path / "missing.log"))
    assert r.returncode == 2
    assert f"error: Cannot dump {tmp_path / 'missing.log'}: file not found" in r.stderr
