"""`kafkactl dump-log` prints .txnindex files as Kafka's DumpLogSegments does, and
`kafkactl recover` checks them against the transaction markers of the log and rebuilds
them (a real `python -m kafkactl` process each time)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kafkactl.broker.partition import Partition
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.txn_index import parse_entries
from kafkactl.log.validator import validate_batches
from kafkactl.record.batch import RecordBatchBuilder
from tests import zygote

PID_A, PID_B = 4000, 4001


def _produce(part: Partition, pid: int, seq: int, n: int) -> None:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq,
                           is_transactional=True)
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k", b"v" * 100)
    buf = memoryview(bytearray(b.build()))
    infos = validate_batches(buf, max_message_bytes=1 << 20, timestamp_type="CreateTime",
                             max_timestamp_difference_ms=2**63 - 1,
                             now_ms=int(time.time() * 1000), produce_version=9,
                             single_batch=True)
    part.append_as_leader(buf, infos, log_append_time=None)


def _aborted_log(root: Path) -> Path:
    """Two aborted transactions (one overlapping an open one) and a commit, closed."""
    d = root / "orders-0"
    part = Partition("orders", 0, Log(d, LogConfig(segment_bytes=900)))
    _produce(part, PID_A, 0, 2)  # A: 0..1
    _produce(part, PID_B, 0, 2)  # B: 2..3
    part.append_control_batch(PID_A, 0, 5, commit=False)  # 4: LSO 2 (B open)
    _produce(part, PID_A, 2, 1)  # A again: 5
    part.append_control_batch(PID_B, 0, 5, commit=True)  # 6
    part.append_control_batch(PID_A, 0, 5, commit=False)  # 7: LSO 8
    part.log.close()
    return d


def test_dump_log_prints_the_txnindex_as_kafka(tmp_path: Path) -> None:
    d = _aborted_log(tmp_path)
    files = sorted(d.glob("*.txnindex"))
    assert files
    r = zygote.run(["dump-log", *map(str, files)], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if not ln.startswith("Dumping ")]
    assert lines == [
        f"version: 0 producerId: {PID_A} firstOffset: 0 lastOffset: 4 lastStableOffset: 2",
        f"version: 0 producerId: {PID_A} firstOffset: 5 lastOffset: 7 lastStableOffset: 8",
    ]
    assert r.stdout.splitlines()[0] == f"Dumping {files[0]}"
    js = zygote.run(["dump-log", "--json", str(files[0])], text=True, timeout=60)
    objs = [json.loads(ln) for ln in js.stdout.splitlines()]
    assert {"type": "aborted_txn", "version": 0, "producer_id": PID_A, "first_offset": 0,
            "last_offset": 4, "last_stable_offset": 2} in objs


def test_dump_log_reports_a_torn_txnindex(tmp_path: Path) -> None:
    d = _aborted_log(tmp_path)
    f = sorted(d.glob("*.txnindex"))[0]
    f.write_bytes(f.read_bytes() + b"\x00\x00\x01")
    r = zygote.run(["dump-log", str(f)], text=True, timeout=60)
    assert r.returncode == 1
    assert "Found 3 invalid bytes at the end of" in r.stderr
    assert "lastStableOffset: 2" in r.stdout  # the whole entries are still printed


def test_recover_checks_and_rebuilds_txnindex(tmp_path: Path) -> None:
    d = _aborted_log(tmp_path)
    files = {p.name: p.read_bytes() for p in d.glob("*.txnindex")}
    ok = zygote.run(["recover", "--dry-run", str(d)], text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # damage: every file lost, then the first one back with a wrong last stable offset
    names = sorted(files)
    for name in names:
        (d / name).unlink()
    wrong = d / names[0]
    damaged = files[names[0]][:-8] + (999).to_bytes(8, "big")
    wrong.write_bytes(damaged)
    dry = zygote.run(["recover", "--dry-run", "--json", str(d)], text=True, timeout=60)
    assert dry.returncode == 1
    doc = json.loads(dry.stdout)
    problems = [p for s in doc["segments"] for p in s["index_problems"]
                if p["index"] == "transaction"]
    assert problems, doc
    assert any("the log says" in p["message"] for p in problems)
    assert wrong.read_bytes() == damaged  # a dry run changes nothing
    fixed = zygote.run(["recover", str(d)], text=True, timeout=60)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert {p.name: p.read_bytes() for p in d.glob("*.txnindex")} == files
    assert all(parse_entries(b) for b in files.values())
