"""AlterUserScramCredentials in a ZooKeeper cluster is the controller's, as in Kafka's
ZooKeeper mode (KafkaApis.handleAlterUserScramCredentialsRequest): another broker answers
NOT_CONTROLLER for every user (each once, sorted) and stores nothing; `kafkactl users`
given only such a broker still works (its AdminClient sends the request to the controller
the Metadata names, as Java's does)."""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.cluster.cluster_helpers import request, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

NOT_CONTROLLER = 41
SHA256, SHA512 = 1, 2


def _upsert(name: str, mechanism: int) -> dict[str, Any]:
    return {"name": name, "mechanism": mechanism, "iterations": 4096,
            "salt": b"s" * 16, "salted_password": b"p" * 32}


def _users(port: int) -> set[str]:
    r = request(port, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    assert r["error_code"] == 0, r
    return {u["user"] for u in r["results"]}


def _kafkactl(*args: str) -> Any:
    return zygote.run(["users", *args], text=True, timeout=60)


def test_only_the_controller_alters_scram_credentials(broker_factory: Any,
                                                      zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper)
    controller = cluster.controller()
    other = next(i for i in cluster.brokers if i != controller)
    port = cluster.brokers[other].port
    body = {"deletions": [{"name": "bob", "mechanism": SHA256}],
            "upsertions": [_upsert("zed", SHA256), _upsert("amy", SHA256),
                           _upsert("amy", SHA512)]}
    r = request(port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body)
    assert [(x["user"], x["error_code"], x["error_message"]) for x in r["results"]] == [
        (u, NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        for u in ("amy", "bob", "zed")], r
    r = request(cluster.brokers[controller].port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                {"deletions": [], "upsertions": [_upsert("ann", SHA256)]})
    assert [(x["user"], x["error_code"]) for x in r["results"]] == [("ann", 0)], r
    # every broker learns ann (through ZooKeeper); the refused request stored nothing
    wait_until(lambda: all(_users(b.port) == {"ann"} for b in cluster.brokers.values()),
               30, "ann on every broker")

    # the CLI, given only a broker that is not the controller
    bootstrap = cluster.brokers[other].bootstrap
    r = _kafkactl("add", "carol", "--password", "pw", "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: "carol" in _users(port), 30, "carol on the broker asked")
    r = _kafkactl("list", "-b", bootstrap)
    assert r.returncode == 0 and "carol\tSCRAM-SHA-256 (iterations=4096), SCRAM-SHA-512 " \
        "(iterations=4096)" in r.stdout, r
    r = _kafkactl("delete", "carol", "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: all(_users(b.port) == {"ann"} for b in cluster.brokers.values()),
               30, "carol gone from every broker")
