"""Incremental fetch sessions (KIP-227): Kafka's FetchSession, FetchSessionCache and the
choice of fetch context (FetchManager.newContext).

A fetcher that keeps a session sends the partitions it wants once, in a full fetch
(session id 0, epoch 0); the leader answers with a session id. Each later fetch of the
session (its id, the next epoch) lists only the partitions added or whose fetch offset,
log start offset or max bytes changed, and the partitions to forget; the leader reads
every partition of the session and answers only those a fetcher must hear about: records,
an error, a new high watermark, last stable offset or log start offset (Kafka's
CachedPartition.maybeUpdateResponseData). Partitions that got records move to the end of
the session, so that busy partitions cannot take every fetch's bytes.

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions (0: none,
every fetch is sessionless). A new session when the cache is full evicts one, as Kafka's
FetchSessionCache.tryEvict: a session not used for `min.incremental.fetch.session.
eviction.ms`; otherwise one created longer ago than that and worth less than the new one
(a follower's session, "privileged", is worth more than any consumer's; then the bigger
one wins). A session the new one cannot beat stays: the new fetch gets session id 0.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from typing import Any

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch that asks for a session
FINAL_EPOCH = -1  # a full fetch without a session (closing the one named, if any)
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
INT32_MAX = 2**31 - 1
TopicPartition = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """The epoch that follows `epoch` (Kafka's FetchMetadata.nextEpoch): a session's epochs
    run 1, 2, ... and wrap to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


def has_records(r: dict[str, Any]) -> bool:
    """Whether a partition's read `r` carries records (bytes, or a FileRegion's length)."""
    records = r["records"]
    if records is None:
        return False
    return (records.length if hasattr(records, "length") else len(records)) > 0


class CachedPartition:
    """One partition of a session: what the fetcher asked for last, and what the leader
    told it last (-1: nothing yet, so the next answer includes the partition)."""

    __slots__ = ("topic", "partition", "key", "fetch_offset", "max_bytes",
                 "fetcher_log_start", "current_leader_epoch", "high_watermark",
                 "last_stable_offset", "log_start_offset")

    def __init__(self, topic: str, p: dict[str, Any]) -> None:
        self.topic = topic
        self.partition: int = p["partition"]
        self.key: TopicPartition = (topic, self.partition)
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.update_request(p)

    def update_request(self, p: dict[str, Any]) -> None:
        self.fetch_offset: int = p["fetch_offset"]
        self.max_bytes: int = p["partition_max_bytes"]
        self.fetcher_log_start: int = p.get("log_start_offset", -1)
        self.current_leader_epoch: int = p.get("current_leader_epoch", -1)

    def as_request(self) -> dict[str, Any]:
        """The partition as a fetch request lists it (for the read)."""
        return {"partition": self.partition, "fetch_offset": self.fetch_offset,
                "partition_max_bytes": self.max_bytes,
                "log_start_offset": self.fetcher_log_start,
                "current_leader_epoch": self.current_leader_epoch}

    def must_respond(self, r: dict[str, Any], update: bool) -> bool:
        """Whether an incremental answer must carry this partition's read `r` (Kafka's
        maybeUpdateResponseData); with `update`, remember what it says as sent."""
        respond = has_records(r)  # new data is always sent
        if r["high_watermark"] != self.high_watermark:
            respond = True
            if update:
                self.high_watermark = r["high_watermark"]
        if r["last_stable_offset"] != self.last_stable_offset:
            respond = True
            if update:
                self.last_stable_offset = r["last_stable_offset"]
        if r["log_start_offset"] != self.log_start_offset:
            respond = True
            if update:
                self.log_start_offset = r["log_start_offset"]
        if r["error_code"] != 0:
            # sent every time; once it goes away the watermarks are sent again
            respond = True
            if update:
                self.high_watermark = -1
        return respond


class FetchSession:
    __slots__ = ("id", "privileged", "partitions", "epoch", "created_ms", "last_used_ms",
                 "cached_size", "evictable")

    def __init__(self, session_id: int, privileged: bool,
                 partitions: dict[TopicPartition, CachedPartition], now_ms: float) -> None:
        self.id = session_id
        self.privileged = privileged  # a follower's
        self.partitions = partitions  # in the order they are read
        self.epoch = next_epoch(INITIAL_EPOCH)  # the epoch the next fetch must carry
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self.cached_size = len(partitions)
        self.evictable = False

    @property
    def size(self) -> int:
        return len(self.partitions)

    def update(self, topics: Iterable[dict[str, Any]],
               forgotten: Iterable[dict[str, Any]]) -> None:
        """An incremental fetch's partitions (added or updated) and forgotten ones."""
        parts = self.partitions
        for t in topics:
            name = t["topic"]
            for p in t["partitions"]:
                cached = parts.get((name, p["partition"]))
                if cached is None:
                    parts[(name, p["partition"])] = CachedPartition(name, p)
                else:
                    cached.update_request(p)
        for t in forgotten:
            name = t["topic"]
            for pid in t["partitions"]:
                parts.pop((name, pid), None)

    def move_to_end(self, key: TopicPartition) -> None:
        """A partition that got records is read last next time (Kafka moves it likewise)."""
        cached = self.partitions.pop(key, None)
        if cached is not None:
            self.partitions[key] = cached

    def __repr__(self) -> str:
        return (f"FetchSession(id={self.id}, privileged={self.privileged}, "
                f"partitions={self.size}, epoch={self.epoch})")


def _evict_rank(session: FetchSession) -> tuple[bool, int, int]:
    """Kafka's EvictableKey order: consumers' before followers', then smaller first."""
    return (session.privileged, session.cached_size, session.id)


class FetchSessionCache:
    """The broker's fetch sessions (Kafka's FetchSessionCache)."""

    def __init__(self, max_slots: int = 1000, eviction_ms: int = 120000) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0  # IncrementalFetchSessionEvictionsPerSec's count
        self.created = 0

    @staticmethod
    def now_ms() -> float:
        return time.monotonic() * 1000

    @property
    def num_partitions(self) -> int:
        """Partitions over every session (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(s.cached_size for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now_ms: float) -> None:
        """The session was used: its last use, size and (after the eviction time since
        its creation) its eligibility for eviction by a better session."""
        session.last_used_ms = now_ms
        session.cached_size = session.size
        session.evictable = session.created_ms + self.eviction_ms < now_ms

    def maybe_create_session(self, now_ms: float, privileged: bool,
                             partitions: dict[TopicPartition, CachedPartition]) -> int:
        """A new session of `partitions`: its id, or 0 when there is no slot for it."""
        if self.max_slots <= 0:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_slots and \
                not self._try_evict(privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, partitions, now_ms)
        self.sessions[session_id] = session
        self.touch(session, now_ms)
        self.created += 1
        return session_id

    def _new_id(self) -> int:
        while True:
            session_id = random.randint(1, INT32_MAX)
            if session_id not in self.sessions:
                return session_id

    def _try_evict(self, privileged: bool, size: int, now_ms: float) -> bool:
        """Make room for a new session of `size` partitions (Kafka's tryEvict): the least
        recently used session if stale, else the weakest evictable one when the new one
        ranks above it (a follower's only looks at consumers' sessions)."""
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - lru.last_used_ms > self.eviction_ms:
            self._evict(lru)
            return True
        for s in self.sessions.values():  # the eligibility that time alone changes
            s.evictable = s.evictable or s.created_ms + self.eviction_ms < now_ms
        candidates = [s for s in self.sessions.values()
                      if s.evictable and not (privileged and s.privileged)]
        if not candidates:
            return False
        weakest = min(candidates, key=_evict_rank)
        if (privileged, size, 0) < _evict_rank(weakest):
            return False
        self._evict(weakest)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.sessions.pop(session.id, None)
        self.evictions += 1


# ---- the fetch contexts (Kafka's FetchManager.newContext) -----------------------------------
SESSIONLESS, FULL, INCREMENTAL, ERROR = range(4)


class FetchContext:
    """What one fetch is, as far as sessions go: sessionless (as before KIP-227), full
    (creating a session when the response is built), incremental (of `session`, which must
    still have `expected_epoch` when answered) or a session error (`error`)."""

    __slots__ = ("kind", "error", "session", "expected_epoch", "privileged")

    def __init__(self, kind: int, *, error: int = 0, session: FetchSession | None = None,
                 privileged: bool = False) -> None:
        self.kind = kind
        self.error = error
        self.session = session
        self.expected_epoch = session.epoch if session is not None else 0
        self.privileged = privileged

    def still_current(self) -> bool:
        """The incremental fetch's session is at the epoch this fetch moved it to: a later
        fetch of the session did not come first (Kafka checks the same; a session evicted
        meanwhile still answers this fetch, and the next one gets FETCH_SESSION_ID_NOT_FOUND)."""
        s = self.session
        return s is not None and s.epoch == self.expected_epoch


def new_context(cache: FetchSessionCache, request: dict[str, Any], *,
                privileged: bool, now_ms: float | None = None) -> FetchContext:
    """The context of a Fetch v7+ request (Kafka's FetchManager.newContext)."""
    session_id = request.get("session_id", INVALID_SESSION_ID)
    epoch = request.get("session_epoch", FINAL_EPOCH)
    now = cache.now_ms() if now_ms is None else now_ms
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)  # a full fetch closes the session it names
        if epoch == FINAL_EPOCH or cache.max_slots <= 0:
            return FetchContext(SESSIONLESS)
        return FetchContext(FULL, privileged=privileged)
    session = cache.get(session_id)
    if session is None:
        return FetchContext(ERROR, error=FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return FetchContext(ERROR, error=INVALID_FETCH_SESSION_EPOCH)
    session.update(request.get("topics", ()), request.get("forgotten_topics_data") or ())
    if not session.partitions:  # nothing left to fetch: the session ends
        cache.remove(session.id)
        return FetchContext(SESSIONLESS)
    cache.touch(session, now)
    session.epoch = next_epoch(session.epoch)
    return FetchContext(INCREMENTAL, session=session, privileged=privileged)


def session_partitions(request: dict[str, Any]) -> dict[TopicPartition, CachedPartition]:
    """A full fetch's partitions, as a new session holds them (in the request's order)."""
    return {(t["topic"], p["partition"]): CachedPartition(t["topic"], p)
            for t in request["topics"] for p in t["partitions"]}
