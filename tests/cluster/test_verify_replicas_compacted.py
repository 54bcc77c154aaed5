"""`kafkactl cluster verify-replicas` on a compacted topic whose replicas were cleaned
differently (each broker's cleaner runs on its own; here broker 2's is off, so only the
leader's copy is cleaned): the same records at the offsets both hold, so no divergence
(it said DIVERGED: batch boundaries and CRCs differ once a copy is cleaned). Two real
brokers on a real ZooKeeper."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

TOPIC = "compacted-v"
CLEANER = {"log_cleaner_backoff_ms": "100"}


def _kafkactl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkactl", *args], capture_output=True,
                          text=True, timeout=120, input=stdin)


def test_replicas_cleaned_differently_do_not_diverge(broker_factory: Any,
                                                    zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper, ids=(1,), **CLEANER)
    b2 = broker_factory(zookeeper_connect=cluster.zookeeper_connect, broker_id="2",
                        zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS),
                        log_cleaner_enable="false", **CLEANER)
    one = cluster.brokers[1].bootstrap
    wait_until(lambda: "2" in _kafkactl("cluster", "describe", "--json", "-b", one).stdout,
               30, "broker 2 registered")
    r = _kafkactl("topics", "create", "-t", TOPIC, "--replica-assignment", "1:2",
                  "--config", "cleanup.policy=compact", "--config", "segment.bytes=16384",
                  "--config", "min.cleanable.dirty.ratio=0.01",
                  "--config", "min.compaction.lag.ms=0", "-b", one)
    assert r.returncode == 0, r.stderr
    lines = "".join(f"k{i % 20}\tv{i}-{'x' * 40}\n" for i in range(2000))
    r = _kafkactl("produce", "-t", TOPIC, "-K", "\t", "-X", "acks=all", "-X", "batch.size=2048",
                  "-q", "-b", one,
                  stdin=lines)
    assert r.returncode == 0, r.stderr

    def offsets_on_leader() -> list[int]:
        r = _kafkactl("consume", "-t", TOPIC, "-o", "earliest", "-e", "-f", "%o\\n", "-b", one)
        assert r.returncode == 0, r.stderr
        return [int(x) for x in r.stdout.split()]

    wait_until(lambda: len(offsets_on_leader()) < 1000, 60,
               "broker 1's cleaner removing superseded records")
    both = ",".join([one, b2.bootstrap])
    wait_until(lambda: _kafkactl("cluster", "describe", "--json", "-b", both).returncode == 0,
               30, "the cluster answering")
    r = _kafkactl("cluster", "verify-replicas", "-t", TOPIC, "-b", both)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.rstrip().endswith("ok"), r.stdout
    assert "DIVERGED" not in r.stdout
