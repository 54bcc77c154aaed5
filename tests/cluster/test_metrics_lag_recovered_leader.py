"""Consumer lag of a partition led elsewhere whose leader failed (a real two-broker
cluster): the coordinator never serves what the leader answered before the failure as a
fresh high watermark with `kafkactl_consumergroup_lag_unknown_partitions` at 0.

- while the leader is failing (its last ask failed), its partition is left out of the lag
  and counted unknown;
- the first scrape after the leader recovers asks it again and waits for it within the
  scrape's budget: the lag is the fresh one (or, should the leader be slow to answer,
  the partition is counted unknown; never the old high watermark)."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path
from typing import Any

from tests.broker.wire import Wire, batch
from tests.cluster.cluster_helpers import Cluster, metadata
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture
from tests.cluster.test_metrics_lag_cluster import (
    _commit,
    _coordinator,
    _create,
    _group_lag,
    _produce,
    _start,
)
from tests.polling import wait_until

TOPIC = "lag-back"
TP = (TOPIC, 0)


def _setup(broker_factory: Any, zk: Any) -> tuple[Cluster, dict[int, int], int, int]:
    """Two brokers; the group's coordinator C; TOPIC-0's only replica on the other, L,
    10 records, committed at 5 (a lag of 5 the coordinator has from L)."""
    connect = zk.connect + f"/c-{uuid.uuid4().hex[:8]}"
    cluster, ports = _start(broker_factory, connect, (1, 2))
    coordinator = _coordinator(cluster)
    leader = 2 if coordinator == 1 else 1
    assert _create(cluster, TOPIC, str(leader), 1) == {0: leader}
    _produce(cluster, TOPIC, 0, leader, 10)
    _commit(cluster, coordinator, {TP: 5})
    wait_until(lambda: (lambda got: got[0].get(TP) == 5 and got[2] == 0)(
        _group_lag(ports, [coordinator])), 30, "the lag of 5 from the leader")
    return cluster, ports, coordinator, leader


def _fail_leader(cluster: Cluster, ports: dict[int, int], coordinator: int, leader: int
                 ) -> None:
    """Freeze the leader and scrape the coordinator (each scrape asks the leader, once
    the last ask is over) until an ask to it failed (timed out). The leader stays frozen."""
    proc = cluster.brokers[leader].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    log_path = cluster.brokers[coordinator].log_path
    assert log_path is not None
    said = f"broker {leader} did not answer for the consumer lag"

    def failed() -> bool:
        if said in Path(log_path).read_text(errors="replace"):
            return True
        _group_lag(ports, [coordinator])  # an ask, unless one is out
        return False

    wait_until(failed, 90, "the coordinator's ask to the frozen leader failed")


def _resume_leader(cluster: Cluster, coordinator: int, leader: int) -> None:
    """SIGCONT the leader; wait until it leads TOPIC-0 again and has 20 more records."""
    proc = cluster.brokers[leader].proc
    assert proc is not None
    proc.send_signal(signal.SIGCONT)

    def leads_again() -> bool:
        topics = metadata(cluster.brokers[coordinator].port, [TOPIC])["topics"]
        parts = topics[0]["partitions"] if topics else []
        return bool(parts) and parts[0]["leader_id"] == leader

    wait_until(leads_again, 60, "the leader back")

    def appended() -> bool:
        with Wire(cluster.brokers[leader].bootstrap) as w:
            r = w.produce(TOPIC, batch([b"n%d" % i for i in range(20)]), acks=-1)
            return bool(r["error_code"] == 0)

    wait_until(appended, 60, "20 more records on the leader")


def test_first_scrape_after_leader_recovers_is_not_stale(broker_factory: Any,
                                                         zookeeper: Any) -> None:  # noqa: F811
    cluster, ports, coordinator, leader = _setup(broker_factory, zookeeper)
    _fail_leader(cluster, ports, coordinator, leader)
    _resume_leader(cluster, coordinator, leader)  # the true lag is now 25
    lags, _total, unknown = _group_lag(ports, [coordinator])  # the first scrape since
    assert lags.get(TP) != 5, ("the old high watermark served as fresh", lags, unknown)
    assert (lags.get(TP) == 25 and unknown == 0) or (TP not in lags and unknown == 1), \
        (lags, unknown)
    wait_until(lambda: (lambda got: got[0].get(TP) == 25 and got[2] == 0)(
        _group_lag(ports, [coordinator])), 30, "the fresh lag")


def test_failing_leader_partition_is_counted_unknown(broker_factory: Any,
                                                     zookeeper: Any) -> None:  # noqa: F811
    cluster, ports, coordinator, leader = _setup(broker_factory, zookeeper)
    try:
        _fail_leader(cluster, ports, coordinator, leader)
        lags, _total, unknown = _group_lag(ports, [coordinator])
        assert TP not in lags, ("a failing leader's old answer served as fresh", lags)
        assert unknown == 1
    finally:
        proc = cluster.brokers[leader].proc
        assert proc is not None
        proc.send_signal(signal.SIGCONT)
