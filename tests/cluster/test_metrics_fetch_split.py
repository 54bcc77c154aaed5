"""Fetch request metrics split as Kafka's RequestChannel records them: each Fetch is
counted under `Fetch` and again under `FetchConsumer` (replica id < 0) or `FetchFollower`
(a follower's, replica id >= 0), in RequestsPerSec, TotalTimeMs and RequestQueueTimeMs
(Kafka's docs/ops.html: request={Produce|FetchConsumer|FetchFollower}). A real two-broker
cluster: broker 2's replica fetcher is the follower, a wire client the consumer."""

from __future__ import annotations

import uuid
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests.broker.test_metrics import scrape
from tests.broker.wire import Wire, batch
from tests.cluster.conftest import zookeeper  # noqa: F401 - the fixture
from tests.cluster.test_metrics_lag_cluster import _create, _start
from tests.polling import wait_until


def _requests(samples: dict[Any, float], request: str) -> dict[str, float]:
    """kafka_network_requestmetrics_requests_total of `request`, by version."""
    out: dict[str, float] = {}
    for (name, labels), value in samples.items():
        got = dict(labels)
        if name == "kafka_network_requestmetrics_requests_total" and \
                got.get("request") == request:
            out[got["version"]] = value
    return out


def _count(samples: dict[Any, float], family: str, request: str) -> float | None:
    return samples.get((f"kafka_network_requestmetrics_{family}_count",
                        (("request", request),)))


def test_fetch_requests_split_consumer_and_follower(broker_factory: Any,
                                                    zookeeper: Any) -> None:  # noqa: F811
    connect = zookeeper.connect + f"/c-{uuid.uuid4().hex[:8]}"
    cluster, ports = _start(broker_factory, connect, (1, 2))
    topic = "split"
    assert _create(cluster, topic, "1:2", 1) == {0: 1}
    leader = cluster.brokers[1]
    with Wire(leader.bootstrap) as w:
        r = w.produce(topic, batch([b"a", b"b", b"c"]), acks=-1)
        assert r["error_code"] == 0, r
        assert w.fetch(topic, 0)["error_code"] == 0  # v12: a flexible request header
        old = w.request(ApiKey.FETCH, 4, {  # v4: request header v1
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
        assert old["responses"][0]["partitions"][0]["error_code"] == 0, old

    def split_adds_up() -> dict[Any, float] | None:
        samples = scrape(ports[1])
        consumer = _requests(samples, "FetchConsumer")
        follower = _requests(samples, "FetchFollower")
        fetch = _requests(samples, "Fetch")
        if sum(follower.values()) <= 0 or \
                sum(fetch.values()) != sum(consumer.values()) + sum(follower.values()):
            return None
        return samples

    samples = wait_until(split_adds_up, 30, "Fetch = FetchConsumer + FetchFollower")
    consumer = _requests(samples, "FetchConsumer")
    assert consumer == {"4": 1.0, "12": 1.0}, consumer  # the wire client's, by version
    assert "12" in _requests(samples, "FetchFollower")  # broker 2's replica fetcher
    for family in ("totaltimems", "requestqueuetimems"):
        for request in ("FetchConsumer", "FetchFollower"):
            assert (_count(samples, family, request) or 0) > 0, (family, request)
    # errors per request stay under Fetch, as Kafka's updateErrorMetrics keeps them
    assert not any(dict(labels).get("request", "").startswith("Fetch") and
                   dict(labels)["request"] != "Fetch"
                   for (name, labels) in samples
                   if name == "kafka_network_requestmetrics_errors_total")
