"""`kafkactl consume --group`, `kafkactl rebalance` and `kafkactl offsets` end to end."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.groups.helpers import FAST, create_topic, kafkactl, offsets_show, produce, wait_until


def _consume(bootstrap: str, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "kafkactl", "consume", "-t", "cli6",
                             "--group", "G", "-o", "earliest", "-q", "-b", bootstrap],
                            stdout=open(out, "wb"), stderr=subprocess.DEVNULL)  # noqa: SIM115


def test_two_consume_group_processes_split_partitions(broker_factory: Any,
                                                      tmp_path: Path) -> None:
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "cli6", 6)
    outs = [tmp_path / "c1.out", tmp_path / "c2.out"]
    procs = [_consume(b.bootstrap, outs[0])]
    try:
        def members() -> list[Any]:
            r = kafkactl("rebalance", "--group", "G", "--json", "-b", b.bootstrap)
            return json.loads(r.stdout)["members"] if r.returncode == 0 else []

        # each check runs `kafkactl rebalance` (a process): poll at 0.5 s, not 0.05 s
        wait_until(lambda: len(members()) == 1, 60, "the first member", interval=0.5)
        procs.append(_consume(b.bootstrap, outs[1]))
        def settled(ms: list[Any]) -> bool:  # one `rebalance` run per check
            return len(ms) == 2 and all(len(m["current"]) == 3 for m in ms)

        wait_until(lambda: settled(members()), 60, "two members with 3 partitions each",
                   interval=0.5)
        ms = members()
        assert all(m["current"] == m["range"] for m in ms)  # the seed's range algorithm
        # --trigger --dry-run changes nothing; --trigger makes every member rejoin
        r = kafkactl("rebalance", "--group", "G", "--trigger", "--dry-run", "--json",
                     "-b", b.bootstrap)
        assert r.returncode == 0 and json.loads(r.stdout)["triggered_generation"] is None
        r = kafkactl("rebalance", "--group", "G", "--trigger", "--timeout", "45", "--json",
                     "-b", b.bootstrap)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["triggered_generation"] >= 3  # 1, 2: the two joins
        wait_until(lambda: (lambda ms: settled(ms) and all(m["current"] == m["range"]
                                                           for m in ms))(members()),
                   60, "both members back with 3 partitions each after the trigger",
                   interval=0.5)
        # offsets reset is refused while the group is active
        r = kafkactl("offsets", "reset", "--group", "G", "--to-earliest", "--topic", "cli6",
                     "--execute", "-b", b.bootstrap)
        assert r.returncode == 1 and "inactive" in r.stderr
        values = [f"rec-{i}" for i in range(600)]
        produce(b.bootstrap, "cli6", values)

        def lines() -> list[str]:
            return [ln for p in outs for ln in p.read_text().splitlines()]

        wait_until(lambda: len(lines()) >= 600, 60, "600 printed records")
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            p.wait(30)
    assert sorted(lines()) == sorted(values)  # every record once across both processes
    assert all(p.read_text() for p in outs)  # and both printed some
    shown = offsets_show(b.bootstrap, "G")
    assert sum(r["current_offset"] for r in shown.values()) == 600
    assert all(r["lag"] == 0 for r in shown.values())
    # now inactive: reset (dry run first), then execute, then delete
    r = kafkactl("offsets", "reset", "--group", "G", "--to-offset", "1", "--topic",
                 "cli6:0,1", "--json", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert not plan["executed"] and [o["partition"] for o in plan["offsets"]] == [0, 1]
    assert offsets_show(b.bootstrap, "G")[("cli6", 0)]["current_offset"] > 1
    r = kafkactl("offsets", "reset", "--group", "G", "--shift-by", "-2", "--topic", "cli6:0",
                 "--execute", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    before = shown[("cli6", 0)]["current_offset"]
    assert offsets_show(b.bootstrap, "G")[("cli6", 0)]["current_offset"] == max(0, before - 2)
    # delete is a dry run unless --execute, like reset
    kept = offsets_show(b.bootstrap, "G")
    r = kafkactl("offsets", "delete", "-G", "G", "--topic", "cli6", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert "Would delete the offset of cli6-0" in r.stdout and "Dry run" in r.stderr
    assert offsets_show(b.bootstrap, "G") == kept
    r = kafkactl("offsets", "delete", "-g", "G", "--topic", "cli6", "--execute",
                 "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    assert "Deleted the offset of cli6-0" in r.stdout
    assert offsets_show(b.bootstrap, "G") == {}
    r = kafkactl("offsets", "show", "--all", "--json", "-b", b.bootstrap)
    assert r.returncode == 0
    # the whole (inactive) group: a dry run first, then --execute
    r = kafkactl("offsets", "delete", "-G", "G", "-b", b.bootstrap)
    assert r.returncode == 0 and "Would delete group G" in r.stdout, r.stderr
    r = kafkactl("rebalance", "-G", "G", "--json", "-b", b.bootstrap)
    assert r.returncode == 0 and json.loads(r.stdout)["state"] == "Empty"  # still there
    r = kafkactl("offsets", "delete", "-G", "G", "--execute", "-b", b.bootstrap)
    assert r.returncode == 0 and "Deleted group G" in r.stdout, r.stderr
    r = kafkactl("rebalance", "-G", "G", "-b", b.bootstrap)
    assert r.returncode == 1 and "does not exist" in r.stderr
    for flag in ("--group", "-G", "-g"):  # one group flag everywhere, -g accepted too
        r = kafkactl("rebalance", flag, "nope", "-b", b.bootstrap)
        assert r.returncode == 1 and "does not exist" in r.stderr


def test_offsets_list_names_the_groups(broker_factory: Any) -> None:
    """kafka-consumer-groups --list (and --state): issue 30 item 9."""
    from confluent_kafka import Consumer

    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "listed", 2)
    produce(b.bootstrap, "listed", ["a", "b", "c"])
    r = kafkactl("offsets", "list", "-b", b.bootstrap)
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    # an inactive group: offsets committed by `offsets reset`, no member
    r = kafkactl("offsets", "reset", "--group", "idle", "--topic", "listed", "--to-earliest",
                 "--execute", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    # an active group: a librdkafka consumer that stays subscribed
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "busy",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["listed"])

        def stable() -> bool:
            c.poll(0.2)
            r = kafkactl("offsets", "list", "--state", "stable", "--json", "-b", b.bootstrap)
            return r.returncode == 0 and [g["group"] for g in json.loads(r.stdout)] == ["busy"]

        wait_until(stable, 60, "the group busy to be Stable", interval=0.3)
        r = kafkactl("offsets", "list", "-b", b.bootstrap)
        assert r.returncode == 0 and r.stdout.splitlines() == ["busy", "idle"], r.stderr
        r = kafkactl("offsets", "list", "--json", "-b", b.bootstrap)
        assert json.loads(r.stdout) == [
            {"group": "busy", "protocol_type": "consumer", "state": "Stable"},
            {"group": "idle", "protocol_type": "", "state": "Empty"}]
        r = kafkactl("offsets", "list", "--state", "Empty,Stable", "-b", b.bootstrap)
        rows = [ln.split() for ln in r.stdout.splitlines()]
        assert rows == [["GROUP", "STATE"], ["busy", "Stable"], ["idle", "Empty"]], r.stdout
        r = kafkactl("offsets", "list", "--state", "asleep", "-b", b.bootstrap)
        assert r.returncode == 2 and "unknown group state" in r.stderr
    finally:
        c.close()
