"""Broker process lifecycle: restarts keep every acknowledged record, SIGKILL recovers,
SIGTERM exits 0 with the clean-shutdown marker, one broker per data dir, config handling."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote

from .wire import Wire, batch


def _produce(bootstrap: str, topic: str, n: int, start: int = 0) -> list[int]:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
    acked: list[int] = []
    for i in range(start, start + n):
        p.produce(topic, value=b"v%d" % i, partition=i % 3,
                  on_delivery=lambda e, m: acked.append(m.offset()) if e is None else None)
    assert p.flush(30) == 0
    return acked


def _consume_all(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x",
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    eof: set[int] = set()
    while len(eof) < partitions:
        m = c.poll(10)
        assert m is not None, "timed out"
        if m.error():
            eof.add(m.partition())
            continue
        out.append(m.value())
    c.close()
    return out


def test_restart_keeps_every_acknowledged_record(broker_factory) -> None:
    broker = broker_factory(num_partitions="3")
    assert len(_produce(broker.bootstrap, "dur", 3000)) == 3000
    assert broker.stop() == 0
    data = broker.data_dir
    assert (data / ".kafka_cleanshutdown").exists()
    assert "broker stopped cleanly" in broker.log()
    broker.start()
    assert len(_produce(broker.bootstrap, "dur", 300, start=3000)) == 300
    got = _consume_all(broker.bootstrap, "dur", 3)
    assert sorted(got) == sorted(b"v%d" % i for i in range(3300))


def test_sigkill_then_restart_recovers(broker_factory) -> None:
    broker = broker_factory(num_partitions="3")
    _produce(broker.bootstrap, "crash", 2000)
    broker.kill()
    # Tear the tail of one segment as a crash mid-write would.
    seg = sorted((broker.data_dir / "crash-0").glob("*.log"))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00garbage")
    broker.start()
    got = _consume_all(broker.bootstrap, "crash", 3)
    assert sorted(got) == sorted(b"v%d" % i for i in range(2000))
    with Wire(broker.bootstrap) as w:
        assert w.produce("crash", batch([b"after"]))["error_code"] == 0


def test_second_broker_on_same_data_dir_refuses(broker) -> None:
    proc = zygote.run(
        ["serve", "--data-dir", str(broker.data_dir), "--listen", "127.0.0.1:0"], text=True,
        timeout=30)
    assert proc.returncode == 1
    assert "is in use by another process" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "stopped cleanly" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_config_is_a_clear_error(tmp_path) -> None:
    cfg = tmp_path / "server.properties"
    cfg.write_text("# Kafka sample\nbroker.id=0\nnum.partitions = abc\n")
    proc = zygote.run(
        ["serve", "--config", str(cfg), "--data-dir", str(tmp_path / "d")], text=True,
        timeout=30)
    assert proc.returncode == 2
    assert "num.partitions='abc' is not an integer" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_config_file_and_overrides(broker_factory, tmp_path) -> None:
    cfg = tmp_path / "server.properties"
    cfg.write_text("num.partitions=2\nauto.create.topics.enable=false\n"
                   "log.retention.hours=1\n")
    broker = broker_factory(extra_args=["--config", str(cfg)], num_partitions="4")
    with Wire(broker.bootstrap) as w:
        md = w.request(ApiKey.METADATA, 12, {"topics": [{"name": "nope"}],
                       "allow_auto_topic_creation": True,
                       "include_topic_authorized_operations": False})
        assert md["topics"][0]["error_code"] == 3
        created = w.create_topic("four", partitions=-1)  # the override beats the file
        assert created["num_partitions"] == 4
        configs = {c["name"]: c for c in created["configs"]}
        assert configs["retention.ms"]["value"] == "3600000"
