"""`kafkactl offsets reset` with the flags of kafka-consumer-groups --reset-offsets that
operators' scripts use: --dry-run (the explicit form of the default; not with --execute),
--all-topics, --to-current, --by-duration, --export (Kafka's CSV) and --from-file (reads
that CSV back), against a real group whose offsets a `kafkactl consume -G` run committed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.groups.helpers import FAST, create_topic, kafkactl, produce
from tests.groups.rejoin_helpers import committed


def _reset(b: Any, *args: str) -> Any:
    return kafkactl("offsets", "reset", "-G", "gk", *args, "-b", b.bootstrap)


def _group_consumed_all(b: Any) -> dict[int, int]:
    """Topic `rk` (2 partitions, 10 records each), read to its end by a `kafkactl consume
    -G gk` member that commits and exits: the group is Empty with offsets {0: 10, 1: 10}."""
    create_topic(b.bootstrap, "rk", 2)
    create_topic(b.bootstrap, "rk2", 1)  # the group never committed an offset of it
    produce(b.bootstrap, "rk", [f"v{i}" for i in range(20)])
    produce(b.bootstrap, "rk2", [f"w{i}" for i in range(7)])
    ends = _ends(b, "rk")
    r = kafkactl("consume", "-G", "gk", "-t", "rk", "-o", "earliest", "-e", "-q",
                 "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert committed(b.bootstrap, "gk", "rk", (0, 1)) == ends
    return ends


def _ends(b: Any, topic: str) -> dict[int, int]:
    from kafkactl.client.consumer import SimpleConsumer
    from kafkactl.client.fetcher import LATEST

    simple = SimpleConsumer(b.bootstrap)
    try:
        got = simple.list_offsets({(topic, p): LATEST for p in (0, 1)
                                   if topic == "rk" or p == 0})
    finally:
        simple.close()
    return {p: v[0] for (_t, p), v in got.items()}


def test_dry_run_all_topics_export_and_from_file(broker_factory: Any, tmp_path: Path) -> None:
    b = broker_factory(**FAST)
    ends = _group_consumed_all(b)
    # --dry-run --all-topics --to-earliest --export: Kafka's CSV, nothing committed
    r = _reset(b, "--all-topics", "--to-earliest", "--dry-run", "--export")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "rk,0,0\nrk,1,0\n", r.stdout
    assert "Dry run" in r.stderr
    assert committed(b.bootstrap, "gk", "rk", (0, 1)) == ends
    # --dry-run with --execute is a usage error (as Kafka's), and commits nothing
    r = _reset(b, "--all-topics", "--to-earliest", "--dry-run", "--execute")
    assert r.returncode == 2, r.stderr
    assert "--execute and --dry-run" in r.stderr
    assert committed(b.bootstrap, "gk", "rk", (0, 1)) == ends
    # the exported plan, replayed with --from-file --execute
    plan = tmp_path / "plan.csv"
    exported = _reset(b, "--all-topics", "--to-earliest", "--export").stdout
    plan.write_text(exported)
    r = _reset(b, "--from-file", str(plan), "--execute")
    assert r.returncode == 0, r.stderr
    assert committed(b.bootstrap, "gk", "rk", (0, 1)) == {0: 0, 1: 0}
    # a file's offsets outside the log are clamped with Kafka's warning; the 4-column form
    # (GROUP,TOPIC,PARTITION,OFFSET) takes this group's lines only
    plan.write_text(f"gk,rk,0,3\nother,rk,1,1\ngk,rk,1,{ends[1] + 50}\n")
    r = _reset(b, "--from-file", str(plan), "--execute", "--json")
    assert r.returncode == 0, r.stderr
    assert {(o["topic"], o["partition"]): o["new_offset"]
            for o in json.loads(r.stdout)["offsets"]} == {("rk", 0): 3, ("rk", 1): ends[1]}
    assert (f"New offset ({ends[1] + 50}) is higher than latest offset for topic partition "
            f"rk-1. Value will be set to {ends[1]}") in r.stderr
    assert committed(b.bootstrap, "gk", "rk", (0, 1)) == {0: 3, 1: ends[1]}
    # a file that is no plan, and --from-file with a scope, are usage errors
    plan.write_text("rk,zero,1\n")
    r = _reset(b, "--from-file", str(plan))
    assert r.returncode == 2 and "line 1" in r.stderr, r.stderr
    r = _reset(b, "--from-file", str(plan), "--topic", "rk")
    assert r.returncode == 2, r.stderr
    r = _reset(b, "--all-topics", "--topic", "rk", "--to-earliest")
    assert r.returncode == 2 and "--all-topics and --topic" in r.stderr, r.stderr
    r = _reset(b, "--all-topics", "--to-earliest", "--export", "--json")
    assert r.returncode == 2, r.stderr


def test_to_current_and_by_duration(broker_factory: Any) -> None:
    b = broker_factory(**FAST)
    ends = _group_consumed_all(b)
    r = _reset(b, "--topic", "rk", "--to-offset", "4", "--execute")
    assert r.returncode == 0, r.stderr
    # --to-current: the committed offsets; a partition with none: its log end offset (as
    # Kafka's resetToCurrent)
    r = _reset(b, "--topic", "rk", "--topic", "rk2", "--to-current", "--export")
    assert r.returncode == 0, r.stderr
    rk2_end = _ends(b, "rk2")[0]
    assert r.stdout == f"rk,0,4\nrk,1,4\nrk2,0,{rk2_end}\n", r.stdout
    r = _reset(b, "--all-topics", "--to-current", "--execute", "--json")
    assert r.returncode == 0, r.stderr
    assert committed(b.bootstrap, "gk", "rk", (0, 1)) == {0: 4, 1: 4}
    # --by-duration P1D: the offsets at a day ago: every record is younger, so the first
    r = _reset(b, "--all-topics", "--by-duration", "P1D", "--execute")
    assert r.returncode == 0, r.stderr
    assert committed(b.bootstrap, "gk", "rk", (0, 1)) == {0: 0, 1: 0}
    # a negative duration is a time to come: no record, the log end offset, Kafka's warning
    r = _reset(b, "--all-topics", "--by-duration", "-PT1H", "--execute")
    assert r.returncode == 0, r.stderr
    assert "Partition 0 from topic rk is empty. Falling back to latest known offset." \
        in r.stderr
    assert committed(b.bootstrap, "gk", "rk", (0, 1)) == ends
    for bad in ("1h", "PT", "P1DT", "PxD"):
        r = _reset(b, "--all-topics", "--by-duration", bad)
        assert r.returncode == 2 and "bad --by-duration" in r.stderr, (bad, r.stderr)
