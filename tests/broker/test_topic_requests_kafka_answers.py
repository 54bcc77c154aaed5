"""CreateTopics, CreatePartitions and DeleteTopics on a real standalone broker, answered as
Kafka's KafkaApis and ZkAdminManager answer them: a timeout_ms of 0 means "do not wait"
(the work is done, each entry that succeeded says REQUEST_TIMED_OUT), a validate_only
CreateTopics has no topic id (the zero UUID), and a topic named twice in one request is
INVALID_REQUEST (CreateTopics: every entry of it, nothing created; CreatePartitions: one
result for it)."""

from __future__ import annotations

import socket
import struct
import uuid
from typing import Any

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess

ZERO_UUID = uuid.UUID(int=0)


def _request(broker: BrokerProcess, api: ApiKey, version: int, body: dict[str, Any]
             ) -> dict[str, Any]:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as s:
        s.sendall(codec.encode_request(api, version, 1, "kafka-answers", body))
        head = b""
        while len(head) < 4:
            head += s.recv(4 - len(head))
        (size,) = struct.unpack(">i", head)
        data = b""
        while len(data) < size:
            chunk = s.recv(size - len(data))
            assert chunk, "connection closed"
            data += chunk
        return codec.decode_response(api, version, data)


def _create(broker: BrokerProcess, names: list[str], *, timeout_ms: int = 10000,
            validate_only: bool = False, version: int = 5) -> list[dict[str, Any]]:
    topics: list[dict[str, Any]] = [
        {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []} for n in names]
    return list(_request(broker, ApiKey.CREATE_TOPICS, version, {
        "topics": topics, "timeout_ms": timeout_ms, "validate_only": validate_only})["topics"])


def _grow(broker: BrokerProcess, counts: list[tuple[str, int]], *, timeout_ms: int = 10000
          ) -> list[dict[str, Any]]:
    return list(_request(broker, ApiKey.CREATE_PARTITIONS, 2, {
        "topics": [{"name": n, "count": c, "assignments": None} for n, c in counts],
        "timeout_ms": timeout_ms, "validate_only": False})["results"])


def _partitions(broker: BrokerProcess, name: str) -> int | None:
    """The topic's partition count in the broker's metadata (None: no such topic)."""
    md = _request(broker, ApiKey.METADATA, 9, {
        "topics": [{"name": name}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    topic = md["topics"][0]
    return None if topic["error_code"] else len(topic["partitions"])


def test_timeout_zero_answers_request_timed_out_and_does_the_work(broker: BrokerProcess
                                                                   ) -> None:
    created = _create(broker, ["t0"], timeout_ms=0)
    assert [(t["name"], t["error_code"]) for t in created] == \
        [("t0", ErrorCode.REQUEST_TIMED_OUT)]
    assert (created[0]["num_partitions"], created[0]["replication_factor"]) == (-1, -1)
    assert _partitions(broker, "t0") == 1

    grown = _grow(broker, [("t0", 2)], timeout_ms=0)
    assert [(r["name"], r["error_code"]) for r in grown] == \
        [("t0", ErrorCode.REQUEST_TIMED_OUT)]
    assert _partitions(broker, "t0") == 2

    deleted = _request(broker, ApiKey.DELETE_TOPICS, 4,
                       {"topic_names": ["t0"], "timeout_ms": 0})["responses"]
    assert [(r["name"], r["error_code"]) for r in deleted] == \
        [("t0", ErrorCode.REQUEST_TIMED_OUT)]
    assert _partitions(broker, "t0") is None

    # a refused entry keeps its own error
    assert [t["error_code"] for t in _create(broker, ["bad name"], timeout_ms=0)] == \
        [ErrorCode.INVALID_TOPIC_EXCEPTION]


def test_validate_only_has_no_topic_id(broker: BrokerProcess) -> None:
    checked = _create(broker, ["v7"], validate_only=True, version=7)
    assert [(t["name"], t["error_code"], t["topic_id"]) for t in checked] == \
        [("v7", ErrorCode.NONE, ZERO_UUID)]
    assert _partitions(broker, "v7") is None
    made = _create(broker, ["v7"], version=7)
    assert made[0]["error_code"] == ErrorCode.NONE and made[0]["topic_id"] != ZERO_UUID


def test_a_topic_named_twice_is_an_invalid_request(broker: BrokerProcess) -> None:
    created = _create(broker, ["twice", "once", "twice"])
    assert [(t["name"], t["error_code"]) for t in created] == [
        ("twice", ErrorCode.INVALID_REQUEST), ("once", ErrorCode.NONE),
        ("twice", ErrorCode.INVALID_REQUEST)]
    assert created[0]["error_message"] == "Found multiple entries for this topic."
    assert _partitions(broker, "twice") is None
    assert _partitions(broker, "once") == 1

    grown = _grow(broker, [("once", 2), ("once", 3)])
    assert [(r["name"], r["error_code"], r["error_message"]) for r in grown] == \
        [("once", ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")]
    assert _partitions(broker, "once") == 1
