"""`kafkactl rebalance --partitions` with nothing to move says so in a sentence, with no
empty table (issue 30, item 10); its options (issue 31 §4) refuse what does not go
together, bad plan files and a replication factor the brokers cannot hold, each with the
reason."""

from __future__ import annotations

import json
from pathlib import Path

from tests import zygote
from tests.conftest import BrokerProcess


def test_nothing_to_move_is_a_sentence(module_broker: BrokerProcess) -> None:
    b = module_broker.bootstrap
    assert zygote.run(["topics", "create", "-b", b, "-t", "still", "--partitions", "2"],
                      timeout=60).returncode == 0
    r = zygote.run(["rebalance", "--partitions", "-b", b], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("Nothing to move: every partition's replicas are spread evenly over "
                        "the live brokers already.\n"), r.stdout
    assert "PARTITION" not in r.stdout and "Dry run" not in r.stderr


def test_partitions_options_that_do_not_go_together_are_usage_errors(
        module_broker: BrokerProcess, tmp_path: Path) -> None:
    b = module_broker.bootstrap
    plan = tmp_path / "p.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"still","partition":0,"replicas":[0]}]}')
    for args, why in [
        (["--verify", "--cancel"], "give either --verify or --cancel"),
        (["--verify", "--execute"], "--verify / --cancel take only --plan-in and -t"),
        (["--cancel", "--replication-factor", "2"], "--verify / --cancel take only"),
        (["--plan-in", str(plan), "--replication-factor", "2"], "a --plan-in plan has its own"),
        (["--replication-factor", "0"], "--replication-factor must be at least 1"),
    ]:
        r = zygote.run(["rebalance", "--partitions", "-b", b, *args], text=True, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert why in r.stderr, (args, r.stderr)


def test_a_bad_plan_file_is_refused_with_the_reason(module_broker: BrokerProcess,
                                                     tmp_path: Path) -> None:
    b = module_broker.bootstrap
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = zygote.run(["rebalance", "--partitions", "-b", b, "--plan-in", str(bad)], text=True,
                   timeout=60)
    assert r.returncode == 1 and f"error: {bad}: the plan is not valid JSON" in r.stderr
    missing = tmp_path / "nope.json"
    r = zygote.run(["rebalance", "--partitions", "-b", b, "--plan-in", str(missing)],
                   text=True, timeout=60)
    assert r.returncode == 1 and "cannot read the plan" in r.stderr, r.stderr
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"version":1,"partitions":[{"topic":"nosuch","partition":3,'
                       '"replicas":[0]}]}')
    r = zygote.run(["rebalance", "--partitions", "-b", b, "--plan-in", str(unknown)],
                   text=True, timeout=60)
    assert r.returncode == 1 and "error: nosuch-3: no such partition" in r.stderr, r.stderr


def test_one_broker_refuses_a_higher_replication_factor_and_verifies_nothing(
        module_broker: BrokerProcess, tmp_path: Path) -> None:
    b = module_broker.bootstrap
    assert zygote.run(["topics", "create", "-b", b, "-t", "single", "--partitions", "1"],
                      timeout=60).returncode == 0
    out = tmp_path / "plan.json"
    r = zygote.run(["rebalance", "--partitions", "-b", b, "-t", "single",
                    "--replication-factor", "2", "--plan-out", str(out)], text=True, timeout=60)
    assert r.returncode == 1
    assert "replication factor 2 was asked for but only 1 broker(s) are live" in r.stderr
    assert r.stdout == "Nothing to move in the topics that could be planned.\n"
    assert json.loads(out.read_text()) == {"version": 1, "partitions": []}
    r = zygote.run(["rebalance", "--partitions", "-b", b, "--verify"], text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "No partition reassignments found.\n", r.stderr
    r = zygote.run(["rebalance", "--partitions", "-b", b, "--cancel"], text=True, timeout=60)
    assert r.returncode == 0
    assert r.stdout == "None of the specified partition reassignments are active.\n"
