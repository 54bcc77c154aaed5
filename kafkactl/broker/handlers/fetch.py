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
bytes. From v7, fetch sessions (KIP-227, kafkactl/broker/fetch_session.py): a full fetch
asking for one (session 0, epoch 0) gets a session id; an incremental fetch of the session
lists only changed partitions and is answered only the partitions with something to say,
and its long poll wakes on an append to any partition of the session. Below
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

from kafkactl.broker import fetch_session
from kafkactl.broker.fetch_session import FetchContext, FetchSession
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

FETCH_SESSION_ID_NOT_FOUND = fetch_session.FETCH_SESSION_ID_NOT_FOUND
SESSION_MIN_FETCH_VERSION = 7  # KIP-227
ZSTD_MIN_FETCH_VERSION = 10  # KIP-110: older fetchers cannot decode zstd
# v2 header up to attributes: baseOffset 8, length 4, epoch 4, magic 1, crc 4, attributes 2
_ATTRIBUTES_END = 23


def _read_all(services: BrokerServices, ctx: RequestContext, request: dict[str, Any],
              wanted: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int, bool]:
    """Read `wanted` (the request's topics, or the partitions of an incremental fetch's
    session that the fast path did not settle)."""
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
    names = [t["topic"] for t in wanted]
    # a follower needs ClusterAction, a consumer Read on each topic; either way what is
    # refused is answered TOPIC_AUTHORIZATION_FAILED per partition (Kafka's KafkaApis)
    denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if request.get("replica_id", -1) >= 0:
        refused = set() if authorize_cluster(services, ctx, AclOperation.CLUSTER_ACTION) \
            else set(names)
    else:
        refused = unauthorized_topics(services, ctx, AclOperation.READ, names)
    for topic in wanted:
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


def _response(topics: list[dict[str, Any]], error: int = 0, session_id: int = 0
              ) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": error, "session_id": session_id,
            "responses": topics}


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
            topics: list[dict[str, Any]], fctx: FetchContext | None) -> dict[str, Any]:
    """The fetch's response; a consumer over its consumer_byte_rate (or request_percentage)
    gets no partitions and the throttle time, its bytes not counted, as Kafka answers
    (getThrottledResponse): the records are fetched again once the throttle is over.
    A full fetch asking for a session creates it now, from what it answers; an incremental
    one answers only the partitions its session says must be (Kafka's
    IncrementalFetchContext.updateAndGenerateResponseData)."""
    session = fctx.session if fctx is not None else None
    cache = services.fetch_sessions
    if fctx is not None and session is not None and not fctx.still_current():
        # a later fetch of the session came first: this one's view is out of date
        return _response([], fetch_session.INVALID_FETCH_SESSION_EPOCH, session.id)
    if ctx.quota is not None and request.get("replica_id", -1) < 0 and \
            ctx.quota.fetch_throttle(topics) > 0:
        return _response([], 0, session.id if session is not None else 0)
    if session is not None:
        topics = _incremental_answer(session, topics)
        count_fetched(services, request, topics)
        return _response(topics, 0, session.id)
    count_fetched(services, request, topics)
    session_id = 0
    if fctx is not None and fctx.kind == fetch_session.FULL and cache is not None:
        parts = fetch_session.session_partitions(request)
        for t in topics:
            for r in t["partitions"]:
                cached = parts.get((t["topic"], r["partition_index"]))
                if cached is not None:
                    cached.must_respond(r, True)
        session_id = cache.maybe_create_session(cache.now_ms(), fctx.privileged, parts)
        log.debug("fetch session %d created for client %s (%s, %d partitions)", session_id,
                  ctx.client_id, "follower" if fctx.privileged else "consumer", len(parts))
    return _response(topics, 0, session_id)


def _incremental_answer(session: FetchSession, topics: list[dict[str, Any]]
                        ) -> list[dict[str, Any]]:
    """The partitions read for an incremental fetch that its answer must carry (records,
    an error, new watermarks), remembered as sent; the ones with records go to the end of
    the session. The others (and the ones the fast path settled) are left out."""
    cached = session.partitions
    out = []
    moved = []
    for t in topics:
        name = t["topic"]
        kept = []
        for r in t["partitions"]:
            key = (name, r["partition_index"])
            cp = cached.get(key)
            if cp is None or cp.must_respond(r, True):
                kept.append(r)
                if fetch_session.has_records(r):
                    moved.append(key)
        if kept:
            out.append({"topic": name, "partitions": kept})
    for key in moved:
        session.move_to_end(key)
    return out


def _context(services: BrokerServices, ctx: RequestContext, request: dict[str, Any]
             ) -> FetchContext | None:
    """The fetch's session context (None: a fetch before v7, sessionless)."""
    cache = services.fetch_sessions
    if ctx.api_version < SESSION_MIN_FETCH_VERSION or cache is None:
        if request.get("session_id", 0) != 0 and request.get("session_epoch", -1) > 0:
            return FetchContext(fetch_session.ERROR, error=FETCH_SESSION_ID_NOT_FOUND)
        return None
    return fetch_session.new_context(cache, request,
                                     privileged=request.get("replica_id", -1) >= 0)


def _wanted(services: BrokerServices, request: dict[str, Any], fctx: FetchContext | None,
            only: set[tuple[str, int]] | None = None) -> list[dict[str, Any]]:
    """What to read: the request's topics, or for an incremental fetch the partitions of
    its session (or of them, `only` these), in the session's order, less those a
    follower's fast path settles (ReplicaManager.follower_session_scan: in sync, caught
    up, nothing new to tell)."""
    session = fctx.session if fctx is not None else None
    if session is None:
        return request["topics"]
    replica_id = request.get("replica_id", -1)
    cached: Any = session.partitions.values()
    if only is not None:
        cached = [cp for key, cp in session.partitions.items() if key in only]
    rest = services.replica_manager.follower_session_scan(cached, replica_id) \
        if replica_id >= 0 else cached
    wanted: list[dict[str, Any]] = []
    last = None
    parts: list[dict[str, Any]] = []
    for cp in rest:
        if cp.topic != last:
            last = cp.topic
            parts = []
            wanted.append({"topic": last, "partitions": parts})
        parts.append(cp.as_request())
    return wanted


def _watched(request: dict[str, Any], fctx: FetchContext | None) -> list[tuple[str, int]]:
    session = fctx.session if fctx is not None else None
    if session is not None:
        return list(session.partitions)
    return [(t["topic"], p["partition"]) for t in request["topics"] for p in t["partitions"]]


def handle_fetch(services: BrokerServices, ctx: RequestContext, request: dict[str, Any]
                 ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    fctx = _context(services, ctx, request)
    if fctx is not None and fctx.kind == fetch_session.ERROR:
        return _response([], fctx.error)
    wanted = _wanted(services, request, fctx)
    topics, total, errors = _read_all(services, ctx, request, wanted)
    max_wait = request.get("max_wait_ms", 0)
    # as Kafka: no more than the fetch may take (fetch.max.bytes, a quota) is waited for
    min_bytes = min(request.get("min_bytes", 0), _max_bytes(services, ctx, request))
    keys = _watched(request, fctx)
    if errors or max_wait <= 0 or total >= min_bytes or not keys:
        return _answer(services, ctx, request, topics, fctx)
    # Register now, not in the coroutine: its first step runs only on a later loop
    # iteration, and an append handled before then must still wake this fetch.
    purgatory = services.fetch_purgatory
    op = purgatory.watch(keys, min_bytes=min_bytes, accumulated=total,
                         replica=request.get("replica_id", -1) >= 0,
                         read_committed=request.get("isolation_level", 0) == 1)
    # a follower's incremental fetch: what its first read settled (in sync, caught up,
    # nothing to tell) is read again only if an append, a high-watermark move or a wake
    # touched it meanwhile (the next fetch's first read sees anything else)
    unsettled = {(t["topic"], p["partition"]) for t in wanted for p in t["partitions"]} \
        if fctx is not None and fctx.session is not None and \
        request.get("replica_id", -1) >= 0 else None
    return _long_poll(services, ctx, request, op, max_wait, fctx, unsettled)


async def _long_poll(services: BrokerServices, ctx: RequestContext, request: dict[str, Any],
                     op: DelayedFetch, max_wait: int, fctx: FetchContext | None,
                     unsettled: set[tuple[str, int]] | None = None) -> dict[str, Any]:
    import asyncio

    purgatory = services.fetch_purgatory
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait / 1000.0
    min_bytes = min(request.get("min_bytes", 0), _max_bytes(services, ctx, request))
    while True:
        await purgatory.wait_for(op, max(deadline - loop.time(), 0.0))
        if fctx is not None and fctx.session is not None and not fctx.still_current():
            return _answer(services, ctx, request, [], fctx)  # INVALID_FETCH_SESSION_EPOCH
        only = unsettled | op.touched if unsettled is not None else None
        topics, total, errors = _read_all(services, ctx, request,
                                          _wanted(services, request, fctx, only))
        if (op.replica or op.forced or errors or purgatory.closed or total >= min_bytes
                or loop.time() >= deadline):
            break
        # a consumer woken with less than min_bytes to read (read_committed: records above
        # the LSO, an open transaction's; a high watermark past records whose size the
        # purgatory did not know): Kafka's DelayedFetch counts only what is below the high
        # watermark (the LSO), so wait on, registered now
        op = purgatory.watch(op.keys, min_bytes=min_bytes, accumulated=total,
                             read_committed=op.read_committed)
    return _answer(services, ctx, request, topics, fctx)
