"""A segment whose file name is above its first batch's offset (here 00..0400.log holding
offsets 356..699, after a segment ending at 355) is renamed to that offset and its indexes
rebuilt, at the broker's start (clean or not) and by `kafkactl recover`: every record is
kept and served, as Kafka's loader rewrites such a segment (splitOverflowedSegment). Before,
its first batch read as "offsets are not increasing", the segment was emptied and every
later one deleted: 654 acknowledged records gone. A segment that overlaps the previous one
is still damage for recovery (not renamed). Real broker processes, real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkactl.log.leftovers import plan_leftovers

N = 1010


def _kafkactl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkactl", *args], capture_output=True,
                          text=True, timeout=120, input=stdin)


def _written(broker: Any) -> Path:
    """Topic rec (segment.bytes 4000): values 1..N at offsets 0..N-1, three segments or
    more; the broker stopped cleanly. The partition dir."""
    b = broker.bootstrap
    r = _kafkactl("topics", "create", "-t", "rec", "--config", "segment.bytes=4000", "-b", b)
    assert r.returncode == 0, r.stderr
    r = _kafkactl("produce", "-t", "rec", "-q", "-X", "batch.size=1000", "-b", b,
                  stdin="".join(f"{i}\n" for i in range(1, N + 1)))
    assert r.returncode == 0, r.stderr
    assert broker.stop() == 0
    return Path(broker.data_dir) / "rec-0"


def _misname(part: Path) -> tuple[int, int]:
    """Rename the second segment's files from its base B to B+44 (its first batch still
    at B); (B, B+44)."""
    second = sorted(p for p in part.iterdir() if p.suffix == ".log")[1]
    base = int(second.stem)
    for f in part.glob(f"{second.stem}.*"):
        if f.suffix != ".snapshot":
            f.rename(f.with_name(f"{base + 44:020d}{f.suffix}"))
    return base, base + 44


def _all_served(broker: Any) -> None:
    r = _kafkactl("consume", "-t", "rec", "-o", "earliest", "-e", "-b", broker.bootstrap)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(i) for i in range(1, N + 1)]


@pytest.mark.parametrize("start", ["clean", "unclean"])
def test_the_broker_renames_a_misnamed_segment(broker: Any, start: str) -> None:
    part = _written(broker)
    base, named = _misname(part)
    if start == "unclean":  # no recovery point: every segment is recovered
        (Path(broker.data_dir) / "recovery-point-offset-checkpoint").unlink()
        (Path(broker.data_dir) / ".kafka_cleanshutdown").unlink(missing_ok=True)
    broker.start()
    _all_served(broker)
    assert (part / f"{base:020d}.log").exists() and not (part / f"{named:020d}.log").exists()
    assert (part / f"{base:020d}.index").exists()  # rebuilt


def test_recover_renames_it_and_loses_nothing(broker: Any) -> None:
    part = _written(broker)
    base, named = _misname(part)
    r = _kafkactl("recover", "--dry-run", str(broker.data_dir))
    assert f"{named:020d}.log" in r.stdout and "renamed to" in r.stdout, r.stdout
    assert (part / f"{named:020d}.log").exists()  # a dry run changes nothing
    # the dry run predicts what the repair does: the rename, no cut, nothing deleted
    r = _kafkactl("recover", "--dry-run", "--json", str(broker.data_dir))
    doc = json.loads(r.stdout)
    assert doc["cuts"] == [], doc["cuts"]
    assert not [s for s in doc["segments"] if s.get("deleted") or s.get("bytes_truncated")], \
        doc["segments"]
    r = _kafkactl("recover", str(broker.data_dir))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "deleted" not in r.stdout.lower(), r.stdout
    assert (part / f"{base:020d}.log").exists()
    broker.start()
    _all_served(broker)


def test_an_overlapping_segment_is_not_renamed(broker: Any) -> None:
    """The second segment's first batch at or below the first segment's last offset is no
    misnamed segment: left to recovery (as damage)."""
    part = _written(broker)
    logs = sorted(p for p in part.iterdir() if p.suffix == ".log")
    first_end = int(logs[1].stem) - 1
    overlapping = logs[1].with_name(f"{first_end + 100:020d}.log")
    # a copy of the first segment named above its content: it starts at offset 0, inside
    # the first segment
    overlapping.write_bytes(logs[0].read_bytes())
    actions = plan_leftovers(part, sorted(p.name for p in part.iterdir()))
    assert not any(a.path == overlapping for a in actions), actions
