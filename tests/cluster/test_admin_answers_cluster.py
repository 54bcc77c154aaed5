"""Admin answers of a ZooKeeper cluster, as Kafka's (ZooKeeper mode):

- CreatePartitions is answered once the new partitions have leaders in the answering
  broker's metadata (Kafka's DelayedCreatePartitions), not as soon as ZooKeeper has them: a
  Metadata request right after the answer lists them all; validate_only changes nothing.
- ElectLeaders of all partitions (topic_partitions null) leaves out the partitions already
  led by their preferred replica (ELECTION_NOT_NEEDED); named ones keep it.
- ElectLeaders sent to a broker that is not the controller: top-level error NONE and
  NOT_CONTROLLER for each partition asked for (null: each one the broker knows), which
  kafkactl's admin client takes as "find the controller and send it again"."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.cluster.cluster_helpers import Cluster, leaders, metadata, request, start_cluster
from tests.cluster.test_config_changes import create_topic
from tests.cluster.zk import ZooKeeperServer

PREFERRED = 0


@pytest.fixture
def cluster(broker_factory: Any, zookeeper: ZooKeeperServer) -> Cluster:
    return start_cluster(broker_factory, zookeeper)


def _create_partitions(port: int, topic: str, count: int, *, validate_only: bool = False
                       ) -> dict[str, Any]:
    return request(port, ApiKey.CREATE_PARTITIONS, 1, {
        "topics": [{"name": topic, "count": count, "assignments": None}],
        "timeout_ms": 15000, "validate_only": validate_only}, timeout=30)


def test_create_partitions_answers_once_the_answering_broker_has_them(
        cluster: Cluster) -> None:
    create_topic(cluster, "grown", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    controller = cluster.brokers[cluster.controller()]
    started = time.monotonic()
    resp = _create_partitions(controller.port, "grown", 6, validate_only=True)
    assert resp["results"][0]["error_code"] == ErrorCode.NONE, resp
    assert time.monotonic() - started < 5  # nothing made: nothing to wait for
    assert len(leaders(controller.port, "grown")) == 3
    for count in (6, 9, 12):
        resp = _create_partitions(controller.port, "grown", count)
        assert resp["results"][0]["error_code"] == ErrorCode.NONE, resp
        # at once, from the broker that answered: every partition, each with a leader
        found = leaders(controller.port, "grown")
        assert len(found) == count, (count, found)
        assert all(lead >= 0 for lead in found.values()), found
    cluster.wait_for_leaders("grown", 12)


def _elect(port: int, partitions: dict[str, list[int]] | None, version: int = 2
           ) -> dict[str, Any]:
    body: dict[str, Any] = {"topic_partitions": None if partitions is None else [
        {"topic": t, "partitions": ps} for t, ps in partitions.items()], "timeout_ms": 10000}
    if version >= 1:
        body["election_type"] = PREFERRED
    return request(port, ApiKey.ELECT_LEADERS, version, body)


def _results(resp: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(r["topic"], p["partition_id"]): p["error_code"]
            for r in resp["replica_election_results"] for p in r["partition_result"]}


NAMED = {"elect": [0, 1, 2]}
TPS = {("elect", p) for p in range(3)}


def _elect_topic(cluster: Cluster) -> tuple[int, int]:
    """A topic led by its preferred replicas; (controller id, another broker's id)."""
    create_topic(cluster, "elect", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    cluster.wait_for_leaders("elect", 3, expect=lambda found: found == {0: 1, 1: 2, 2: 3})
    controller_id = cluster.controller()
    return controller_id, next(i for i in cluster.brokers if i != controller_id)


def test_elect_leaders_of_all_partitions_leaves_out_those_not_needed(
        cluster: Cluster) -> None:
    controller = cluster.brokers[_elect_topic(cluster)[0]]
    resp = _elect(controller.port, NAMED)
    assert resp["error_code"] == ErrorCode.NONE, resp
    assert _results(resp) == dict.fromkeys(TPS, ErrorCode.ELECTION_NOT_NEEDED), resp
    resp = _elect(controller.port, None)
    assert resp["error_code"] == ErrorCode.NONE, resp
    assert resp["replica_election_results"] == [], resp


def test_elect_leaders_on_another_broker_says_not_controller_per_partition(
        cluster: Cluster) -> None:
    other_id = _elect_topic(cluster)[1]
    other = cluster.brokers[other_id]
    named, tps = NAMED, TPS
    resp = _elect(other.port, named)
    assert resp["error_code"] == ErrorCode.NONE, resp
    assert _results(resp) == dict.fromkeys(tps, ErrorCode.NOT_CONTROLLER), resp
    resp = _elect(other.port, named, version=0)  # version 0 has no top-level error
    assert _results(resp) == dict.fromkeys(tps, ErrorCode.NOT_CONTROLLER), resp
    resp = _elect(other.port, None)
    assert resp["error_code"] == ErrorCode.NONE, resp
    known = {(t["name"], p["partition_index"]) for t in metadata(other.port)["topics"]
             for p in t["partitions"]}
    assert tps <= known
    assert _results(resp) == dict.fromkeys(known, ErrorCode.NOT_CONTROLLER), resp

    # kafkactl's admin client sent to that broker finds the controller and asks it again
    from kafkactl.client.admin import AdminClient

    with AdminClient(other.bootstrap, request_timeout_ms=20000) as admin:
        real = admin._controller
        asked: list[int] = []

        def first_the_other() -> Any:
            if not asked:
                asked.append(other_id)
                admin.client.refresh_metadata([])
                return admin.client.connection(other_id)
            asked.append(-1)
            return real()

        admin._controller = first_the_other  # type: ignore[method-assign]
        results = admin.elect_preferred_leaders(sorted(tps))
    assert asked[0] == other_id and len(asked) >= 2, asked
    assert {tp: (e.code if e is not None else None) for tp, e in results.items()} == \
        dict.fromkeys(tps, ErrorCode.ELECTION_NOT_NEEDED), results
