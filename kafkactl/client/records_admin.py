"""Deleting records through the Kafka protocol: DeleteRecords (API key 21), as Kafka's
Admin.deleteRecords sends it, and the offset JSON file of kafka-delete-records.sh.

DeleteRecords moves a partition's log start offset up to the offset asked (-1: the high
watermark); the records below it are gone for every consumer. Only the partition's leader
takes it, so the partitions are sent to their leaders, one request per leader, all at
once; a partition answered with stale-leader metadata (NOT_LEADER_OR_FOLLOWER, ...) or
whose leader cannot be reached is sent again after a metadata refresh, and other
retriable answers are tried again, until the timeout (Kafka's DeleteRecordsHandler with
its PartitionLeaderStrategy). Every other answer is the partition's result."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkactl.client.errors import (
    STALE_LEADER,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnknownTopicError,
)
from kafkactl.client.kafka_client import MISSING_ATTEMPTS, KafkaClient
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import RETRIABLE_CODES, ErrorCode, error_for, error_name

TopicPartition = tuple[str, int]

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK: delete up to the high watermark
OFFSET_FILE_VERSION = 1  # the only version of kafka-delete-records' --offset-json-file


class OffsetFileError(ValueError):
    """An offset JSON file kafka-delete-records would refuse, with Kafka's reason."""


@dataclass(frozen=True)
class DeletedRecords:
    """One partition's result: its low watermark (the smallest log start offset of its
    replicas) once the records are deleted, or the error and why: the broker that
    answered it (`broker`), or -1 when no broker did (the metadata, the timeout)."""

    low_watermark: int = -1
    error: ErrorCode | None = None
    reason: str = ""
    broker: int = -1


# ---- kafka-delete-records' --offset-json-file -----------------------------------------------

def parse_offset_json(text: str) -> dict[TopicPartition, int]:
    """`{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}` ->
    partition -> offset (-1: the high watermark). OffsetFileError, as Kafka's tool says
    it, for anything else, including a partition named twice."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise OffsetFileError("The input string is not a valid JSON") from None
    if not isinstance(doc, dict):
        raise OffsetFileError('expected a JSON object {"partitions": [...], "version": 1}')
    version = doc.get("version", OFFSET_FILE_VERSION)
    if version != OFFSET_FILE_VERSION or isinstance(version, bool):
        raise OffsetFileError(f"Not supported version field value {json.dumps(version)}")
    if "partitions" not in doc:
        raise OffsetFileError("Missing partitions field")
    rows = doc["partitions"]
    if not isinstance(rows, list):
        raise OffsetFileError('"partitions" must be a list')
    out: dict[TopicPartition, int] = {}
    duplicates: list[str] = []
    for i, row in enumerate(rows):
        tp, offset = _offset_row(i, row)
        if tp in out and f"{tp[0]}-{tp[1]}" not in duplicates:
            duplicates.append(f"{tp[0]}-{tp[1]}")
        out.setdefault(tp, offset)
    if duplicates:
        raise OffsetFileError("Offset json file contains duplicate topic partitions: "
                              + ",".join(duplicates))
    return out


def _offset_row(i: int, row: Any) -> tuple[TopicPartition, int]:
    where = f"partitions[{i}]"
    if not isinstance(row, dict):
        raise OffsetFileError(f'{where} must be an object {{"topic": ..., "partition": ..., '
                              '"offset": ...}')
    for key, kind in (("topic", str), ("partition", int), ("offset", int)):
        if key not in row:
            raise OffsetFileError(f"{where}: No such field exists: `{key}`")
        if not isinstance(row[key], kind) or isinstance(row[key], bool):
            raise OffsetFileError(f"{where}: {key} must be "
                                  + ("a string" if kind is str else "an integer")
                                  + f", not {json.dumps(row[key])}")
    topic, partition, offset = row["topic"], row["partition"], row["offset"]
    if not 0 <= partition < 2**31:
        raise OffsetFileError(f"{where}: partition {partition} is not a partition number")
    if not HIGH_WATERMARK <= offset < 2**63:
        raise OffsetFileError(f"{where}: offset {offset} of {topic}-{partition} is not an "
                              "offset (give one >= 0, or -1 for the high watermark)")
    return (topic, partition), offset


# ---- the request ----------------------------------------------------------------------------

def topic_partitions(client: KafkaClient, topic: str) -> list[int]:
    """The partitions of `topic`; UnknownTopicError when it does not exist, a
    TopicAuthorizationFailedError when the principal may not describe it."""
    try:
        cluster = client.ensure_topics([topic], allow_auto_create=False)
    except UnknownTopicError:
        t = client.cluster.topics.get(topic)
        if t is not None and t.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            raise error_for(ErrorCode.TOPIC_AUTHORIZATION_FAILED)(
                f"topic {topic!r}: TOPIC_AUTHORIZATION_FAILED: this principal may not "
                "describe the topic") from None
        raise
    return sorted(cluster.topics[topic].partitions)


def delete_records(client: KafkaClient, before: Mapping[TopicPartition, int], *,
                   timeout_s: float | None = None) -> dict[TopicPartition, DeletedRecords]:
    """Delete the records of each partition below its offset in `before` (HIGH_WATERMARK:
    below the high watermark): each partition's DeletedRecords, in partition order. The
    whole takes at most `timeout_s` (default: the client's request timeout); a partition
    still being retried then gets its last error. Raises only when no metadata can be
    had (NoBrokersAvailable, KafkaTimeoutError)."""
    total = client.request_timeout if timeout_s is None else timeout_s
    deadline = time.monotonic() + total
    # what the brokers may take (the request's timeout_ms), so that their answer arrives
    # before this client gives up on the connection
    margin = min(5.0, total / 5)
    todo = dict(before)
    done: dict[TopicPartition, DeletedRecords] = {}
    last: dict[TopicPartition, DeletedRecords] = {}  # the retriable answer seen last
    unknown_rounds: dict[TopicPartition, int] = {}
    while todo:
        client.refresh_metadata(sorted({t for t, _ in todo}),
                                timeout=max(0.1, deadline - time.monotonic()))
        by_leader = _route(client, todo, done, last, unknown_rounds)
        timeout_ms = int((deadline - time.monotonic() - margin) * 1000)
        if by_leader and timeout_ms > 0:
            _send(client, by_leader, todo, timeout_ms, done, last)
        for tp in done:
            todo.pop(tp, None)
        if todo and time.monotonic() + client.retry_backoff + margin >= deadline:
            for tp in todo:
                done[tp] = last.get(tp) or DeletedRecords(
                    error=ErrorCode.REQUEST_TIMED_OUT, reason=f"no answer within {total:g} s")
            break
        if todo:
            time.sleep(client.retry_backoff)
    return dict(sorted(done.items()))


def _route(client: KafkaClient, todo: Mapping[TopicPartition, int],
           done: dict[TopicPartition, DeletedRecords],
           last: dict[TopicPartition, DeletedRecords],
           unknown_rounds: dict[TopicPartition, int]) -> dict[int, list[TopicPartition]]:
    """The partitions of `todo` by leader, per the metadata just fetched; those the
    metadata refuses go to `done` (a topic or partition said MISSING_ATTEMPTS times not
    to exist, a topic the principal may not describe), those without a leader wait."""
    cluster = client.cluster
    out: dict[int, list[TopicPartition]] = {}
    for tp in todo:
        topic, partition = tp
        t = cluster.topics.get(topic)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if t is None else t.error_code
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or (
                t is not None and not code and partition not in t.partitions):
            why = (f"topic {topic!r} does not exist" if code else
                   f"topic {topic!r} has no partition {partition} (it has "
                   f"{len(t.partitions) if t is not None else 0})")
            unknown_rounds[tp] = n = unknown_rounds.get(tp, 0) + 1
            result = DeletedRecords(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, reason=why)
            if n >= MISSING_ATTEMPTS:
                done[tp] = result
            else:
                last[tp] = result
        elif code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            done[tp] = DeletedRecords(error=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      reason="this principal may not describe topic "
                                             f"{topic!r}")
        elif code and code not in RETRIABLE_CODES:
            done[tp] = DeletedRecords(error=_code(code), reason="the metadata answered "
                                      f"{error_name(code)} for topic {topic!r}")
        elif code or cluster.leader_for(topic, partition) < 0:
            last[tp] = DeletedRecords(error=ErrorCode.LEADER_NOT_AVAILABLE,
                                      reason="the partition has no leader")
        else:
            out.setdefault(cluster.leader_for(topic, partition), []).append(tp)
    return out


def _send(client: KafkaClient, by_leader: Mapping[int, list[TopicPartition]],
          todo: Mapping[TopicPartition, int], timeout_ms: int,
          done: dict[TopicPartition, DeletedRecords],
          last: dict[TopicPartition, DeletedRecords]) -> None:
    """One DeleteRecords to each leader for its partitions, all sent before any answer is
    waited for; each answer goes to `done` (a result) or `last` (to be retried)."""
    pending = []
    for node, tps in by_leader.items():
        by_topic: dict[str, list[dict[str, int]]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append({"partition_index": p, "offset": todo[(t, p)]})
        body = {"topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                "timeout_ms": timeout_ms}
        try:
            conn = client.connection(node)
            pending.append((node, tps, conn, conn.send(ApiKey.DELETE_RECORDS, body)))
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            _unreachable(client, node, tps, e, last)
    for node, tps, conn, req in pending:
        try:
            resp = conn.wait(req, timeout_ms / 1000 + client.request_timeout)
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            _unreachable(client, node, tps, e, last)
            continue
        rows = {(t["name"], p["partition_index"]): p for t in resp.get("topics") or ()
                for p in t.get("partitions") or ()}
        for tp in tps:
            row = rows.get(tp)
            if row is None:  # Kafka's sanity check of the answer
                done[tp] = DeletedRecords(error=ErrorCode.UNKNOWN_SERVER_ERROR, broker=node,
                                          reason=f"broker {node} did not answer for it")
                continue
            code = row["error_code"]
            if not code:
                done[tp] = DeletedRecords(low_watermark=row["low_watermark"])
                continue
            result = DeletedRecords(error=_code(code), broker=node,
                                    reason=f"broker {node} answered {error_name(code)}")
            if code in STALE_LEADER:
                client.cluster.invalidate(*tp)
                last[tp] = result
            elif code in RETRIABLE_CODES:
                last[tp] = result
            else:
                done[tp] = result


def _unreachable(client: KafkaClient, node: int, tps: list[TopicPartition],
                 e: Exception, last: dict[TopicPartition, DeletedRecords]) -> None:
    client.drop_connection(node)
    client.cluster.invalidate_node(node)
    for tp in tps:
        last[tp] = DeletedRecords(error=ErrorCode.NETWORK_EXCEPTION,
                                  reason=f"its leader, broker {node}, cannot be reached ({e})")


def _code(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
