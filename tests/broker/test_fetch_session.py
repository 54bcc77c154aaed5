"""Incremental fetch sessions (KIP-227) on a real broker, over the wire (Fetch v12).

A full fetch with session 0 / epoch 0 gets a session id; each incremental fetch (the id, the
next epoch) lists only the partitions that changed and is answered only the partitions with
something new (records, a moved high watermark); forgotten partitions leave the session; a
wrong epoch is INVALID_FETCH_SESSION_EPOCH (71), an unknown id FETCH_SESSION_ID_NOT_FOUND
(70), epoch -1 closes the session; with max.incremental.fetch.session.cache.slots=0 there are
no sessions; an incremental long poll wakes on an append to any partition of its session; a
full cache gives a new consumer no session, but a follower's (privileged) session evicts a
consumer's. Before sessions every answer had session id 0."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests.conftest import free_port
from tests.polling import wait_until

from .wire import Wire, batch

TOPIC = "fs"


def _part(p: int, offset: int) -> dict[str, Any]:
    return {"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
            "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}


def fetch(w: Wire, session_id: int, epoch: int, parts: dict[int, int] | None = None,
          forgotten: list[int] | None = None, *, replica_id: int = -1, max_wait_ms: int = 0,
          topic: str = TOPIC) -> dict[str, Any]:
    """One Fetch v12: `parts` partition -> fetch offset; `forgotten` partitions."""
    return w.request(ApiKey.FETCH, 12, {
        "replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": 1,
        "max_bytes": 50 << 20, "isolation_level": 0, "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": topic, "partitions": [_part(p, o) for p, o in parts.items()]}]
        if parts else [],
        "forgotten_topics_data": [{"topic": topic, "partitions": forgotten}]
        if forgotten else [],
        "rack_id": ""})


def answered(resp: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """partition -> its part of the answer."""
    return {p["partition_index"]: p for t in resp["responses"] for p in t["partitions"]}


def produce(w: Wire, p: int, value: bytes = b"v", topic: str = TOPIC) -> None:
    assert w.produce(topic, batch([value]), partition=p)["error_code"] == 0


def test_incremental_fetches_carry_only_what_changed(broker_factory: Any) -> None:
    b = broker_factory()
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, partitions=3)["error_code"] == 0
        produce(w, 0)
        produce(w, 1)
        full = fetch(w, 0, 0, {0: 0, 1: 0, 2: 0})
        assert full["error_code"] == 0
        sid = full["session_id"]
        assert sid != 0, "a full fetch with epoch 0 must create a session"
        got = answered(full)
        assert sorted(got) == [0, 1, 2]
        assert got[0]["records"] and got[1]["records"] and not got[2]["records"]
        # the fetcher moves 0 and 1 on: nothing new anywhere, so nothing in the answer
        inc = fetch(w, sid, 1, {0: 1, 1: 1})
        assert (inc["error_code"], inc["session_id"]) == (0, sid)
        assert answered(inc) == {}
        # partition 2 gets a record: it comes although the request does not list it
        produce(w, 2, b"late")
        inc = fetch(w, sid, 2)
        got = answered(inc)
        assert sorted(got) == [2], got
        assert got[2]["high_watermark"] == 1 and b"late" in bytes(got[2]["records"])
        assert answered(fetch(w, sid, 3, {2: 1})) == {}
        # forgotten: partition 1 leaves the session; its records are not sent any more
        assert answered(fetch(w, sid, 4, forgotten=[1])) == {}
        produce(w, 1)
        assert answered(fetch(w, sid, 5)) == {}
        produce(w, 0)
        got = answered(fetch(w, sid, 6))
        assert sorted(got) == [0] and got[0]["high_watermark"] == 2
        # a wrong epoch: error 71 and no partitions; the session stays, at its epoch
        bad = fetch(w, sid, 99)
        assert (bad["error_code"], bad["responses"]) == (71, [])
        assert fetch(w, sid, 7, {0: 2})["error_code"] == 0
        # an unknown session id: error 70
        unknown = fetch(w, sid % 2_000_000_000 + 1, 1)
        assert (unknown["error_code"], unknown["responses"]) == (70, [])
        # epoch -1 closes the session and is answered sessionless (what it lists)
        closing = fetch(w, sid, -1, {0: 0})
        assert (closing["error_code"], closing["session_id"]) == (0, 0)
        assert sorted(answered(closing)) == [0]
        assert fetch(w, sid, 8)["error_code"] == 70


def test_a_partition_with_an_error_is_sent_until_the_error_goes(broker_factory: Any) -> None:
    b = broker_factory()
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, partitions=1)["error_code"] == 0
        produce(w, 0)
        sid = fetch(w, 0, 0, {0: 1})["session_id"]
        assert sid != 0
        # an offset past the end: OFFSET_OUT_OF_RANGE each time, never left out
        for epoch in (1, 2):
            got = answered(fetch(w, sid, epoch, {0: 5} if epoch == 1 else None))
            assert got[0]["error_code"] == 1, got
        # back in range: the partition (and its watermark) is sent again once
        got = answered(fetch(w, sid, 3, {0: 1}))
        assert got[0]["error_code"] == 0 and got[0]["high_watermark"] == 1
        assert answered(fetch(w, sid, 4)) == {}


def test_no_sessions_with_zero_slots(broker_factory: Any) -> None:
    b = broker_factory(max_incremental_fetch_session_cache_slots="0")
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, partitions=2)["error_code"] == 0
        produce(w, 0)
        full = fetch(w, 0, 0, {0: 0, 1: 0})
        assert (full["error_code"], full["session_id"]) == (0, 0)
        assert sorted(answered(full)) == [0, 1]
        assert answered(full)[0]["records"]


def _metric(port: int, name: str, label: str = "") -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    for line in text.decode().splitlines():
        if line.startswith(name) and label in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} {label} not in the metrics")


def test_a_long_poll_wakes_on_an_append_to_any_session_partition(broker_factory: Any) -> None:
    metrics_port = free_port()
    b = broker_factory(extra_args=["--metrics", f"127.0.0.1:{metrics_port}"])
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, partitions=2)["error_code"] == 0
        sid = fetch(w, 0, 0, {0: 0, 1: 0})["session_id"]
        assert sid != 0
        assert _metric(metrics_port,
                       "kafka_server_fetchsessioncache_numincrementalfetchsessions") == 1
    result: dict[str, Any] = {}

    def long_poll() -> None:
        with Wire(b.bootstrap, timeout=120) as poller:
            # lists only partition 0; waits up to 60 s for a byte of the session
            result["resp"] = fetch(poller, sid, 1, {0: 0}, max_wait_ms=60_000)

    t = threading.Thread(target=long_poll)
    t.start()
    purgatory = "kafka_server_delayedoperationpurgatory_purgatorysize"
    wait_until(lambda: _metric(metrics_port, purgatory, 'delayedoperation="Fetch"') >= 1,
               30, "the incremental fetch parked in the purgatory")
    assert "resp" not in result
    with Wire(b.bootstrap) as w:
        produce(w, 1, b"wake")
    t.join(90)
    assert not t.is_alive()
    resp = result["resp"]
    assert (resp["error_code"], resp["session_id"]) == (0, sid)
    got = answered(resp)
    assert sorted(got) == [1] and b"wake" in bytes(got[1]["records"]), got


def test_a_full_cache_refuses_a_consumer(broker_factory: Any) -> None:
    b = broker_factory(max_incremental_fetch_session_cache_slots="1")
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, partitions=2)["error_code"] == 0
        first = fetch(w, 0, 0, {0: 0, 1: 0})["session_id"]
        assert first != 0
        # a second consumer's session is no bigger and the first is young: no slot
        assert fetch(w, 0, 0, {0: 0, 1: 0})["session_id"] == 0
        assert fetch(w, first, 1)["error_code"] == 0


def test_a_follower_session_evicts_a_consumer_session(broker_factory: Any) -> None:
    eviction_ms = 5000
    b = broker_factory(max_incremental_fetch_session_cache_slots="1",
                       min_incremental_fetch_session_eviction_ms=str(eviction_ms))
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, partitions=2)["error_code"] == 0
        consumer = fetch(w, 0, 0, {0: 0, 1: 0})["session_id"]
        assert consumer != 0
        # the consumer keeps its session in use until it is older than the eviction time
        created = time.monotonic()
        epoch = 1
        while time.monotonic() - created < eviction_ms / 1000 + 0.5:
            assert fetch(w, consumer, epoch, max_wait_ms=200)["error_code"] == 0
            epoch += 1
        assert fetch(w, consumer, epoch)["error_code"] == 0
        epoch += 1
        # in use: another consumer of the same size cannot take its slot
        assert fetch(w, 0, 0, {0: 0, 1: 0})["session_id"] == 0
        # a follower's session is privileged: it evicts the consumer's
        follower = fetch(w, 0, 0, {0: 0, 1: 0}, replica_id=7)["session_id"]
        assert follower != 0
        assert fetch(w, consumer, epoch)["error_code"] == 70
        assert fetch(w, follower, 1, replica_id=7)["error_code"] == 0


def test_the_session_configs_are_known(broker_factory: Any) -> None:
    b = broker_factory(max_incremental_fetch_session_cache_slots="5",
                       min_incremental_fetch_session_eviction_ms="1000")
    with Wire(b.bootstrap) as w:
        w.create_topic(TOPIC, partitions=1)
    assert not re.search(r"incremental\.fetch\.session.*(isn't a known|unknown)", b.log())
