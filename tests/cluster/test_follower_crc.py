"""A follower checks the CRC of every batch it fetches: a batch damaged on the leader's disk
(or on the wire) is never stored; the follower keeps what came before it and fetches again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from kafkactl.record.memory_records import iter_batches
from tests.cluster.cluster_helpers import start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until


def _kafkactl(*args: str, input: bytes | None = None) -> None:
    r = subprocess.run([sys.executable, "-m", "kafkactl", *args], input=input,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr


def _batches(path: Path) -> list[Any]:
    return list(iter_batches(path.read_bytes())) if path.exists() else []


def test_a_damaged_batch_is_never_replicated(broker_factory: Any,
                                             zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper, ids=(1, 2))
    _kafkactl("topics", "create", "-t", "rot", "--replication-factor", "2",
              "-b", cluster.bootstrap)
    leader_id = cluster.wait_for_leaders("rot", 1)[0]
    leader = cluster.brokers[leader_id]
    follower = next(b for i, b in cluster.brokers.items() if i != leader_id)
    seg = "rot-0/00000000000000000000.log"
    _kafkactl("produce", "-t", "rot", "-q", "-b", cluster.bootstrap, input=b"a1\na2\n")
    wait_until(lambda: len(_batches(follower.data_dir / seg)) == 1, 30,
               "the first batch on the follower")
    follower.stop()
    _kafkactl("produce", "-t", "rot", "-q", "--acks", "1", "-b", leader.bootstrap,
              input=b"b1\nb2\n")
    on_leader = leader.data_dir / seg
    first, second = _batches(on_leader)
    end = first.size + second.size  # v2 batches: size includes the 12-byte overhead
    with open(on_leader, "r+b") as f:  # bit rot in the last value byte of the second batch
        f.seek(end - 2)
        byte = f.read(1)
        f.seek(end - 2)
        f.write(bytes([byte[0] ^ 0x01]))
    follower.start()
    wait_until(lambda: "fails its CRC check; not stored" in follower.log(), 60,
               "the follower refusing the damaged batch")
    kept = _batches(follower.data_dir / seg)
    assert len(kept) == 1 and kept[0].is_valid()  # only the first batch, intact
    assert follower.proc is not None and follower.proc.poll() is None  # still serving
