"""Bad group/offset requests get Kafka's error codes and the broker keeps serving."""

from __future__ import annotations

from typing import Any

from kafkactl.client.connection import BrokerConnection
from kafkactl.client.group import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.data import SUBSCRIPTION, encode_data
from kafkactl.protocol.errors import ErrorCode as E
from tests.groups.helpers import FAST, create_topic, find_coordinator


def _conn(bootstrap: str) -> BrokerConnection:
    host, port = bootstrap.rsplit(":", 1)
    c = BrokerConnection(host, int(port))
    c.connect()
    return c


def _join(c: BrokerConnection, group: str, member: str = "", version: int = 5,
          session: int = 10000) -> dict[str, Any]:
    meta = encode_data(SUBSCRIPTION, 0, {"topics": ["bad"], "user_data": None})
    return c.request(ApiKey.JOIN_GROUP, {
        "group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": 10000,
        "member_id": member, "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": meta}]}, version=version)


def _commit(c: BrokerConnection, group: str, gen: int, member: str, topic: str = "bad",
            partition: int = 0, metadata: str = "") -> int:
    r = c.request(ApiKey.OFFSET_COMMIT, {
        "group_id": group, "generation_id_or_member_epoch": gen, "member_id": member,
        "group_instance_id": None, "retention_time_ms": -1, "topics": [{
            "name": topic, "partitions": [{"partition_index": partition,
                                           "committed_offset": 5,
                                           "committed_leader_epoch": -1,
                                           "commit_timestamp": -1,
                                           "committed_metadata": metadata}]}]})
    return int(r["topics"][0]["partitions"][0]["error_code"])


def test_group_bad_input_error_codes(broker_factory: Any) -> None:
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "bad", 2)
    c = _conn(b.bootstrap)
    find_coordinator(c, "g")
    # KIP-394: v4+ joins get an id first
    r = _join(c, "g")
    assert r["error_code"] == E.MEMBER_ID_REQUIRED and r["member_id"]
    r = _join(c, "g", r["member_id"])
    assert r["error_code"] == E.NONE and r["leader"] == r["member_id"]
    member, gen = r["member_id"], r["generation_id"]
    assert _join(c, "g", "nobody")["error_code"] == E.UNKNOWN_MEMBER_ID
    assert _join(c, "g2", session=10)["error_code"] == E.INVALID_SESSION_TIMEOUT
    assert _join(c, "")["error_code"] == E.INVALID_GROUP_ID
    sync = {"group_id": "g", "generation_id": gen + 7, "member_id": member,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": []}
    assert c.request(ApiKey.SYNC_GROUP, sync)["error_code"] == E.ILLEGAL_GENERATION
    sync["generation_id"] = gen
    sync["protocol_name"] = "roundrobin"
    assert c.request(ApiKey.SYNC_GROUP, sync)["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    sync["protocol_name"] = "range"
    assert c.request(ApiKey.SYNC_GROUP, sync)["error_code"] == E.NONE
    hb = {"group_id": "g", "generation_id": gen - 1, "member_id": member,
          "group_instance_id": None}
    assert c.request(ApiKey.HEARTBEAT, hb)["error_code"] == E.ILLEGAL_GENERATION
    hb.update(generation_id=gen, member_id="ghost")
    assert c.request(ApiKey.HEARTBEAT, hb)["error_code"] == E.UNKNOWN_MEMBER_ID
    # commits: stale generation, unknown member, unknown topic/partition, huge metadata
    assert _commit(c, "g", gen - 1, member) == E.ILLEGAL_GENERATION
    assert _commit(c, "g", gen, "ghost") == E.UNKNOWN_MEMBER_ID
    assert _commit(c, "g", gen, member, topic="no-such-topic") == E.UNKNOWN_TOPIC_OR_PARTITION
    assert _commit(c, "g", gen, member, partition=99) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert _commit(c, "g", gen, member, metadata="m" * 5000) == E.OFFSET_METADATA_TOO_LARGE
    assert _commit(c, "g", gen, member) == E.NONE
    assert _commit(c, "g", -1, "") == E.UNKNOWN_MEMBER_ID  # simple commit, live group
    assert _commit(c, "fresh", 3, "x") == E.ILLEGAL_GENERATION  # no such group
    assert _commit(c, "simple", -1, "") == E.NONE  # kcat/legacy: no member needed
    # deleting a live group is refused; offsets of a subscribed topic too
    r = c.request(ApiKey.DELETE_GROUPS, {"groups_names": ["g", "missing"]})
    assert [x["error_code"] for x in r["results"]] == [E.NON_EMPTY_GROUP, E.GROUP_ID_NOT_FOUND]
    r = c.request(ApiKey.OFFSET_DELETE, {"group_id": "g", "topics": [
        {"name": "bad", "partitions": [{"partition_index": 0}]}]})
    assert r["topics"][0]["partitions"][0]["error_code"] == E.GROUP_SUBSCRIBED_TO_TOPIC
    leave = {"group_id": "g", "member_id": member,
             "members": [{"member_id": member, "group_instance_id": None}]}
    assert c.request(ApiKey.LEAVE_GROUP, leave)["error_code"] == E.NONE
    r = c.request(ApiKey.LEAVE_GROUP, leave)
    assert r["members"][0]["error_code"] == E.UNKNOWN_MEMBER_ID
    c.close()
    # the broker still answers, and the group's committed offset is there
    client = KafkaClient(b.bootstrap)
    admin = GroupAdmin(client)
    assert admin.fetch_offsets("g") == {("bad", 0): 5}
    assert admin.describe_group("g").state == "Empty"
    admin.delete_group("g")
    assert admin.fetch_offsets("g") == {}
    admin.close()
    client.close()
