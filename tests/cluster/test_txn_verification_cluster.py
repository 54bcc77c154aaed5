"""KIP-890's leader check across brokers: the batch goes to a partition led by a broker
that is not the transactional id's coordinator, which asks the coordinator over the
inter-broker channel (AddPartitionsToTxn v4 verify_only)."""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests.broker.test_txn_verification import (
    INVALID_TXN_STATE,
    _add,
    _batch,
    _init,
    _latest,
    _produce,
)
from tests.cluster.cluster_helpers import request, start_cluster
from tests.polling import wait_until


def test_a_leader_asks_a_coordinator_on_another_broker(broker_factory, zookeeper) -> None:
    from tests import zygote

    cluster = start_cluster(broker_factory, zookeeper,
                            transaction_state_log_num_partitions="5")
    r = zygote.run(["topics", "create", "-b", cluster.bootstrap, "-t", "spread",
                    "--partitions", "3", "--replication-factor", "1"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lead = cluster.wait_for_leaders("spread", 3)
    any_port = next(iter(cluster.brokers.values())).port

    def at(port: int) -> Any:
        return lambda api, version, body: request(port, api, version, body)

    def found() -> int | None:  # the first FindCoordinator makes __transaction_state
        r = request(any_port, ApiKey.FIND_COORDINATOR, 3, {"key": "far-txn", "key_type": 1})
        return int(r["node_id"]) if r["error_code"] == 0 else None

    coordinator = wait_until(found, 90, "the coordinator of far-txn")
    # InitProducerId goes to the coordinator, as a client sends it
    pid, epoch = _init(at(cluster.brokers[coordinator].port), "far-txn")
    partition = next(p for p, b in lead.items() if b != coordinator)
    leader = cluster.brokers[lead[partition]]
    w = at(leader.port)
    assert _produce(w, "far-txn", "spread", partition, _batch(pid, epoch, 0, "x")) == \
        INVALID_TXN_STATE
    assert _latest(w, "spread", partition) == 0
    assert _add(at(cluster.brokers[coordinator].port), "far-txn", pid, epoch, "spread",
                partition) == 0
    assert _produce(w, "far-txn", "spread", partition, _batch(pid, epoch, 0, "x")) == 0
    assert _latest(w, "spread", partition) == 1

