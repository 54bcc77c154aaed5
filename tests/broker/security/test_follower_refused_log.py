"""A follower whose requests the leader refuses says so in its log, as Kafka's
AbstractFetcherThread does ("Retrying leaderEpoch request for partition ... as the leader
reported an error: ...", "Error for partition ... at offset ..."), once per kind (topic and
error) and then a count a minute, not a line per retry. Before, it logged nothing at all
(the T4 finding: a broker not in the others' super.users never joined an ISR, silently).

A real leader broker with Kafka's ACL authorizer; an in-process ReplicaFetcher follows its
partitions over SASL_PLAINTEXT as bob (PLAIN, not a super user): first bob may not Describe
the topic (OffsetForLeaderEpoch answered TOPIC_AUTHORIZATION_FAILED), then he may, but has no
ClusterAction (its follower Fetch answered TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from kafkactl.broker.metadata_cache import BrokerEndpoint
from kafkactl.broker.partition import Partition
from kafkactl.broker.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.cluster.broker_connection import InterBrokerSecurity
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.protocol.api_keys import ApiKey
from tests.broker.security.certs import Certs
from tests.broker.security.conftest import ACL_AUTHORIZER, PASSWORDS, start_secure
from tests.broker.wire import Wire

LEADER_ID, LOCAL_ID = 0, 99
TOPIC = "refused"
TOPIC_TYPE, LITERAL, DESCRIBE, ALLOW = 2, 3, 8, 3
ROUNDS = 4  # refusals the leader audits before the follower's log is looked at


async def _until(cond: Any, timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    """The follower's lines about `text`, not counting the minute's summaries."""
    return [r for r in caplog.records if r.name == "kafkactl.broker.replica_fetcher"
            and text in r.getMessage() and "more partition errors" not in r.getMessage()]


def test_a_refused_follower_says_why_once(tmp_path: Path, certs: Certs,
                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kafkactl.broker.replica_fetcher")
    sb = start_secure(tmp_path / "leader", certs, **ACL_AUTHORIZER)
    try:
        with Wire(sb.bootstrap("PLAINTEXT")) as w:
            assert w.create_topic(TOPIC, partitions=2)["error_code"] == 0

        def denied(request: str) -> int:
            return sum(1 for x in sb.broker.log().splitlines()
                       if "Principal = User:bob is Denied" in x and
                       f"for request = {request}" in x)

        async def scenario() -> None:
            host, port = sb.bootstrap("SASL_PLAINTEXT").rsplit(":", 1)
            cache = ZkMetadataCache("test", BrokerEndpoint(LOCAL_ID, "127.0.0.1", 1))
            cache.apply_update_metadata({"controller_id": -1, "live_brokers": [
                {"id": LEADER_ID, "endpoints": [
                    {"listener": "SASL_PLAINTEXT", "host": host, "port": int(port)}]}]})
            security = InterBrokerSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAIN",
                                           "bob", PASSWORDS["bob"], None)
            manager = ReplicaFetcherManager(LOCAL_ID, cache, FetcherSettings(
                max_wait_ms=100, backoff_ms=20), security)
            for p in range(2):
                part = Partition(TOPIC, p, Log(tmp_path / f"{TOPIC}-{p}", LogConfig()))
                part.become_follower(LOCAL_ID, LEADER_ID, 0, [LEADER_ID, LOCAL_ID],
                                     [LEADER_ID, LOCAL_ID], 0)
                manager.follow(part)
            try:
                # 1. bob may not Describe the topic: OffsetForLeaderEpoch refused
                await _until(lambda: denied("OffsetForLeaderEpoch") >= ROUNDS, 60,
                             "the leader refusing the leader epoch requests")
                warned = _lines(caplog, "retrying the leader epoch request")
                assert len(warned) == 1, [r.getMessage() for r in warned]
                assert warned[0].levelno == logging.WARNING
                assert f"partition {TOPIC}-" in warned[0].getMessage()
                assert "TOPIC_AUTHORIZATION_FAILED" in warned[0].getMessage()
                # 2. he may now, but a follower's Fetch needs ClusterAction
                with Wire(sb.bootstrap("PLAINTEXT")) as w:
                    r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [{
                        "resource_type": TOPIC_TYPE, "resource_name": TOPIC,
                        "resource_pattern_type": LITERAL, "principal": "User:bob",
                        "host": "*", "operation": DESCRIBE, "permission_type": ALLOW}]})
                    assert r["results"][0]["error_code"] == 0, r
                await _until(lambda: denied("Fetch") >= ROUNDS, 60,
                             "the leader refusing the follower's fetches")
                errors = _lines(caplog, "error for partition")
                assert len(errors) == 1, [r.getMessage() for r in errors]
                assert errors[0].levelno == logging.ERROR
                assert f"error for partition {TOPIC}-" in errors[0].getMessage()
                assert "at offset 0" in errors[0].getMessage()
                assert "the leader (broker 0) answered TOPIC_AUTHORIZATION_FAILED" in \
                    errors[0].getMessage()
            finally:
                manager.shutdown()

        asyncio.run(scenario())
    finally:
        sb.broker.kill()
