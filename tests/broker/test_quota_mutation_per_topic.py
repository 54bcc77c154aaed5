"""(Applies with the handlers/topics.py patch: per-topic strict controller_mutation_rate.)"""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests.broker.test_quota_enforcement import (
    THROTTLING_QUOTA_EXCEEDED,
    WINDOWS,
    Client,
    _create,
    kafkactl,
)


def test_a_strict_request_refuses_its_topics_after_the_one_that_exhausts(
        broker_factory: Any) -> None:
    """Kafka's ZkAdminManager records each topic in turn: in one CreateTopics v6, the topic
    that empties the bucket is made, the ones after it are refused (89), not made; the
    request is not throttled for the one made, it is for the refusal."""
    b = broker_factory(**WINDOWS)
    kafkactl("quotas", "add", "--client-default", "-c", "controller_mutation_rate=1",
             "-b", b.bootstrap)
    with Client(b.bootstrap, "one") as c:
        resp = _create(c, 6, ("pt-a", 30), ("pt-b", 1), ("pt-c", 1))
    codes = [(r["name"], r["error_code"]) for r in resp["topics"]]
    assert codes == [("pt-a", 0), ("pt-b", THROTTLING_QUOTA_EXCEEDED),
                     ("pt-c", THROTTLING_QUOTA_EXCEEDED)], resp
    assert resp["throttle_time_ms"] > 10_000
    with Client(b.bootstrap, "one") as c:  # validate_only is never refused nor counted
        checked = c.request(ApiKey.CREATE_TOPICS, 6, {
            "topics": [{"name": "pt-d", "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": 30000, "validate_only": True})
    assert checked["topics"][0]["error_code"] == 0, checked
