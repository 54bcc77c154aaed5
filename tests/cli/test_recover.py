"""`kafkactl recover`: table/JSON reports, repairs, --dry-run leaves every byte alone."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkactl.cli.app import app
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.manager import LogManager
from kafkactl.record.memory_records import iter_batches
from tests.log.helpers import FakeTime, assert_indexes_agree, fill, make_batch

runner = CliRunner()
CFG = dataclasses.replace(LogConfig(), segment_bytes=1500, index_interval_bytes=300)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _make_log_dir(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "logs"
    for part in (0, 1):
        log = Log(root / f"orders-{part}", CFG, time=FakeTime())
        fill(log, 20)
        log.close()
    return root, root / "orders-0"


def _damage(part: Path) -> tuple[Path, bytes]:
    seg = sorted(part.glob("*.log"))[-1]
    good = seg.read_bytes()
    with open(seg, "ab") as f:
        f.write(make_batch(2)[:40] + os.urandom(33))
    return seg, good


def test_consistent_log_dir_exit_0_and_untouched(tmp_path: Path) -> None:
    root, _part = _make_log_dir(tmp_path)
    before = _snapshot(root)
    r = runner.invoke(app, ["recover", str(root)])
    assert r.exit_code == 0, r.output
    assert "nothing to repair" in r.output and "Checked 2 partitions" in r.output
    assert "orders-1" not in r.output  # no table: nothing to show
    r = runner.invoke(app, ["recover", str(root), "--all"])
    assert r.exit_code == 0 and "orders-0" in r.output and "orders-1" in r.output
    after = {k: v for k, v in _snapshot(root).items() if k != ".lock"}
    assert after == before


def test_only_partitions_with_problems_are_listed(tmp_path: Path) -> None:
    """89 partitions, one damaged: the report shows that one (--all: every segment)."""
    root = tmp_path / "logs"
    for part in range(89):
        log = Log(root / f"events-{part}", CFG, time=FakeTime())
        fill(log, 2)
        log.close()
    _damage(root / "events-42")
    r = runner.invoke(app, ["recover", str(root), "--dry-run"])
    assert r.exit_code == 1, r.output
    listed = {w for w in r.output.split() if w.startswith("events-")}
    assert listed == {"events-42"}, r.output
    assert "Checked 89 partitions (89 segments): 1 segment of 1 partition had problems; " \
           "--all lists every segment." in " ".join(r.output.split())
    doc = json.loads(runner.invoke(app, ["recover", str(root), "--dry-run", "--json"]).output)
    assert [s["partition"] for s in doc["segments"]] == ["events-42"]
    assert doc["partitions_checked"] == 89 and doc["segments_checked"] == 89
    r = runner.invoke(app, ["recover", str(root), "--dry-run", "--all", "--json"])
    assert len(json.loads(r.output)["segments"]) == 89


def test_dry_run_reports_and_changes_nothing(tmp_path: Path) -> None:
    root, part = _make_log_dir(tmp_path)
    _seg, good = _damage(part)
    (part / "00000000000000000000.index").unlink()
    before = _snapshot(root)
    r = runner.invoke(app, ["recover", str(part), "--dry-run", "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    assert doc["dry_run"] and not doc["consistent"]
    last = doc["segments"][-1]
    assert last["bytes_truncated"] == 73 and last["valid_bytes"] == len(good)
    assert last["error"] and last["error_position"] == len(good)
    assert doc["segments"][0]["indexes_rebuilt"]  # the missing index
    assert _snapshot(root) == before  # not one byte changed, no file created
    r = runner.invoke(app, ["recover", str(part), "--dry-run"])
    assert r.exit_code == 1 and "would" in r.output


def test_repair_cuts_only_invalid_bytes_and_rebuilds(tmp_path: Path) -> None:
    root, part = _make_log_dir(tmp_path)
    seg, good = _damage(part)
    (part / "00000000000000000000.index").unlink()
    r = runner.invoke(app, ["recover", str(root), "--json", "--index-interval-bytes", "300"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["consistent"]
    cut = [s for s in doc["segments"] if s["bytes_truncated"]]
    assert len(cut) == 1 and cut[0]["partition"] == "orders-0"
    assert seg.read_bytes() == good  # exactly the valid prefix
    assert (part / "00000000000000000000.index").exists()
    # a second run finds nothing to do
    r = runner.invoke(app, ["recover", str(root)])
    assert r.exit_code == 0 and "nothing to repair" in r.output
    log = Log(part, CFG, time=FakeTime(), needs_recovery=False)
    for s in log.segments:
        assert_indexes_agree(s)
    assert [b.base_offset for b in log.iter_batches()][-1] == 57
    log.close()


def test_refuses_while_a_broker_holds_the_dir(tmp_path: Path) -> None:
    root, part = _make_log_dir(tmp_path)
    _damage(part)
    m = LogManager([root], CFG)
    m.load()
    try:
        before = _snapshot(part)
        r = runner.invoke(app, ["recover", str(root)])
        assert r.exit_code == 2
        assert "in use by another process" in r.output and "Traceback" not in r.output
        assert _snapshot(part) == before
    finally:
        m.shutdown()


@pytest.mark.parametrize("given", [".", "../orders-0", "./"])
def test_a_partition_dir_given_relatively_is_locked_and_read_right(
        tmp_path: Path, given: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cd logs/orders-0 && kafkactl recover .`: "." has no name, so its log dir was taken
    to be "." itself: the lock was looked for in the partition dir (a live broker's
    partition repaired) and its leader-epoch-checkpoint read as a log dir checkpoint and
    emptied ("malformed line '0 0'")."""
    root, part = _make_log_dir(tmp_path)
    (part / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    monkeypatch.chdir(part)
    m = LogManager([root], CFG)
    m.load()
    try:
        before = _snapshot(part)
        r = runner.invoke(app, ["recover", given])
        assert r.exit_code == 2 and "in use by another process" in r.output, r.output
        assert _snapshot(part) == before
    finally:
        m.shutdown()
    r = runner.invoke(app, ["recover", given])
    assert r.exit_code == 0, r.output
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n", r.output


@pytest.mark.parametrize("name", ["missing", "file"])
def test_bad_paths_are_sentences(tmp_path: Path, name: str) -> None:
    p = tmp_path / name
    if name == "file":
        p.write_text("x")
    r = runner.invoke(app, ["recover", str(p)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert str(p) in r.output


def test_empty_dir_is_not_a_log_dir(tmp_path: Path) -> None:
    r = runner.invoke(app, ["recover", str(tmp_path)])
    assert r.exit_code == 2 and "no <topic>-<partition>" in r.output


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_permission_denied(tmp_path: Path) -> None:
    root, part = _make_log_dir(tmp_path)
    _damage(part)
    os.chmod(root, 0o555)
    try:
        r = runner.invoke(app, ["recover", str(root)])
    finally:
        os.chmod(root, 0o755)
    assert r.exit_code == 2 and "permission denied" in r.output


def test_legacy_and_v2_mixed_partition(tmp_path: Path) -> None:
    from kafkactl.record.codecs import Compression
    from kafkactl.record.legacy import build_message_set

    part = tmp_path / "old-0"
    part.mkdir()
    data = build_message_set(1, [(5, b"a", b"b"), (6, None, b"c")], Compression.GZIP) + \
        build_message_set(0, [(None, b"x", b"y")], Compression.NONE, base_offset=2)
    (part / "00000000000000000000.log").write_bytes(data + b"\x00\x01")
    r = runner.invoke(app, ["recover", str(part), "--json"])
    assert r.exit_code == 0, r.output
    (seg,) = json.loads(r.output)["segments"]
    assert seg["valid_batches"] == 2 and seg["bytes_truncated"] == 2 and seg["last_offset"] == 2
    assert (part / "00000000000000000000.log").read_bytes() == data
    assert [b.last_offset for b in iter_batches(data)] == [1, 2]


def test_an_existing_file_is_not_a_partition_directory(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# not a log\n")
    r = runner.invoke(app, ["recover", str(readme)])
    assert r.exit_code == 2
    assert f"error: {readme} is a file, not a partition directory" in r.output
    assert "does not exist" not in r.output
