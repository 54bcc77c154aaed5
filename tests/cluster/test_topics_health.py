"""`kafkactl topics describe --under-replicated-partitions | --unavailable-partitions |
--under-min-isr-partitions | --at-min-isr-partitions` on three real brokers with one
killed, with kafka-topics' meaning of each filter (issue 30 item 9)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests import zygote
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, metadata, start_cluster
from tests.polling import wait_until

OVERRIDES = {"replica_lag_time_max_ms": "3000", "replica_fetch_backoff_ms": "100",
             "offsets_topic_replication_factor": "3"}


@pytest.fixture
def cluster(broker_factory: Any, zookeeper: Any) -> Cluster:
    return start_cluster(broker_factory, zookeeper, **OVERRIDES)


def topics(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    bootstrap = ",".join(b.bootstrap for b in cluster.live())
    return zygote.run(["topics", *args, "-b", bootstrap], text=True, timeout=60)


def described(cluster: Cluster, *flags: str) -> set[tuple[str, int]]:
    r = topics(cluster, "describe", "--exclude-internal", "--json", *flags)
    assert r.returncode == 0, r.stderr
    return {(d["topic"], p["partition"]) for d in json.loads(r.stdout) for p in d["partitions"]}


def _state(cluster: Cluster) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (leader, isr size), as a live broker reports it."""
    md = metadata(cluster.live()[0].port, ["wide", "narrow", "strict"])
    return {(t["name"], p["partition_index"]): (p["leader_id"], len(p["isr_nodes"]))
            for t in md["topics"] for p in t["partitions"]}


def test_partition_filters_after_a_broker_dies(cluster: Cluster) -> None:
    for name, rf, extra in (("wide", "3", ["--config", "min.insync.replicas=2"]),
                            ("strict", "3", ["--config", "min.insync.replicas=3"]),
                            ("narrow", "1", [])):
        r = topics(cluster, "create", "-t", name, "--partitions", "3",
                   "--replication-factor", rf, *extra)
        assert r.returncode == 0, r.stderr
    wait_until(lambda: (s := _state(cluster)) and len(s) == 9 and all(
        lead >= 0 and isr == (1 if t == "narrow" else 3) for (t, _p), (lead, isr) in s.items()),
        40, "every partition led, with its full ISR")
    # all healthy: nothing under-replicated, unavailable or under min ISR
    assert described(cluster, "--under-replicated-partitions") == set()
    assert described(cluster, "--unavailable-partitions") == set()
    assert described(cluster, "--under-min-isr-partitions") == set()
    assert described(cluster, "--at-min-isr-partitions") == \
        {("strict", p) for p in range(3)} | {("narrow", p) for p in range(3)}

    # kill a broker that leads one of narrow's partitions (not the controller if possible)
    narrow_leaders = {p: lead for (t, p), (lead, _i) in _state(cluster).items() if t == "narrow"}
    controller = cluster.controller()
    victim = next((b for b in narrow_leaders.values() if b != controller),
                  next(iter(narrow_leaders.values())))
    cluster.brokers[victim].kill()
    lost = {("narrow", p) for p, lead in narrow_leaders.items() if lead == victim}

    def shrunk() -> bool:
        s = _state(cluster)
        return all(isr == 2 for (t, _p), (_l, isr) in s.items() if t != "narrow") and all(
            lead != victim for (t, _p), (lead, _i) in s.items() if t != "narrow")
    wait_until(shrunk, SESSION_TIMEOUT_MS / 1000 + 40, "the ISRs to drop the dead broker")

    wide_and_strict = {(t, p) for t in ("wide", "strict") for p in range(3)}
    assert described(cluster, "--under-replicated-partitions") == wide_and_strict
    assert described(cluster, "--unavailable-partitions") == lost
    # under min ISR: strict (2 < 3) and the partitions without a leader
    assert described(cluster, "--under-min-isr-partitions") == \
        {("strict", p) for p in range(3)} | lost
    # at min ISR: exactly min.insync.replicas in sync (wide: 2 of 3; narrow: 1, also a
    # leaderless partition whose ISR keeps its last replica, as Kafka counts it)
    min_isr = {"wide": 2, "strict": 3, "narrow": 1}
    assert described(cluster, "--at-min-isr-partitions") == \
        {tp for tp, (_l, isr) in _state(cluster).items() if isr == min_isr[tp[0]]}
    assert {("wide", p) for p in range(3)} <= described(cluster, "--at-min-isr-partitions")

    # the text layout: kafka-topics prints only the partition lines, Leader: none
    r = topics(cluster, "describe", "--unavailable-partitions", "--exclude-internal")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(lost) and all(ln.startswith("\tTopic: narrow\t") for ln in lines)
    assert all("\tLeader: none\t" in ln or f"\tLeader: {victim}\t" in ln for ln in lines)
    assert not any(ln.startswith("Topic:") for ln in lines)
