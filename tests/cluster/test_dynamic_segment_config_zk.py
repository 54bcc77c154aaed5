"""ZooKeeper cluster: a topic's segment.bytes altered through one broker reaches the log
of another broker that hosts the topic (the /config/changes notification, the path
retention changes take) and its active segment rolls by it at the next append."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cluster.cluster_helpers import start_cluster
from tests.cluster.test_config_changes import alter_topic, create_topic, produce_error
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

MESSAGE_TOO_LARGE = 10


def test_segment_bytes_altered_through_another_broker_rolls_the_hosts_log(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper, ids=(1, 2))
    create_topic(cluster, "zkseg", {0: [2]})
    host = cluster.brokers[2]
    wait_until(lambda: produce_error(host.port, "zkseg", 0, b"x" * 300) == 0, 10,
               "broker 2 accepting records for zkseg-0")
    # max.message.bytes rides along: its refusal says broker 2's log took the change
    alter_topic(cluster.brokers[1].port, "zkseg",
                {"segment.bytes": "1000", "max.message.bytes": "2000"})
    wait_until(lambda: produce_error(host.port, "zkseg", 0, b"y" * 5000) == MESSAGE_TOO_LARGE,
               10, "broker 2 applying the altered configs")
    for _ in range(10):
        assert produce_error(host.port, "zkseg", 0, b"x" * 300) == 0
    segments = sorted(Path(host.data_dir, "zkseg-0").glob("*.log"))
    assert len(segments) >= 4, segments
    # the first holds what came before the change (a 5000-byte probe among them, taken
    # while the change was on its way)
    assert all(s.stat().st_size <= 1000 for s in segments[1:]), segments
