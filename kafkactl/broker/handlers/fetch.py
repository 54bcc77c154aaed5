"""Fetch (key 1): zero-copy reads of many partitions, long poll, sessionless.

Records go out as FileRegions (the network layer sendfile()s them). A fetch starting inside a
batch returns that whole batch (clients skip the earlier records). `max_bytes` bounds the
response and `partition_max_bytes` each partition, except that from v3 the first batch of
the first non-empty partition is always returned whole (KIP-74) so a big batch cannot stall
a consumer; a later partition whose first batch does not fit gets an empty record set
(Kafka's firstEntryIncomplete), to be fetched whole when it comes first. v0-v2 (before
KIP-74: Kafka's hardMaxBytesLimit, minOneMessage false) never exceed the limits: a first
batch that does not fit, in the first partition or a later one, is sent as the bytes of it
that fit, unconverted (Kafka's FileRecords.downConvert returns them as they are when no
whole batch converts): the client reads an incomplete message and reports it too large.
If fewer than `min_bytes` are available, the request waits in the purgatory until appends
bring enough or `max_wait_ms` passes. Fetch v0-3 (magic 0/1 clients) get down-converted
bytes. Fetch sessions are not kept: every answer has session_id 0 (full fetches). Below
v10 a zstd topic or batch gets UNSUPPORTED_COMPRESSION_TYPE for that partition, as in Kafka.
With an authorizer a consumer needs Read on each topic (TOPIC_AUTHORIZATION_FAILED per
partition otherwise) and a follower (replica_id >= 0) ClusterAction on the cluster. A follower's
throttled partition gets no records while the leader's replication quota is exceeded
(kafkactl/broker/replication_quota.py); the fetch still tells where the follower is. A
consumer with a consumer_byte_rate fetches at most what its quota windows let through, and
over its quota gets an answer with no partitions and the throttle time, as in Kafka.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable
from typing import Any

from kafkactl.broker.metrics import count_fetched
from kafkactl.broker.purgatory import DelayedFetch
from kafkactl.broker.request_handler import RequestContext
from kafkactl.broker.security.acl import AclOperation
from kafkactl.broker.security.checks import authorize_cluster, unauthorized_topics
from kafkactl.broker.services import BrokerServices
from kafkactl.protocol.errors import ErrorCode
from kafkactl.protocol.types import FileRegion
from kafkactl.record.codecs import Compression
from kafkactl.record.errors import RecordError

log = logging.getLogger(__name__)

FETCH_SESSION_ID_NOT_FOUND = 70
ZSTD_MIN_FETCH_VERSION = 10  # KIP-110: older fetchers cannot decode zstd
# v2 header up to attributes: baseOffset 8, length 4, epoch 4, magic 1, crc 4, attributes 2
_ATTRIBUTES_END = 23


def _read_all(services: BrokerServices, ctx: RequestContext, request: dict[str, Any]
              ) -> tuple[list[dict[str, Any]], int, bool]:
    rm = services.replica_manager
    version = ctx.api_version
    remaining = request.get("max_bytes", 0x7FFFFFFF)
    if remaining <= 0:
        remaining = 0x7FFFFFFF
    remaining = min(remaining, _max_bytes(services, ctx, request))
    read_committed = request.get("isolation_level", 0) == 1
    replica_id = request.get("replica_id", -1)
    hard_limit = version <= 2  # Kafka's hardMaxBytesLimit: no KIP-74 first batch
    total = 0
    errors = False
    topics = []
    names = [t["topic"] for t in request["topics"]]
    # a follower needs ClusterAction, a consumer Read on each topic; either way what is
    # refused is answered TOPIC_AUTHORIZATION_FAILED per partition (Kafka's KafkaApis)
    denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if request.get("replica_id", -1) >= 0:
        refused = set() if authorize_cluster(services, ctx, AclOperation.CLUSTER_ACTION) \
            else set(names)
    else:
        refused = unauthorized_topics(services, ctx, AclOperation.READ, names)
    for topic in request["topics"]:
        name = topic["topic"]
        parts = []
        for p in topic["partitions"]:
            if name in refused:
                errors = True
                parts.append(_refused(p["partition"], denied, read_committed))
                continue
            throttled = replica_id >= 0 and rm.leader_throttled(name, p["partition"],
                                                                replica_id)
            limit = 0 if throttled else min(p["partition_max_bytes"], remaining)
            r = rm.read(name, p["partition"], p["fetch_offset"], max(limit, 0),
                        min_one_batch=(total == 0 and not throttled and not hard_limit),
                        current_leader_epoch=p.get("current_leader_epoch", -1),
                        replica_id=replica_id, read_committed=read_committed,
                        log_start_offset=p.get("log_start_offset", -1),
                        hard_max_bytes_limit=hard_limit)
            records: Any = b""
            if version < ZSTD_MIN_FETCH_VERSION and r.error == ErrorCode.NONE and (
                    _zstd_topic(services, name) or (r.records is not None and r.size > 0
                                                and _has_zstd(r.records))):
                errors = True
                parts.append(_unsupported_compression(p["partition"], read_committed))
                continue
            if r.records is not None and r.size > 0:
                fs = r.records
                if version > 3:
                    records = FileRegion(fs.fd, fs.position, fs.length)
                    size = fs.length
                elif fs.first_entry_incomplete:  # v0-v2: the part of a batch that fits
                    records = fs.read_bytes()  # as is: no whole message to convert
                    size = len(records)
                else:
                    try:
                        records = _down_convert(fs, 0 if version <= 1 else 1)
                    except RecordError as e:  # damage a clean start did not re-check
                        log.warning("cannot convert %s-%d at offset %d for a Fetch v%d "
                                    "client: %s", name, p["partition"], p["fetch_offset"],
                                    version, e)
                        errors = True
                        parts.append(_refused(p["partition"], ErrorCode.CORRUPT_MESSAGE,
                                              read_committed))
                        continue
                    size = len(records)
                total += size
                remaining -= size
                if replica_id >= 0:
                    rm.replicated(name, p["partition"], size)
            if r.error != ErrorCode.NONE:
                errors = True
            parts.append({
                "partition_index": p["partition"], "error_code": r.error,
                "high_watermark": r.high_watermark, "last_stable_offset": r.last_stable_offset,
                "log_start_offset": r.log_start_offset,
                "aborted_transactions": None if not read_committed else [
                    {"producer_id": pid, "first_offset": first}
                    for pid, first in r.aborted_transactions or ()],
                "preferred_read_replica": -1, "records": records,
            })
        topics.append({"topic": name, "partitions": parts})
    return topics, total, errors


def _zstd_topic(services: BrokerServices, topic: str) -> bool:
    try:
        return bool(services.partitions.topic_config(topic).compression_type == "zstd")
    except KeyError:
        return False


def _has_zstd(fs: Any) -> bool:
    """True if a batch in the slice is zstd-compressed (reads only the batch headers)."""
    pos, end = fs.position, fs.position + fs.length
    while pos + _ATTRIBUTES_END <= end:
        head = os.pread(fs.fd, _ATTRIBUTES_END, pos)
        if len(head) < _ATTRIBUTES_END:
            return False
        size = int.from_bytes(head[8:12], "big", signed=True)
        if size <= 0:
            return False
        magic = head[16]
        attributes = int.from_bytes(head[21:23], "big") if magic >= 2 else head[17]
        if attributes & 0x07 == Compression.ZSTD:
            return True
        pos += 12 + size
    return False


def _unsupported_compression(partition: int, read_committed: bool) -> dict[str, Any]:
    """Kafka's answer to a client below Fetch v10 for zstd data: an error for that
    partition and no records (it could not decode them)."""
    return {"partition_index": partition, "error_code": ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
            "aborted_transactions": [] if read_committed else None,
            "preferred_read_replica": -1, "records": b""}


def _refused(partition: int, code: int, read_committed: bool) -> dict[str, Any]:
    return {"partition_index": partition, "error_code": code, "high_watermark": -1,
            "last_stable_offset": -1, "log_start_offset": -1,
            "aborted_transactions": [] if read_committed else None,
            "preferred_read_replica": -1, "records": b""}


def _down_convert(fs: Any, magic: int) -> bytes:
    from kafkactl.record.convert import down_convert

    return bytes(down_convert(memoryview(fs.read_bytes()), magic))


def _response(topics: list[dict[str, Any]], error: int = 0) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": error, "session_id": 0, "responses": topics}


def _max_bytes(services: BrokerServices, ctx: RequestContext, request: dict[str, Any]) -> int:
    """The most a fetch takes: the broker's fetch.max.bytes (KIP-541) and, for a consumer
    with a consumer_byte_rate, what that lets through in the quota windows (Kafka's
    getMaxValueInQuotaWindow: more would be throttled for sure)."""
    most = services.replica_manager.fetch_max_bytes
    if ctx.quota is not None and request.get("replica_id", -1) < 0:
        in_window = ctx.quota.fetch_max_bytes()
        if in_window is not None:
            most = min(most, in_window)
    return most


def _answer(services: BrokerServices, ctx: RequestContext, request: dict[str, Any],
            topics: list[dict[str, Any]]) -> dict[str, Any]:
    """The fetch's response; a consumer over its consumer_byte_rate (or request_percentage)
    gets no partitions and the throttle time, its bytes not counted, as Kafka answers
    (getThrottledResponse): the records are fetched again once the throttle is over."""
    if ctx.quota is not None and request.get("replica_id", -1) < 0 and \
            ctx.quota.fetch_throttle(topics) > 0:
        return _response([])
    count_fetched(services, request, topics)
    return _response(topics)


def handle_fetch(services: BrokerServices, ctx: RequestContext, request: dict[str, Any]
                 ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    if request.get("session_id", 0) != 0 and request.get("session_epoch", -1) > 0:
        return _response([], FETCH_SESSION_ID_NOT_FOUND)
    topics, total, errors = _read_all(services, ctx, request)
    max_wait = request.get("max_wait_ms", 0)
    # as Kafka: no more than the fetch may take (fetch.max.bytes, a quota) is waited for
    min_bytes = min(request.get("min_bytes", 0), _max_bytes(services, ctx, request))
    keys = [(t["topic"], p["partition"]) for t in request["topics"] for p in t["partitions"]]
    if errors or max_wait <= 0 or total >= min_bytes or not keys:
        return _answer(services, ctx, request, topics)
    # Register now, not in the coroutine: its first step runs only on a later loop
    # iteration, and an append handled before then must still wake this fetch.
    purgatory = services.fetch_purgatory
    op = purgatory.watch(keys, min_bytes=min_bytes, accumulated=total,
                         replica=request.get("replica_id", -1) >= 0)
    return _long_poll(services, ctx, request, op, max_wait)


async def _long_poll(services: BrokerServices, ctx: RequestContext, request: dict[str, Any],
                     op: DelayedFetch, max_wait: int) -> dict[str, Any]:
    import asyncio

    purgatory = services.fetch_purgatory
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait / 1000.0
    min_bytes = min(request.get("min_bytes", 0), _max_bytes(services, ctx, request))
    while True:
        await purgatory.wait_for(op, max(deadline - loop.time(), 0.0))
        topics, total, errors = _read_all(services, ctx, request)
        if (request.get("isolation_level", 0) != 1 or errors or purgatory.closed
                or total >= min_bytes or loop.time() >= deadline):
            break
        # read_committed woken by records above the LSO (an open transaction's): Kafka's
        # DelayedFetch counts only what is below the LSO, so wait on, registered now
        op = purgatory.watch(op.keys, min_bytes=min_bytes, accumulated=total)
    return _answer(services, ctx, request, topics)
