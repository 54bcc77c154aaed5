"""read_committed against a real standalone broker, fed hand-built transactional batches
(Produce with a transactional_id) and COMMIT/ABORT markers (WriteTxnMarkers, as the
transaction coordinator sends them): kcat (-X isolation.level=read_committed) and a
confluent-kafka consumer see exactly the committed records, read_uncommitted sees them
all, ListOffsets read_committed answers the last stable offset, a long-poll read_committed
fetch wakes when a marker moves it, a client's control batch is refused, and dump-log
prints the .txnindex the aborts wrote."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from kafkactl.log.checkpoint import RECOVERY_POINT_CHECKPOINT
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.batch import RecordBatchBuilder
from tests import zygote
from tests.conftest import BrokerProcess
from tests.polling import wait_until

from .wire import Wire

PID_A, PID_B, PID_C = 51_001, 51_002, 51_003
# The log side on its own: hand-built transactional batches and markers, no coordinator
# transaction behind them, which KIP-890's leader check would refuse (tested in
# test_txn_verification.py): the check is off here, as Kafka's
# transaction.partition.verification.enable=false turns it off.
NO_VERIFICATION = {"transaction.partition.verification.enable": "false"}
MODULE_BROKER_OVERRIDES = NO_VERIFICATION
INVALID_RECORD = 87
TXN_ID_AUTH_FAILED = 53


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics of their own: one broker for the module."""
    return module_broker


class TxnProducer:
    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(self, *values: str) -> bytes:
        b = RecordBatchBuilder(producer_id=self.pid, producer_epoch=self.epoch,
                               base_sequence=self.seq, is_transactional=True)
        for v in values:
            b.append(None, None, v.encode())
        self.seq += len(values)
        return b.build()


def plain(*values: str) -> bytes:
    b = RecordBatchBuilder()
    for v in values:
        b.append(None, None, v.encode())
    return b.build()


def produce(w: Wire, topic: str, records: bytes, txn_id: str | None = "t") -> dict:
    resp = w.request(ApiKey.PRODUCE, 9, {
        "transactional_id": txn_id, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": 0, "records": records}]}]})
    return resp["responses"][0]["partition_responses"][0]


def marker(w: Wire, topic: str, pid: int, commit: bool, epoch: int = 0,
           coordinator_epoch: int = 0) -> int:
    resp = w.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    return int(resp["markers"][0]["topics"][0]["partitions"][0]["error_code"])


def list_latest(w: Wire, topic: str, isolation: int) -> int:
    resp = w.request(ApiKey.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": isolation,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return int(resp["topics"][0]["partitions"][0]["offset"])


def fetch(w: Wire, topic: str, isolation: int, offset: int = 0, max_wait_ms: int = 0
          ) -> dict:
    resp = w.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1,
        "max_bytes": 1 << 20, "isolation_level": isolation, "session_id": 0,
        "session_epoch": -1, "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": []})
    return resp["responses"][0]["partitions"][0]


def _scenario(w: Wire, topic: str) -> None:
    """p0 | A: a1 a2 ABORT | B: b1 COMMIT | A: a3 COMMIT | C: c1 (open) | p1."""
    a, b, c = TxnProducer(PID_A), TxnProducer(PID_B), TxnProducer(PID_C)
    assert produce(w, topic, plain("p0"), txn_id=None)["error_code"] == 0
    assert produce(w, topic, a.batch("a1", "a2"))["error_code"] == 0
    assert produce(w, topic, b.batch("b1"))["error_code"] == 0
    assert marker(w, topic, PID_A, commit=False) == 0
    assert marker(w, topic, PID_B, commit=True) == 0
    assert produce(w, topic, a.batch("a3"))["error_code"] == 0
    assert marker(w, topic, PID_A, commit=True) == 0
    assert produce(w, topic, c.batch("c1"))["error_code"] == 0
    assert produce(w, topic, plain("p1"), txn_id=None)["error_code"] == 0


COMMITTED = ["p0", "b1", "a3"]  # below the LSO (C's open transaction holds it)
EVERYTHING = ["p0", "a1", "a2", "b1", "a3", "c1", "p1"]


def kcat(*args: str) -> list[str]:
    proc = subprocess.run(["kcat", *args], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout.decode().splitlines()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_read_committed_sees_only_committed_records(broker) -> None:
    topic = "txn-kcat"
    with Wire(broker.bootstrap) as w:
        _scenario(w, topic)
        assert kcat("-b", broker.bootstrap, "-C", "-t", topic, "-e", "-f", "%s\n",
                    "-X", "isolation.level=read_committed") == COMMITTED
        assert kcat("-b", broker.bootstrap, "-C", "-t", topic, "-e", "-f", "%s\n",
                    "-X", "isolation.level=read_uncommitted") == EVERYTHING
        assert marker(w, topic, PID_C, commit=False) == 0
        assert kcat("-b", broker.bootstrap, "-C", "-t", topic, "-e", "-f", "%s\n",
                    "-X", "isolation.level=read_committed") == [*COMMITTED, "p1"]


def test_confluent_kafka_read_committed(broker) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = "txn-ck"
    with Wire(broker.bootstrap) as w:
        _scenario(w, topic)
        assert marker(w, topic, PID_C, commit=True) == 0

    def consume(isolation: str) -> list[str]:
        c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{isolation}",
                         "isolation.level": isolation, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
            out: list[str] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                m = c.poll(1.0)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == ck.KafkaError._PARTITION_EOF:
                        return out
                    raise AssertionError(m.error())
                out.append(m.value().decode())
            raise AssertionError(f"no end of partition within 30 s; got {out}")
        finally:
            c.close()

    assert consume("read_committed") == [*COMMITTED, "c1", "p1"]
    assert consume("read_uncommitted") == EVERYTHING


def test_lso_in_list_offsets_fetch_and_long_poll(broker) -> None:
    topic = "txn-lso"
    with Wire(broker.bootstrap) as w:
        _scenario(w, topic)
        part = fetch(w, topic, 0)
        hw = int(part["high_watermark"])
        lso = int(part["last_stable_offset"])
        assert list_latest(w, topic, 0) == hw == 10
        # p0 a1 a2 b1 ABORT(A) COMMIT(B) a3 COMMIT(A) c1 p1: C's open transaction at 8
        assert lso == 8 and list_latest(w, topic, 1) == lso
        rc = fetch(w, topic, 1)
        assert rc["aborted_transactions"] == [{"producer_id": PID_A, "first_offset": 1}]
        assert rc["last_stable_offset"] == lso
        ru = fetch(w, topic, 0)
        assert ru["aborted_transactions"] is None
        assert len(ru["records"]) > len(rc["records"])
        # a read_committed long poll at the LSO wakes when C's marker moves it
        with Wire(broker.bootstrap) as poller:
            poller.correlation_id += 1
            from kafkactl.protocol import codec

            body = {
                "replica_id": -1, "max_wait_ms": 20_000, "min_bytes": 1,
                "max_bytes": 1 << 20, "isolation_level": 1, "session_id": 0,
                "session_epoch": -1, "rack_id": "",
                "topics": [{"topic": topic, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": lso,
                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": []}
            poller.send_raw(codec.encode_request(ApiKey.FETCH, 11, poller.correlation_id,
                                                 "wire", body))
            time.sleep(0.3)  # the fetch is parked in the purgatory (waiting is the point)
            start = time.monotonic()
            assert marker(w, topic, PID_C, commit=True) == 0
            frame = poller.recv_frame()
            waited = time.monotonic() - start
            resp = codec.decode_response(ApiKey.FETCH, 11, frame)
        p = resp["responses"][0]["partitions"][0]
        assert p["last_stable_offset"] == 11 and len(p["records"]) > 0
        assert waited < 15, "the long poll sat out its max_wait_ms"


def test_bad_transactional_input_is_refused(broker) -> None:
    topic = "txn-bad"
    with Wire(broker.bootstrap) as w:
        assert produce(w, topic, plain("x"), txn_id=None)["error_code"] == 0
        ctrl = RecordBatchBuilder(producer_id=PID_A, producer_epoch=0, is_transactional=True,
                                  is_control=True)
        ctrl.append(None, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")
        r = produce(w, topic, ctrl.build())
        assert r["error_code"] == INVALID_RECORD
        assert "Clients are not allowed to write control records" in r["error_message"]
        r = produce(w, topic, TxnProducer(PID_B).batch("no-id"), txn_id=None)
        assert r["error_code"] == TXN_ID_AUTH_FAILED
        a = TxnProducer(PID_A, epoch=3)
        assert produce(w, topic, a.batch("a"))["error_code"] == 0
        assert marker(w, topic, PID_A, commit=True, epoch=2) != 0  # an older epoch: fenced
        end = list_latest(w, topic, 0)
        assert end == 2  # x, a: nothing else was stored
        assert marker(w, topic, PID_A, commit=True, epoch=3) == 0
        wait_until(lambda: list_latest(w, topic, 1) == 3, timeout=10,
                   what="the LSO to reach the log end after the commit")


def test_dump_log_prints_the_brokers_txnindex(broker) -> None:
    topic = "txn-dump"
    with Wire(broker.bootstrap) as w:
        _scenario(w, topic)
    d = broker.data_dir / f"{topic}-0"
    files = sorted(d.glob("*.txnindex"))
    assert [f.name for f in files] == ["00000000000000000000.txnindex"]
    r = zygote.run(["dump-log", str(files[0])], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1:] == [
        f"version: 0 producerId: {PID_A} firstOffset: 1 lastOffset: 4 lastStableOffset: 3"]


def test_sigkill_restart_rebuilds_txnindex_and_open_transactions(broker_factory) -> None:
    """Transactions aborted in several segments and one left open; the broker is killed
    (SIGKILL) and .txnindex files damaged: the restarted broker's recovery rebuilds them
    identical to the written ones, and the open transaction still holds the LSO."""
    b = broker_factory(log_segment_bytes="1024", transaction_partition_verification_enable="false")
    topic = "txn-crash"
    producers = [TxnProducer(60_000 + i) for i in range(3)]
    with Wire(b.bootstrap) as w:
        for r in range(8):
            for i, p in enumerate(producers):
                assert produce(w, topic, p.batch(f"r{r}-p{i}-" + "x" * 100))["error_code"] == 0
            for i, p in enumerate(producers):
                assert marker(w, topic, p.pid, commit=(r + i) % 3 == 0) == 0
        assert produce(w, topic, producers[1].batch("open"))["error_code"] == 0
        lso = list_latest(w, topic, 1)
        hw = list_latest(w, topic, 0)
        aborted = fetch(w, topic, 1)["aborted_transactions"]
    assert lso < hw
    d = b.data_dir / f"{topic}-0"
    written = {p.name: p.read_bytes() for p in d.glob("*.txnindex")}
    assert len(written) >= 2, "the test wants aborts in several segments"
    b.kill()
    # every segment recovered (the recovery-point checkpoint is lost too); one .txnindex
    # gone, another torn
    (b.data_dir / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)
    names = sorted(written)
    (d / names[0]).unlink()
    (d / names[-1]).write_bytes(written[names[-1]][:-5])
    b.start()
    with Wire(b.bootstrap) as w:
        assert list_latest(w, topic, 1) == lso
        assert list_latest(w, topic, 0) == hw
        assert fetch(w, topic, 1)["aborted_transactions"] == aborted
    assert {p.name: p.read_bytes() for p in d.glob("*.txnindex")} == written


def test_read_committed_long_poll_waits_through_uncommitted_appends(broker) -> None:
    """A read_committed fetch parked at the LSO is not answered empty by an append of the
    open transaction (above the LSO): it answers with the records once the marker comes."""
    from kafkactl.protocol import codec

    topic = "txn-poll"
    t = TxnProducer(PID_C)
    with Wire(broker.bootstrap) as w, Wire(broker.bootstrap) as poller:
        assert produce(w, topic, t.batch("t1"))["error_code"] == 0
        lso = list_latest(w, topic, 1)
        assert lso == 0
        poller.correlation_id += 1
        body = {
            "replica_id": -1, "max_wait_ms": 20_000, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 1, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": []}
        poller.send_raw(codec.encode_request(ApiKey.FETCH, 11, poller.correlation_id,
                                             "wire", body))
        assert produce(w, topic, t.batch("t2"))["error_code"] == 0  # above the LSO
        assert produce(w, topic, t.batch("t3"))["error_code"] == 0
        assert marker(w, topic, PID_C, commit=True) == 0
        resp = codec.decode_response(ApiKey.FETCH, 11, poller.recv_frame())
    p = resp["responses"][0]["partitions"][0]
    assert p["last_stable_offset"] == 4
    from kafkactl.record.memory_records import iter_batches

    batches = list(iter_batches(memoryview(bytes(p["records"]))))
    assert batches and batches[0].base_offset == 0


def test_list_offsets_by_timestamp_stops_at_the_lso(broker) -> None:
    """Kafka's lastFetchableOffset: a timestamp lookup finds nothing at or past the LSO
    (read_committed) or the high watermark (read_uncommitted)."""
    topic = "txn-times"

    def at(ts: int, *values: str, pid: int = -1) -> bytes:
        b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                               base_sequence=0 if pid >= 0 else -1,
                               is_transactional=pid >= 0)
        for v in values:
            b.append(ts, None, v.encode())
        return b.build()

    def lookup(w: Wire, ts: int, isolation: int) -> int:
        resp = w.request(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": isolation,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]})
        return int(resp["topics"][0]["partitions"][0]["offset"])

    now = int(time.time() * 1000)
    with Wire(broker.bootstrap) as w:
        assert produce(w, topic, at(now - 3000, "p0"), txn_id=None)["error_code"] == 0
        assert produce(w, topic, at(now - 2000, "c1", pid=PID_C))["error_code"] == 0
        assert produce(w, topic, at(now - 1000, "p1"), txn_id=None)["error_code"] == 0
        assert lookup(w, now - 5000, 1) == lookup(w, now - 5000, 0) == 0
        assert lookup(w, now - 2500, 0) == 1
        assert lookup(w, now - 2500, 1) == -1  # c1 is past the LSO (its txn is open)
        assert lookup(w, -3, 0) == 2 and lookup(w, -3, 1) == -1
        assert marker(w, topic, PID_C, commit=True) == 0
        assert lookup(w, now - 2500, 1) == 1


def test_list_offsets_isolation_is_a_consumers_only(broker) -> None:
    """Kafka's handleListOffsetRequest: the isolation level applies to a consumer
    (replica_id -1) only; for any other replica_id (-2, the debugging replica; a broker id;
    -3) isolationLevelOpt is None and the last fetchable offset is the log end: latest is
    the log end past an open transaction, and a timestamp lookup finds records past the
    LSO, read_committed or not."""
    topic = "txn-replica-ids"

    def at(ts: int, value: str, pid: int = -1) -> bytes:
        b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                               base_sequence=0 if pid >= 0 else -1,
                               is_transactional=pid >= 0)
        b.append(ts, None, value.encode())
        return b.build()

    def answer(w: Wire, version: int, replica_id: int, ts: int, isolation: int) -> int:
        resp = w.request(ApiKey.LIST_OFFSETS, version, {
            "replica_id": replica_id, "isolation_level": isolation,
            "topics": [{"name": topic, "partitions": [{
                "partition_index": 0, "current_leader_epoch": -1, "timestamp": ts,
                "max_num_offsets": 1}]}]})
        p = resp["topics"][0]["partitions"][0]
        assert p["error_code"] == 0, p
        return int(p["old_style_offsets"][0] if version == 0 else p["offset"])

    now = int(time.time() * 1000)
    with Wire(broker.bootstrap) as w:
        assert produce(w, topic, at(now - 3000, "p0"), txn_id=None)["error_code"] == 0
        assert produce(w, topic, at(now - 2000, "c1", pid=PID_C + 10))["error_code"] == 0
        assert produce(w, topic, at(now - 1000, "p1"), txn_id=None)["error_code"] == 0
        for iso in (0, 1):
            assert answer(w, 5, -1, -1, iso) == (1 if iso else 3)  # LSO / high watermark
            assert answer(w, 5, -1, now - 2500, iso) == (-1 if iso else 1)
            for rid in (-2, 0, 7, -3):
                assert answer(w, 5, rid, -1, iso) == 3, (rid, iso)  # the log end
                assert answer(w, 5, rid, now - 2500, iso) == 1, (rid, iso)
                assert answer(w, 7, rid, -3, iso) == 2, (rid, iso)  # max timestamp
        assert answer(w, 0, -2, -1, 0) == 3  # v0: getOffsetsBefore, no isolation level
        assert marker(w, topic, PID_C + 10, commit=True) == 0


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_broker_compaction_of_a_transactional_topic(broker_factory) -> None:
    """The broker's own cleaner on a compacted topic with transactions: aborted records go
    (and never hide a committed value), a read_committed reader sees the same latest value
    per key before and after, and kcat read_committed agrees."""
    b = broker_factory(log_cleaner_backoff_ms="200",
                       transaction_partition_verification_enable="false")
    topic = "txn-compact"

    def keyed(p: TxnProducer | None, *pairs: tuple[str, str]) -> bytes:
        bld = RecordBatchBuilder(producer_id=p.pid, producer_epoch=0, base_sequence=p.seq,
                                 is_transactional=True) if p else RecordBatchBuilder()
        for k, v in pairs:
            bld.append(None, k.encode(), v.encode())
        if p:
            p.seq += len(pairs)
        return bld.build()

    def view(isolation: str) -> list[str]:
        return kcat("-b", b.bootstrap, "-C", "-t", topic, "-e", "-f", "%k=%s\n",
                    "-X", f"isolation.level={isolation}")

    a, c = TxnProducer(PID_A), TxnProducer(PID_B)
    with Wire(b.bootstrap) as w:
        r = w.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": [
                            {"name": k, "value": v} for k, v in {
                                "cleanup.policy": "compact", "segment.bytes": "1024",
                                "min.cleanable.dirty.ratio": "0.01",
                                "delete.retention.ms": "0"}.items()]}],
            "timeout_ms": 5000, "validate_only": False})
        assert r["topics"][0]["error_code"] == 0, r
        assert produce(w, topic, keyed(None, ("k1", "plain-1"), ("k2", "plain-2")),
                       txn_id=None)["error_code"] == 0
        assert produce(w, topic, keyed(a, ("k1", "aborted"), ("k3", "aborted")))[
            "error_code"] == 0
        assert produce(w, topic, keyed(c, ("k2", "txn-2")))["error_code"] == 0
        assert marker(w, topic, PID_A, commit=False) == 0
        assert marker(w, topic, PID_B, commit=True) == 0
        for i in range(40):  # fill segments so the cleaner has inactive ones to clean
            assert produce(w, topic, keyed(None, (f"f{i}", "x" * 100)),
                           txn_id=None)["error_code"] == 0
    before = view("read_committed")
    assert "k1=plain-1" in before and "k2=txn-2" in before and "k3=aborted" not in before
    wait_until(lambda: not any(v.endswith("=aborted") for v in view("read_uncommitted")),
               timeout=30, what="the cleaner to remove the aborted records")
    after = view("read_committed")
    assert "k1=plain-1" in after and "k2=txn-2" in after
    assert "k2=plain-2" not in after  # superseded by the committed transaction
    assert [v for v in after if not v.startswith("k")] == \
        [v for v in before if not v.startswith("k")]
