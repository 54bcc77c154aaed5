"""The metrics of a real 3-broker ZooKeeper cluster, each broker with its metrics listener:
one active controller, every broker ready, and after a broker is killed the survivors'
under-replicated partition counts add up to the partitions it held."""

from __future__ import annotations

import uuid
from typing import Any

from tests import zygote
from tests.broker.test_metrics import sample, scrape, status
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, metadata
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture
from tests.conftest import free_port
from tests.polling import wait_until


def test_cluster_metrics_after_a_broker_dies(broker_factory: Any,
                                             zookeeper: Any) -> None:  # noqa: F811
    connect = zookeeper.connect + f"/c-{uuid.uuid4().hex[:8]}"
    ports = {i: free_port() for i in (1, 2, 3)}
    brokers = {i: broker_factory(
        zookeeper_connect=connect, broker_id=str(i),
        zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS), replica_lag_time_max_ms="3000",
        replica_fetch_backoff_ms="100", metrics_listen=f"127.0.0.1:{ports[i]}")
        for i in (1, 2, 3)}
    cluster = Cluster(connect, "", brokers)
    wait_until(lambda: cluster.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == 3 for b in cluster.live()), 30, "a cluster")
    for i in brokers:
        wait_until(lambda i=i: status(ports[i], "/ready") == 200, 30, f"broker {i} ready")
    r = zygote.run(["topics", "create", "-t", "spread", "--partitions", "3",
                    "--replication-factor", "3", "-b", cluster.bootstrap], text=True, timeout=60)
    assert r.returncode == 0, r.stderr

    def total(name: str, live: list[int]) -> float:
        return sum(sample(scrape(ports[i]), name) or 0 for i in live)

    everyone = [1, 2, 3]
    wait_until(lambda: total("kafka_server_replicamanager_leadercount", everyone) >= 3 and
               total("kafka_server_replicamanager_underreplicatedpartitions", everyone) == 0,
               40, "the partitions led, with full ISRs")
    assert total("kafka_controller_kafkacontroller_activecontrollercount", everyone) == 1
    for i in everyone:
        assert sample(scrape(ports[i]), "kafka_log_log_logendoffset", topic="spread",
                      partition="0") == 0

    victim = 3 if cluster.controller() != 3 else 2
    brokers[victim].kill()
    live = [i for i in everyone if i != victim]
    wait_until(lambda: total("kafka_server_replicamanager_underreplicatedpartitions", live)
               == 3, 60, "3 under-replicated partitions on the survivors")
    wait_until(lambda: total("kafka_controller_kafkacontroller_activecontrollercount", live)
               == 1, 30, "one active controller among the survivors")
    assert total("kafka_controller_kafkacontroller_offlinepartitionscount", live) == 0
