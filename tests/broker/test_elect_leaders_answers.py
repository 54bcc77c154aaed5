"""ElectLeaders on a standalone broker, as Kafka's KafkaApis.handleElectLeaders answers: a
request of all partitions (topic_partitions null) leaves out the partitions whose election
was not needed (ELECTION_NOT_NEEDED), so that Java's electLeaders(PREFERRED, null).all()
succeeds on a healthy broker; partitions named keep their ELECTION_NOT_NEEDED."""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.cluster.cluster_helpers import request
from tests.conftest import BrokerProcess

PREFERRED, UNCLEAN = 0, 1


def _create(port: int, name: str, partitions: int) -> None:
    resp = request(port, ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                    "assignments": [], "configs": []}],
        "timeout_ms": 10000, "validate_only": False})
    assert resp["topics"][0]["error_code"] == 0, resp


def _elect(port: int, election: int, partitions: dict[str, list[int]] | None,
           version: int = 2) -> dict[str, Any]:
    body: dict[str, Any] = {"topic_partitions": None if partitions is None else [
        {"topic": t, "partitions": ps} for t, ps in partitions.items()], "timeout_ms": 10000}
    if version >= 1:
        body["election_type"] = election
    return request(port, ApiKey.ELECT_LEADERS, version, body)


def _results(resp: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(r["topic"], p["partition_id"]): p["error_code"]
            for r in resp["replica_election_results"] for p in r["partition_result"]}


def test_all_partitions_leaves_out_the_elections_not_needed(
        module_broker: BrokerProcess) -> None:
    port = module_broker.port
    _create(port, "led-all", 3)
    for election in (PREFERRED, UNCLEAN):
        resp = _elect(port, election, None)
        assert resp["error_code"] == ErrorCode.NONE, resp
        # every partition is led by its only (preferred) replica: nothing to list
        assert resp["replica_election_results"] == [], (election, resp)
    resp = _elect(port, PREFERRED, None, version=0)  # no election type, no top-level error
    assert resp["replica_election_results"] == [], resp


def test_named_partitions_keep_election_not_needed(module_broker: BrokerProcess) -> None:
    port = module_broker.port
    _create(port, "led-named", 2)
    for election in (PREFERRED, UNCLEAN):
        resp = _elect(port, election, {"led-named": [0, 1, 7]})
        assert resp["error_code"] == ErrorCode.NONE, resp
        assert _results(resp) == {
            ("led-named", 0): ErrorCode.ELECTION_NOT_NEEDED,
            ("led-named", 1): ErrorCode.ELECTION_NOT_NEEDED,
            ("led-named", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}, (election, resp)
