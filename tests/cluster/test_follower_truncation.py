"""A follower with a divergent suffix truncates it (KIP-101) and rebuilds its producer state
off the event loop (kafkactl/broker/log_io.py), then copies the new leader's records: the two
replicas end byte for byte identical.

Three real brokers, unclean leader election on; a partition with replicas L (leader) and
F. F stops (the ISR shrinks to L) and L takes 50 records F never sees; L is killed, F
started and elected (uncleanly: it was out of the ISR), and it takes other records at the
same offsets. L comes back as a follower: its suffix is cut at F's epoch boundary and its
producer state rebuilt from the log before it fetches again."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.cluster.cluster_helpers import Cluster, leaders, metadata, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

OVERRIDES = {"replica_lag_time_max_ms": "3000", "replica_fetch_backoff_ms": "100",
             "unclean_leader_election_enable": "true"}


def _kafkactl(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "kafkactl", *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def _kcat(bootstrap: str, lines: list[str], *props: str) -> None:
    args = ["kcat", "-P", "-b", bootstrap, "-t", "div", "-p", "0"]
    for p in props:
        args += ["-X", p]
    r = subprocess.run(args, input="".join(f"{v}\n" for v in lines), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def _log_bytes(data_dir: Path) -> bytes:
    d = data_dir / "div-0"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def _isr(cluster: Cluster) -> list[int]:
    md = metadata(cluster.live()[0].port, ["div"])
    return sorted(md["topics"][0]["partitions"][0]["isr_nodes"])


def _leader(cluster: Cluster) -> int:
    for b in cluster.live():
        try:
            lead = leaders(b.port, "div").get(0, -1)
        except OSError:
            continue
        if lead >= 0:
            return lead
    return -1


def test_a_divergent_follower_truncates_and_matches_the_leader(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper, (1, 2, 3), **OVERRIDES)
    _kafkactl("topics", "create", "-t", "div", "--partitions", "1", "--replication-factor",
              "2", "-b", cluster.bootstrap)
    first = cluster.wait_for_leaders("div", 1)[0]
    leader = cluster.brokers[first]
    # the other replica: the broker whose data dir has the partition, not the leader
    wait_until(lambda: sum((b.data_dir / "div-0").exists() for b in cluster.brokers.values())
               == 2, 30, "both replicas made")
    fid = next(i for i, b in cluster.brokers.items()
               if i != first and (b.data_dir / "div-0").exists())
    follower = cluster.brokers[fid]
    _kcat(cluster.bootstrap, [f"both-{i}" for i in range(100)], "enable.idempotence=true")
    wait_until(lambda: _log_bytes(follower.data_dir) == _log_bytes(leader.data_dir), 30,
               "the follower caught up")

    follower.stop()
    wait_until(lambda: cluster.live() and _isr(cluster) == [first], 30, "the ISR shrunk")
    _kcat(leader.bootstrap, [f"lost-{i}" for i in range(50)], "acks=1")
    leader.kill()
    follower.start()
    wait_until(lambda: _leader(cluster) == fid, 60, "the follower elected")
    _kcat(follower.bootstrap, [f"new-{i}" for i in range(30)], "enable.idempotence=true")

    leader.start()  # the old leader: now a follower with records the new leader lacks
    wait_until(lambda: re.search(r"truncating from 150 to 100\n[\s\S]*?rebuilt producer "
                                 r"state from offsets 0\.\.100\n", leader.log()),
               60, "the divergent suffix cut and the producer state rebuilt")
    wait_until(lambda: _log_bytes(leader.data_dir) == _log_bytes(follower.data_dir), 60,
               "the replicas identical")
    data = _log_bytes(leader.data_dir)
    assert b"lost-0" not in data and b"new-29" in data
