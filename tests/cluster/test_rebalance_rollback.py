"""`kafkactl rebalance --partitions --execute` prints the current replicas of the partitions
it moves before it moves them, as kafka-reassign-partitions --execute does ("Current
partition replica assignment", the JSON, "Save this to use as the ... option during
rollback"): the JSON is Kafka's, byte for byte, and given back to `--plan-in` it moves the
partitions back. With --json it is the document's "rollback"; a dry run prints none."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cluster.cluster_helpers import Cluster
from tests.cluster.test_rebalance_partitions import cluster, create_on, rebalance, replicas
from tests.cluster.test_replication import consume_all, full_isr, produce_acks_all
from tests.polling import wait_until

__all__ = ["cluster"]  # the fixture

HEAD = "Current partition replica assignment\n\n"
TAIL = "\n\nSave this to use as the --plan-in option during rollback\n"


def test_execute_prints_the_rollback_plan_and_it_moves_the_partitions_back(
        cluster: Cluster, tmp_path: Path) -> None:
    create_on(cluster, "back", {0: [1, 2], 1: [2, 3]})
    full_isr(cluster, "back", 2, size=2)
    lines = [f"b{i}" for i in range(100)]
    assert produce_acks_all(cluster.bootstrap, "back", lines).returncode == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "back", "partition": 0, "replicas": [3, 1]},
        {"topic": "back", "partition": 1, "replicas": [2, 3]}]}))  # (1 does not change)

    dry = rebalance(cluster.bootstrap, "--plan-in", str(plan))
    assert dry.returncode == 0, dry.stderr
    assert "Current partition replica assignment" not in dry.stdout + dry.stderr

    done = rebalance(cluster.bootstrap, "--plan-in", str(plan), "--execute")
    assert done.returncode == 0, done.stderr
    rollback = ('{"version":1,"partitions":[{"topic":"back","partition":0,'
                '"replicas":[1,2],"log_dirs":["any","any"]}]}')
    assert done.stdout.startswith(HEAD + rollback + TAIL), done.stdout
    wait_until(lambda: replicas(cluster, "back") == {0: [3, 1], 1: [2, 3]}, 60,
               "back-0 on 3,1")

    saved = tmp_path / "rollback.json"
    saved.write_text(done.stdout[len(HEAD):].split(TAIL)[0])
    again = rebalance(cluster.bootstrap, "--plan-in", str(saved), "--execute", "--json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["executed"] and [m["partition"] for m in doc["moves"]] == ["back-0"], doc
    assert doc["rollback"] == {"version": 1, "partitions": [
        {"topic": "back", "partition": 0, "replicas": [3, 1], "log_dirs": ["any", "any"]}]}
    wait_until(lambda: replicas(cluster, "back") == {0: [1, 2], 1: [2, 3]}, 60,
               "back-0 back on 1,2")
    verify = rebalance(cluster.bootstrap, "--verify", "--plan-in", str(saved))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout.startswith("Status of partition reassignment:\n"
                                    "Reassignment of partition back-0 is completed.\n")
    full_isr(cluster, "back", 2, size=2, timeout=60)
    assert sorted(consume_all(cluster.bootstrap, "back")) == sorted(lines)
