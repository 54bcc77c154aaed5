"""The fetch session cache's eviction order (Kafka's FetchSessionCache.tryEvict), with the
clock in the test's hands: a stale session (unused for the eviction time) goes first; else
a session older than the eviction time goes to a newcomer that ranks above it (a follower's
session above any consumer's, then the bigger one); a newcomer that does not rank above
gets no session (id 0)."""

from __future__ import annotations

from kafkactl.broker.fetch_session import FetchSessionCache, new_context, next_epoch

EVICT = 1000


def _parts(n: int) -> dict[tuple[str, int], object]:
    return {("t", p): object() for p in range(n)}


def _create(cache: FetchSessionCache, now: float, privileged: bool, n: int) -> int:
    return cache.maybe_create_session(now, privileged, _parts(n))  # type: ignore[arg-type]


def test_eviction_ranks_followers_then_size() -> None:
    cache = FetchSessionCache(max_slots=2, eviction_ms=EVICT)
    small = _create(cache, 0, False, 2)
    big = _create(cache, 0, False, 5)
    assert small and big
    # young sessions: nobody gets in, not even a follower
    assert _create(cache, 10, True, 100) == 0
    # old but in use (touched recently): a consumer as small as the smallest cannot evict it
    for s in (small, big):
        cache.touch(cache.sessions[s], EVICT + 500)
    assert _create(cache, EVICT + 600, False, 2) == 0
    # a bigger consumer evicts the smallest
    bigger = _create(cache, EVICT + 600, False, 3)
    assert bigger and small not in cache.sessions and cache.evictions == 1
    # a follower evicts the weakest consumer's session, whatever its size
    for s in (big, bigger):
        cache.touch(cache.sessions[s], 2 * EVICT + 650)
    follower = _create(cache, 2 * EVICT + 700, True, 1)
    assert follower and bigger not in cache.sessions and big in cache.sessions
    # a follower never evicts another follower's session (only when stale) ...
    for s in (big, follower):
        cache.touch(cache.sessions[s], 3 * EVICT + 800)
    other = _create(cache, 3 * EVICT + 900, True, 1000)
    assert other and big not in cache.sessions and follower in cache.sessions
    # ... nor does a consumer, however big
    for s in (follower, other):
        cache.touch(cache.sessions[s], 5 * EVICT - 50)
    assert _create(cache, 5 * EVICT, False, 10_000) == 0
    assert cache.evictions == 3


def test_a_stale_session_goes_to_anyone() -> None:
    cache = FetchSessionCache(max_slots=1, eviction_ms=EVICT)
    follower = _create(cache, 0, True, 50)
    assert _create(cache, EVICT, False, 1) == 0
    consumer = _create(cache, EVICT + 1, False, 1)
    assert consumer and follower not in cache.sessions


def test_epochs_and_contexts() -> None:
    assert next_epoch(0) == 1 and next_epoch(2**31 - 1) == 1 and next_epoch(-1) == -1
    cache = FetchSessionCache(max_slots=1, eviction_ms=EVICT)
    req = {"topics": [{"topic": "t", "partitions": [
        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1}]}],
        "forgotten_topics_data": []}
    sid = cache.maybe_create_session(0, False, {})
    # an incremental fetch that forgets everything ends the session: sessionless
    ctx = new_context(cache, {"session_id": sid, "session_epoch": 1, "topics": [],
                              "forgotten_topics_data": []}, privileged=False, now_ms=1)
    assert ctx.session is None and sid not in cache.sessions
    # a full fetch naming a session closes it, and asks for a new one
    sid = cache.maybe_create_session(0, False, {})
    ctx = new_context(cache, {**req, "session_id": sid, "session_epoch": 0},
                      privileged=False, now_ms=1)
    assert ctx.session is None and sid not in cache.sessions
