"""A real Prometheus server (Debian's `prometheus` 2.x; skipped when it is not installed:
`apt-get install --no-install-recommends prometheus`) scrapes real brokers; queries through
its HTTP API return the produced record count, a stopped group's lag, and, in a 3-broker
cluster with a broker killed, the under-replicated partitions."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import zygote
from tests.broker.test_metrics import status
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, metadata
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture
from tests.conftest import free_port
from tests.polling import wait_until

pytestmark = pytest.mark.skipif(shutil.which("prometheus") is None,
                                reason="Prometheus is not installed (apt-get install "
                                       "prometheus)")


class Prometheus:
    def __init__(self, workdir: Path, targets: list[str]) -> None:
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
            "scrape_configs:\n  - job_name: kafkactl\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n")
        self.log = workdir / "prometheus.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                ["prometheus", f"--config.file={config}",
                 f"--storage.tsdb.path={workdir / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT)
        wait_until(self._ready, 60, "Prometheus ready")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {self.log.read_text()[-3000:]}")
        try:
            return status(self.port, "/-/ready") == 200
        except OSError:
            return False

    def query(self, expr: str) -> float | None:
        """The value of an instant query with one series (None: no series yet)."""
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        result = doc["data"]["result"]
        if not result:
            return None
        assert len(result) == 1, result
        return float(result[0]["value"][1])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def prometheus_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[Prometheus] = []

    def make(targets: list[str]) -> Prometheus:
        p = Prometheus(tmp_path, targets)
        started.append(p)
        return p

    yield make
    for p in started:
        p.stop()


def test_prometheus_scrapes_records_and_lag(broker_factory: Any,
                                            prometheus_factory: Any) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    port = free_port()
    b = broker_factory(extra_args=["--metrics", f"127.0.0.1:{port}"])
    prom = prometheus_factory([f"127.0.0.1:{port}"])
    producer = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        producer.produce("scraped", f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "stopped",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("scraped", 0, 4)], asynchronous=False)
    consumer.close()
    wait_until(lambda: prom.query('up{job="kafkactl"}') == 1, 60, "the broker scraped")
    wait_until(lambda: prom.query(
        'kafka_server_brokertopicmetrics_messagesin_total{topic="scraped"}') == 10,
        60, "10 records in Prometheus")
    wait_until(lambda: prom.query(
        'kafka_consumergroup_group_lag{group="stopped",topic="scraped",partition="0"}') == 6,
        60, "the stopped group's lag of 6")
    assert prom.query('sum(kafka_network_requestmetrics_requests_total{request="Produce"})') \
        >= 1
    assert prom.query("kafka_controller_kafkacontroller_activecontrollercount") == 1


def test_prometheus_sees_under_replicated_partitions(
        broker_factory: Any, prometheus_factory: Any,
        zookeeper: Any) -> None:  # noqa: F811 - the imported fixture
    connect = zookeeper.connect + f"/c-{uuid.uuid4().hex[:8]}"
    ports = {i: free_port() for i in (1, 2, 3)}
    brokers = {i: broker_factory(
        zookeeper_connect=connect, broker_id=str(i),
        zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS), replica_lag_time_max_ms="3000",
        replica_fetch_backoff_ms="100", metrics_listen=f"127.0.0.1:{ports[i]}")
        for i in (1, 2, 3)}
    cluster = Cluster(connect, "", brokers)
    wait_until(lambda: cluster.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == 3 for b in cluster.live()), 30, "a cluster")
    prom = prometheus_factory([f"127.0.0.1:{p}" for p in ports.values()])
    r = zygote.run(["topics", "create", "-t", "spread", "--partitions", "3",
                    "--replication-factor", "3", "-b", cluster.bootstrap], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: prom.query('count(up{job="kafkactl"} == 1)') == 3, 60, "3 targets up")
    wait_until(lambda: prom.query("sum(kafka_server_replicamanager_leadercount)") is not None
               and prom.query("sum(kafka_server_replicamanager_underreplicatedpartitions)")
               == 0 and prom.query("sum(kafka_controller_kafkacontroller_activecontrollercount)")
               == 1, 60, "a healthy cluster in Prometheus")
    victim = 3 if cluster.controller() != 3 else 2
    brokers[victim].kill()
    wait_until(lambda: prom.query("sum(kafka_server_replicamanager_underreplicatedpartitions)")
               == 3, 90, "3 under-replicated partitions in Prometheus")
    assert prom.query('count(up{job="kafkactl"} == 0)') == 1
