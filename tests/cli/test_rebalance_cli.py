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
    # (raising it is not lowering it: the reason and the way out fit the request)
    assert "would lower" not in r.stderr, r.stderr
    assert ("a partition cannot have more replicas than live brokers): start the missing "
            "brokers, or ask for 1 or fewer") in r.stderr, r.stderr
    assert r.stdout == "Nothing to move in the topics that could be planned.\n"
    assert json.loads(out.read_text()) == {"version": 1, "partitions": []}
    r = zygote.run(["rebalance", "--partitions", "-b", b, "--verify"], text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "No partition reassignments found.\n", r.stderr
    r = zygote.run(["rebalance", "--partitions", "-b", b, "--cancel"], text=True, timeout=60)
    assert r.returncode == 0
    assert r.stdout == "None of the specified partition reassignments are active.\n"


def test_an_invalid_plan_prints_only_its_errors(module_broker: BrokerProcess,
                                                tmp_path: Path) -> None:
    """A --plan-in plan whose every partition is refused moves nothing, and says only why:
    not also "Nothing to move: ... spread evenly already" (it used to, on stdout)."""
    b = module_broker.bootstrap
    assert zygote.run(["topics", "create", "-b", b, "-t", "planned", "--partitions", "1"],
                      timeout=60).returncode == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "planned", "partition": 0, "replicas": [7]},
        {"topic": "planned", "partition": 4, "replicas": [0]}]}))
    for extra in (["--execute"], []):
        r = zygote.run(["rebalance", "--partitions", "-b", b, "--plan-in", str(plan), *extra],
                       text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert r.stdout == "", r.stdout
        assert r.stderr.splitlines() == [
            "error: planned-0: broker 7 is not live (live brokers: 0)",
            "error: planned-4: no such partition"], r.stderr


def test_unclean_leaders_must_name_the_partitions(module_broker: BrokerProcess) -> None:
    """--unclean-leaders (kafka-leader-election --election-type unclean) is held only
    where asked for: -t TOPIC --partition P, or --all-topic-partitions; its help says it
    may lose acknowledged records."""
    import inspect

    from kafkactl.cli.rebalance import rebalance

    b = module_broker.bootstrap
    for args, why in [
        (["--unclean-leaders"], "--unclean-leaders needs the partitions: -t TOPIC "
                                "--partition P (repeatable), or --all-topic-partitions"),
        (["--unclean-leaders", "-t", "x"], "--unclean-leaders needs the partitions"),
        (["--unclean-leaders", "--partition", "0"], "--partition needs -t TOPIC"),
        (["--unclean-leaders", "-t", "x", "-t", "y", "--partition", "0"],
         "--partition goes with one -t TOPIC"),
        (["--unclean-leaders", "-t", "x", "--partition", "0", "--all-topic-partitions"],
         "give either --all-topic-partitions or -t TOPIC --partition P"),
        (["--unclean-leaders", "-t", "x", "--partition", "a"], "bad --partition 'a'"),
        (["--unclean-leaders", "--preferred-leaders", "--all-topic-partitions"],
         "give only one of --preferred-leaders, --unclean-leaders"),
        (["--preferred-leaders", "--all-topic-partitions"],
         "--all-topic-partitions: only with --unclean-leaders"),
        (["--unclean-leaders", "--all-topic-partitions", "--execute"],
         "--execute: only with --partitions"),
        (["--partitions", "--partition", "0"],
         "--partition: only with --preferred-leaders / --unclean-leaders"),
        (["-G", "g", "--all-topic-partitions"], "--all-topic-partitions: only with "
                                                "--unclean-leaders"),
    ]:
        r = zygote.run(["rebalance", "-b", b, *args], text=True, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert why in r.stderr, (args, r.stderr)
    option = inspect.signature(rebalance).parameters["unclean_leaders"].default
    assert "MAY LOSE ACKNOWLEDGED RECORDS" in option.help


def test_unclean_and_preferred_elections_on_one_broker(module_broker: BrokerProcess) -> None:
    """A standalone broker leads every partition it has: an unclean election (KIP-460) is
    not needed (it used to be refused as INVALID_REQUEST), with the same message as a
    preferred one and as a cluster's controller gives."""
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    from kafkactl.cluster.partition_election import ELECTION_NOT_NEEDED_MESSAGE

    b = module_broker.bootstrap
    assert zygote.run(["topics", "create", "-b", b, "-t", "led", "--partitions", "2"],
                      timeout=60).returncode == 0
    admin = AdminClient({"bootstrap.servers": b})
    for kind in (ElectionType.UNCLEAN, ElectionType.PREFERRED):
        results = admin.elect_leaders(kind, [TopicPartition("led", 0),
                                             TopicPartition("led", 9)]).result(30)
        errors = {tp.partition: e for tp, e in results.items()}
        assert errors[0] is not None and errors[0].code() == 84, (kind, errors)  # NOT_NEEDED
        assert errors[0].str() == ELECTION_NOT_NEEDED_MESSAGE
        assert errors[9] is not None and errors[9].code() == 3  # UNKNOWN_TOPIC_OR_PARTITION
    r = zygote.run(["rebalance", "--unclean-leaders", "-b", b, "-t", "led", "--partition",
                    "0,1"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("Unclean leader election: 0 partition(s) got a leader, 2 already had "
                        "a live one.\n")
    r = zygote.run(["rebalance", "--unclean-leaders", "-b", b, "--all-topic-partitions",
                    "--json"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = {row["partition"]: row["result"] for row in json.loads(r.stdout)}
    assert rows["led-0"] == rows["led-1"] == "has a leader"
    r = zygote.run(["rebalance", "--unclean-leaders", "--dry-run", "-b", b, "-t", "led",
                    "--partition", "1", "--partition", "5"], text=True, timeout=60)
    assert r.returncode == 1
    assert r.stdout == ("Unclean leader election (dry run, nothing elected): 0 partition(s) "
                        "would get a leader, 1 already have a live one, 1 not found.\n"), r.stdout
    assert r.stderr == "error: led-5: no such partition\n"
    r = zygote.run(["rebalance", "--unclean-leaders", "-b", b, "-t", "led", "--partition",
                    "5"], text=True, timeout=60)
    assert r.returncode == 1
    assert "error: led-5: UNKNOWN_TOPIC_OR_PARTITION: no such partition" in r.stderr
    # the unknown partition is counted as failed, not as unchanged beside its error
    assert r.stdout == ("Unclean leader election: 0 partition(s) got a leader, 0 already had "
                        "a live one, 1 failed.\n"), r.stdout
    r = zygote.run(["rebalance", "--preferred-leaders", "-b", b, "-t", "led", "--partition",
                    "1"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("Preferred leader election: 0 partition(s) moved, 1 already led by "
                        "their preferred replica.\n")
    r = zygote.run(["rebalance", "--preferred-leaders", "--dry-run", "-b", b, "-t", "led",
                    "--partition", "1", "--partition", "7"], text=True, timeout=60)
    assert r.stdout == ("Preferred leader election (dry run, nothing elected): 0 partition(s) "
                        "would move, 1 already led by their preferred replica, 1 not "
                        "found.\n"), r.stdout
