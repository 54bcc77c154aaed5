"""DescribeLogDirs: a broker with two log directories tells, per directory, the replicas it
holds with their on-disk sizes and the volume's space, as kafka-log-dirs.sh reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any


def _size(d: Path) -> int:
    return sum(f.stat().st_size for f in d.iterdir() if f.suffix == ".log")


def test_describe_log_dirs_of_two_directories(broker_factory: Any, tmp_path: Path) -> None:
    from kafka.admin import KafkaAdminClient

    dirs = [tmp_path / "disk-a", tmp_path / "disk-b"]
    b = broker_factory(log_dirs=",".join(map(str, dirs)))
    r = subprocess.run([sys.executable, "-m", "kafkactl", "topics", "create", "-t", "spread",
                        "--partitions", "4", "-b", b.bootstrap], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for p in range(4):
        r = subprocess.run([sys.executable, "-m", "kafkactl", "produce", "-t", "spread", "-p",
                            str(p), "-q", "-b", b.bootstrap],
                           input=b"".join(b"record %d\n" % i for i in range(100 * (p + 1))),
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        [answer] = admin.describe_log_dirs()
        only = admin.describe_log_dirs({"spread": [2]})
    finally:
        admin.close()
    by_dir = {Path(d["log_dir"]): d for d in answer["log_dirs"]}
    assert set(by_dir) == {d.absolute() for d in dirs}
    seen = {}
    for d, desc in by_dir.items():
        assert desc["error_code"] == 0 and desc["total_bytes"] >= desc["usable_bytes"] > 0
        for t in desc["topics"]:
            if t["name"] != "spread":
                continue
            for part in t["partitions"]:
                seen[part["partition_index"]] = d
                assert part["partition_size"] == _size(d / f"spread-{part['partition_index']}")
                assert part["offset_lag"] == 0 and part["is_future_key"] is False
    assert sorted(seen) == [0, 1, 2, 3]
    assert len(set(seen.values())) == 2  # the partitions are spread over both directories
    parts = [(t["name"], p["partition_index"]) for d in only[0]["log_dirs"]
             for t in d["topics"] for p in t["partitions"]]
    assert parts == [("spread", 2)]
