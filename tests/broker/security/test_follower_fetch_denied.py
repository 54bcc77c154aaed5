"""A Fetch with a replica id (a follower's) from a principal without ClusterAction is
refused per partition with TOPIC_AUTHORIZATION_FAILED, as Kafka's KafkaApis answers it (it
said CLUSTER_AUTHORIZATION_FAILED); no record is served. Real broker, ACL authorizer, a
SASL_PLAINTEXT client as bob (a PLAIN user, not a super user)."""

from __future__ import annotations

from pathlib import Path

from kafkactl.client.connection import BrokerConnection
from kafkactl.client.security import ClientSecurity
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests import zygote
from tests.broker.security.certs import Certs
from tests.broker.security.conftest import ACL_AUTHORIZER, PASSWORDS, start_secure


def test_a_follower_fetch_without_cluster_action(tmp_path: Path, certs: Certs) -> None:
    sb = start_secure(tmp_path, certs, **ACL_AUTHORIZER)
    try:
        plain = ["-b", sb.bootstrap("PLAINTEXT")]
        assert zygote.run(["produce", "-t", "t", "-q", *plain], input="a\nb\n", text=True,
                          timeout=60).returncode == 0
        host, port = sb.bootstrap("SASL_PLAINTEXT").rsplit(":", 1)
        security = ClientSecurity.from_properties({
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "bob", "sasl.password": PASSWORDS["bob"]})
        conn = BrokerConnection(host, int(port), security=security)
        conn.connect()
        try:
            resp = conn.request(ApiKey.FETCH, {
                "replica_id": 1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": "t", "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                    "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": 1 << 20}]}]}, version=12)
        finally:
            conn.close()
        part = resp["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED, part
        assert not part.get("records"), part
    finally:
        sb.broker.kill()
