"""Transactions on three real brokers (issue 32): `__transaction_state` replicated
(transaction.state.log.replication.factor=3), each id coordinated by the leader of its
partition, markers sent over the inter-broker channel to the other partitions' leaders, and
the coordinator killed mid-transaction: the new leader of its `__transaction_state`
partition loads the transaction and completes it, all-or-nothing for read_committed
consumers."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.broker.txn_helpers import committed_values, markers
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, request, start_cluster
from tests.polling import wait_until

OVERRIDES = {"replica_fetch_backoff_ms": "100", "default_replication_factor": "3",
             "transaction_state_log_replication_factor": "3",
             "transaction_state_log_num_partitions": "5",
             "transaction_state_log_min_isr": "2"}


@pytest.fixture
def cluster(broker_factory, zookeeper):  # type: ignore[no-untyped-def]
    return start_cluster(broker_factory, zookeeper, **OVERRIDES)


def _create(cluster: Cluster, name: str, partitions: int) -> None:
    r = zygote.run(["topics", "create", "-b", cluster.bootstrap, "-t", name, "--partitions",
                    str(partitions), "--replication-factor", "3"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders(name, partitions)


def _producer(cluster: Cluster, tid: str) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid,
                     "linger.ms": 0, "transaction.timeout.ms": 60000})


def _coordinator(cluster: Cluster, tid: str) -> int:
    def found() -> int | None:
        r = request(cluster.live()[0].port, ApiKey.FIND_COORDINATOR, 3,
                    {"key": tid, "key_type": 1})
        return int(r["node_id"]) if r["error_code"] == 0 else None
    return wait_until(found, 30, f"the coordinator of {tid}")


def _read_committed(cluster: Cluster, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    md = c.list_topics(topic, timeout=30)
    c.assign([TopicPartition(topic, p, 0) for p in md.topics[topic].partitions])
    got: list[bytes] = []

    def step() -> bool:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value() or b"")
        return len(got) >= count

    try:
        wait_until(step, 60, f"{count} committed records of {topic}")
        extra = c.poll(1.0)  # nothing else is committed
        assert extra is None or extra.error() is not None, extra.value()
    finally:
        c.close()
    return got


def _all_markers(cluster: Cluster, topic: str, partitions: int, broker: int) -> list[list[str]]:
    d = cluster.brokers[broker].data_dir
    return [[m[0] for m in markers(d, topic, p)] for p in range(partitions)]


def test_commit_and_abort_across_leaders(cluster: Cluster) -> None:
    topic, tid = "tx-spread", "tid-spread"
    _create(cluster, topic, 3)
    p = _producer(cluster, tid)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, f"c{i}".encode(), partition=i % 3)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(9):
        p.produce(topic, f"a{i}".encode(), partition=i % 3)
    p.flush(60)
    p.abort_transaction(60)
    coordinator = _coordinator(cluster, tid)
    # every replica of every partition has the COMMIT then the ABORT marker
    for b in cluster.brokers:
        wait_until(lambda b=b: _all_markers(cluster, topic, 3, b) == [["COMMIT", "ABORT"]] * 3,
                   30, f"the markers on broker {b}")
    got = _read_committed(cluster, topic, 30)
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(30))
    # __transaction_state's partition of the id is replicated to every broker
    for b in cluster.brokers.values():

        states = [s for s in _states_any(b.data_dir, tid)]
        assert states[-1] in ("CompleteAbort", "PrepareAbort"), (b, states)
    assert coordinator in cluster.brokers
    # kafkactl transactions asks every broker (each coordinates its partitions' ids)
    import json

    def described() -> dict[str, Any]:
        r = zygote.run(["transactions", "describe", "-t", tid, "--json", "-b",
                        cluster.bootstrap], text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return dict(json.loads(r.stdout))

    d = wait_until(lambda: (x := described())["state"] == "CompleteAbort" and x, 30,
                   "CompleteAbort")
    assert d["coordinator"] == coordinator
    r = zygote.run(["transactions", "list", "--json", "-b", cluster.bootstrap], text=True,
                   timeout=60)
    assert r.returncode == 0, r.stderr
    listed = [t for t in json.loads(r.stdout) if t["transactional_id"] == tid]
    assert [(t["coordinator"], t["state"]) for t in listed] == [(coordinator, "CompleteAbort")]


def _states_any(data_dir: Any, tid: str) -> list[str | None]:
    from kafkactl.broker.coordinator.group_metadata_manager import partition_for
    from kafkactl.broker.coordinator.transaction_state_manager import decode_txn_record
    from tests.broker.txn_helpers import STATES, batches_raw

    out: list[str | None] = []
    for b in batches_raw(data_dir, "__transaction_state", partition_for(tid, 5)):
        for r in b:
            e = decode_txn_record(r.key, r.value)
            if e.transactional_id == tid:
                out.append(None if e.value is None else STATES[e.value["transaction_status"]])
    return out


def test_coordinator_killed_mid_transaction(cluster: Cluster) -> None:
    """The coordinator dies with a transaction open: the new leader of the id's
    __transaction_state partition loads it (Ongoing, with its partitions) and the producer's
    commit completes there, markers on every partition."""
    topic, tid = "tx-failover", "tid-failover"
    _create(cluster, topic, 3)
    p = _producer(cluster, tid)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(12):
        p.produce(topic, f"v{i}".encode(), partition=i % 3)
    p.flush(60)
    old = _coordinator(cluster, tid)
    cluster.brokers[old].kill()
    wait_until(lambda: _coordinator(cluster, tid) != old, SESSION_TIMEOUT_MS / 1000 + 30,
               "another coordinator")
    p.commit_transaction(120)
    got = _read_committed(cluster, topic, 12)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(12))
    live = [b for b in cluster.brokers if b != old]
    for b in live:
        wait_until(lambda b=b: _all_markers(cluster, topic, 3, b) == [["COMMIT"]] * 3, 30,
                   f"the COMMIT markers on broker {b}")
    assert committed_values(cluster.brokers[live[0]].data_dir, topic, 0) == \
        [f"v{i}".encode() for i in range(0, 12, 3)]


def test_prepare_commit_completed_by_the_next_coordinator(broker_factory, zookeeper) -> None:  # type: ignore[no-untyped-def]
    """EndTxn answered (PrepareCommit written), then the only leader of the transaction's
    partition stops before it gets its marker, and the coordinator is SIGKILLed: the next
    leader of the id's __transaction_state partition loads PrepareCommit and sends the
    markers again (to whoever leads the partition by then), then writes CompleteCommit.
    read_committed consumers see the whole transaction."""
    import os
    import signal

    # A session timeout well above the commit's own time (however loaded the machine), so
    # the commit returns before the stopped leader's partition moves; and the stopped
    # leader is not the controller, so ISR changes go on while it is stopped.
    cluster = start_cluster(broker_factory, zookeeper, **{
        **OVERRIDES, "transaction_state_log_min_isr": "1", "replica_lag_time_max_ms": "2000",
        "request_timeout_ms": "3000", "zookeeper_session_timeout_ms": "10000"})
    topic = "tx-prepared"
    controller = wait_until(lambda: c if (c := cluster.controller()) in cluster.brokers
                            else None, 30, "a controller")
    first = next(b for b in sorted(cluster.brokers) if b != controller)
    replicas = [first, *(b for b in sorted(cluster.brokers) if b != first)]
    resp = request(cluster.brokers[controller].port, ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": topic, "num_partitions": -1, "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": replicas}],
                    "configs": []}], "timeout_ms": 10000, "validate_only": False})
    assert resp["topics"][0]["error_code"] == 0, resp
    leader = cluster.wait_for_leaders(topic, 1)[0]
    assert leader != controller
    tid = next(t for t in (f"tid-prepared-{i}" for i in range(100))
               if _coordinator(cluster, t) != leader)
    coordinator = _coordinator(cluster, tid)
    p = _producer(cluster, tid)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"p{i}".encode(), partition=0)
    p.flush(60)
    stopped = cluster.brokers[leader]
    assert stopped.proc is not None
    os.kill(stopped.proc.pid, signal.SIGSTOP)
    try:
        p.commit_transaction(60)  # answered once PrepareCommit is written
        d = cluster.brokers[coordinator].data_dir
        assert _states_any(d, tid)[-1] == "PrepareCommit"
        cluster.brokers[coordinator].kill()
        third = next(b for b in cluster.brokers if b not in (leader, coordinator))
        wait_until(lambda: _states_any(cluster.brokers[third].data_dir, tid)[-1] ==
                   "CompleteCommit", 10 + 60,
                   "CompleteCommit written by the next coordinator")
        assert [m[0] for m in markers(cluster.brokers[third].data_dir, topic, 0)] == ["COMMIT"]
        assert f"completing the commit of {tid}" in cluster.brokers[third].log()
    finally:
        os.kill(stopped.proc.pid, signal.SIGCONT)
    live = Cluster(cluster.zookeeper_connect, cluster.chroot,
                   {i: b for i, b in cluster.brokers.items() if i != coordinator})
    got = _read_committed(live, topic, 5)
    assert sorted(got) == [f"p{i}".encode() for i in range(5)]


def test_partition_leader_killed_mid_transaction(cluster: Cluster) -> None:
    """A partition's leader SIGKILLed while a transaction writes to it: the producer goes
    on with the new leader (which has the transaction's first batches from replication),
    the commit's marker goes to it, and read_committed sees every record exactly once."""
    topic, tid = "tx-leader-kill", "tid-leader-kill"
    _create(cluster, topic, 3)
    coordinator = _coordinator(cluster, tid)
    leaders_now = cluster.wait_for_leaders(topic, 3)
    victim_partition = next(p for p, b in leaders_now.items() if b != coordinator)
    victim = leaders_now[victim_partition]
    p = _producer(cluster, tid)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, f"k{i}".encode(), partition=i % 3)
    p.flush(60)
    cluster.brokers[victim].kill()
    cluster.wait_for_leaders(topic, 3, timeout=SESSION_TIMEOUT_MS / 1000 + 30,
                             expect=lambda ls: all(b not in (-1, victim) for b in ls.values()))
    for i in range(30, 60):
        p.produce(topic, f"k{i}".encode(), partition=i % 3)
    p.commit_transaction(120)
    live = Cluster(cluster.zookeeper_connect, cluster.chroot,
                   {i: b for i, b in cluster.brokers.items() if i != victim})
    got = _read_committed(live, topic, 60)
    assert sorted(got) == sorted(f"k{i}".encode() for i in range(60))
    for b in live.brokers:
        wait_until(lambda b=b: _all_markers(live, topic, 3, b) == [["COMMIT"]] * 3, 30,
                   f"the COMMIT markers on broker {b}")
