"""The counters Kafka keeps per local append and per request, against a real standalone broker
after known traffic (exact requests over the wire):

- messages and bytes in count every append as leader, the coordinators' too (Kafka counts in
  ReplicaManager.appendRecords): offset commits to __consumer_offsets, the transaction
  coordinator's __transaction_state and its transaction markers;
- produce and fetch requests per topic (TotalProduceRequestsPerSec and friends), failed ones,
  and ErrorsPerSec per request and error code (NONE included, as Kafka's errorCounts);
- the replication counters and ReplicaFetcherManager MaxLag exist on a standalone broker
  (zero: nothing to replicate)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.broker.test_metrics import sample, scrape, status
from tests.broker.wire import Wire, batch
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until


@pytest.fixture
def metered(broker_factory: Any) -> tuple[BrokerProcess, int]:
    port = free_port()
    b = broker_factory(extra_args=["--metrics", f"127.0.0.1:{port}"])
    wait_until(lambda: status(port, "/ready") == 200, 30, "/ready")
    return b, port


def _commit(w: Wire, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as a simple consumer (no generation), again while the coordinator is not
    ready (the first FindCoordinator creates the offsets topic): a refused commit appends
    nothing."""
    def committed() -> bool:
        w.request(ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
        resp = w.request(ApiKey.OFFSET_COMMIT, 2, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_metadata": ""}
                for p, o in offsets.items()]}]})
        codes = [p["error_code"] for t in resp["topics"] for p in t["partitions"]]
        return codes == [0] * len(offsets)

    wait_until(committed, 30, f"group {group}'s commit")


def test_coordinator_appends_count_as_messages_in(metered: tuple[BrokerProcess, int]) -> None:
    from confluent_kafka import Producer

    b, port = metered
    with Wire(b.bootstrap) as w:
        assert w.create_topic("txn-in")["error_code"] == 0
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "metrics-txn"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("txn-in", f"r{i}".encode(), partition=0)
    p.commit_transaction(30)
    with Wire(b.bootstrap) as w:
        wait_until(lambda: w.fetch("txn-in", 0)["high_watermark"] == 6, 30,
                   "the commit marker appended")
        _commit(w, "appends", "txn-in", {0: 3})
    samples = scrape(port)

    def messages(topic: str) -> float | None:
        return sample(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic)

    # the 5 records and the COMMIT marker the transaction coordinator wrote (Kafka counts
    # the marker's append as a message in too)
    assert messages("txn-in") == 6
    # one offset commit of one partition: one record appended by the group coordinator
    assert messages("__consumer_offsets") == 1
    assert (sample(samples, "kafka_server_brokertopicmetrics_bytesin_total",
                   topic="__consumer_offsets") or 0) > 0
    assert sample(samples, "kafka_server_brokertopicmetrics_totalproducerequests_total",
                  topic="__consumer_offsets") == 1
    # the transaction's states (Empty at init, Ongoing, PrepareCommit, CompleteCommit)
    assert (messages("__transaction_state") or 0) >= 4
    assert (sample(samples, "kafka_server_brokertopicmetrics_bytesin_total",
                   topic="__transaction_state") or 0) > 0
    in_all = sample(samples, "kafka_server_brokertopicmetrics_messagesin_total")
    assert in_all == sum(v for (name, labels), v in samples.items()
                         if name == "kafka_server_brokertopicmetrics_messagesin_total"
                         and labels)


def test_produce_fetch_totals_and_errors_per_request(
        metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    with Wire(b.bootstrap) as w:
        assert w.create_topic("pf")["error_code"] == 0
        assert w.create_topic("pf-compacted", configs={"cleanup.policy": "compact"}
                              )["error_code"] == 0
        for _ in range(2):
            assert w.produce("pf", batch([b"a", b"b", b"c"]))["error_code"] == 0
        # a partition the topic does not have, and a keyless record on a compacted topic
        assert w.produce("pf", batch([b"x"]), partition=7)["error_code"] == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        keyless = batch([b"no key"])
        assert w.produce("pf-compacted", keyless)["error_code"] == ErrorCode.INVALID_RECORD
        for _ in range(3):
            assert w.fetch("pf", 0)["error_code"] == 0
    samples = scrape(port)

    def topic_metric(name: str, topic: str | None = None) -> float | None:
        full = f"kafka_server_brokertopicmetrics_{name}_total"
        return sample(samples, full) if topic is None else sample(samples, full, topic=topic)

    assert topic_metric("totalproducerequests", "pf") == 2
    assert topic_metric("failedproducerequests", "pf") == 0
    assert topic_metric("totalproducerequests", "pf-compacted") == 1
    assert topic_metric("failedproducerequests", "pf-compacted") == 1
    # all topics: the unknown partition too (not failed: Kafka's appendToLocalLog does not
    # count a partition that is not here), without a series for it
    assert topic_metric("totalproducerequests") == 4
    assert topic_metric("failedproducerequests") == 1
    assert topic_metric("messagesin", "pf") == 6
    assert topic_metric("messagesin", "pf-compacted") is None
    assert topic_metric("totalfetchrequests", "pf") == 3
    assert topic_metric("failedfetchrequests", "pf") == 0
    assert topic_metric("replicationbytesin") == 0
    assert topic_metric("replicationbytesout") == 0
    assert sample(samples, "kafka_server_replicafetchermanager_maxlag", clientid="Replica") == 0

    def errors(request: str, error: str) -> float | None:
        return sample(samples, "kafka_network_requestmetrics_errors_total", request=request,
                      error=error)

    assert errors("Produce", "NONE") == 2
    assert errors("Produce", "UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert errors("Produce", "INVALID_RECORD") == 1
    # a Fetch v12 response has a top-level error code and one per partition: both count
    assert errors("Fetch", "NONE") == 6
    assert errors("CreateTopics", "NONE") == 2


def test_error_counts_follow_the_response_schema() -> None:
    """Error codes are found at every depth of a response, whatever the field's name
    (error_code, partition_error_code, ...), and a body not shaped as its schema is
    skipped, never an error for the request."""
    from kafkactl.broker.metrics import BrokerMetrics

    metrics = BrokerMetrics(0)
    metrics.count_errors(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {"results_by_topic_v3_and_below": [
        {"name": "t", "results_by_partition": [
            {"partition_index": 0, "partition_error_code": ErrorCode.NONE},
            {"partition_index": 1, "partition_error_code": ErrorCode.INVALID_TXN_STATE}]}]})
    assert metrics.errors[ApiKey.ADD_PARTITIONS_TO_TXN] == {
        ErrorCode.NONE: 1, ErrorCode.INVALID_TXN_STATE: 1}
    metrics.count_errors(ApiKey.PRODUCE, 9, {"responses": ["not a dict"]})
    metrics.count_errors(ApiKey.PRODUCE, 9, {"responses": [{"partition_responses": [
        {"index": 0, "error_code": ErrorCode.NONE}]}]})
    assert metrics.errors[ApiKey.PRODUCE] == {ErrorCode.NONE: 1}

