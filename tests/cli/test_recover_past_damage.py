"""`kafkactl recover` (without --salvage) tells the true range a cut loses: the valid
batches past the damage (a zero-filled hole in a segment, say) are found by scanning on as
--salvage does, counted in the offsets lost, and --salvage is said to keep them.

Every segment here is written by kafkactl's own Log."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kafkactl.cli.app import app
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.memory_records import iter_batches
from tests.log.helpers import FakeTime, fill

runner = CliRunner()
CFG = dataclasses.replace(LogConfig(), segment_bytes=1500, index_interval_bytes=300)
BIG = dataclasses.replace(CFG, segment_bytes=1 << 20)


def _log_with_long_active_segment(part: Path) -> tuple[list[Path], int]:
    """4+ small segments, then an active segment of 20 batches; (.log paths, log end)."""
    log = Log(part, CFG, time=FakeTime())
    fill(log, 30)
    log.close()
    log = Log(part, BIG, time=FakeTime())
    fill(log, 20, ts0=5_000)
    paths, end = [s.log_path for s in log.segments], log.log_end_offset
    log.close()
    assert len(paths) >= 4
    return paths, end


def _zero_fill_hole(path: Path, first: int, count: int) -> tuple[int, int, list[int]]:
    """Zero the bytes of batches first..first+count-1 of a segment (a hole); returns
    (its position, the first offset it held, the base offsets of the batches after it)."""
    data = bytearray(path.read_bytes())
    batches = list(iter_batches(bytes(data)))
    start = batches[first].position
    stop = batches[first + count].position
    data[start:stop] = bytes(stop - start)
    path.write_bytes(bytes(data))
    return start, batches[first].base_offset, [b.base_offset for b in batches[first + count:]]


def _batches(part: Path) -> list[tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for s in sorted(part.glob("*.log"))
            for b in iter_batches(s.read_bytes())]


def _line(output: str, start: str) -> str:
    (line,) = [ln for ln in output.splitlines() if ln.startswith(start)]
    return line


def test_dry_run_counts_valid_batches_past_a_hole_in_the_last_segment(tmp_path: Path
                                                                        ) -> None:
    """The tester's case: a damaged batch in an older segment, and a zero-filled hole in
    the active segment with valid batches after it: those are lost too, and --salvage
    keeps them."""
    part = tmp_path / "logs" / "rc-0"
    paths, end = _log_with_long_active_segment(part)
    data = bytearray(paths[1].read_bytes())
    second = list(iter_batches(bytes(data)))[1]
    data[second.position + 40] ^= 0xFF  # the header stays readable: it claims its offset
    paths[1].write_bytes(bytes(data))
    cut_at = second.base_offset
    _pos, hole_start, after_hole = _zero_fill_hole(paths[-1], 5, 3)
    assert after_hole and after_hole[-1] < end
    salvage_copy = tmp_path / "salvage"
    shutil.copytree(part, salvage_copy)
    # what --salvage keeps after the damaged batch, as it does it
    r = runner.invoke(app, ["recover", str(salvage_copy), "--salvage"])
    assert r.exit_code == 0, r.output
    kept = [b for b in _batches(salvage_copy) if b[0] > cut_at]
    assert kept[-1][1] == end - 1
    n = len(kept)

    r = runner.invoke(app, ["recover", str(part), "--dry-run", "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    (cut,) = doc["cuts"]
    assert (cut["first_lost_offset"], cut["last_lost_offset"]) == (cut_at, end - 1)
    assert cut["salvageable_batches"] == n
    last = next(s for s in doc["segments"] if s["path"] == str(paths[-1]))
    assert last["deleted"] and last["last_offset"] == hole_start - 1
    assert last["last_offset_past_damage"] == end - 1

    r = runner.invoke(app, ["recover", str(part), "--dry-run"])
    assert r.exit_code == 1, r.output
    deleted = ", ".join(p.name for p in paths[2:])
    assert _line(r.output, "rc-0: segment") == (
        f"rc-0: {cut['reason']}; would delete the {len(paths) - 2} later segment(s) so the "
        f"log stays contiguous ({deleted}): offsets {cut_at}..{end - 1} would be lost, the "
        f"log would end at offset {cut_at}; --salvage would keep the {n} valid batches "
        f"found after the damage.")

    # the repair itself says the same range (no --salvage hint: it is done)
    r = runner.invoke(app, ["recover", str(part)])
    assert r.exit_code == 0, r.output
    assert _line(r.output, "rc-0: segment").endswith(
        f": offsets {cut_at}..{end - 1} are lost, the log now ends at offset {cut_at}.")
    assert _batches(part)[-1][1] == cut_at - 1


def test_hole_in_the_only_damaged_segment_says_what_is_lost(tmp_path: Path) -> None:
    """No earlier damage: the last segment is cut at the hole, which loses the valid
    batches after it; the dry run says so, with what --salvage would keep."""
    part = tmp_path / "logs" / "rc-0"
    paths, end = _log_with_long_active_segment(part)
    size, hole_start, after_hole = _zero_fill_hole(paths[-1], 5, 3)

    r = runner.invoke(app, ["recover", str(part), "--dry-run"])
    assert r.exit_code == 1, r.output
    line = _line(r.output, "rc-0: segment")
    assert line.startswith(f"rc-0: segment {paths[-1].name} would be truncated at position "
                           f"{size} (")
    assert line.endswith(
        f"), before valid batches found after the damage: offsets {hole_start}..{end - 1} "
        f"would be lost, the log would end at offset {hole_start}; --salvage would keep "
        f"the {len(after_hole)} valid batches found after the damage.")

    salvaged = tmp_path / "salvage"
    shutil.copytree(part, salvaged)
    r = runner.invoke(app, ["recover", str(salvaged), "--salvage"])
    assert r.exit_code == 0, r.output
    assert [b[0] for b in _batches(salvaged) if b[0] >= hole_start] == after_hole
    assert "found after the damage" not in r.output

    r = runner.invoke(app, ["recover", str(part)])
    assert r.exit_code == 0, r.output
    assert _line(r.output, "rc-0: segment").endswith(
        f"offsets {hole_start}..{end - 1} are lost, the log now ends at offset "
        f"{hole_start}.")
    assert _batches(part)[-1][1] == hole_start - 1


def test_torn_tail_says_nothing_more(tmp_path: Path) -> None:
    """A torn last batch (a crash mid-write) has nothing valid after it: no extra line."""
    part = tmp_path / "logs" / "rc-0"
    paths, _end = _log_with_long_active_segment(part)
    data = paths[-1].read_bytes()
    paths[-1].write_bytes(data[:-7])
    r = runner.invoke(app, ["recover", str(part), "--dry-run"])
    assert r.exit_code == 1, r.output
    assert "found after the damage" not in r.output
    assert "would be lost" not in r.output
