"""Client quotas enforced as Kafka enforces them (ClientQuotaManager, ClientRequestQuotaManager,
ControllerMutationQuotaManager, KafkaApis): acks=0 producers are held to producer_byte_rate
(their connection muted though they get no response), byte-rate throttles are not capped
(request_percentage ones at one quota window), a throttled Fetch carries no records and one
Fetch takes no more than the quota windows let through, controller_mutation_rate is strict
for CreateTopics v6+, CreatePartitions v3+ and DeleteTopics v5+ (THROTTLING_QUOTA_EXCEEDED),
and a client's quota state and throttle-time series are forgotten once idle (an hour in
Kafka; shortened here through KAFKACTL_QUOTA_SENSOR_EXPIRY_S).

Nothing here depends on the machine's speed: the assertions are on throttle_time_ms answers,
error codes, the metric's series, and volumes bounded from the quota formula (a slow machine
only moves less)."""

from __future__ import annotations

import json
import struct
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kafkactl.broker.client_quotas import ClientQuotaStore
from kafkactl.broker.quota_manager import QuotaManager
from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.broker.wire import Wire, batch
from tests.conftest import free_port
from tests.polling import wait_until

THROTTLING_QUOTA_EXCEEDED = 89
TOPIC_ALREADY_EXISTS = 36
# the broker's quota windows in these tests: 2 of 1 s
WINDOWS = {"quota_window_num": "2", "quota_window_size_seconds": "1"}


def kafkactl(*args: str) -> Any:
    r = zygote.run(list(args), text=True, timeout=60)
    assert r.returncode == 0, (args, r.stderr)
    return r


class Client(Wire):
    """The wire client with a client id of its own (quotas are per client id)."""

    def __init__(self, bootstrap: str, client_id: str) -> None:
        super().__init__(bootstrap, timeout=60)
        self.client_id = client_id

    def request(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        self.send_raw(codec.encode_request(api_key, version, self.correlation_id,
                                           self.client_id, body))
        frame = self.recv_frame()
        assert codec.peek_correlation_id(frame) == self.correlation_id
        return codec.decode_response(api_key, version, frame)

    def fetch_all(self, topic: str, offset: int) -> dict[str, Any]:
        return self.request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "log_start_offset": -1,
                 "last_fetched_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""})


def end_offset(bootstrap: str, topic: str) -> int:
    r = kafkactl("topics", "offsets", "-t", topic, "--json", "-b", bootstrap)
    return sum(int(p["offset"]) for p in json.loads(r.stdout))


def metrics_text(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()


def throttle_series(text: str, client_prefix: str) -> dict[str, float]:
    """kafka_server_quota_throttle_time_ms_total by client id (those starting so)."""
    found = {}
    for line in text.splitlines():
        if line.startswith("kafka_server_quota_throttle_time_ms_total{") and \
                f'client_id="{client_prefix}' in line:
            client = line.split('client_id="', 1)[1].split('"', 1)[0]
            found[client] = float(line.rsplit(" ", 1)[1])
    return found


# ---------------------------------------------------------------- acks=0 (finding 1)

def test_acks0_producer_is_held_to_its_byte_rate(broker_factory: Any) -> None:
    """An acks=0 producer gets no response, but its connection is muted for the throttle
    time all the same (Kafka's KafkaApis: "the channel may be throttled due to bandwidth
    quota violation"): what reaches the log stays within the quota formula."""
    from confluent_kafka import Producer

    b = broker_factory(**WINDOWS)
    quota = 100_000
    kafkactl("quotas", "add", "--client-id", "zero", "-c", f"producer_byte_rate={quota}",
             "-b", b.bootstrap)
    kafkactl("topics", "create", "-t", "acks0", "-b", b.bootstrap)
    size = 1000
    request_max = 100_000  # the most one Produce request carries (message.max.bytes)
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "zero", "acks": "0",
                  "linger.ms": 5, "batch.size": 50_000, "message.max.bytes": request_max,
                  "queue.buffering.max.messages": 20_000})
    started = time.monotonic()
    while time.monotonic() - started < 3:  # offer far more than 3 s of quota
        try:
            p.produce("acks0", b"z" * size)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    appended = end_offset(b.bootstrap, "acks0") * size
    elapsed = time.monotonic() - started
    p.purge()
    p.flush(0)
    del p
    # Kafka's rate is measured over at least (num - 1) windows and a client over it is
    # muted until its rate is back at the quota: by `elapsed`, no more than the quota for
    # elapsed plus the two windows, and a request or two beyond (generous)
    bound = quota * (elapsed + 2 * 1.0) + 2 * request_max
    assert appended <= bound, (appended, bound, elapsed)


# ---------------------------------------------------------------- throttle caps (2a)

def test_a_byte_rate_throttle_is_not_capped(broker_factory: Any) -> None:
    """(rate - quota) / quota x window, uncapped, as Kafka's ClientQuotaManager: 30 kB at
    1 kB/s over a 1 s window is 29 s (not the 2 x 1 s windows)."""
    from confluent_kafka import Producer

    b = broker_factory(**WINDOWS)
    kafkactl("quotas", "add", "--client-id", "big", "-c", "producer_byte_rate=1000",
             "-b", b.bootstrap)
    kafkactl("topics", "create", "-t", "uncapped", "-b", b.bootstrap)
    throttles: list[float] = []
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "big", "linger.ms": 0,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    p.produce("uncapped", b"x" * 30_000)
    assert p.flush(30) == 0
    wait_until(lambda: p.poll(0.1) >= 0 and throttles, 30, "the throttle reported")
    assert max(throttles) >= 20, throttles  # seconds: ~29, far above the 2 s of windows


def test_a_request_percentage_throttle_is_capped_at_one_window(broker_factory: Any) -> None:
    """ClientRequestQuotaManager caps a request quota's throttle at one quota window (1 s
    here): never more, however far over the client is."""
    b = broker_factory(**WINDOWS)
    kafkactl("quotas", "add", "--client-id", "busy", "-c", "request_percentage=0.0001",
             "-b", b.bootstrap)
    throttle = 0
    for _ in range(50):
        with Client(b.bootstrap, "busy") as c:  # a new connection: not muted
            throttle = c.request(ApiKey.METADATA, 9, {
                "topics": None, "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False})["throttle_time_ms"]
        if throttle:
            break
    assert 0 < throttle <= 1000, throttle


# ---------------------------------------------------------------- throttled fetch (2b)

def _next_offset(records: Any) -> int | None:
    """The offset after the last whole v2 batch of a fetched record set."""
    data = bytes(records or b"")
    pos, nxt = 0, None
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        nxt = base + struct.unpack_from(">i", data, pos + 57)[0]
        pos += 12 + length
    return nxt


def test_a_throttled_fetch_carries_no_records_and_a_fetch_is_capped(
        broker_factory: Any) -> None:
    """A consumer Fetch takes at most what its consumer_byte_rate lets through in the quota
    windows (quota x (num - 1) x size, plus the first batch whole), and a Fetch over the quota
    is answered with no partitions and the throttle time, its bytes not counted (Kafka's
    getMaxValueInQuotaWindow, getThrottledResponse, unrecordQuotaSensor): nothing is lost,
    the same offset is fetched again after the throttle."""
    b = broker_factory(**WINDOWS)
    quota = 2000
    kafkactl("quotas", "add", "--client-id", "reader", "-c", f"consumer_byte_rate={quota}",
             "-b", b.bootstrap)
    with Wire(b.bootstrap) as w:
        assert w.create_topic("capped")["error_code"] == 0
        for i in range(40):
            assert w.produce("capped", batch([bytes([65 + i % 26]) * 500]))["error_code"] == 0
    one_batch = len(batch([b"x" * 500]))
    in_window = quota * (2 - 1) * 1
    with Client(b.bootstrap, "reader") as c:
        first = c.fetch_all("capped", 0)
        records = first["responses"][0]["partitions"][0]["records"]
        assert len(records or b"") <= in_window + one_batch, len(records)
        offset = _next_offset(records)
        assert offset is not None and offset > 0
        throttled = None
        while offset < 40:
            resp = c.fetch_all("capped", offset)
            if resp["throttle_time_ms"] > 0:
                throttled = resp
                break
            offset = _next_offset(resp["responses"][0]["partitions"][0]["records"]) or offset
        assert throttled is not None, "never throttled"
        assert throttled["responses"] == [], throttled  # no partitions, no records
        # after the throttle (the connection was muted meanwhile) the same offset comes
        again = c.fetch_all("capped", offset)["responses"]
        while not again:  # throttled once more: empty again, fetched after the next mute
            again = c.fetch_all("capped", offset)["responses"]
        got = again[0]["partitions"][0]["records"]
        assert struct.unpack_from(">q", bytes(got), 0)[0] == offset


# ---------------------------------------------------------------- controller_mutation_rate (3)

def _create(c: Client, version: int, *topics: tuple[str, int]) -> dict[str, Any]:
    return c.request(ApiKey.CREATE_TOPICS, version, {
        "topics": [{"name": n, "num_partitions": p, "replication_factor": 1,
                    "assignments": [], "configs": []} for n, p in topics],
        "timeout_ms": 30000, "validate_only": False})


def test_controller_mutation_rate_is_strict_from_createtopics_v6(broker_factory: Any) -> None:
    """KIP-599: the request that exhausts the token bucket (quota x 2 windows = 2 partitions
    here) is accepted and not throttled; then every topic a strict request (CreateTopics
    v6, DeleteTopics v5, CreatePartitions v3) would mutate is refused
    THROTTLING_QUOTA_EXCEEDED, nothing done, with the time to wait; a topic refused for
    another reason keeps its own error. Older versions are permissive: done, throttled."""
    b = broker_factory(**WINDOWS)
    kafkactl("quotas", "add", "--client-default", "-c", "controller_mutation_rate=1",
             "-b", b.bootstrap)
    with Client(b.bootstrap, "strict") as c:
        first = _create(c, 6, ("mut-a", 30))
    assert first["topics"][0]["error_code"] == 0, first
    assert first["throttle_time_ms"] == 0  # strict: the request that empties it is let be
    with Client(b.bootstrap, "strict") as c:  # 28 partitions below zero: ~28 s to refill
        second = _create(c, 6, ("mut-a", 1), ("mut-b", 1), ("mut-c", 2))
    rows = second["topics"]
    assert [r["name"] for r in rows] == ["mut-a", "mut-b", "mut-c"]
    assert rows[0]["error_code"] == TOPIC_ALREADY_EXISTS, rows
    for r in rows[1:]:
        assert r["error_code"] == THROTTLING_QUOTA_EXCEEDED, rows
        assert r["error_message"] == "The throttling quota has been exceeded."
        assert r["num_partitions"] == -1
    assert 10_000 < second["throttle_time_ms"] <= 28_000, second
    with Client(b.bootstrap, "strict") as c:
        deleted = c.request(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["mut-a"],
                                                       "timeout_ms": 30000})
    assert deleted["responses"][0]["error_code"] == THROTTLING_QUOTA_EXCEEDED, deleted
    with Client(b.bootstrap, "strict") as c:
        grown = c.request(ApiKey.CREATE_PARTITIONS, 3, {
            "topics": [{"name": "mut-a", "count": 31, "assignments": None}],
            "timeout_ms": 30000, "validate_only": False})
    assert grown["results"][0]["error_code"] == THROTTLING_QUOTA_EXCEEDED, grown
    listed = json.loads(kafkactl("topics", "list", "--json", "-b", b.bootstrap).stdout)
    names = {t["name"] if isinstance(t, dict) else t for t in listed}
    assert "mut-a" in names and "mut-b" not in names and "mut-c" not in names, listed
    r = kafkactl("topics", "describe", "-t", "mut-a", "--json", "-b", b.bootstrap)
    assert len(json.loads(r.stdout)[0]["partitions"]) == 30  # not grown, not deleted
    # another client id has its own bucket; v5 is permissive: done, then throttled
    with Client(b.bootstrap, "loose") as c:
        loose = _create(c, 5, ("mut-d", 10))
    assert loose["topics"][0]["error_code"] == 0 and loose["throttle_time_ms"] > 0, loose
    with Client(b.bootstrap, "loose") as c:
        again = _create(c, 5, ("mut-e", 1))
    assert again["topics"][0]["error_code"] == 0 and again["throttle_time_ms"] > 0, again


# ---------------------------------------------------------------- expiry (4)

def test_idle_clients_quota_series_expire(broker_factory: Any,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A client's throttle-time series (and its rates) go once it has been idle for the
    expiry (Kafka's hour, 1 s here), also after its quota is removed."""
    monkeypatch.setenv("KAFKACTL_QUOTA_SENSOR_EXPIRY_S", "1")
    metrics_port = free_port()
    b = broker_factory(extra_args=["--metrics", f"127.0.0.1:{metrics_port}"], **WINDOWS)
    kafkactl("quotas", "add", "--client-default", "-c", "producer_byte_rate=10",
             "-b", b.bootstrap)
    with Wire(b.bootstrap) as w:
        assert w.create_topic("idle")["error_code"] == 0
    for i in range(5):
        with Client(b.bootstrap, f"idle-{i}") as c:
            assert c.produce("idle", batch([b"y" * 200]))["error_code"] == 0
    seen = throttle_series(metrics_text(metrics_port), "idle-")
    assert sorted(seen) == [f"idle-{i}" for i in range(5)], seen
    kafkactl("quotas", "remove", "--client-default", "-b", b.bootstrap)
    wait_until(lambda: not throttle_series(metrics_text(metrics_port), "idle-"), 30,
               "the idle clients' throttle series to go")


def test_quota_state_is_swept_after_an_hour_idle(tmp_path: Path) -> None:
    """The manager itself, on Kafka's hour: an idle client's rates, token bucket and
    throttle series go at the next sweep; an active one's stay."""
    now = [1000.0]
    store = ClientQuotaStore(None)
    store.alter((("client-id", None),), [("producer_byte_rate", 10.0),
                                         ("controller_mutation_rate", 1.0)])
    q = QuotaManager(store, window_num=2, window_size_s=1.0, clock=lambda: now[0],
                     expiry_s=3600.0)
    for i in range(200):
        ms = q.record("produce", "u", f"c{i}", 1000)
        q.throttled("produce", "u", f"c{i}", ms)
        mq = q.mutation_quota("u", f"c{i}", strict=True)
        assert mq is not None
        mq.record(1)
    assert len(q.throttle_ms_total) == 200
    now[0] += 1800
    q.record("produce", "u", "c0", 1)  # c0 stays active
    now[0] += 1801
    assert list(q.throttle_ms_total) == []  # every throttle was an hour ago
    q.record("produce", "u", "new", 1)
    assert {k[1][1] for k in q._rates} == {"c0", "new"}
    assert q._buckets == {}
