"""Dynamic password configs of a broker in a ZooKeeper cluster: refused without
`password.encoder.secret` (before anything reaches ZooKeeper), else kept out of ZooKeeper
and stored encrypted in the broker's data dir (mode 0600), never logged, read back after a
restart. Before, the value went in clear to the data dir file (mode 0644) and the log."""

from __future__ import annotations

import json
import stat
import subprocess
from typing import Any

from kafkactl.broker.password_encoder import is_encoded
from tests import zygote
from tests.cluster.cluster_helpers import Cluster, start_cluster
from tests.cluster.zk import ZooKeeperServer

PASSWORD = "zk-topsecret"
KEY = "listener.name.plaintext.ssl.key.password"


def alter(cluster: Cluster, config: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(["configs", "alter", "-b", cluster.brokers[1].bootstrap,
                       "--entity-type", "brokers", "--entity-name", "1", "--add-config",
                       config], text=True, timeout=60)


def znode(zk: Any, cluster: Cluster) -> str:
    path = f"{cluster.chroot}/config/brokers/1"
    return zk.get(path)[0].decode() if zk.exists(path) else ""


def test_refused_without_the_encoder_secret(broker_factory: Any, zookeeper: ZooKeeperServer,
                                            zk: Any) -> None:
    cluster = start_cluster(broker_factory, zookeeper, ids=(1,))
    r = alter(cluster, f"{KEY}={PASSWORD},log.retention.ms=7654321")
    assert r.returncode == 1, r.stdout
    assert "INVALID_CONFIG: Password encoder secret not configured" in r.stderr, r.stderr
    assert "7654321" not in znode(zk, cluster)  # nothing of the request was written
    path = cluster.brokers[1].data_dir / "dynamic-broker-configs.json"
    assert not path.exists() or PASSWORD not in path.read_text()


def test_stored_encrypted_in_the_data_dir_not_in_zookeeper(
        broker_factory: Any, zookeeper: ZooKeeperServer, zk: Any) -> None:
    cluster = start_cluster(broker_factory, zookeeper, ids=(1,),
                            password_encoder_secret="zk-encoder-secret")
    b = cluster.brokers[1]
    r = alter(cluster, f"{KEY}={PASSWORD},log.retention.ms=7654321")
    assert r.returncode == 0, r.stderr
    assert json.loads(znode(zk, cluster))["config"] == {"log.retention.ms": "7654321"}
    path = b.data_dir / "dynamic-broker-configs.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert PASSWORD not in path.read_text()
    assert is_encoded(json.loads(path.read_text())["brokers"]["1"][KEY])
    b.restart()
    r = zygote.run(["configs", "describe", "-b", b.bootstrap, "--entity-type", "brokers",
                    "--entity-name", "1"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"  {KEY}=null sensitive=true" in r.stdout, r.stdout
    assert "  log.retention.ms=7654321 " in r.stdout, r.stdout
    assert PASSWORD not in b.log()
