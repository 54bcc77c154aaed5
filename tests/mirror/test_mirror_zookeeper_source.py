"""A 3-broker ZooKeeper cluster as the source, found through `--source-zookeeper`.

Needs the cluster mode's test helper (tests/cluster/cluster_helpers.py,
`start_cluster(broker_factory, zookeeper) -> Cluster` with `.zookeeper_connect`); skipped
with that reason until it is on the branch."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mirror.helpers import (
    MirrorProcess,
    assert_same,
    create_topics,
    mirrored,
    produce,
    read_topic,
)
from tests.polling import wait_until

HELPERS = Path(__file__).resolve().parents[1] / "cluster" / "cluster_helpers.py"
pytestmark = pytest.mark.skipif(
    not HELPERS.exists(),
    reason="tests/cluster/cluster_helpers.py (the ZooKeeper cluster mode) is not here yet")


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.cluster.zk import ZooKeeperServer, available

    reason = available()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


def test_mirror_from_a_zookeeper_cluster(broker_factory: Any, zookeeper: Any,
                                         tmp_path: Path) -> None:
    helpers = importlib.import_module("tests.cluster.cluster_helpers")
    cluster = helpers.start_cluster(broker_factory, zookeeper,
                                    group_initial_rebalance_delay_ms="0")
    target = broker_factory(group_initial_rebalance_delay_ms="0")
    topics = {"zk.orders": 3, "zk.clicks": 2, "zk.audit": 1}
    create_topics(cluster.bootstrap, topics)
    for topic, n in topics.items():
        produce(cluster.bootstrap, topic, 0, 300, partitions=n)
    log_path = tmp_path / "zk-mirror.log"
    status = tmp_path / "zk-status.json"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkactl", "mirror", "--source-zookeeper",
             cluster.zookeeper_connect, "--target", target.bootstrap, "--whitelist",
             r"zk\..*", "--json-status", str(status), "--status-interval", "0.2"],
            stdout=log, stderr=subprocess.STDOUT)
    m = MirrorProcess(proc, log_path, status)
    wait_until(lambda: mirrored(m, 900), 120, f"900 records mirrored:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    for topic in topics:
        assert_same(read_topic(cluster.bootstrap, topic), read_topic(target.bootstrap, topic))
