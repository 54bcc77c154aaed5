"""ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3), or by timestamp
(the seed's getOffsetsBefore, answered from the time index). For a consumer (replica_id
-1) latest is the high watermark for isolation_level 0 (read_uncommitted), the last stable
offset for 1 (read_committed); for any other replica_id (a follower, or -2) the log end,
isolation_level ignored (Kafka's isolationLevelOpt None). A lookup by timestamp finds
nothing (-1) at or past that offset, as Kafka's fetchOffsetForTimestamp.

Only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere), except a request from
replica_id -2 (Kafka's DEBUGGING_REPLICA_ID, fetchOnlyFromLeader false): a follower answers
it from its own log (its log start, log end and time index). current_leader_epoch (-1:
none) is checked against the replica's leader epoch as Kafka's checkCurrentLeaderEpoch:
older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH.

As Kafka (3.9) answers a partition before looking it up: INVALID_REQUEST for a partition
named twice in the request (every copy; version 1 and later), UNSUPPORTED_VERSION for a
special timestamp the request's version cannot ask for (MAX_TIMESTAMP needs version 7;
version 0 knows only LATEST and EARLIEST; any other negative timestamp is never supported).

Version 0 is the seed's getOffsetsBefore, answered as Kafka's legacyFetchOffsetsBefore
(_legacy_offsets): a list of up to max_num_offsets offsets, newest first, from the log's
segments (their base offsets and .log files' last-modified times) and its end.
"""

from __future__ import annotations

import time
from typing import Any

from kafkactl.broker.replica_manager import DEBUGGING_CONSUMER_ID
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import unauthorized_topics
from kafkactl.broker.services import BrokerServices
from kafkactl.log.errors import LogError
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch import TimestampType
from kafkactl.record.memory_records import iter_batches

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
CONSUMER_REPLICA_ID = -1
# Kafka's timestampMinSupportedVersion (KafkaApis, 3.9): the first version that may ask for
# each special (negative) timestamp; any other negative one is never supported. Version 0
# knows only LATEST and EARLIEST.
TIMESTAMP_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7}


def _unsupported(ts: int, version: int) -> bool:
    """Kafka's isListOffsetsTimestampUnsupported (UNSUPPORTED_VERSION for the partition)."""
    if version == 0:
        return ts < EARLIEST
    return ts < 0 and version < TIMESTAMP_MIN_VERSION.get(ts, 1 << 15)


def _duplicates(topics: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """The partitions named more than once in the request (Kafka's duplicatePartitions)."""
    seen: set[tuple[str, int]] = set()
    dups: set[tuple[str, int]] = set()
    for t in topics:
        for p in t["partitions"]:
            tp = (t["name"], p["partition_index"])
            (dups if tp in seen else seen).add(tp)
    return dups


def _error(p: dict[str, Any], code: int) -> dict[str, Any]:
    return {"partition_index": p["partition_index"], "error_code": code,
            "old_style_offsets": [], "timestamp": -1, "offset": -1, "leader_epoch": -1}


def _record_with_max_timestamp(log: Any) -> tuple[int, int] | None:
    """KIP-734: the offset of the first record holding the log's max timestamp. The log
    knows the batch (its segments keep a batch's last offset); the record is found in it.
    With LogAppendTime every record of the batch has that timestamp: its first record."""
    found = log.fetch_offset_by_timestamp(MAX_TIMESTAMP)
    if found is None:
        return None
    batch_offset, max_ts = found
    try:
        fs = log.read(batch_offset, 1, min_one_batch=True)  # just the batch holding it
    except LogError:
        return found
    for batch in iter_batches(memoryview(fs.read_bytes())):
        if batch.last_offset < batch_offset:
            continue
        if batch.base_offset > batch_offset:
            break
        log_append = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        for rec in batch:
            if log_append or rec.timestamp == max_ts:
                return (rec.offset, max_ts)
        break
    return found


def _legacy_offsets(log: Any, ts: int, max_num_offsets: int) -> list[int]:
    """Kafka's Log.legacyFetchOffsetsBefore: one (offset, time) pair per segment (its base
    offset, at least the log start; its .log file's last-modified time), then (log end,
    now) when the active segment holds data. LATEST starts from the last pair, EARLIEST
    from the first, a timestamp from the last pair whose time is <= it (none: empty);
    from there back towards the first, at most max_num_offsets offsets, descending."""
    if max_num_offsets < 0:  # Kafka's `new Array[Long](negative)` fails the partition
        raise ValueError(f"max_num_offsets {max_num_offsets} is negative")
    segments = log.segments
    start = log.log_start_offset
    pairs = [(max(seg.base_offset, start), seg.last_modified_ms()) for seg in segments]
    if segments and segments[-1].size > 0:
        pairs.append((log.log_end_offset, int(time.time() * 1000)))
    if ts == LATEST:
        index = len(pairs) - 1
    elif ts == EARLIEST:
        index = 0
    else:
        index = len(pairs) - 1
        while index >= 0 and pairs[index][1] > ts:
            index -= 1
    count = min(max_num_offsets, index + 1)
    return sorted((pairs[index - j][0] for j in range(count)), reverse=True)


def _lookup_v0(services: BrokerServices, topic: str, p: dict[str, Any],
               consumer: bool, leader_only: bool) -> dict[str, Any]:
    """One partition's v0 answer (Kafka's legacyFetchOffsetsForTimestamp): for a consumer
    (replica_id -1) offsets past the high watermark are replaced by the high watermark."""
    out: dict[str, Any] = {"partition_index": p["partition_index"],
                           "error_code": ErrorCode.NONE, "old_style_offsets": [],
                           "timestamp": -1, "offset": -1, "leader_epoch": -1}
    part, code = services.replica_manager.local_partition(topic, p["partition_index"],
                                                          leader_only=leader_only)
    if part is None:
        out["error_code"] = code
        return out
    try:
        offsets = _legacy_offsets(part.log, p["timestamp"], p.get("max_num_offsets", 1))
    except ValueError:
        out["error_code"] = ErrorCode.UNKNOWN_SERVER_ERROR
        return out
    if consumer:
        hw = part.high_watermark
        if any(o > hw for o in offsets):
            offsets = [hw] + [o for o in offsets if o <= hw]
    out["old_style_offsets"] = offsets
    return out


def _lookup(services: BrokerServices, topic: str, p: dict[str, Any], *, client: bool,
            leader_only: bool, read_committed: bool = False) -> dict[str, Any]:
    """One partition's answer; a client (replica_id -1) may see offsets up to the high
    watermark (the last stable offset with read_committed), any other replica_id up to
    the log end (Kafka's lastFetchableOffset)."""
    part, code = services.replica_manager.local_partition(topic, p["partition_index"],
                                                          leader_only=leader_only)
    out: dict[str, Any] = {"partition_index": p["partition_index"], "timestamp": -1,
                           "offset": -1, "old_style_offsets": [], "leader_epoch": -1}
    if part is None:
        out["error_code"] = code
        return out
    current_epoch = p.get("current_leader_epoch", -1)
    if current_epoch != -1 and current_epoch != part.leader_epoch:
        out["error_code"] = ErrorCode.FENCED_LEADER_EPOCH \
            if current_epoch < part.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH
        return out
    last_fetchable = (part.last_stable_offset if read_committed else part.high_watermark) \
        if client else part.log_end_offset
    ts = p["timestamp"]
    found: tuple[int, int] | None
    if ts == LATEST:
        found = (last_fetchable, -1)
    elif ts == EARLIEST:
        found = (part.log_start_offset, -1)
    elif ts == MAX_TIMESTAMP:
        found = _record_with_max_timestamp(part.log)
    else:  # a timestamp (other negative ones are refused by _unsupported)
        found = part.log.fetch_offset_by_timestamp(ts)
        if found is not None and found[0] < part.log_start_offset:
            found = (part.log_start_offset, found[1])
    out["error_code"] = ErrorCode.NONE
    if found is not None and ts not in (LATEST, EARLIEST) and found[0] >= last_fetchable:
        found = None  # not fetchable yet (Kafka's lastFetchableOffset)
    if found is not None:
        out["offset"], out["timestamp"] = found
        out["old_style_offsets"] = [found[0]]
        # latest: the leader's epoch; a record's offset (earliest, by time, max timestamp):
        # the epoch that wrote it, as Kafka's (a client checks its position against it)
        out["leader_epoch"] = part.leader_epoch if ts == LATEST \
            else part.epochs.epoch_for_offset(found[0])
    return out


def handle_list_offsets(services: BrokerServices, ctx: RequestContext,
                        request: dict[str, Any]) -> dict[str, Any]:
    topics = []
    replica_id = request.get("replica_id", CONSUMER_REPLICA_ID)
    client = replica_id == CONSUMER_REPLICA_ID  # else no isolation level applies
    leader_only = replica_id != DEBUGGING_CONSUMER_ID  # Kafka's fetchOnlyFromLeader
    read_committed = client and request.get("isolation_level", 0) == 1
    version = ctx.api_version
    refused = unauthorized_topics(services, ctx, AclOperation.DESCRIBE,
                                  (t["name"] for t in request["topics"]))
    # as Kafka: version 0 has no check of repeated partitions, each is answered
    duplicates = _duplicates(request["topics"]) if version > 0 else set()
    for t in request["topics"]:
        if t["name"] in refused:  # Describe on the topic, as Kafka checks
            topics.append({"name": t["name"], "partitions": [
                _error(p, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t["partitions"]]})
            continue
        partitions = []
        for p in t["partitions"]:
            if (t["name"], p["partition_index"]) in duplicates:
                partitions.append(_error(p, ErrorCode.INVALID_REQUEST))
            elif _unsupported(p["timestamp"], version):
                partitions.append(_error(p, ErrorCode.UNSUPPORTED_VERSION))
            elif version == 0:
                partitions.append(_lookup_v0(services, t["name"], p, client, leader_only))
            else:
                partitions.append(_lookup(services, t["name"], p, client=client,
                                          leader_only=leader_only,
                                          read_committed=read_committed))
        topics.append({"name": t["name"], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
