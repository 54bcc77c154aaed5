"""The metrics listener against a real broker: /metrics scraped over HTTP (the produced
record count, request counters, a stopped group's lag), /health and /ready, and what the
listener refuses."""

from __future__ import annotations

import http.client
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkactl.broker.metrics import BrokerMetrics, record_count
from kafkactl.broker.metrics_http import MetricsServer
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def sample(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def status(port: int, path: str, method: str = "GET") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.fixture
def metered(broker_factory: Any) -> tuple[BrokerProcess, int]:
    port = free_port()
    b = broker_factory(extra_args=["--metrics", f"127.0.0.1:{port}"])
    return b, port


def kcat(*args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def test_scrape_counts_records_requests_and_lag(metered: tuple[BrokerProcess, int]) -> None:
    from confluent_kafka import Consumer, Producer

    b, port = metered
    wait_until(lambda: status(port, "/ready") == 200, 30, "/ready")
    assert status(port, "/health") == 200
    producer = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        producer.produce("metered", f"m{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    samples = scrape(port)
    assert sample(samples, "kafka_server_brokertopicmetrics_messagesin_total",
                  topic="metered") == 10
    assert sample(samples, "kafka_server_brokertopicmetrics_bytesin_total",
                  topic="metered") > 0
    produces = [v for (name, labels), v in samples.items()
                if name == "kafka_network_requestmetrics_requests_total"
                and dict(labels)["request"] == "Produce"]
    assert sum(produces) >= 1
    assert (sample(samples, "kafka_network_requestmetrics_totaltimems_count",
                   request="Produce") or 0) >= 1
    assert (sample(samples, "kafka_network_requestmetrics_requestqueuetimems_count",
                    request="Produce") or 0) >= 1
    assert sample(samples, "kafka_log_log_logendoffset", topic="metered", partition="0") == 10
    assert sample(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert sample(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert sample(samples, "kafka_server_socket_server_metrics_connection_count",
                  listener="PLAINTEXT", networkprocessor="0") >= 1
    assert sample(samples, "process_resident_memory_bytes") > 0
    assert sample(samples, "process_open_fds") > 0

    # a group reads 4 records, commits, and stops consuming: lag 6; 5 more produced: 11
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "stopped",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["metered"])
    got: list[Any] = []
    wait_until(lambda: got.extend(m for m in [consumer.poll(0.5)] if m is not None
                                  and m.error() is None) or len(got) >= 4, 60, "4 records")
    from confluent_kafka import TopicPartition
    consumer.commit(offsets=[TopicPartition("metered", 0, 4)], asynchronous=False)
    consumer.close()
    lag = wait_until(lambda: sample(scrape(port), "kafka_consumergroup_group_lag",
                                    group="stopped", topic="metered", partition="0"),
                     30, "the group's lag")
    assert lag == 6
    for i in range(5):
        producer.produce("metered", f"n{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    samples = scrape(port)
    assert sample(samples, "kafka_consumergroup_group_lag", group="stopped",
                  topic="metered", partition="0") == 11
    assert sample(samples, "kafka_consumergroup_group_offset", group="stopped",
                  topic="metered", partition="0") == 4
    assert sample(samples, "kafka_consumergroup_group_sum_lag", group="stopped") == 11
    assert sample(samples, "kafka_server_brokertopicmetrics_messagesin_total",
                  topic="metered") == 15
    assert sample(samples, "kafka_server_brokertopicmetrics_bytesout_total",
                  topic="metered") > 0


def test_listener_serves_only_its_paths(metered: tuple[BrokerProcess, int]) -> None:
    _b, port = metered
    assert status(port, "/health") == 200
    assert status(port, "/metrics", "HEAD") == 200
    for path in ("/", "/metrics/../etc/passwd", "/../../etc/passwd", "/healthz", "/metrics/x"):
        assert status(port, path) == 404, path
    assert status(port, "/metrics", "POST") == 405
    # an oversized request line is refused, and the listener keeps serving
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.0 414")
    assert status(port, "/health") == 200


def test_ready_is_503_until_the_broker_says_so() -> None:
    metrics = BrokerMetrics(0, ["PLAINTEXT"])
    server = MetricsServer(metrics, "127.0.0.1", 0)
    server.start()
    try:
        port = server.address[1]
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=10)
        assert e.value.code == 503
        assert status(port, "/health") == 200
        samples = scrape(port)  # counters only: no broker state yet
        assert sample(samples, "kafkactl_broker_ready") == 0
        metrics.ready = True
        assert status(port, "/ready") == 200
    finally:
        server.stop()


def test_metrics_port_in_use_is_a_clear_error(broker_factory: Any, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match="cannot listen for metrics on 127.0.0.1"):
            broker_factory(extra_args=["--metrics", f"127.0.0.1:{port}"])


def test_metrics_on_the_brokers_own_listener_is_refused_before_binding(tmp_path: Path) -> None:
    # the endpoint used to take the port first, then the listener failed with "address
    # already in use; is another broker running?" (itself), after the broker had listened
    port = free_port()
    data = tmp_path / "data"
    data.mkdir()
    b = BrokerProcess(data, port, {"metrics.listen": f"127.0.0.1:{port}"})
    with pytest.raises(RuntimeError, match=(
            r"metrics.listen='127.0.0.1:\d+' is the address of the PLAINTEXT listener")):
        b.start()
    assert b.proc is not None and b.proc.returncode == 1


def test_record_count_reads_batch_headers() -> None:
    from kafkactl.record.builder import RecordBatchBuilder

    builder = RecordBatchBuilder()
    builder.append_values([b"a", b"b", b"c"])
    batch = builder.build()
    assert record_count(batch * 2) == 6
    assert record_count(b"") == 0


class _Fixed(BrokerMetrics):
    """A broker's metrics with a given snapshot (the formatting, without a broker)."""

    def __init__(self, snap: Any) -> None:
        super().__init__(0, ["PLAINTEXT"])
        self.fixed = snap

    def snapshot(self) -> Any:
        return self.fixed


def test_exposition_parses_and_escapes_label_values() -> None:
    from kafkactl.broker.metrics import PartitionState, Snapshot, exposition

    snap = Snapshot(partition_count=3, leader_count=3)
    snap.partitions = [PartitionState("t", p, 10 * p, p, 100 + p) for p in range(3)]
    odd = 'a "quoted"\\group\nwith a newline'
    snap.group_offsets = {(odd, "t", 0): (40, 100), ("plain", "t", 1): (-1, 101)}
    metrics = _Fixed(snap)
    metrics.messages_in["t"] = 7
    families = {f.name: f for f in text_string_to_metric_families(exposition(metrics))}
    lag = {(s.labels["group"], s.labels["partition"]): s.value
           for s in families["kafka_consumergroup_group_lag"].samples}
    assert lag == {(odd, "0"): 60, ("plain", "1"): 101}  # no commit: the whole log
    ends = {s.labels["partition"]: s.value for s in families["kafka_log_log_logendoffset"].samples}
    assert ends == {"0": 100, "1": 101, "2": 102}
    assert families["kafka_server_brokertopicmetrics_messagesin"].type == "counter"
    assert [s.value for s in families["kafka_consumergroup_group_max_lag"].samples
            if s.labels["group"] == odd] == [60]


def test_failed_authentications_per_listener(tmp_path: Path) -> None:
    from confluent_kafka import KafkaException, Producer

    from tests.broker.security.conftest import JAAS

    data = tmp_path / "data"
    data.mkdir()
    plain, sasl, metrics_port = free_port(), free_port(), free_port()
    b = BrokerProcess(data, plain, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": "0",
        "metrics.listen": f"127.0.0.1:{metrics_port}"})
    b.start()
    try:
        def failures(listener: str) -> float | None:
            return sample(scrape(metrics_port),
                          "kafka_server_socket_server_metrics_failed_authentication_total",
                          listener=listener, networkprocessor="0")

        assert failures("SASL_PLAINTEXT") == 0 and failures("PLAINTEXT") == 0
        intruder = Producer({"bootstrap.servers": f"127.0.0.1:{sasl}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": "bob", "sasl.password": "wrong"})
        with pytest.raises(KafkaException):
            intruder.list_topics(timeout=5)
        wait_until(lambda: (failures("SASL_PLAINTEXT") or 0) >= 1, 30,
                   "a failed authentication counted")
        assert failures("PLAINTEXT") == 0
    finally:
        b.kill()


def test_clean_stop_with_metrics_on(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    wait_until(lambda: status(port, "/ready") == 200, 30, "/ready")
    assert b.stop() == 0
    assert "broker stopped cleanly" in b.log()
    with socket.socket() as s:  # nothing listens on the metrics port: a restart can bind it
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()


def test_bad_metrics_address_is_refused(tmp_path: Path) -> None:
    from tests import zygote

    r = zygote.run(["serve", "--metrics", "no-port", "-d", str(tmp_path / "a")], text=True,
                   timeout=60)
    assert r.returncode == 2 and "--metrics" in r.stderr and "HOST:PORT" in r.stderr
    r = zygote.run(["serve", "-d", str(tmp_path / "b"), "-l", f"127.0.0.1:{free_port()}",
                    "-o", "metrics.listen=somewhere"], text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "metrics.listen='somewhere' must be HOST:PORT" in r.stderr
