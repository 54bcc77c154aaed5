"""The broker's fetch.max.bytes (KIP-541, default 55 MiB): a Fetch response carries no more
than it, whatever the request's max_bytes, except the first batch a consumer needs to make
progress (KIP-74); a response asking above it used to carry all it asked for."""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey

from .wire import Wire, batch

LIMIT = 100_000
BATCH = 30_000


def _fetch(w: Wire, max_bytes: int) -> list[dict[str, Any]]:
    resp = w.request(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "fmb", "partitions": [
            {"partition": p, "fetch_offset": 0, "partition_max_bytes": 10 << 20,
             "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}
            for p in range(3)]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return list(resp["responses"][0]["partitions"])


def test_a_fetch_carries_at_most_fetch_max_bytes(broker_factory: Any) -> None:
    b = broker_factory(fetch_max_bytes=str(LIMIT))
    with Wire(b.bootstrap) as w:
        assert w.create_topic("fmb", partitions=3,
                              configs={"max.message.bytes": "1000000"})["error_code"] == 0
        for p in range(3):
            for _ in range(5):
                assert w.produce("fmb", batch([b"x" * BATCH]), partition=p)["error_code"] == 0
        parts = _fetch(w, 500_000_000)
        total = sum(len(p["records"] or b"") for p in parts)
        assert 0 < total <= LIMIT, total
        assert 0 < sum(len(p["records"] or b"") for p in _fetch(w, 50_000)) <= 50_000
        # one batch above the limit still comes whole (KIP-74)
        assert w.produce("fmb", batch([b"y" * 150_000]), partition=2)["error_code"] == 0
        resp = w.request(ApiKey.FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 500_000_000,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "fmb", "partitions": [
                {"partition": 2, "fetch_offset": 5, "partition_max_bytes": 10 << 20,
                 "current_leader_epoch": -1, "log_start_offset": -1,
                 "last_fetched_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        records = resp["responses"][0]["partitions"][0]["records"]
        assert len(records) > 150_000
    assert not [line for line in b.log().splitlines()
                if "fetch.max.bytes" in line and "unknown" in line.lower()], b.log()
