"""A 3-broker ZooKeeper cluster as the source, found through `--source-zookeeper` (the
cluster tests' ZooKeeper server and start_cluster)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.cluster.cluster_helpers import start_cluster
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture
from tests.mirror.helpers import (
    MirrorProcess,
    assert_same,
    create_topics,
    mirrored,
    produce,
    read_topic,
)
from tests.polling import wait_until


def test_mirror_from_a_zookeeper_cluster(broker_factory: Any, zookeeper: Any,  # noqa: F811
                                         tmp_path: Path) -> None:
    cluster = start_cluster(broker_factory, zookeeper, group_initial_rebalance_delay_ms="0")
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
