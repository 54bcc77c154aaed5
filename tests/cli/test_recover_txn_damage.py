"""What `kafkactl recover` and `kafkactl dump-log` say about damaged transactional files: a
transaction marker cut (with or without --salvage) leaves its transaction open, and the
report says so; a .txnindex entry with a bad version is named as such (not as "invalid
bytes at the end"); a truncated producer snapshot is "truncated", once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkactl.cli.app import app
from kafkactl.log.dump import Options, Output, dump_files
from kafkactl.log.txn_index import ENTRY_SIZE
from tests.log.test_transactions import PID_A
from tests.log.test_txn_damage import (
    _aborting_log,
    _damage_batch_at,
    _marker_log,
    truncated_snapshot,
)

runner = CliRunner()


@pytest.mark.parametrize("salvage", [False, True], ids=["recover", "recover-salvage"])
def test_recover_says_a_cut_transaction_marker_leaves_its_transaction_open(
        tmp_path: Path, salvage: bool) -> None:
    d = tmp_path / "t-0"
    marker, _end = _marker_log(d, roll_after_marker=False)
    _damage_batch_at(d, marker)
    flags = ["--salvage"] if salvage else []
    dry = runner.invoke(app, ["recover", "--dry-run", "--json", *flags, str(d)])
    assert dry.exit_code == 1, dry.output
    doc = json.loads(dry.stdout)
    lost = [s.get("lost_marker") for s in doc["segments"] if s.get("lost_marker")]
    assert [(m["offset"], m["producer_id"], m["marker"]) for m in lost] == [
        (marker, PID_A, "ABORT")]
    r = runner.invoke(app, ["recover", *flags, str(d)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    assert (f"(offset {marker}) is an ABORT marker of producer {PID_A} (epoch 0): it was cut "
            "with everything after it") in text
    assert "left open (hanging)" in text
    assert "kafkactl transactions find-hanging --topic t --partition 0" in text
    assert ("not skipped" in text) == salvage
    assert r.stdout.rstrip().endswith(
        "Repaired: the log is consistent now; 1 transaction is left open (see above).")


def test_recover_names_a_bad_txnindex_version(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _aborting_log(d)
    victim = sorted(d.glob("*.txnindex"))[1]
    data = victim.read_bytes()
    victim.write_bytes(data[:ENTRY_SIZE] + b"\x00\x05" + data[ENTRY_SIZE + 2:])
    r = runner.invoke(app, ["recover", "--dry-run", "--json", str(d)])
    assert r.exit_code == 1, r.output
    messages = [p["message"] for s in json.loads(r.stdout)["segments"]
                for p in s["index_problems"] if p["index"] == "transaction"]
    assert (f"the transaction index {victim.name}: entry 1 (at byte 34) has version 5, not "
            "0: it and the") in messages[0]
    assert not any("version-0 entry" in m for m in messages)


def _dump(path: Path) -> tuple[int, list[str], list[str]]:
    opts = Options()
    lines: list[str] = []
    errors: list[str] = []
    code = dump_files([path], opts, Output(opts, lines.append, errors.append))
    return code, lines, errors


def test_dump_log_names_a_bad_txnindex_version_as_kafka_does(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _aborting_log(d)
    victim = sorted(d.glob("*.txnindex"))[1]
    data = victim.read_bytes()
    n = len(data) // ENTRY_SIZE
    assert n >= 3
    victim.write_bytes(data[:ENTRY_SIZE] + b"\x00\x05" + data[ENTRY_SIZE + 2:])
    code, lines, errors = _dump(victim)
    assert code == 1
    assert [ln for ln in lines if ln.startswith("version: ")] == [
        next(ln for ln in _dump_lines(data, tmp_path) if ln.startswith("version: "))]
    assert errors == [
        f"Unexpected aborted transaction version 5 in transaction index {victim.resolve()}, "
        f"current version is 0: entry 1 (at byte 34); it and the {n - 2} "
        f"entr{'y' if n - 2 == 1 else 'ies'} after it are not printed"]
    victim.write_bytes(data[:-20])  # a truncated file
    code, lines, errors = _dump(victim)
    assert code == 1 and len([ln for ln in lines if ln.startswith("version: ")]) == n - 1
    assert errors == [f"Found {ENTRY_SIZE - 20} invalid bytes at the end of {victim.name} (not "
                      f"a whole {ENTRY_SIZE}-byte entry: the file is truncated)"]


def _dump_lines(data: bytes, tmp_path: Path) -> list[str]:
    intact = tmp_path / "intact" / "00000000000000000000.txnindex"
    intact.parent.mkdir()
    intact.write_bytes(data)
    return _dump(intact)[1]


def test_a_truncated_snapshot_is_truncated_in_recover_and_dump_log(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    snap = truncated_snapshot(d)
    _code, _lines, errors = _dump(snap)
    assert errors == [f"Producer snapshot {snap} is truncated: 40 bytes, its header counts 1 "
                      "entry (56 bytes)."]
    r = runner.invoke(app, ["recover", str(d)])
    assert r.exit_code == 0, r.output
    assert r.output.count("truncated") == 1 and "CRC" not in r.output
    assert (f"{snap.name}: not a readable producer snapshot (truncated: 40 bytes, its header "
            "counts 1 entry (56 bytes)). Removed it.") in r.stdout
