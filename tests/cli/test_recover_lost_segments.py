"""`kafkactl recover` follows Kafka's loader where a segment lost its `.log` or its bytes,
where recovery leaves the log end below the log start, and where a torn transaction marker
is shorter than a batch header:

- a missing or emptied middle `.log` loses only its own offsets (reported: a gap), the
  later segments are kept (no cut);
- a log end below the log-start-offset checkpoint: every segment is deleted and the log
  restarts empty at the log start (no offset handed out twice);
- a final ABORT marker torn to fewer than 61 bytes is still reported as a lost marker
  (its transaction left open), from whatever header bytes are on disk.

Every segment here is written by kafkactl's own Log (or Partition, for transactions)."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkactl.cli.app import app
from kafkactl.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    write_checkpoint,
)
from kafkactl.log.config import LogConfig
from kafkactl.log.leader_epoch_cache import LeaderEpochCache
from kafkactl.log.log import Log
from kafkactl.log.producer_snapshot import encode_snapshot
from kafkactl.record.memory_records import iter_batches
from tests.log.helpers import FakeTime, closed_log_of_four_segments
from tests.log.test_transactions import PID_A, Producer, open_partition, produce

runner = CliRunner()
CFG = dataclasses.replace(LogConfig(), segment_bytes=1500, index_interval_bytes=300)


def _log_dir(tmp_path: Path, name: str = "rc-0") -> tuple[Path, Path, list[Path], int]:
    root = tmp_path / "logs"
    part = root / name
    paths, end = closed_log_of_four_segments(part, CFG)
    write_checkpoint(root / RECOVERY_POINT_CHECKPOINT, {(name[:-2], 0): end})
    return root, part, paths, end


def _offsets(part: Path) -> list[int]:
    return [o for s in sorted(part.glob("*.log")) for b in iter_batches(s.read_bytes())
            for o in range(b.base_offset, b.last_offset + 1)]


def _base(p: Path) -> int:
    return int(p.name[:20])


def test_missing_and_emptied_middle_segments_lose_only_their_offsets(tmp_path: Path) -> None:
    """`: > seg1.log; rm seg2.log`: both reported with their offsets; nothing is cut, the
    later segments stay, the orphan index files of seg2 go."""
    _root, part, paths, end = _log_dir(tmp_path)
    b1, b2, b3 = _base(paths[1]), _base(paths[2]), _base(paths[3])
    paths[1].write_bytes(b"")
    paths[2].unlink()

    r = runner.invoke(app, ["recover", str(part), "--dry-run", "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    assert doc["cuts"] == []
    assert [(x["segment"], x["first_lost_offset"], x["last_lost_offset"])
            for x in doc["lost_segments"]] == [(paths[1].name, b1, b2 - 1),
                                               (paths[2].name, b2, b3 - 1)]
    assert not any(s.get("deleted") for s in doc["segments"])

    r = runner.invoke(app, ["recover", str(part), "--dry-run"])
    text = " ".join(r.output.split())
    assert (f"segment {paths[2].name} is missing (its index files were left): offsets "
            f"{b2}..{b3 - 1} would be lost; the later segments would be kept") in text
    assert "would delete" not in text

    r = runner.invoke(app, ["recover", str(part)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert f"segment {paths[1].name} is empty" in text
    assert f"offsets {b1}..{b2 - 1} are lost; the later segments are kept" in text
    assert sorted(part.glob("*.log")) == [paths[0], paths[1], *paths[3:]]
    assert not list(part.glob(f"{b2:020d}.*index"))
    assert _offsets(part) == [o for o in range(end) if not b1 <= o < b3]
    r = runner.invoke(app, ["recover", str(part), "--dry-run"])
    assert r.exit_code == 0, r.output
    log = Log(part, CFG, time=FakeTime(), needs_recovery=False)
    assert log.log_end_offset == end
    log.close()


def test_log_end_below_the_log_start_checkpoint_restarts_the_log(tmp_path: Path) -> None:
    """DeleteRecords up to the end, then a torn tail: recover deletes the segments and
    reopens the log empty at the log start, as the broker's loader does."""
    root, part, paths, end = _log_dir(tmp_path, "p-0")
    write_checkpoint(root / LOG_START_OFFSET_CHECKPOINT, {("p", 0): end})
    paths[-1].write_bytes(paths[-1].read_bytes()[:-30])
    (part / f"{_base(paths[-1]):020d}.snapshot").write_bytes(encode_snapshot([]))
    epochs = LeaderEpochCache(part)
    epochs.assign(0, 0)

    r = runner.invoke(app, ["recover", str(root), "--dry-run", "--json"])
    assert r.exit_code == 1, r.output
    (reset,) = json.loads(r.output)["log_start_resets"]
    assert reset["log_start_offset"] == end and reset["log_end_found"] < end
    assert reset["deleted_segments"] == [p.name for p in paths]
    assert all(p.exists() for p in paths)

    r = runner.invoke(app, ["recover", str(root)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert f"below its log start offset {end}" in text
    assert f"restarted the log empty at offset {end}" in text
    assert [p.name for p in part.glob("*.log")] == [f"{end:020d}.log"]
    assert not list(part.glob("*.snapshot"))
    again = LeaderEpochCache(part)
    again.load()
    assert again.epochs == []
    assert runner.invoke(app, ["recover", str(root), "--dry-run"]).exit_code == 0
    log = Log(part, CFG, time=FakeTime(), needs_recovery=False, log_start_offset=end)
    assert (log.log_start_offset, log.log_end_offset) == (end, end)
    log.close()


def _log_ending_in_a_marker(d: Path) -> tuple[int, Path, int]:
    """Producer A's transaction 0..2 ends with an ABORT marker, the log's last batch:
    (its offset, the segment, its position)."""
    part = open_partition(d, LogConfig(segment_bytes=1 << 20))
    produce(part, Producer(PID_A).batch(3))
    marker = part.append_control_batch(PID_A, 0, 0, commit=False)
    part.log.close()
    seg = sorted(d.glob("*.log"))[-1]
    last = list(iter_batches(seg.read_bytes()))[-1]
    assert last.base_offset == marker
    return marker, seg, last.position


@pytest.mark.parametrize("kept", [23, 40, 52, 58])
def test_a_marker_torn_shorter_than_its_header_is_reported(
        tmp_path: Path, kept: int, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "tx-0"
    marker, seg, pos = _log_ending_in_a_marker(d)
    seg.write_bytes(seg.read_bytes()[:pos + kept])
    r = runner.invoke(app, ["recover", "--dry-run", "--json", str(d)])
    assert r.exit_code == 1, r.output
    (lost,) = [s["lost_marker"] for s in json.loads(r.stdout)["segments"]
               if s.get("lost_marker")]
    assert (lost["offset"], lost["position"]) == (marker, pos)
    assert lost["producer_id"] == (PID_A if kept >= 51 else None)
    assert lost["producer_epoch"] == (0 if kept >= 53 else None)

    broker_copy = tmp_path / "broker" / "tx-0"
    broker_copy.parent.mkdir()
    shutil.copytree(d, broker_copy)

    r = runner.invoke(app, ["recover", str(d)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    assert f"(offset {marker}) is a transaction marker" in text
    assert "left open (hanging)" in text
    assert r.stdout.rstrip().endswith(
        "Repaired: the log is consistent now; 1 transaction is left open (see above).")

    # the broker's start-up says it too
    with caplog.at_level(logging.WARNING, logger="kafkactl.log"):
        Log(broker_copy, LogConfig(), time=FakeTime(), needs_recovery=True).close()
    assert "is a transaction marker" in caplog.text and "left open" in caplog.text


def test_a_batch_torn_before_its_attributes_is_no_marker(tmp_path: Path) -> None:
    d = tmp_path / "tx-0"
    _marker, seg, pos = _log_ending_in_a_marker(d)
    seg.write_bytes(seg.read_bytes()[:pos + 20])  # not even the attributes on disk
    r = runner.invoke(app, ["recover", "--dry-run", "--json", str(d)])
    assert r.exit_code == 1, r.output
    assert not [s for s in json.loads(r.stdout)["segments"] if s.get("lost_marker")]
