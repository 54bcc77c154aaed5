"""A broker whose data dir belongs to a cluster, pointed at a ZooKeeper chroot that holds no
cluster (a wrong zookeeper.connect or chroot), is refused as Kafka refuses it
(InconsistentClusterIdException): one clear line, a non-zero exit, and nothing made in
ZooKeeper, not even the chroot. A standalone broker's data dir still brings its cluster id
to an empty chroot (tests/cluster/test_cluster.py adopts its topics)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from kafkactl.cluster import zk_paths
from tests import zygote
from tests.conftest import free_port
from tests.polling import wait_until


def serve(data: Path, *overrides: str) -> Any:
    args = ["serve", "--data-dir", str(data),
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}"]
    for o in overrides:
        args += ["--override", o]
    return zygote.run(args, timeout=60, text=True)


def test_a_cluster_members_data_dir_is_refused_by_an_empty_chroot(
        broker_factory: Any, zookeeper: Any, zk: Any) -> None:
    first = f"/w-{uuid.uuid4().hex[:8]}"
    b = broker_factory(zookeeper_connect=zookeeper.connect + first, broker_id="2")
    wait_until(lambda: zk.exists(f"{first}/brokers/ids/2"), 20, "registration")
    cid = json.loads(zk.get(f"{first}{zk_paths.CLUSTER_ID}")[0])["id"]
    assert b.stop() == 0

    other = f"/w-{uuid.uuid4().hex[:8]}/kafka"
    r = serve(b.data_dir, f"zookeeper.connect={zookeeper.connect}{other}", "broker.id=2")
    assert r.returncode != 0
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    error = [line for line in lines if "trying to join the wrong cluster" in line]
    assert len(error) == 1, r.stderr
    assert f"log dir {b.data_dir} belongs to cluster {cid}" in error[0], error[0]
    assert "zookeeper.connect" in error[0] and "Traceback" not in r.stderr
    assert zk.exists(other.rsplit("/", 1)[0]) is None  # nothing made, not even the chroot

    # its own cluster still takes it
    b.start()
    wait_until(lambda: zk.exists(f"{first}/brokers/ids/2"), 20, "registration again")


def test_a_standalone_data_dir_brings_its_cluster_id_to_an_empty_chroot(
        broker_factory: Any, zookeeper: Any, zk: Any) -> None:
    b = broker_factory()
    meta = (b.data_dir / "meta.properties").read_text()
    cid = next(line.split("=", 1)[1] for line in meta.splitlines()
               if line.startswith("cluster.id="))
    assert b.stop() == 0
    chroot = f"/w-{uuid.uuid4().hex[:8]}"
    b.overrides["zookeeper.connect"] = zookeeper.connect + chroot
    b.start()
    wait_until(lambda: zk.exists(f"{chroot}/brokers/ids/0"), 20, "registration")
    assert json.loads(zk.get(f"{chroot}{zk_paths.CLUSTER_ID}")[0])["id"] == cid
