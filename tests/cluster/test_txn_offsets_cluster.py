"""The group side of transactions on three real brokers: `__consumer_offsets` with
replication factor 3, a producer's TxnOffsetCommit pending in the group's coordinator,
that coordinator SIGKILLed mid-transaction. The new leader of the group's offsets
partition replays the replicated transactional batch as pending (OffsetFetch with
require_stable: UNSTABLE_OFFSET_COMMIT), and the transaction's marker, sent to it by the
transaction coordinator, makes the offset committed (or, for an abort, drops it)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.client.producer import Producer
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode as E
from tests import zygote
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, request, start_cluster
from tests.polling import wait_until

OVERRIDES = {"replica_fetch_backoff_ms": "100", "default_replication_factor": "3",
             "offsets_topic_replication_factor": "3", "offsets_topic_num_partitions": "3",
             "transaction_state_log_replication_factor": "3",
             "transaction_state_log_num_partitions": "3",
             "transaction_state_log_min_isr": "2", "group_initial_rebalance_delay_ms": "0"}
TP = ("cin", 0)


@pytest.fixture
def cluster(broker_factory, zookeeper):  # type: ignore[no-untyped-def]
    return start_cluster(broker_factory, zookeeper, **OVERRIDES)


def _coordinator(cluster: Cluster, key: str, key_type: int) -> int:
    def found() -> int | None:
        for b in cluster.live():
            try:
                r = request(b.port, ApiKey.FIND_COORDINATOR, 3,
                            {"key": key, "key_type": key_type})
            except OSError:
                continue
            return int(r["node_id"]) if r["error_code"] == 0 else None
        return None
    return wait_until(found, 60, f"the coordinator of {key}")


def _fetch(cluster: Cluster, group: str) -> tuple[int, int]:
    """(error, committed offset) of TP from the group's coordinator, require_stable."""
    node = _coordinator(cluster, group, 0)
    r = request(cluster.brokers[node].port, ApiKey.OFFSET_FETCH, 7, {
        "group_id": group, "require_stable": True,
        "topics": [{"name": TP[0], "partition_indexes": [TP[1]]}]})
    if r["error_code"]:
        return int(r["error_code"]), -1
    p = r["topics"][0]["partitions"][0]
    return int(p["error_code"]), int(p["committed_offset"])


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_group_coordinator_killed_mid_transaction(cluster: Cluster, commit: bool) -> None:
    r = zygote.run(["topics", "create", "-b", cluster.bootstrap, "-t", TP[0], "--partitions",
                    "1", "--replication-factor", "3"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders(TP[0], 1)
    group = "cl-group"
    _coordinator(cluster, group, 0)  # makes __consumer_offsets (RF 3)
    cluster.wait_for_leaders("__consumer_offsets", 3)
    p = Producer(cluster.bootstrap, transactional_id="cl-offsets", linger_ms=1,
                 request_timeout_ms=60000)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send_offsets_to_transaction({TP: 10}, group)
        p.commit_transaction()  # answered once PrepareCommit is written; markers follow
        wait_until(lambda: _fetch(cluster, group) == (E.NONE, 10), 60, "offset 10 committed")
        p.begin_transaction()
        p.send_offsets_to_transaction({TP: 42}, group)
        assert _fetch(cluster, group) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        old = _coordinator(cluster, group, 0)
        cluster.brokers[old].kill()
        wait_until(lambda: _coordinator(cluster, group, 0) != old,
                   SESSION_TIMEOUT_MS / 1000 + 30, "another group coordinator")
        # replayed from the replicated log: still pending on the new coordinator
        wait_until(lambda: _fetch(cluster, group)[0] != E.COORDINATOR_LOAD_IN_PROGRESS, 60,
                   "the group loaded")
        assert _fetch(cluster, group) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
        want = 42 if commit else 10
        got: Any = None

        def settled() -> bool:
            nonlocal got
            got = _fetch(cluster, group)
            return bool(got == (E.NONE, want))
        wait_until(settled, 60, f"offset {want} committed (last answer {got})")
    finally:
        p.close(10)
