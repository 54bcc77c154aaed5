"""`kafkactl recover` keeps the log contiguous and the dir consistent: later segments
deleted after a cut (named, with the offsets lost), missing/empty middle segments, leftover
.swap/.cleaned/.deleted files, corrupt producer snapshots, checkpoints above the log end.

Every segment here is written by kafkactl's own Log."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kafkactl.cli.app import app
from kafkactl.log.checkpoint import RECOVERY_POINT_CHECKPOINT, read_checkpoint, write_checkpoint
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.producer_snapshot import encode_snapshot
from kafkactl.record.memory_records import iter_batches
from tests.log.helpers import FakeTime, assert_indexes_agree, closed_log_of_four_segments

runner = CliRunner()
CFG = dataclasses.replace(LogConfig(), segment_bytes=1500, index_interval_bytes=300)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def _log_dir(tmp_path: Path) -> tuple[Path, Path, list[Path], int]:
    """(log dir, partition dir rc-0, its .log paths, log end) of a closed 4+ segment log,
    with a recovery-point checkpoint at the log end."""
    root = tmp_path / "logs"
    part = root / "rc-0"
    paths, end = closed_log_of_four_segments(part, CFG)
    write_checkpoint(root / RECOVERY_POINT_CHECKPOINT, {("rc", 0): end})
    return root, part, paths, end


def _offsets(part: Path) -> list[int]:
    return [o for s in sorted(part.glob("*.log")) for b in iter_batches(s.read_bytes())
            for o in range(b.base_offset, b.last_offset + 1)]


def test_cut_deletes_later_segments_and_says_which(tmp_path: Path) -> None:
    root, part, paths, end = _log_dir(tmp_path)
    data = bytearray(paths[1].read_bytes())
    second = list(iter_batches(bytes(data)))[1]
    data[second.position + 40] ^= 0xFF  # the header stays readable: it claims its offset
    paths[1].write_bytes(bytes(data))
    cut_at = second.base_offset
    (part / f"{end:020d}.snapshot").write_bytes(encode_snapshot([]))
    salvage_copy = tmp_path / "salvage"
    shutil.copytree(root, salvage_copy)
    before = _files(root)

    r = runner.invoke(app, ["recover", str(part), "--dry-run", "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    assert not doc["consistent"]
    (cut,) = doc["cuts"]
    assert cut["deleted_segments"] == [p.name for p in paths[2:]]
    assert (cut["first_lost_offset"], cut["last_lost_offset"]) == (cut_at, end - 1)
    assert cut["log_end_offset"] == cut_at and cut["segment"] == paths[1].name
    seg = next(s for s in doc["segments"] if s["base_offset"] == int(paths[1].name[:20]))
    assert seg["cut_first_offset"] == cut_at  # a dry run names it too
    assert {s["path"] for s in doc["segments"] if s["deleted"]} == {str(p) for p in paths[2:]}
    assert [f["path"] for f in doc["files"]] == [str(part / f"{end:020d}.snapshot")]
    assert [c["lowered"] for c in doc["checkpoints"]] == [True]
    assert _files(root) == before

    r = runner.invoke(app, ["recover", str(root)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert all(p.name in text for p in paths[2:])
    assert f"offsets {cut_at}..{end - 1} are lost" in text
    assert sorted(part.glob("*.log")) == paths[:2]
    assert not list(part.glob("*.snapshot"))
    assert _offsets(part) == list(range(cut_at))
    assert read_checkpoint(root / RECOVERY_POINT_CHECKPOINT) == {("rc", 0): cut_at}
    again = runner.invoke(app, ["recover", str(root), "--dry-run"])
    assert again.exit_code == 0 and "nothing to repair" in again.output, again.output
    log = Log(part, CFG, time=FakeTime(), recovery_point=cut_at, needs_recovery=True)
    assert log.log_end_offset == cut_at and not any(r.bytes_truncated
                                                    for r in log.recovery_reports)
    for s in log.segments:
        assert_indexes_agree(s)
    log.close()

    # --salvage keeps what it can: the later segments stay (the log gets a gap)
    r = runner.invoke(app, ["recover", str(salvage_copy / "rc-0"), "--salvage", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["cuts"] == []
    assert len(list((salvage_copy / "rc-0").glob("*.log"))) == len(paths)


def test_snapshots_and_leftover_files_are_reported_and_removed(tmp_path: Path) -> None:
    root, part, paths, end = _log_dir(tmp_path)
    good1 = paths[1].read_bytes()
    batches2 = list(iter_batches(paths[2].read_bytes()))
    compacted = paths[2].read_bytes()[:batches2[2].position]  # whole batches: a valid swap
    garbage_snap = part / f"{int(paths[3].name[:20]):020d}.snapshot"
    garbage_snap.write_bytes(b"garbage")
    (part / f"{paths[3].name}.cleaned").write_bytes(b"half a compaction")
    deleted = part / f"{paths[0].name[:20]}.timeindex.deleted"
    deleted.write_bytes(b"\0" * 12)
    bad_swap = paths[1].with_name(paths[1].name + ".swap")
    bad_swap.write_bytes(os.urandom(200))
    good_swap = paths[2].with_name(paths[2].name + ".swap")
    good_swap.write_bytes(compacted)
    before = _files(root)

    r = runner.invoke(app, ["recover", str(root), "--dry-run"])
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    for name in (garbage_snap.name, bad_swap.name, good_swap.name, deleted.name,
                 f"{paths[3].name}.cleaned"):
        assert name in text, name
    assert "not a readable producer snapshot" in text
    assert _files(root) == before

    r = runner.invoke(app, ["recover", str(root), "--json"])
    assert r.exit_code == 0, r.output
    actions = {Path(str(f["path"])).name: f["action"] for f in json.loads(r.output)["files"]}
    assert actions[bad_swap.name] == "removed" and actions[good_swap.name] == "renamed"
    assert actions[garbage_snap.name] == "removed"
    names = {p.name for p in part.iterdir()}
    assert not any(n.endswith((".swap", ".cleaned", ".deleted")) for n in names)
    assert garbage_snap.name not in names
    assert paths[1].read_bytes() == good1  # the garbage .swap never replaced it
    assert paths[2].read_bytes() == compacted
    assert runner.invoke(app, ["recover", str(root), "--dry-run"]).exit_code == 0
    log = Log(part, CFG, time=FakeTime(), needs_recovery=False)
    for s in log.segments:
        assert_indexes_agree(s)
    assert log.log_end_offset == end
    log.close()


def test_dir_of_segments_not_named_like_a_partition_is_recovered(tmp_path: Path) -> None:
    _root, part, paths, _end = _log_dir(tmp_path)
    copy = tmp_path / "copied-segments"
    shutil.copytree(part, copy)
    last = copy / paths[-1].name
    with open(last, "ab") as f:
        f.write(b"\x00" * 30)
    r = runner.invoke(app, ["recover", str(copy), "--dry-run"])
    assert r.exit_code == 1, r.output
    assert "no <topic>-<partition>" not in r.output and "30 (would cut)" in r.output
