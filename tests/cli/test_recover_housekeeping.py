"""`kafkactl recover` and the broker's loader on leftovers, housekeeping and dry-run wording:

- a `.swap` at or above a `.cleaned` file's offset is an unfinished replacement: deleted,
  the original segments kept (Kafka's LogLoader, KAFKA-6264); a `.swap` renamed into place
  takes every file of the segments it covers, their producer snapshots too;
- a queued `.deleted` file and a leader epoch starting at the log end are housekeeping the
  broker's start-up does on a healthy log: listed, not "repairs needed";
- a dry run says a segment "would be truncated", and predicts the missing indexes a
  `.swap`'s rename leaves, as the real run then reports them.

Every segment here is written by kafkactl's own Log."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kafkactl.cli.app import app
from kafkactl.log.config import LogConfig
from kafkactl.log.leader_epoch_cache import LeaderEpochCache
from kafkactl.log.log import Log
from kafkactl.log.producer_snapshot import encode_snapshot
from kafkactl.record.memory_records import iter_batches
from tests.log.helpers import FakeTime, closed_log_of_four_segments

runner = CliRunner()
CFG = dataclasses.replace(LogConfig(), segment_bytes=1500, index_interval_bytes=300)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name != ".lock"}


def _offsets(d: Path) -> list[int]:
    return [o for s in sorted(d.glob("*.log")) for b in iter_batches(s.read_bytes())
            for o in range(b.base_offset, b.last_offset + 1)]


def test_swap_beside_a_cleaned_file_is_deleted_and_the_originals_kept(tmp_path: Path) -> None:
    d = tmp_path / "logs" / "sc-0"
    paths, end = closed_log_of_four_segments(d, CFG)
    swap = paths[1].with_name(paths[1].name + ".swap")
    swap.write_bytes(paths[1].read_bytes() + paths[2].read_bytes())  # whole valid batches
    cleaned = paths[1].with_name(paths[1].name[:20] + ".index.cleaned")
    cleaned.write_bytes(paths[1].with_suffix(".index").read_bytes())
    originals = {p.name: p.read_bytes() for p in paths}
    broker_copy = tmp_path / "broker" / "sc-0"
    shutil.copytree(d, broker_copy)

    r = runner.invoke(app, ["recover", str(d), "--dry-run", "--json"])
    assert r.exit_code == 1, r.output
    actions = {Path(str(f["path"])).name: f for f in json.loads(r.output)["files"]}
    assert actions[swap.name]["action"] == "would remove"
    assert actions[swap.name]["target"] is None
    assert "original segments are kept" in str(actions[swap.name]["problem"])
    r = runner.invoke(app, ["recover", str(d)])
    assert r.exit_code == 0, r.output
    assert {p.name: p.read_bytes() for p in paths} == originals
    assert not swap.exists() and not cleaned.exists()
    assert _offsets(d) == list(range(end))

    log = Log(broker_copy, CFG, time=FakeTime(), needs_recovery=False)  # the broker's start
    assert log.log_end_offset == end and len(log.segments) == len(paths)
    log.close()
    assert {p.name: (broker_copy / p.name).read_bytes() for p in paths} == originals
    assert not (broker_copy / swap.name).exists()


def test_a_renamed_swap_takes_the_snapshots_of_the_segments_it_covers(tmp_path: Path) -> None:
    d = tmp_path / "logs" / "sw-0"
    paths, end = closed_log_of_four_segments(d, CFG)
    covered_snap = d / f"{paths[2].name[:20]}.snapshot"
    covered_snap.write_bytes(encode_snapshot([]))
    kept_snap = d / f"{paths[3].name[:20]}.snapshot"
    kept_snap.write_bytes(encode_snapshot([]))
    swap = paths[1].with_name(paths[1].name + ".swap")
    swap.write_bytes(paths[1].read_bytes() + paths[2].read_bytes())
    r = runner.invoke(app, ["recover", str(d), "--dry-run", "--json"])
    assert r.exit_code == 1, r.output
    (action,) = [f for f in json.loads(r.output)["files"]
                 if Path(str(f["path"])).name == swap.name]
    assert str(covered_snap) in action["also_removed"]
    r = runner.invoke(app, ["recover", str(d)])
    assert r.exit_code == 0, r.output
    assert not covered_snap.exists() and kept_snap.exists()
    assert not paths[2].exists()
    assert _offsets(d) == list(range(end))


def _housekeeping_dir(tmp_path: Path) -> tuple[Path, int]:
    """A healthy, closed log with a queued .deleted file and an epoch at the log end."""
    d = tmp_path / "logs" / "hk-0"
    _paths, end = closed_log_of_four_segments(d, CFG)
    (d / f"{0:020d}.log.deleted").write_bytes(b"\0" * 100)
    epochs = LeaderEpochCache(d)
    epochs.assign(0, 0)
    epochs.assign(1, end)  # a leader of the log at its end assigned it
    return d, end


def test_housekeeping_alone_is_no_repair(tmp_path: Path) -> None:
    d, end = _housekeeping_dir(tmp_path)
    before = _files(d)
    r = runner.invoke(app, ["recover", str(d), "--dry-run"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "Repairs needed" not in text
    assert f"{0:020d}.log.deleted" in text and f"1@{end}" in text
    assert text.count("(housekeeping: the broker's start-up does it too; no repair)") == 2
    assert "nothing to repair (only the housekeeping above)" in text
    doc = json.loads(runner.invoke(app, ["recover", str(d), "--dry-run", "--json"]).output)
    assert doc["consistent"] and all(f["housekeeping"] for f in doc["files"])
    assert _files(d) == before
    r = runner.invoke(app, ["recover", str(d)])
    assert r.exit_code == 0, r.output
    assert not (d / f"{0:020d}.log.deleted").exists()
    again = LeaderEpochCache(d)
    again.load()
    assert again.epochs == [0]


def test_an_epoch_above_the_log_end_is_still_a_repair(tmp_path: Path) -> None:
    d, end = _housekeeping_dir(tmp_path)
    LeaderEpochCache(d).assign(2, end + 5)
    r = runner.invoke(app, ["recover", str(d), "--dry-run"])
    assert r.exit_code == 1, r.output
    assert "Repairs needed" in r.output


def test_dry_run_says_would_be_truncated(tmp_path: Path) -> None:
    d = tmp_path / "logs" / "tr-0"
    paths, _end = closed_log_of_four_segments(d, CFG)
    data = bytearray(paths[1].read_bytes())
    second = list(iter_batches(bytes(data)))[1]
    data[second.position + 40] ^= 0xFF
    paths[1].write_bytes(bytes(data))
    r = runner.invoke(app, ["recover", str(d), "--dry-run"])
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert (f"segment {paths[1].name} would be truncated at position {second.position}"
            in text)
    assert "was truncated" not in text
    r = runner.invoke(app, ["recover", str(d)])
    assert f"segment {paths[1].name} was truncated at position {second.position}" in \
        " ".join(r.output.split())


def test_dry_run_predicts_the_indexes_a_swap_rename_leaves_missing(tmp_path: Path) -> None:
    d = tmp_path / "logs" / "ix-0"
    paths, _end = closed_log_of_four_segments(d, CFG)
    batches = list(iter_batches(paths[2].read_bytes()))
    swap = paths[2].with_name(paths[2].name + ".swap")
    swap.write_bytes(paths[2].read_bytes()[:batches[2].position])  # a compaction's result

    def problems(*flags: str) -> list[str]:
        r = runner.invoke(app, ["recover", str(d), "--json", "--index-interval-bytes",
                                "300", *flags])
        (seg,) = [s for s in json.loads(r.output)["segments"]
                  if s["base_offset"] == int(paths[2].name[:20])]
        assert seg["indexes_rebuilt"]
        return [str(p["message"]) for p in seg["index_problems"]]

    predicted = problems("--dry-run")
    assert predicted == problems()
    assert predicted[:2] == [f"{paths[2].name[:20]}.index is missing",
                             f"{paths[2].name[:20]}.timeindex is missing"]


def test_swap_beside_a_cleaned_file_stays_when_a_covered_segment_is_deleted(
        tmp_path: Path) -> None:
    """The replacement got past deleting a covered segment (`.deleted`): the .swap is the
    only copy of its records, so it is renamed into place (deleting it would lose them)."""
    d = tmp_path / "logs" / "sd-0"
    paths, end = closed_log_of_four_segments(d, CFG)
    swap = paths[1].with_name(paths[1].name + ".swap")
    swap.write_bytes(paths[1].read_bytes() + paths[2].read_bytes())
    paths[1].with_name(paths[1].name[:20] + ".index.cleaned").write_bytes(b"")
    paths[2].rename(paths[2].with_name(paths[2].name + ".deleted"))
    r = runner.invoke(app, ["recover", str(d)])
    assert r.exit_code == 0, r.output
    assert not swap.exists() and not paths[2].exists()
    assert _offsets(d) == list(range(end))
