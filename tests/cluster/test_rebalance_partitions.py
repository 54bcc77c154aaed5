"""`kafkactl rebalance --partitions` on three real brokers (issue 31 §4): a broker down
never costs a topic a replica (the RF=3 topic is refused, the RF=2 one moves onto the live
brokers), a freshly created topic plans nothing, `-t` only filters, `--plan-out` then
`--plan-in` replays the same plan, `--verify` says Kafka's sentences, `--replication-factor`
adds replicas that catch up (kcat and `cluster verify-replicas` agree), and `--cancel`
undoes a reassignment that cannot finish."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.cluster.cluster_helpers import (
    SESSION_TIMEOUT_MS,
    Cluster,
    metadata,
    request,
    start_cluster,
)
from tests.cluster.test_replication import (
    OVERRIDES,
    consume_all,
    create,
    full_isr,
    produce_acks_all,
)
from tests.polling import wait_until


@pytest.fixture
def cluster(broker_factory, zookeeper):  # type: ignore[no-untyped-def]
    return start_cluster(broker_factory, zookeeper, **OVERRIDES)


def rebalance(bootstrap: str, *args: str, timeout: float = 120
              ) -> subprocess.CompletedProcess[str]:
    return zygote.run(["rebalance", "--partitions", "-b", bootstrap, *args], text=True,
                      timeout=timeout)


def replicas(cluster: Cluster, topic: str) -> dict[int, list[int]]:
    """partition -> replicas in order (the first is the preferred leader)."""
    md = metadata(cluster.live()[0].port, [topic])
    return {p["partition_index"]: list(p["replica_nodes"])
            for t in md["topics"] for p in t["partitions"]}


def create_on(cluster: Cluster, name: str, assignment: dict[int, list[int]]) -> None:
    controller = cluster.brokers[cluster.controller()]
    resp = request(controller.port, ApiKey.CREATE_TOPICS, 5, {"topics": [{
        "name": name, "num_partitions": -1, "replication_factor": -1, "configs": [],
        "assignments": [{"partition_index": p, "broker_ids": b}
                        for p, b in assignment.items()]}],
        "timeout_ms": 30000, "validate_only": False})
    assert resp["topics"][0]["error_code"] == 0, resp


def plan_of(stdout: str) -> dict[str, Any]:
    doc = json.loads(stdout)
    return {m["partition"]: m["target"] for m in doc["moves"]}


def test_a_broker_down_keeps_every_replication_factor(cluster: Cluster) -> None:
    create(cluster, "three", 2, rf=3)
    create(cluster, "two", 3, rf=2)
    full_isr(cluster, "three", 2)
    full_isr(cluster, "two", 3, size=2)
    lines = [f"r{i}" for i in range(300)]
    assert produce_acks_all(cluster.bootstrap, "two", lines).returncode == 0
    victim = next(b for b in (3, 2, 1) if b != cluster.controller())
    rest = sorted(b for b in cluster.brokers if b != victim)
    cluster.brokers[victim].kill()
    wait_until(lambda: all(sorted(x["node_id"] for x in metadata(b.port, [])["brokers"])
                           == rest for b in cluster.live()),
               SESSION_TIMEOUT_MS / 1000 + 30, f"broker {victim} gone from the metadata")
    bootstrap = ",".join(cluster.brokers[b].bootstrap for b in rest)
    r = rebalance(bootstrap, "--execute", "--json")
    assert r.returncode == 1, r.stderr  # a topic was refused
    doc = json.loads(r.stdout)
    assert set(doc["refused"]) == {"three"}, doc
    assert f"its replication factor is 3 but only 2 broker(s) are live " \
        f"({', '.join(map(str, rest))})" in r.stderr, r.stderr
    assert doc["executed"] and {m["partition"].rsplit("-", 1)[0] for m in doc["moves"]} == \
        {"two"}
    # the refused topic keeps its three replicas; the other moved off the dead broker
    assert all(len(rs) == 3 for rs in replicas(cluster, "three").values())
    wait_until(lambda: all(sorted(rs) == rest for rs in replicas(cluster, "two").values()),
               60, "topic two on the live brokers only")
    st = full_isr(cluster, "two", 3, size=2, timeout=60)
    assert all(s["isr"] == rest for s in st.values())
    assert sorted(consume_all(bootstrap, "two")) == sorted(lines)
    # nothing left to do for the plannable topic; still refused for the other
    again = rebalance(bootstrap, "-t", "two", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["moves"] == [], again.stdout
    refused = rebalance(bootstrap, "-t", "three")
    assert refused.returncode == 1 and "start the missing brokers, or lower it on purpose " \
        "with --replication-factor" in refused.stderr, refused.stderr


def test_balanced_plans_nothing_and_a_plan_replays(cluster: Cluster, tmp_path: Path) -> None:
    create(cluster, "fresh", 6, rf=2)
    full_isr(cluster, "fresh", 6, size=2)
    r = rebalance(cluster.bootstrap, "-t", "fresh")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("Nothing to move: every partition's replicas are spread evenly over "
                        "the live brokers already.\n")

    create_on(cluster, "skewed", {p: [1, 2] for p in range(3)})
    full_isr(cluster, "skewed", 3, size=2)
    lines = [f"s{i}" for i in range(200)]
    assert produce_acks_all(cluster.bootstrap, "skewed", lines).returncode == 0
    plan_file = tmp_path / "plan.json"
    out = rebalance(cluster.bootstrap, "--plan-out", str(plan_file), "--json")
    assert out.returncode == 0, out.stderr
    planned = plan_of(out.stdout)
    assert planned and all(p.startswith("skewed-") for p in planned), planned
    assert json.loads(out.stdout)["replica_moves"] == 2  # 6 replicas: 2 per broker
    doc = json.loads(plan_file.read_text())
    assert doc["version"] == 1
    assert {f"{r['topic']}-{r['partition']}": r["replicas"] for r in doc["partitions"]} \
        == planned
    assert all(r["log_dirs"] == ["any"] * len(r["replicas"]) for r in doc["partitions"])
    # -t only filters; --plan-in shows the same plan
    alone = rebalance(cluster.bootstrap, "-t", "skewed", "--json")
    assert plan_of(alone.stdout) == planned
    replay = rebalance(cluster.bootstrap, "--plan-in", str(plan_file), "--json")
    assert replay.returncode == 0, replay.stderr
    assert plan_of(replay.stdout) == planned

    before = rebalance(cluster.bootstrap, "--verify", "--plan-in", str(plan_file))
    assert before.returncode == 1
    assert before.stdout.startswith("Status of partition reassignment:\n")
    assert "There is no active reassignment of partition skewed-" in before.stdout

    done = rebalance(cluster.bootstrap, "--plan-in", str(plan_file), "--execute")
    assert done.returncode == 0, done.stderr
    after = rebalance(cluster.bootstrap, "--verify", "--plan-in", str(plan_file))
    assert after.returncode == 0, after.stdout + after.stderr
    assert after.stdout == "Status of partition reassignment:\n" + "".join(
        f"Reassignment of partition {p} is completed.\n" for p in sorted(planned))
    assert {f"skewed-{p}": rs for p, rs in replicas(cluster, "skewed").items()
            if f"skewed-{p}" in planned} == planned
    st = full_isr(cluster, "skewed", 3, size=2, timeout=60)
    assert sorted(b for s in st.values() for b in s["replicas"]) == [1, 1, 2, 2, 3, 3]  # type: ignore[attr-defined]
    assert sorted(consume_all(cluster.bootstrap, "skewed")) == sorted(lines)
    final = rebalance(cluster.bootstrap, "--json")
    assert final.returncode == 0 and json.loads(final.stdout)["moves"] == []
    nothing = rebalance(cluster.bootstrap, "--verify")
    assert nothing.returncode == 0 and nothing.stdout == "No partition reassignments found.\n"


def test_replication_factor_is_raised_and_the_new_replicas_catch_up(cluster: Cluster) -> None:
    create(cluster, "grow", 2, rf=1)
    full_isr(cluster, "grow", 2, size=1)
    lines = [f"g{i}" for i in range(400)]
    assert produce_acks_all(cluster.bootstrap, "grow", lines).returncode == 0
    leaders_before = {p: rs[0] for p, rs in replicas(cluster, "grow").items()}
    r = rebalance(cluster.bootstrap, "-t", "grow", "--replication-factor", "3", "--execute",
                  "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["replica_moves"] == 4
    full_isr(cluster, "grow", 2, size=3, timeout=60)
    assert {p: rs[0] for p, rs in replicas(cluster, "grow").items()} == leaders_before
    # every replica holds every record: verify-replicas compares them, kcat reads them all
    v = zygote.run(["cluster", "verify-replicas", "-t", "grow", "--json",
                    "-b", cluster.bootstrap], text=True, timeout=60)
    assert v.returncode == 0, v.stderr + v.stdout
    rows = json.loads(v.stdout)
    assert len(rows) == 2 and all(row["compared"] and row["diverged_at"] is None
                                  for row in rows), rows
    assert sum(row["checked_up_to"] for row in rows) == len(lines)
    assert sorted(consume_all(cluster.bootstrap, "grow")) == sorted(lines)
    # and lowered again, on purpose
    down = rebalance(cluster.bootstrap, "-t", "grow", "--replication-factor", "2",
                     "--execute", "--json")
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["replica_moves"] == 0
    wait_until(lambda: all(len(rs) == 2 for rs in replicas(cluster, "grow").values()), 60,
               "two replicas per partition")
    assert sorted(consume_all(cluster.bootstrap, "grow")) == sorted(lines)


def test_cancel_undoes_a_reassignment_that_cannot_finish(broker_factory, zookeeper,  # type: ignore[no-untyped-def]
                                                         tmp_path: Path) -> None:
    """The new replica's broker is stopped (SIGSTOP; registered for the long session
    timeout): the move stays in progress until --cancel puts the old replica set back."""
    cluster = start_cluster(broker_factory, zookeeper, **{
        **OVERRIDES, "zookeeper_session_timeout_ms": "60000"})
    create_on(cluster, "stuck", {0: [1]})
    full_isr(cluster, "stuck", 1, size=1)
    assert produce_acks_all(cluster.bootstrap, "stuck", ["a", "b"]).returncode == 0
    frozen = next(b for b in (3, 2) if b != cluster.controller())
    others = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != frozen)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "stuck", "partition": 0, "replicas": [1, frozen],
         "log_dirs": ["any", "any"]}]}))
    proc = cluster.brokers[frozen].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    try:
        started = rebalance(others, "--plan-in", str(plan_file), "--execute",
                            "--timeout", "0.5")
        # still in progress at the timeout: said, no error (it goes on)
        assert started.returncode == 0, started.stderr
        assert "1 of 1 move(s) still in progress" in started.stderr, started.stderr
        assert "--verify" in started.stderr
        busy = rebalance(others, "--verify", "--plan-in", str(plan_file))
        assert busy.returncode == 1
        assert busy.stdout == ("Status of partition reassignment:\n"
                               "Reassignment of partition stuck-0 is still in progress.\n")
        planned = rebalance(others, "-t", "stuck")
        assert planned.returncode == 1 and "reassignments in progress (stuck-0)" \
            in planned.stderr, planned.stderr
        cancelled = rebalance(others, "--cancel", "--plan-in", str(plan_file))
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout == "Successfully cancelled partition reassignment for: " \
            "stuck-0\n"
        wait_until(lambda: replicas(cluster, "stuck") == {0: [1]}, 30, "the old replicas back")
        again = rebalance(others, "--cancel")
        assert again.stdout == "None of the specified partition reassignments are active.\n"
        after = rebalance(others, "--verify", "--plan-in", str(plan_file))
        assert after.returncode == 1
        assert after.stdout.endswith("There is no active reassignment of partition stuck-0, "
                                     f"but replica set is 1 rather than 1,{frozen}.\n")
    finally:
        proc.send_signal(signal.SIGCONT)
    assert sorted(consume_all(others, "stuck")) == ["a", "b"]
