"""Consumer lag and replication metrics of a real ZooKeeper cluster, each broker with its
metrics listener:

- the group's coordinator reports the lag of every partition the group committed, those led
  by the other brokers too (their leaders' high watermarks, asked over the inter-broker
  listener), as `offsets show` computes it; so the README's alert on
  `max by (group) (kafka_consumergroup_group_sum_lag)` sees the whole group;
- a leader that stops answering (SIGSTOP) neither holds the scrape up nor drops what it
  answered before: its partitions keep their last answer, and a partition it never answered
  for is left out and counted in kafkactl_consumergroup_lag_unknown_partitions until it
  answers again;
- ReplicationBytesIn / ReplicationBytesOut count a replicated batch's bytes on the follower
  and the leader, and ReplicaFetcherManager MaxLag is 0 once the follower caught up."""

from __future__ import annotations

import json
import signal
import uuid
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.broker.test_metrics import sample, scrape, status
from tests.broker.wire import Wire, batch
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, metadata, request
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture
from tests.conftest import free_port
from tests.polling import wait_until

GROUP = "cg-lag"


def _start(broker_factory: Any, connect: str, ids: tuple[int, ...]
           ) -> tuple[Cluster, dict[int, int]]:
    ports = {i: free_port() for i in ids}
    brokers = {i: broker_factory(
        zookeeper_connect=connect, broker_id=str(i),
        zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS), replica_lag_time_max_ms="3000",
        replica_fetch_backoff_ms="100", offsets_topic_replication_factor=str(len(ids)),
        metrics_listen=f"127.0.0.1:{ports[i]}") for i in ids}
    cluster = Cluster(connect, "", brokers)
    wait_until(lambda: cluster.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == len(ids) for b in cluster.live()), 30,
        "a cluster")
    for i in ids:
        wait_until(lambda i=i: status(ports[i], "/ready") == 200, 30, f"broker {i} ready")
    return cluster, ports


def _create(cluster: Cluster, topic: str, assignment: str, partitions: int) -> dict[int, int]:
    r = zygote.run(["topics", "create", "-t", topic, "--replica-assignment", assignment,
                    "-b", cluster.bootstrap], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return cluster.wait_for_leaders(topic, partitions)


def _produce(cluster: Cluster, topic: str, partition: int, leader: int, n: int) -> None:
    with Wire(cluster.brokers[leader].bootstrap) as w:
        r = w.produce(topic, batch([b"r%d" % i for i in range(n)]), acks=-1,
                      partition=partition)
        assert r["error_code"] == 0, r


def _coordinator(cluster: Cluster) -> int:
    def found() -> int | None:
        port = cluster.live()[0].port
        r = request(port, ApiKey.FIND_COORDINATOR, 1, {"key": GROUP, "key_type": 0})
        return r["node_id"] if r["error_code"] == 0 else None
    return wait_until(found, 30, "the group's coordinator")


def _commit(cluster: Cluster, coordinator: int, offsets: dict[tuple[str, int], int]) -> None:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(
            {"partition_index": p, "committed_offset": o, "committed_metadata": ""})

    def committed() -> bool:
        r = request(cluster.brokers[coordinator].port, ApiKey.OFFSET_COMMIT, 2, {
            "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        return all(p["error_code"] == 0 for t in r["topics"] for p in t["partitions"])
    wait_until(committed, 30, "the group's commit")


def _group_lag(ports: dict[int, int], live: list[int]
               ) -> tuple[dict[tuple[str, int], float], float, float]:
    """Over the live brokers' endpoints: the group's lag per partition, its sum_lag, and its
    partitions left out (unknown)."""
    lags: dict[tuple[str, int], float] = {}
    total = unknown = 0.0
    for i in live:
        for (name, labels), value in scrape(ports[i]).items():
            got = dict(labels)
            if got.get("group") != GROUP:
                continue
            if name == "kafka_consumergroup_group_lag":
                lags[(got["topic"], int(got["partition"]))] = value
            elif name == "kafka_consumergroup_group_sum_lag":
                total += value
            elif name == "kafkactl_consumergroup_lag_unknown_partitions":
                unknown += value
    return lags, total, unknown


def test_coordinator_reports_lag_of_partitions_led_elsewhere(broker_factory: Any,
                                                            zookeeper: Any) -> None:  # noqa: F811
    connect = zookeeper.connect + f"/c-{uuid.uuid4().hex[:8]}"
    cluster, ports = _start(broker_factory, connect, (1, 2, 3))
    everyone = [1, 2, 3]
    # one replica each, one partition on each broker; and three replicas of each partition
    single = _create(cluster, "lag-single", "1,2,3", 3)
    assert sorted(single.values()) == [1, 2, 3]
    triple = _create(cluster, "lag-triple", "1:2:3,2:3:1,3:1:2", 3)
    for p, leader in single.items():
        _produce(cluster, "lag-single", p, leader, 150)
    for p, leader in triple.items():
        _produce(cluster, "lag-triple", p, leader, 20)
    coordinator = _coordinator(cluster)
    _commit(cluster, coordinator, {**{("lag-single", p): 50 for p in single},
                                   **{("lag-triple", p): 10 for p in triple}})
    expected = {**{("lag-single", p): 100.0 for p in single},
                **{("lag-triple", p): 10.0 for p in triple}}

    # the partitions led by the two other brokers are in the coordinator's lag
    seen: list[Any] = []

    def settled() -> tuple[dict[tuple[str, int], float], float, float] | None:
        got = _group_lag(ports, everyone)
        seen[:] = [got]
        return got if got[0] == expected and got[2] == 0 else None

    try:
        lags = wait_until(settled, 30, "the lag of every committed partition")
    except AssertionError as e:
        raise AssertionError(f"{e}: the endpoints say (lag, sum_lag, unknown) {seen}, "
                             f"not {expected}") from None
    assert lags[1] == 330
    r = zygote.run(["offsets", "show", "-G", GROUP, "--json", "-b", cluster.bootstrap],
                   text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    shown = {(row["topic"], row["partition"]): row["lag"]
             for row in json.loads(r.stdout) if row["topic"] is not None}
    assert shown == expected

    # a leader that stops answering: its partition keeps its last lag; a partition of it the
    # group commits only now has none, and is said to be left out
    frozen = next(b for b in single.values() if b != coordinator)
    frozen_partition = next(p for p, b in single.items() if b == frozen)
    _create(cluster, "lag-late", str(frozen), 1)
    _produce(cluster, "lag-late", 0, frozen, 30)
    proc = cluster.brokers[frozen].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    try:
        _commit(cluster, coordinator, {("lag-late", 0): 5})
        lags, total, unknown = _group_lag(ports, [coordinator])
        assert lags == expected  # lag-late-0 left out, the frozen one's at its last answer
        assert lags[("lag-single", frozen_partition)] == 100
        assert unknown == 1
        assert total == 330
    finally:
        proc.send_signal(signal.SIGCONT)
    # the leader back (its partitions led again once it is registered again): it answers
    back = {**expected, ("lag-late", 0): 25.0}
    wait_until(lambda: (lambda got: got[0] == back and got[2] == 0)(
        _group_lag(ports, [coordinator])), 60, "lag-late-0's lag once its leader answers")


def test_replication_bytes_and_max_lag(broker_factory: Any, zookeeper: Any) -> None:  # noqa: F811
    connect = zookeeper.connect + f"/c-{uuid.uuid4().hex[:8]}"
    cluster, ports = _start(broker_factory, connect, (1, 2))
    _create(cluster, "replicated", "1:2", 1)

    def counter(broker: int, name: str) -> float:
        value = sample(scrape(ports[broker]), f"kafka_server_brokertopicmetrics_{name}_total")
        assert value is not None, name
        return value

    # the follower caught up with the empty log: nothing in flight between the two
    wait_until(lambda: sample(scrape(ports[1]),
                              "kafka_server_replicamanager_underreplicatedpartitions") == 0,
               30, "the follower in the ISR")
    sent, got = counter(1, "replicationbytesout"), counter(2, "replicationbytesin")
    records = batch([b"x" * 100 for _ in range(10)])
    with Wire(cluster.brokers[1].bootstrap) as w:
        # acks=all: answered once the follower fetched the batch (and counted it)
        assert w.produce("replicated", records, acks=-1)["error_code"] == 0
    assert counter(1, "replicationbytesout") - sent == len(records)
    assert counter(2, "replicationbytesin") - got == len(records)
    assert counter(1, "bytesin") >= len(records)  # BytesIn: the leader's appends only
    assert counter(2, "bytesin") == 0
    for i in (1, 2):
        assert sample(scrape(ports[i]), "kafka_server_replicafetchermanager_maxlag",
                      clientid="Replica") == 0
