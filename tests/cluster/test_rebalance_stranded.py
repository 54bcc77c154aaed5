"""`kafkactl rebalance --partitions` never plans a move that could not finish, on three real
brokers: a partition whose only replica is on a broker that is down has nothing to copy
from, so moving it to a live broker would stay in progress (leader: none) until that broker
is back. It used to be planned, without a word, and --execute left it in progress. Now the
planner leaves it out and says why (exit 1, as for a refused topic: the other partitions
are still planned and moved), and a --plan-in plan with such a move is refused, as one
naming a broker that is not live."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, metadata
from tests.cluster.test_rebalance_partitions import cluster, create_on, rebalance, replicas
from tests.cluster.test_replication import consume_all, full_isr, produce_acks_all
from tests.polling import wait_until

__all__ = ["cluster"]  # the fixture


def test_a_move_from_a_dead_broker_alone_is_not_planned(cluster: Cluster,
                                                         tmp_path: Path) -> None:
    victim = next(b for b in (3, 2) if b != cluster.controller())
    a, b = sorted(x for x in cluster.brokers if x != victim)
    create_on(cluster, "solo", {0: [victim]})
    create_on(cluster, "two", {0: [victim, a]})
    full_isr(cluster, "two", 1, size=2)
    cluster.wait_for_leaders("solo", 1)
    assert produce_acks_all(cluster.bootstrap, "two", ["x", "y"]).returncode == 0
    cluster.brokers[victim].kill()
    wait_until(lambda: all(sorted(x["node_id"] for x in metadata(p.port, [])["brokers"])
                           == [a, b] for p in cluster.live()),
               SESSION_TIMEOUT_MS / 1000 + 30, f"broker {victim} gone from the metadata")
    wait_until(lambda: [p["leader_id"] for t in metadata(cluster.live()[0].port, ["solo"])[
        "topics"] for p in t["partitions"]] == [-1], 30, "solo-0 without a leader")
    live = ",".join(cluster.brokers[x].bootstrap for x in (a, b))
    why = (f"its replicas ({victim}) are all on brokers that are not live: a new replica "
           "would have nothing to copy from, so the move could not finish until one of "
           f"them is back (start broker {victim} first)")

    dry = rebalance(live, "--json")
    assert dry.returncode == 1, dry.stdout + dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["stranded"] == {"solo-0": why}, doc
    assert [m["partition"] for m in doc["moves"]] == ["two-0"], doc
    alone = rebalance(live, "-t", "solo")
    assert alone.returncode == 1
    assert alone.stdout == "Nothing to move in the topics that could be planned.\n"
    assert f"error: solo-0: not planned: {why}" in alone.stderr, alone.stderr

    done = rebalance(live, "--execute")
    assert done.returncode == 1, done.stderr
    assert f"error: solo-0: not planned: {why}" in done.stderr, done.stderr
    assert "two-0" in done.stdout and "solo-0" not in done.stdout, done.stdout
    wait_until(lambda: sorted(replicas(cluster, "two")[0]) == [a, b], 60, "two-0 moved")
    wait_until(lambda: rebalance(live, "--verify").stdout ==
               "No partition reassignments found.\n", 60, "no reassignment in progress")
    assert replicas(cluster, "solo") == {0: [victim]}

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "solo", "partition": 0, "replicas": [a]}]}))
    refused = rebalance(live, "--plan-in", str(plan), "--execute")
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr == f"error: solo-0: not moved: {why}\n", refused.stderr
    assert rebalance(live, "--verify").stdout == "No partition reassignments found.\n"
    assert replicas(cluster, "solo") == {0: [victim]}
    assert sorted(consume_all(live, "two")) == ["x", "y"]
