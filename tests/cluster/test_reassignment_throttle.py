"""`kafkactl rebalance --partitions --execute --throttle R` on three real brokers: the moving
replica copies at about R bytes/s (Kafka's replication throttle: the throttled-replicas topic
configs and the brokers' throttled rates, set before the move starts), the configs stay
while the move runs, and `--verify` removes them all once it is complete.

The brokers measure the rate over 2 windows of 1 s (replication.quota.window.*; Kafka's
default 11 lets the first 10 s of quota through at once) and fetch at most 64 KiB per
partition, so a copy of N bytes cannot be faster than about (N - R - 64 KiB) / R: the test
asserts only the lower bound N / R * 0.8, never an upper one."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kafkactl.broker.replication_quota import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)
from kafkactl.client.admin import BROKER_RESOURCE, AdminClient
from tests.cluster.cluster_helpers import Cluster, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

RATE = 100_000  # bytes/s
RECORDS, RECORD_BYTES = 1500, 1000
OVERRIDES = {"replica_fetch_backoff_ms": "100", "replica_fetch_max_bytes": "65536",
             "replication_quota_window_num": "2", "replication_quota_window_size_seconds": "1"}


def _kafkactl(*args: str, input: bytes | None = None, ok: bool = True
              ) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "kafkactl", *args],
                       input=input.decode() if input is not None else None,
                       capture_output=True, text=True, timeout=180)
    if ok:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def _topic_throttles(cluster: Cluster) -> dict[str, str]:
    with AdminClient(cluster.bootstrap) as admin:
        entries = admin.describe_configs("moving", [LEADER_REPLICAS, FOLLOWER_REPLICAS])
    return {k: e.value or "" for k, e in entries.items() if not e.is_default and e.value}


def _broker_rates(cluster: Cluster, broker_id: int) -> dict[str, str]:
    """The broker's own dynamic rates, asked of that broker."""
    with AdminClient(cluster.brokers[broker_id].bootstrap) as admin:
        entries = admin.describe_configs(str(broker_id), [LEADER_RATE, FOLLOWER_RATE],
                                         resource_type=BROKER_RESOURCE)
    return {k: e.value or "" for k, e in entries.items() if e.source == 2 and e.value}


def _log_size(cluster: Cluster, broker_id: int) -> int:
    d = cluster.brokers[broker_id].data_dir / "moving-0"
    return sum(p.stat().st_size for p in d.glob("*.log")) if d.exists() else 0


def _moving(broker_factory: Any, zookeeper: ZooKeeperServer, tmp_path: Path
            ) -> tuple[Cluster, int, int]:
    """Three brokers; topic `moving` (one partition, one replica) with RECORDS records;
    (the cluster, the broker holding it, another one to move it to)."""
    cluster = start_cluster(broker_factory, zookeeper, (1, 2, 3), **OVERRIDES)
    _kafkactl("topics", "create", "-t", "moving", "--partitions", "1",
              "--replication-factor", "1", "-b", cluster.bootstrap)
    source = cluster.wait_for_leaders("moving", 1)[0]
    target = next(b for b in sorted(cluster.brokers) if b != source)
    data = tmp_path / "records.txt"
    data.write_bytes(b"".join(b"%06d" % i + b"x" * (RECORD_BYTES - 6) + b"\n"
                              for i in range(RECORDS)))
    _kafkactl("produce", "-t", "moving", "-q", "-f", str(data), "--batch-size", "16384",
              "-b", cluster.bootstrap)
    return cluster, source, target


def test_a_throttled_move_copies_at_about_the_rate(broker_factory: Any,
                                                   zookeeper: ZooKeeperServer,
                                                   tmp_path: Path) -> None:
    cluster, source, target = _moving(broker_factory, zookeeper, tmp_path)
    size = _log_size(cluster, source)
    assert size >= RECORDS * RECORD_BYTES
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [target]}]}))

    started = time.monotonic()
    move = subprocess.Popen(
        [sys.executable, "-m", "kafkactl", "rebalance", "--partitions", "--plan-in",
         str(plan), "--execute", "--throttle", str(RATE), "--timeout", "150",
         "-b", cluster.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # while it copies: the moving partition's replicas and both brokers are throttled
        wait_until(lambda: _topic_throttles(cluster) == {
            LEADER_REPLICAS: f"0:{source}", FOLLOWER_REPLICAS: f"0:{target}"}, 30,
            "the throttled-replicas topic configs")
        for b in (source, target):  # set next, before the move starts
            wait_until(lambda b=b: _broker_rates(cluster, b) == {  # type: ignore[misc]
                LEADER_RATE: str(RATE), FOLLOWER_RATE: str(RATE)}, 30, f"broker {b}'s rates")
        assert _log_size(cluster, target) < size, "the copy was not throttled"
        out, err = move.communicate(timeout=170)
    finally:
        if move.poll() is None:
            move.kill()
    elapsed = time.monotonic() - started
    assert move.returncode == 0, out + err
    assert "The inter-broker throttle limit was set to 100000 B/s" in err
    assert _log_size(cluster, target) == size
    assert elapsed >= size / RATE * 0.8, f"{size} bytes copied in {elapsed:.1f} s"

    # complete, but the throttle stays until --verify
    assert _topic_throttles(cluster)
    verify = _kafkactl("rebalance", "--partitions", "--verify", "--plan-in", str(plan),
                       "-b", cluster.bootstrap)
    assert "Reassignment of partition moving-0 is completed." in verify.stdout
    assert f"Clearing broker-level throttles on brokers {min(source, target)}," \
        f"{max(source, target)}" in verify.stdout
    assert "Clearing topic-level throttles on topic(s) moving" in verify.stdout
    assert _topic_throttles(cluster) == {}
    for b in cluster.brokers:
        wait_until(lambda b=b: _broker_rates(cluster, b) == {}, 10,  # type: ignore[misc]
                   f"broker {b}'s rates removed")
    consumed = subprocess.run(["kcat", "-C", "-b", cluster.brokers[target].bootstrap,
                               "-t", "moving", "-e", "-q"], capture_output=True, timeout=60)
    assert len(consumed.stdout.split(b"\n")) - 1 == RECORDS


def test_throttle_needs_execute(broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    r = _kafkactl("rebalance", "--partitions", "--throttle", "1000", "-b", "127.0.0.1:1",
                  ok=False)
    assert r.returncode == 2 and "--throttle goes with --execute" in r.stderr
    r = _kafkactl("rebalance", "--partitions", "--execute", "--throttle", "0",
                  "-b", "127.0.0.1:1", ok=False)
    assert r.returncode == 2 and "at least 1 byte/s" in r.stderr


def test_a_move_outlasting_the_timeout_is_no_error_and_cancel_unthrottles(
        broker_factory: Any, zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """--execute waits --timeout (1 s here) for a throttled move that takes ~15 s: the move
    going on is said, exit 0 (kafka-reassign-partitions does not wait at all; it said
    "error:" and exited 1); --cancel then undoes it and removes the throttles, as
    kafka-reassign-partitions --cancel does (they stayed until a --verify)."""
    cluster, source, target = _moving(broker_factory, zookeeper, tmp_path)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [target]}]}))
    r = _kafkactl("rebalance", "--partitions", "--plan-in", str(plan), "--execute",
                  "--throttle", str(RATE), "--timeout", "1", "-b", cluster.bootstrap)
    assert "1 of 1 move(s) still in progress after 1 s: they go on" in r.stderr, r.stderr
    assert "error:" not in r.stderr and "\r" not in r.stderr, r.stderr  # (not a terminal)
    assert _topic_throttles(cluster)  # the move runs, throttled
    r = _kafkactl("rebalance", "--partitions", "--cancel", "--plan-in", str(plan),
                  "-b", cluster.bootstrap)
    assert "Successfully cancelled partition reassignment for: moving-0" in r.stdout
    assert _topic_throttles(cluster) == {}
    for b in cluster.brokers:
        wait_until(lambda b=b: _broker_rates(cluster, b) == {}, 10,  # type: ignore[misc]
                   f"broker {b}'s rates removed")
