"""`kafkactl cluster health` (kafkactl.cli.cluster_health) against real brokers: a healthy
standalone broker, no broker at all, and a 3-broker ZooKeeper cluster with one broker
killed (health and `top --once --json` both see it down and its partitions
under-replicated).

Until `cluster health` is wired into kafkactl.cli.cluster, the tests reach the command
through a test-only Typer app holding just it; test_real_cli_cluster_health runs the real
`kafkactl cluster health`.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kafkactl.cli.cluster_health import register
from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.cluster.cluster_helpers import Cluster, metadata, request, start_cluster
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture, for the cluster test
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until


def health_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _group() -> None:
        """cluster"""

    register(app)
    return app


def health(*args: str) -> Any:
    return CliRunner().invoke(health_app(), ["health", *args])


def test_standalone_broker_is_healthy(module_broker: BrokerProcess) -> None:
    r = health("-b", module_broker.bootstrap)
    assert r.exit_code == 0, r.output
    assert "Healthy:                          true" in r.output
    r = health("-b", module_broker.bootstrap, "--json")
    doc = json.loads(r.output)
    assert doc["healthy"] is True and doc["nodes_down"] == [] and doc["all_nodes"] == [0]
    assert doc["unhealthy_reasons"] == []


def test_watch_until_healthy(module_broker: BrokerProcess) -> None:
    r = health("-b", module_broker.bootstrap, "--watch", "--exit-when-healthy", "--json",
               "--interval", "0.1")
    assert r.exit_code == 0, r.output
    line = json.loads(r.output.splitlines()[0])
    assert line["healthy"] is True and "time" in line


def test_no_broker_answers() -> None:
    r = health("-b", f"127.0.0.1:{free_port()}")
    assert r.exit_code == 2
    assert "cannot reach the cluster" in r.output


def test_real_cli_cluster_health(module_broker: BrokerProcess) -> None:
    """The real command line (needs kafkactl.cli.cluster to register cluster_health)."""
    r = zygote.run(["cluster", "health", "-b", module_broker.bootstrap, "--json"], text=True,
                   timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["healthy"] is True


@pytest.fixture
def cluster(broker_factory: Any, zookeeper: Any) -> Cluster:  # noqa: F811
    return start_cluster(broker_factory, zookeeper, replica_lag_time_max_ms="3000",
                         replica_fetch_backoff_ms="100")


def _top(bootstrap: str) -> dict[str, Any]:
    r = zygote.run(["top", "--once", "--json", "--interval", "0.2", "-b", bootstrap],
                   text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def test_cluster_with_a_broker_down(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap
    r = zygote.run(["topics", "create", "-t", "spread", "--partitions", "3",
                    "--replication-factor", "3", "-b", bootstrap], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: (md := metadata(cluster.live()[0].port, ["spread"])) and all(
        p["leader_id"] >= 0 and len(p["isr_nodes"]) == 3
        for t in md["topics"] for p in t["partitions"]) and md["topics"][0]["partitions"],
        40, "every partition led with its full ISR")
    r = health("-b", bootstrap, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["all_nodes"] == [1, 2, 3]
    doc = _top(bootstrap)
    assert [b["up"] for b in doc["brokers"]] == [True, True, True]
    assert doc["under_replicated"] == 0

    victim = 3 if cluster.controller() != 3 else 2
    cluster.brokers[victim].kill()
    live = ",".join(b.bootstrap for b in cluster.live())

    def unhealthy() -> dict[str, Any] | None:
        r = health("-b", live, "--json")
        found = json.loads(r.output)
        return found if r.exit_code == 1 and found["nodes_down"] == [victim] and \
            found["under_replicated_count"] == 3 else None

    found = wait_until(unhealthy, 60, f"health to see broker {victim} down")
    assert "nodes_down" in found["unhealthy_reasons"]
    assert "under_replicated_partitions" in found["unhealthy_reasons"]
    assert found["under_replicated_partitions"] == {"spread": [0, 1, 2]}
    text = health("-b", live)
    assert text.exit_code == 1
    assert f"Nodes down:                       [{victim}]" in text.output

    doc = _top(live)
    assert {b["id"]: b["up"] for b in doc["brokers"]} == {
        1: victim != 1, 2: victim != 2, 3: victim != 3}
    assert doc["under_replicated_partitions"]["spread"] == [0, 1, 2]
    assert doc["under_replicated"] >= 3
    assert any(t["topic"] == "spread" for t in doc["topics"])



def test_a_frozen_broker_still_listed_is_down(broker_factory: Any,
                                               zookeeper: Any) -> None:  # noqa: F811
    """A broker that stopped answering (SIGSTOP) stays in every broker's metadata while its
    ZooKeeper session lives (30 s here): health asks each listed broker itself and reports
    it down (it said "healthy" until the session expired)."""
    cluster = start_cluster(broker_factory, zookeeper, zookeeper_session_timeout_ms="30000")
    victim = 3 if cluster.controller() != 3 else 2
    frozen = cluster.brokers[victim]
    live = ",".join(b.bootstrap for b in cluster.live() if b is not frozen)
    assert frozen.proc is not None
    frozen.proc.send_signal(signal.SIGSTOP)
    try:
        r = health("-b", live, "--json")
        doc = json.loads(r.output)
        assert len(metadata(cluster.brokers[1 if victim != 1 else 2].port, [])["brokers"]) == 3
    finally:
        frozen.proc.send_signal(signal.SIGCONT)
    assert r.exit_code == 1, r.output
    assert doc["nodes_down"] == [victim] and doc["nodes_not_answering"] == [victim], doc
    assert "nodes_down" in doc["unhealthy_reasons"]


def test_top_does_not_show_a_lag_it_could_not_see(broker_factory: Any,
                                                  zookeeper: Any) -> None:  # noqa: F811
    """A group's only partition led by a broker that does not answer (SIGSTOP, still
    registered): `top` has no end offset for it, so the group's lag is unknown (null, `-`),
    not 0; a group with one of two such partitions shows its known lag flagged partial."""
    cluster = start_cluster(broker_factory, zookeeper, zookeeper_session_timeout_ms="30000")
    b = cluster.bootstrap
    def coordinator(group: str) -> int | None:
        node = request(cluster.brokers[1].port, ApiKey.FIND_COORDINATOR, 1,
                       {"key": group, "key_type": 0})["node_id"]
        return node if node >= 0 else None

    lost = wait_until(lambda: coordinator("g-lost"), 60, "__consumer_offsets led")
    half = next(g for n in range(200) if coordinator(g := f"g-half-{n}") == lost)
    victim = next(i for i in (3, 2, 1) if i not in (lost, cluster.controller()))
    other = next(i for i in (1, 2, 3) if i != victim)
    for args in (["topics", "create", "-t", "lost", "--replica-assignment", f"{victim}"],
                 ["topics", "create", "-t", "half", "--replica-assignment",
                  f"{victim},{other}"]):
        r = zygote.run([*args, "-b", b], text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    for topic, group in (("lost", "g-lost"), ("half", half)):
        r = zygote.run(["produce", "-t", topic, "-b", b], input="a\nb\nc\nd\n", text=True,
                       timeout=60)
        assert r.returncode == 0, r.stderr
        r = zygote.run(["offsets", "reset", "-G", group, "-t", topic, "--to-offset", "1",
                        "--execute", "-b", b], text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    before = {g["group"]: g for g in _top(b)["groups"]}
    assert before["g-lost"]["lag"] == 3 and before["g-lost"]["lag_unknown_partitions"] == 0
    frozen = cluster.brokers[victim]
    assert frozen.proc is not None
    live = ",".join(x.bootstrap for x in cluster.live() if x is not frozen)
    frozen.proc.send_signal(signal.SIGSTOP)
    try:
        groups = {g["group"]: g for g in _top(live)["groups"]}
    finally:
        frozen.proc.send_signal(signal.SIGCONT)
    assert groups["g-lost"]["lag"] is None and groups["g-lost"]["lag_unknown_partitions"] == 1
    partial = groups[half]
    assert partial["lag_unknown_partitions"] == 1 and partial["lag"] is not None, partial
