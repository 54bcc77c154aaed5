"""Concurrent first writes to a new topic (issue 30.4). Requests of different connections
are handled concurrently, so several Metadata requests can all find a topic missing before
any has created it. Kafka answers the second creator LEADER_NOT_AVAILABLE (retriable),
never TOPIC_ALREADY_EXISTS; so must we, and every producer's records must land.

- The race, made deterministic: the broker is stopped (SIGSTOP) while every connection's
  Metadata request is put in its socket, so that on SIGCONT one turn of the event loop
  reads them all, before the first auto-creation runs (standalone, and a ZooKeeper
  cluster of two brokers doing it at once).
- Seven producer processes (kafkactl produce, confluent-kafka, kafka-python) released
  together at a new topic: all records acknowledged, each once.
- The client library waits out an auto-creation within its timeout, whatever a broker
  answers meanwhile (a proxy in front of the real broker plays an older broker that said
  TOPIC_ALREADY_EXISTS to the loser, then a broker the topic has not reached yet).
"""

from __future__ import annotations

import functools
import signal
from pathlib import Path

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.memory_records import iter_batches
from tests.conftest import BrokerProcess
from tests.polling import wait_until
from tests.sockets import queued_requests

from .metadata_proxy import MetadataProxy
from .wire import Wire, batch

CONNECTIONS = 8


def _all_queued(port: int, n: int) -> bool:
    return queued_requests(port) >= n


def _metadata(topic: str, cid: int) -> bytes:
    return codec.encode_request(ApiKey.METADATA, 9, cid, "racer", {
        "topics": [{"name": topic}], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})


def _answer(w: Wire) -> dict:
    frame = w.recv_frame()
    return codec.decode_response(ApiKey.METADATA, 9, memoryview(frame))


def _all_at_once(broker: BrokerProcess, wires: list[Wire], frames: list[bytes]) -> None:
    """Put every frame in its connection's socket while the broker is stopped, then let
    it run: it reads them all in one turn of its event loop."""
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGSTOP)
    try:
        for w, frame in zip(wires, frames, strict=True):
            w.send_raw(frame)
        wait_until(lambda: queued_requests(broker.port) >= len(wires), 20,
                   "every request queued at the stopped broker")
    finally:
        broker.proc.send_signal(signal.SIGCONT)


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
def test_concurrent_auto_creations_answer_leader_not_available_never_already_exists(
        broker_factory) -> None:
    broker = broker_factory(num_partitions="3")
    wires = [Wire(broker.bootstrap, timeout=30) for _ in range(CONNECTIONS)]
    for w in wires:  # connected and accepted before the broker stops
        assert w.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    seen: set[int] = set()
    for round_ in range(5):
        topic = f"race-{round_}"
        _all_at_once(broker, wires, [_metadata(topic, 100 + i) for i in range(CONNECTIONS)])
        codes = []
        for w in wires:
            t = _answer(w)["topics"][0]
            assert t["name"] == topic
            codes.append(t["error_code"])
        seen.update(codes)
        assert ErrorCode.TOPIC_ALREADY_EXISTS not in codes, codes
        assert set(codes) <= {ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE}, codes
        # every "producer" writes its first record; all are acknowledged, none is lost
        for i, w in enumerate(wires):
            r = w.produce(topic, batch([f"{i}".encode()]), partition=i % 3)
            assert r["error_code"] == 0, r
        total = sum(len(_records(wires[0], topic, p)) for p in range(3))
        assert total == CONNECTIONS
    assert ErrorCode.NONE in seen  # the creator is answered with the topic itself
    for w in wires:
        w.close()
    assert broker.log_path is not None
    assert "Traceback" not in broker.log_path.read_text(errors="replace")


def _records(w: Wire, topic: str, partition: int) -> list[bytes]:
    resp = w.request(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
            "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    p = resp["responses"][0]["partitions"][0]
    assert p["error_code"] == 0
    return [bytes(r.value) for b in iter_batches(bytes(p["records"] or b"")) for r in b]


CONFLUENT_PRODUCER = """
import sys
from confluent_kafka import Producer
bootstrap, topic, tag, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
failed = []
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
              "message.timeout.ms": 60000})
for i in range(n):
    p.produce(topic, f"{tag}-{i}".encode(),
              on_delivery=lambda err, msg: failed.append(err) if err else None)
    p.poll(0)
assert p.flush(60) == 0, "not all delivered"
assert not failed, failed
"""

KAFKA_PYTHON_PRODUCER = """
import sys
from kafka import KafkaProducer
bootstrap, topic, tag, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_block_ms=60000)
futures = [p.send(topic, f"{tag}-{i}".encode()) for i in range(n)]
for f in futures:
    f.get(timeout=60)
p.close()
"""


def _start_producers(broker: BrokerProcess, topic: str, tmp: Path,
                     per_producer: int) -> tuple[list, set[bytes]]:
    """Four `kafkactl produce`, two confluent-kafka and one kafka-python producer
    processes, each writing `per_producer` records of its own to `topic`."""
    import subprocess
    import sys

    from tests import zygote

    procs: list = []
    expected: set[bytes] = set()
    for k in range(4):
        tag = f"kafkactl{k}"
        src = tmp / f"{topic}-{tag}.txt"
        values = [f"{tag}-{i}" for i in range(per_producer)]
        src.write_text("".join(v + "\n" for v in values))
        expected.update(v.encode() for v in values)
        argv = ["produce", "-b", broker.bootstrap, "-t", topic, "--file", str(src), "-q"]
        forked = zygote.spawn(argv, str(tmp / f"{topic}-{tag}.log"))
        procs.append(forked if forked is not None else subprocess.Popen(
            [sys.executable, "-m", "kafkactl", *argv]))
    for tag, script in (("confluent0", CONFLUENT_PRODUCER), ("confluent1", CONFLUENT_PRODUCER),
                        ("kafkapython", KAFKA_PYTHON_PRODUCER)):
        expected.update(f"{tag}-{i}".encode() for i in range(per_producer))
        procs.append(subprocess.Popen([sys.executable, "-c", script, broker.bootstrap, topic,
                                       tag, str(per_producer)]))
    return procs, expected


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
def test_concurrent_producer_processes_writing_a_new_topic_all_land(
        broker_factory, tmp_path: Path) -> None:
    """Seven producer processes (kafkactl, librdkafka, kafka-python) released together at
    a new topic, three times: every process succeeds and every record is there once."""
    broker = broker_factory(num_partitions="3")
    assert broker.proc is not None
    per_producer = 50
    for round_ in range(3):
        topic = f"procs-{round_}"
        broker.proc.send_signal(signal.SIGSTOP)  # all of them start while it is stopped
        try:
            procs, expected = _start_producers(broker, topic, tmp_path, per_producer)
            wait_until(functools.partial(_all_queued, broker.port, len(procs)), 60,
                       "every producer's first request queued at the stopped broker")
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        for p in procs:
            assert p.wait(120) == 0, [
                f.read_text() for f in tmp_path.glob(f"{topic}-*.log")]
        with Wire(broker.bootstrap) as w:
            got = [v for part in range(3) for v in _records(w, topic, part)]
        assert len(got) == len(expected) and set(got) == expected
    assert broker.log_path is not None
    assert "Traceback" not in broker.log_path.read_text(errors="replace")


# ---- the client library: waits out an auto-creation ------------------------------------
AS_LOST_RACE = [ErrorCode.TOPIC_ALREADY_EXISTS, *[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 8,
                ErrorCode.LEADER_NOT_AVAILABLE]


def test_the_client_waits_while_the_topic_is_being_created(broker_factory) -> None:
    """What a losing auto-creator may hear (TOPIC_ALREADY_EXISTS from an older broker),
    then a broker the new topic has not reached (UNKNOWN_TOPIC_OR_PARTITION, more times
    than a topic that is simply absent is retried), then LEADER_NOT_AVAILABLE: the client
    retries within its timeout and gets the topic."""
    from kafkactl.client.kafka_client import MISSING_ATTEMPTS, KafkaClient

    broker = broker_factory(num_partitions="2")
    proxy = MetadataProxy(("127.0.0.1", broker.port), "late", AS_LOST_RACE)
    client = KafkaClient(proxy.bootstrap, retry_backoff_ms=20)
    try:
        cluster = client.ensure_topics(["late"], allow_auto_create=True, timeout=30)
        assert sorted(cluster.partitions_for("late") or []) == [0, 1]
        assert proxy.rewritten == len(AS_LOST_RACE) > MISSING_ATTEMPTS + 1
    finally:
        client.close()
        proxy.close()


def test_a_topic_only_ever_unknown_is_still_reported_missing(broker_factory) -> None:
    from kafkactl.client.errors import UnknownTopicError
    from kafkactl.client.kafka_client import KafkaClient

    broker = broker_factory(auto_create_topics_enable="false")
    client = KafkaClient(broker.bootstrap, retry_backoff_ms=20)
    try:
        with pytest.raises(UnknownTopicError, match="'absent' does not exist"):
            client.ensure_topics(["absent"], allow_auto_create=True, timeout=30)
    finally:
        client.close()


def test_a_producer_whose_first_metadata_says_already_exists_delivers_all(
        broker_factory) -> None:
    """The Spark writer's case: a producer that lost the auto-creation race delivers."""
    from kafkactl.client.producer import Producer

    broker = broker_factory(num_partitions="3")
    proxy = MetadataProxy(("127.0.0.1", broker.port), "spark-out", AS_LOST_RACE)
    producer = Producer(proxy.bootstrap, retry_backoff_ms=20, linger_ms=0)
    try:
        futures = [producer.send("spark-out", f"row-{i}".encode()) for i in range(1000)]
        producer.flush(60)
        assert all(f.result(10).offset >= 0 for f in futures)
    finally:
        producer.close(10)
        proxy.close()
    with Wire(broker.bootstrap) as w:
        got = sorted(v for part in range(3) for v in _records(w, "spark-out", part))
    assert got == sorted(f"row-{i}".encode() for i in range(1000))


# ---- a ZooKeeper cluster: two brokers auto-create the same topic at once -----------------
@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory):
    from tests.cluster.zk import ZooKeeperServer, available

    reason = available()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
def test_a_clusters_brokers_auto_creating_at_once_never_say_already_exists(
        broker_factory, zookeeper) -> None:
    """Each of two brokers gets four Metadata requests for the same new topic in one turn
    of its event loop: each auto-creation is written to ZooKeeper from a worker thread, at
    most one wins, and the others must answer LEADER_NOT_AVAILABLE (or the topic)."""
    from kafkactl.client.producer import Producer
    from tests.cluster.cluster_helpers import start_cluster

    cluster = start_cluster(broker_factory, zookeeper, ids=(1, 2), num_partitions="2")
    brokers = list(cluster.brokers.values())
    wires = [Wire(b.bootstrap, timeout=30) for b in brokers for _ in range(4)]
    for w in wires:
        assert w.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
    topic = "cluster-race"
    for b in brokers:
        assert b.proc is not None
        b.proc.send_signal(signal.SIGSTOP)
    try:
        for i, w in enumerate(wires):
            w.send_raw(_metadata(topic, 200 + i))
        wait_until(lambda: sum(queued_requests(b.port) for b in brokers) >= len(wires), 20,
                   "every request queued at the stopped brokers")
    finally:
        for b in brokers:
            assert b.proc is not None
            b.proc.send_signal(signal.SIGCONT)
    codes = [_answer(w)["topics"][0]["error_code"] for w in wires]
    assert ErrorCode.TOPIC_ALREADY_EXISTS not in codes, codes
    assert set(codes) <= {ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE}, codes
    for w in wires:
        w.close()
    cluster.wait_for_leaders(topic, 2)
    producer = Producer(cluster.bootstrap, linger_ms=0)
    try:
        futures = [producer.send(topic, f"v{i}".encode()) for i in range(100)]
        producer.flush(60)
        assert all(f.result(10).offset >= 0 for f in futures)
    finally:
        producer.close(10)
