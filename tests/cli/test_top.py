"""`kafkactl top` against a real standalone broker: one snapshot as JSON and as tables,
from the Kafka protocol and from the broker's metrics endpoint, the lag of a group that
stopped consuming, sorting, and the live mode's refreshes. (A cluster with a broker down:
tests/cli/test_cluster_health.py::test_cluster_with_a_broker_down.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests import zygote
from tests.conftest import BrokerProcess, free_port


def kafkactl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=timeout)


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        producer.produce(topic, f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """A group that committed `offset` and stopped consuming."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    consumer.close()


@pytest.fixture
def metered(broker_factory: Any) -> tuple[BrokerProcess, int]:
    port = free_port()
    return broker_factory(extra_args=["--metrics", f"127.0.0.1:{port}"]), port


def _once(*args: str) -> dict[str, Any]:
    r = kafkactl("top", "--once", "--json", "--interval", "0.2", *args)
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def test_once_json_from_the_protocol(metered: tuple[BrokerProcess, int]) -> None:
    b, _port = metered
    produce(b.bootstrap, "busy", 10)
    produce(b.bootstrap, "quiet", 1)
    commit(b.bootstrap, "stopped", "busy", 4)
    doc = _once("-b", b.bootstrap)
    assert doc["source"] == "protocol"
    assert doc["brokers"] == [{"id": 0, "host": "127.0.0.1", "port": b.port, "up": True,
                               "controller": True}]
    assert doc["controller_id"] == 0
    assert doc["under_replicated"] == 0 and doc["offline"] == 0
    names = {t["topic"]: t for t in doc["topics"]}
    assert set(names) == {"busy", "quiet"}  # internal topics are left out
    assert names["busy"]["partitions"] == 1
    assert names["busy"]["in_msgs_per_s"] == 0.0  # nothing produced between the two looks
    group = {g["group"]: g for g in doc["groups"]}["stopped"]
    assert group["lag"] == 6
    assert group["trend"] == "steady" and group["lag_change_per_s"] == 0.0
    assert group["state"] == "Empty" and group["members"] == 0


def test_once_json_from_the_metrics_endpoint(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    produce(b.bootstrap, "busy", 10)
    commit(b.bootstrap, "stopped", "busy", 4)
    doc = _once("--metrics", f"127.0.0.1:{port}")
    assert doc["source"] == "metrics"
    [broker] = doc["brokers"]
    assert broker["endpoint"] == f"http://127.0.0.1:{port}/metrics"
    assert broker["up"] is True and broker["controller"] is True
    assert broker["connections"] >= 0 and broker["rss_bytes"] > 0
    assert broker["cpu_percent"] is not None
    assert [t["topic"] for t in doc["topics"]] == ["busy"]
    assert {g["group"]: g["lag"] for g in doc["groups"]} == {"stopped": 6}
    # an endpoint that does not answer is a broker shown down, not a failure
    doc = _once("--metrics", f"127.0.0.1:{port}", "--metrics", f"127.0.0.1:{free_port()}")
    assert [x["up"] for x in doc["brokers"]] == [True, False]


def test_sort_and_tables(module_broker: BrokerProcess) -> None:
    produce(module_broker.bootstrap, "sort-b", 3)
    produce(module_broker.bootstrap, "sort-a", 2)
    commit(module_broker.bootstrap, "sort-lagging", "sort-b", 0)
    commit(module_broker.bootstrap, "sort-caught-up", "sort-a", 2)
    doc = _once("-b", module_broker.bootstrap, "--sort", "name")
    topics = [t["topic"] for t in doc["topics"] if t["topic"].startswith("sort-")]
    assert topics == ["sort-a", "sort-b"]
    doc = _once("-b", module_broker.bootstrap, "--sort", "lag")
    groups = [g["group"] for g in doc["groups"] if g["group"].startswith("sort-")]
    assert groups == ["sort-lagging", "sort-caught-up"]
    r = kafkactl("top", "--once", "--interval", "0.1", "-b", module_broker.bootstrap)
    assert r.returncode == 0, r.stderr
    for text in ("Brokers", "Topics", "Consumer groups", "sort-lagging", "under-replicated"):
        assert text in r.stdout
    r = kafkactl("top", "--once", "--sort", "size", "-b", module_broker.bootstrap)
    assert r.returncode == 2 and "--sort" in r.stderr


def test_tables_keep_their_full_width_when_piped(module_broker: BrokerProcess) -> None:
    """`top --once | cat` prints the tables full width, as every other command (README:
    "printed full width also when the output is piped"): no name or address cut to an
    ellipsis at 80 columns (it used to be, unless COLUMNS was set wide)."""
    long_name = "a-topic-whose-name-is-far-too-long-for-an-eighty-column-table-" + "x" * 30
    produce(module_broker.bootstrap, long_name, 1)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    r = zygote.run(["top", "--once", "--interval", "0.1", "-b", module_broker.bootstrap],
                   text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert long_name in r.stdout, r.stdout
    assert module_broker.bootstrap in r.stdout and "controller" in r.stdout
    assert "…" not in r.stdout, r.stdout
    assert all(line == line.rstrip() for line in r.stdout.splitlines())


def test_live_json_refreshes_until_stopped(module_broker: BrokerProcess) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkactl", "top", "--json", "--interval", "0.2",
         "-b", module_broker.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        second = json.loads(proc.stdout.readline())
        assert first["source"] == second["source"] == "protocol"
        assert second["interval_s"] is not None
    finally:
        proc.terminate()
        proc.wait(30)


def test_unreachable_cluster_is_one_sentence() -> None:
    r = kafkactl("top", "--once", "-b", f"127.0.0.1:{free_port()}")
    assert r.returncode == 1
    assert "cannot reach the cluster" in r.stderr
    assert "Traceback" not in r.stderr


def test_long_names_fold_in_a_narrow_terminal(module_broker: BrokerProcess) -> None:
    """In a terminal too narrow for the tables, a long topic or group name folds onto more
    lines instead of being cut to an ellipsis, where names differing at their end (v1, v2)
    looked alike."""
    from rich.console import Console

    from kafkactl.cli.top_render import render

    names = [f"orders.eu-west-1.payments.settlement.{v}" for v in ("v1", "v2")]
    for name in names:
        produce(module_broker.bootstrap, name, 1)
        commit(module_broker.bootstrap, f"{name}-reader", name, 0)
    doc = _once("-b", module_broker.bootstrap, "--sort", "name")
    console = Console(width=60, color_system=None, force_terminal=False)
    with console.capture() as cap:
        console.print(render(doc))
    first_cells = "".join(line.split("│")[1].strip() for line in cap.get().splitlines()
                          if line.count("│") > 2)
    for name in names:
        assert name in first_cells and f"{name}-reader" in first_cells, cap.get()
