"""Quota enforcement: rates per client measured over a sliding window, and the throttle time
a client over its quota is given (Kafka's ClientQuotaManager, KIP-13/KIP-124/KIP-219).

A rate is measured over `quota.window.num` (11) samples of `quota.window.size.seconds` (1)
each. A client over its quota gets, in the response, throttle_time_ms = (rate - quota) /
quota × the measured window, and its connection is muted for that long after the response
is sent (KIP-219): the client backs off, nothing is dropped, nothing waits on the event loop.

Whose rate: the quota's entity with its defaults read as the client's own names, so clients
under /clients/<default> are measured each on its own, while every client id of a user with a
/users/alice quota shares alice's rate.

Kinds: produce (request bytes, producer_byte_rate), fetch (response bytes,
consumer_byte_rate), request (the share of the event loop a client's requests took,
request_percentage), mutation (partitions created or deleted, controller_mutation_rate).
As in Kafka, a byte-rate throttle is not capped, a request_percentage throttle is capped at
one quota window (ClientRequestQuotaManager), and controller_mutation_rate is a token bucket
(KIP-599: up to quota x window_num x window_size partitions at once, refilled at the quota a
second): CreateTopics v6+, CreatePartitions v3+ and DeleteTopics v5+ are strict (a topic
asked while the bucket is empty gets THROTTLING_QUOTA_EXCEEDED and is not mutated; the
request that empties it is not throttled), older versions permissive (done, then
throttled). A throttled consumer Fetch is answered with no records (its bytes unrecorded),
and a Fetch takes at most what the quota lets through in the windows (Kafka's
getMaxValueInQuotaWindow). Acks=0 Produces count against producer_byte_rate only (their
connection is muted all the same), as Kafka exempts them from request_percentage.

A client's rates and its throttle-time series are forgotten an hour after their last use
(Kafka's InactiveSensorExpirationTimeSeconds), swept as they are used: no timer per client.

And the connections accepted from each IP address against its connection_creation_rate
(KIP-612, Kafka's ConnectionQuotas): a new connection is counted in, and when that takes the
address's rate over its quota it is counted out again and refused, with the time Kafka would
throttle it for (bounded by one quota window); kafkactl.broker.connection_quotas asks on
accept (`connection_throttle_ms`), and measures the listeners' and the broker's
max.connection.creation.rate the same way (`record_connection`).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkactl.broker.client_quotas import (
    CLIENT_ID,
    IP_RATE_MAX,
    USER,
    ClientQuotaStore,
    Entity,
    ip_address_of,
)
from kafkactl.protocol.api_keys import ApiKey

WINDOW_NUM = 11
WINDOW_SIZE_S = 1.0
# Kafka's ClientQuotaManager.InactiveSensorExpirationTimeSeconds: a client's quota sensors
# go an hour after their last record
SENSOR_EXPIRY_S = 3600.0
EXPIRY_ENV = "KAFKACTL_QUOTA_SENSOR_EXPIRY_S"  # a shorter expiry, for tests
KEY_OF = {"produce": "producer_byte_rate", "fetch": "consumer_byte_rate",
          "request": "request_percentage", "mutation": "controller_mutation_rate"}


@dataclass
class Rate:
    """A rate over the last `num` samples of `size_s` seconds (Kafka's SampledStat Rate)."""

    num: int = WINDOW_NUM
    size_s: float = WINDOW_SIZE_S
    samples: deque[list[float]] = field(default_factory=deque)  # [start, total]
    last: float = 0.0  # when it was last recorded into (its expiry)

    def record(self, value: float, now: float) -> None:
        self._roll(now)
        self.last = now
        if not self.samples or now - self.samples[-1][0] >= self.size_s:
            self.samples.append([now, 0.0])
        self.samples[-1][1] += value

    def measure(self, now: float) -> tuple[float, float]:
        """(value per second, the window it was measured over in seconds)."""
        self._roll(now)
        if not self.samples:
            return 0.0, self.size_s * (self.num - 1)
        total = sum(s[1] for s in self.samples)
        # Kafka: the elapsed time since the oldest sample, at least (num - 1) windows (and
        # at least 1 ms: one window of one sample may have just begun)
        window = max(now - self.samples[0][0], self.size_s * (self.num - 1), 0.001)
        return total / window, window

    def _roll(self, now: float) -> None:
        horizon = now - self.size_s * self.num
        while self.samples and self.samples[0][0] <= horizon:
            self.samples.popleft()


@dataclass
class TokenBucket:
    """Kafka's TokenBucket (KIP-599), controller_mutation_rate's measure: up to `burst`
    credits (quota x window_num x window_size), refilled at the quota a second, full at
    first; a mutation takes its partitions out; the quota is exhausted below zero."""

    tokens: float | None = None  # None: not used yet, full
    at: float = 0.0  # when it was last refilled
    last: float = 0.0  # when it was last recorded into (its expiry)

    def refill(self, bound: float, burst: float, now: float) -> float:
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + bound * max(now - self.at, 0.0))
        self.at = now
        return self.tokens

    def record(self, value: float, bound: float, burst: float, now: float) -> float:
        self.tokens = min(burst, self.refill(bound, burst, now) - value)
        self.last = now
        return self.tokens


THROTTLING_QUOTA_EXCEEDED = 89
THROTTLED_MESSAGE = "The throttling quota has been exceeded."  # Kafka's Errors message


class ThrottlingQuotaExceeded(Exception):
    """A strict controller_mutation_rate refused a mutation (Kafka's
    ThrottlingQuotaExceededException): answer the topic THROTTLING_QUOTA_EXCEEDED (89)."""

    code = THROTTLING_QUOTA_EXCEEDED

    def __init__(self, throttle_ms: int) -> None:
        super().__init__(THROTTLED_MESSAGE)
        self.throttle_ms = throttle_ms


class QuotaManager:
    """Measures each client's rates against the store's quotas; `record` returns the
    throttle time in ms (0 within the quota, or without one)."""

    def __init__(self, store: ClientQuotaStore, *, window_num: int = WINDOW_NUM,
                 window_size_s: float = WINDOW_SIZE_S,
                 clock: Callable[[], float] = time.monotonic,
                 expiry_s: float | None = None) -> None:
        self.store = store
        self.window_num = window_num
        self.window_size_s = window_size_s
        self.clock = clock
        if expiry_s is None:
            try:
                expiry_s = float(os.environ.get(EXPIRY_ENV) or SENSOR_EXPIRY_S)
            except ValueError:
                expiry_s = SENSOR_EXPIRY_S
        self.expiry_s = max(expiry_s, 0.001)
        self._rates: dict[tuple[str, tuple[str, str]], Rate] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}  # controller_mutation_rate
        self._throttle_ms: dict[tuple[str, str, str], float] = {}  # kind, user, client
        self._throttled_at: dict[tuple[str, str, str], float] = {}  # its last throttle
        self._swept = -float("inf")
        self._ip_rates: dict[str, Rate] = {}  # address -> its connections accepted
        self.ip_throttled = 0  # connections refused over a connection_creation_rate

    @property
    def throttle_ms_total(self) -> dict[tuple[str, str, str], float]:
        """Throttle time given, ms, per (quota kind, user, client id): the metric
        kafka_server_quota_throttle_time_ms; a client's series goes an hour after its last
        throttle (Kafka's throttle-time sensor expires so)."""
        self.maybe_sweep()
        return self._throttle_ms

    def maybe_sweep(self) -> None:
        """Sweep (`sweep`) if anything is kept and the last sweep is a while ago."""
        if self._throttle_ms or self._rates or self._buckets:
            now = self.clock()
            if now - self._swept >= self._sweep_every:
                self.sweep(now)

    def record(self, kind: str, user: str, client_id: str, value: float, *,
               check: bool = True) -> int:
        """Record `value` against the client's quota of `kind`; the throttle time in ms (0
        within the quota, without one, or when not `check`ed: Kafka's recordNoThrottle).
        A byte-rate throttle is (rate - quota) / quota x the window measured, uncapped
        (Kafka's ClientQuotaManager); a request_percentage one at most one quota window
        (ClientRequestQuotaManager). The throttle given is counted with `throttled`."""
        if kind == "mutation":
            quota = self.mutation_quota(user, client_id, strict=False)
            if quota is None:
                return 0
            quota.record(value)
            return quota.throttle_ms()
        found = self.store.quota(KEY_OF[kind], user, client_id)
        if found is None:
            return 0
        bound, entity = found
        now = self.clock()
        if now - self._swept >= self._sweep_every:
            self.sweep(now)
        key = (kind, _sensor(entity, user, client_id))
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = Rate(self.window_num, self.window_size_s)
        rate.record(value, now)
        if not check:
            return 0
        observed, window = rate.measure(now)
        if observed <= bound:
            return 0
        throttle = (observed - bound) / bound * window if bound > 0 else self.window_size_s
        if kind == "request":
            throttle = min(throttle, self.window_size_s)
        return int(throttle * 1000 + 0.5)  # Java's Math.round

    def unrecord(self, kind: str, user: str, client_id: str, value: float) -> None:
        """Take back a value recorded (Kafka's unrecordQuotaSensor: a throttled Fetch is
        answered with no records, so its bytes do not count)."""
        found = self.store.quota(KEY_OF[kind], user, client_id)
        if found is None:
            return
        rate = self._rates.get((kind, _sensor(found[1], user, client_id)))
        if rate is not None:
            rate.record(-value, self.clock())

    def max_in_window(self, kind: str, user: str, client_id: str) -> float | None:
        """The most a client may take at once without being throttled for sure: the
        quota x (window_num - 1) windows (Kafka's getMaxValueInQuotaWindow); None without a
        quota."""
        found = self.store.quota(KEY_OF[kind], user, client_id)
        if found is None:
            return None
        return found[0] * max(self.window_num - 1, 1) * self.window_size_s

    def throttled(self, kind: str, user: str, client_id: str, ms: int) -> None:
        """Count a throttle given (the one a response carried and its connection was muted
        for), into the metric."""
        if ms <= 0:
            return
        tkey = (kind, user, client_id)
        self._throttle_ms[tkey] = self._throttle_ms.get(tkey, 0.0) + ms
        self._throttled_at[tkey] = self.clock()

    def mutation_quota(self, user: str, client_id: str, *, strict: bool
                       ) -> MutationQuota | None:
        """One request's controller_mutation_rate (Kafka's Strict- or
        PermissiveControllerMutationQuota); None when the client has none."""
        found = self.store.quota(KEY_OF["mutation"], user, client_id)
        if found is None:
            return None
        bound, entity = found
        return MutationQuota(self, _sensor(entity, user, client_id), bound, strict)

    def _bucket(self, key: tuple[str, str], now: float) -> TokenBucket:
        if now - self._swept >= self._sweep_every:
            self.sweep(now)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(last=now)
        return bucket

    @property
    def _sweep_every(self) -> float:
        return min(60.0, self.expiry_s / 4)

    def sweep(self, now: float) -> None:
        """Forget what no client used for the expiry time (an hour): the rates and token
        buckets, and the throttle-time series (Kafka expires a client's sensors so, also
        after its quota is removed). Called as quotas are used, at most every minute."""
        self._swept = now
        horizon = now - self.expiry_s
        for key in [k for k, r in self._rates.items() if r.last <= horizon]:
            del self._rates[key]
        for bkey in [k for k, b in self._buckets.items() if b.last <= horizon]:
            del self._buckets[bkey]
        for tkey in [k for k, at in self._throttled_at.items() if at <= horizon]:
            del self._throttled_at[tkey]
            self._throttle_ms.pop(tkey, None)

    def idle(self) -> bool:
        """Nothing is kept for any client (no sweep is needed)."""
        return not (self._rates or self._buckets or self._throttle_ms)

    def connection_throttle_ms(self, ip: str) -> int:
        """A new connection from `ip` (KIP-612): 0 when its address has no
        connection_creation_rate or stays within it (the connection is counted), else the
        time in ms Kafka throttles it for (it is not counted: a refused connection does
        not use the quota up)."""
        address = ip_address_of(ip)
        if address is None:  # no IP peer (not a TCP connection): no quota of an address
            return 0
        bound = self.store.ip_connection_rate(ip)
        if bound is None or bound >= IP_RATE_MAX:
            return 0
        key = str(address)
        rate = self._ip_rates.get(key)
        now = self.clock()
        if rate is None:
            if len(self._ip_rates) >= IP_SENSORS_PRUNE_AT:
                self._prune_ip_rates(now)
            rate = self._ip_rates[key] = Rate(self.window_num, self.window_size_s)
        ms = record_connection(rate, bound, now, self.window_size_s)
        if ms <= 0:
            return 0
        rate.record(-1.0, now)
        self.ip_throttled += 1
        return ms

    def _prune_ip_rates(self, now: float) -> None:
        """Forget the addresses with no connection inside the windows (Kafka expires an
        IP's sensor after an hour without one)."""
        for key, rate in list(self._ip_rates.items()):
            rate.measure(now)  # rolls the old samples out
            if not rate.samples:
                del self._ip_rates[key]


IP_SENSORS_PRUNE_AT = 4096  # addresses measured before the idle ones are forgotten


def record_connection(rate: Rate, bound: float, now: float, window_size_s: float) -> int:
    """A new connection counted into `rate` (a connection creation rate: an address's, a
    listener's or the broker's, KIP-612): 0 while the rate stays within `bound`, else the
    throttle time in ms, Kafka's QuotaUtils.boundedThrottleTime: (rate - bound) / bound x
    the window measured, at most one quota window (`window_size_s`; with bound 0, that)."""
    rate.record(1.0, now)
    observed, window = rate.measure(now)
    if observed <= bound:
        return 0
    longest = window_size_s * 1000.0
    ms = longest if bound <= 0 else min((observed - bound) / bound * window * 1000.0, longest)
    return int(ms + 0.5)  # Java's Math.round


def _sensor(entity: Entity, user: str, client_id: str) -> tuple[str, str]:
    """The (user, client id) a rate is kept for: the entity's names, its defaults read as
    the client's own, "" for a type the entity leaves out (shared)."""
    d = dict(entity)
    u = "" if USER not in d else (d[USER] if d[USER] is not None else user)
    c = "" if CLIENT_ID not in d else (d[CLIENT_ID] if d[CLIENT_ID] is not None else client_id)
    return u or "", c or ""


# ---------------------------------------------------------------- controller mutations

class MutationQuota:
    """One CreateTopics, CreatePartitions or DeleteTopics request's controller_mutation_rate
    (Kafka's Strict- and PermissiveControllerMutationQuota). A handler calls `record` with
    a topic's partitions before it creates, grows or deletes it (not for validate_only, nor
    for a topic refused otherwise). Strict (CreateTopics v6+, CreatePartitions v3+,
    DeleteTopics v5+): while the client's bucket is below zero, `record` raises
    ThrottlingQuotaExceeded and records nothing (answer that topic THROTTLING_QUOTA_EXCEEDED
    with its message, and leave it be); else it records, the bucket may go below zero, and
    the request is not throttled. Permissive (older versions): it records, and the request
    is throttled while the bucket is below zero. `throttle_ms` is the response's."""

    __slots__ = ("manager", "key", "bound", "strict", "_throttle_ms", "_at")

    def __init__(self, manager: QuotaManager, key: tuple[str, str], bound: float,
                 strict: bool) -> None:
        self.manager = manager
        self.key = key
        self.bound = bound
        self.strict = strict
        self._throttle_ms = 0
        self._at = 0.0

    def _burst(self) -> float:
        return self.bound * self.manager.window_num * self.manager.window_size_s

    def exhausted_ms(self) -> int:
        """The throttle a mutation asked now gets: 0 unless the bucket is below zero."""
        now = self.manager.clock()
        tokens = self.manager._bucket(self.key, now).refill(self.bound, self._burst(), now)
        return self._throttle_of(tokens) if tokens < 0 else 0

    def check(self) -> None:
        """Strict: ThrottlingQuotaExceeded while the bucket is below zero (then answer the
        topic THROTTLING_QUOTA_EXCEEDED and leave it be); else nothing. For a handler that
        learns a topic's partitions only once it is made: `check()` before, then
        `record(partitions, checked=False)` once made (Kafka's record checks and counts
        at once)."""
        if not self.strict:
            return
        throttle = self.exhausted_ms()
        if throttle > 0:
            self.refused(throttle)
            raise ThrottlingQuotaExceeded(throttle)

    def record(self, partitions: float, *, checked: bool = True) -> None:
        """Count `partitions` mutated; strict (and `checked`): ThrottlingQuotaExceeded
        instead while the bucket is below zero."""
        manager = self.manager
        now = manager.clock()
        bucket = manager._bucket(self.key, now)
        burst = self._burst()
        if self.strict and checked:
            tokens = bucket.refill(self.bound, burst, now)
            if tokens < 0:
                self.refused(self._throttle_of(tokens))
                raise ThrottlingQuotaExceeded(self._throttle_ms)
        tokens = bucket.record(partitions, self.bound, burst, now)
        if not self.strict and tokens < 0:
            self._throttle_ms, self._at = self._throttle_of(tokens), now

    def refused(self, throttle_ms: int) -> None:
        """A mutation was refused (THROTTLING_QUOTA_EXCEEDED) with this throttle time."""
        self._throttle_ms, self._at = throttle_ms, self.manager.clock()

    def throttle_ms(self) -> int:
        """The throttle time, less the time gone since it was decided (Kafka's: a request
        may wait for the controller long after)."""
        if self._throttle_ms <= 0:
            return 0
        gone = int((self.manager.clock() - self._at) * 1000)
        return max(0, self._throttle_ms - gone)

    def _throttle_of(self, tokens: float) -> int:
        if self.bound <= 0:
            return int(self.manager.window_size_s * 1000)
        return int(-tokens / self.bound * 1000 + 0.5)  # Kafka: Math.round(-value/bound*1000)


# the first version of each whose controller_mutation_rate is strict (KIP-599)
STRICT_SINCE = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}
MUTATIONS = frozenset(STRICT_SINCE)


# ---------------------------------------------------------------- what a request counts for

class RequestQuota:
    """One request's client quotas while quotas are enforced: its handler finds it as
    `ctx.quota` (None otherwise). The request handler records the request when its
    handler is done (`finish`); a Fetch handler decides its throttle itself
    (`fetch_throttle`, `fetch_max_bytes`), a topic handler may record each topic's
    mutation (`mutation`, a MutationQuota, None when the client has no
    controller_mutation_rate)."""

    __slots__ = ("quotas", "user", "client_id", "busy", "mutation",
                 "_decided")

    def __init__(self, quotas: QuotaManager, user: str, client_id: str,
                 busy: Callable[[], float]) -> None:
        self.quotas = quotas
        self.user = user
        self.client_id = client_id
        self.busy = busy  # the handler's busy time so far, seconds
        self.mutation: MutationQuota | None = None
        self._decided: tuple[int, str, float] | None = None  # (ms, kind, busy then)

    # ---- Fetch
    def fetch_max_bytes(self) -> int | None:
        """The most one consumer Fetch may take: what the consumer_byte_rate lets through in
        the windows (Kafka's getMaxValueInQuotaWindow caps fetch max_bytes so); None
        without one."""
        most = self.quotas.max_in_window("fetch", self.user, self.client_id)
        return None if most is None else max(int(min(most, 0x7FFFFFFF)), 1)

    def fetch_throttle(self, topics: list[dict[str, Any]]) -> int:
        """A consumer Fetch's answer is ready (`topics`, as its response's): record the
        request's time so far and the answer's bytes, as Kafka's handleFetchRequest does;
        over either quota, the throttle time in ms (the answer must then carry no
        partitions: Kafka's getThrottledResponse), its bytes taken back; else 0."""
        busy = self.busy()
        quotas, user, client = self.quotas, self.user, self.client_id
        request_ms = quotas.record("request", user, client, busy * 100.0)
        size = records_bytes(topics)
        bandwidth_ms = quotas.record("fetch", user, client, size)
        ms = max(request_ms, bandwidth_ms)
        if ms > 0:
            quotas.unrecord("fetch", user, client, size)
        self._decided = (ms, "fetch" if bandwidth_ms > request_ms else "request", busy)
        return ms

    # ---- CreateTopics, CreatePartitions, DeleteTopics
    def before_mutation(self, api_key: int, api_version: int) -> None:
        """Before a CreateTopics, CreatePartitions or DeleteTopics is handled: its
        MutationQuota (`mutation`), strict from Kafka's versions (STRICT_SINCE), which
        the handler checks and records topic by topic (handlers/topics.py); none when the
        client has no controller_mutation_rate."""
        self.mutation = self.quotas.mutation_quota(
            self.user, self.client_id, strict=api_version >= STRICT_SINCE[ApiKey(api_key)])

    # ---- the handler is done
    def finish(self, api_key: int, request: dict[str, Any], body: dict[str, Any] | None,
               request_bytes: int, busy_s: float) -> int:
        """Record a handled request against its client's quotas; the throttle time in ms
        (the largest of the quotas it exceeds, counted into the metric). Followers' fetches
        (replica_id >= 0) are exempt, and acks=0 Produces from request_percentage, as in
        Kafka."""
        if request.get("replica_id", -1) >= 0:
            return 0
        quotas, user, client = self.quotas, self.user, self.client_id
        if self._decided is not None:  # the handler decided (a Fetch): the rest of its time
            ms, kind, busy = self._decided
            quotas.record("request", user, client, max(busy_s - busy, 0.0) * 100.0,
                          check=False)
            quotas.throttled(kind, user, client, ms)
            return ms
        throttles: dict[str, int] = {}
        if not (api_key == ApiKey.PRODUCE and request.get("acks") == 0):
            throttles["request"] = quotas.record("request", user, client, busy_s * 100.0)
        if api_key == ApiKey.PRODUCE:
            throttles["produce"] = quotas.record("produce", user, client, request_bytes)
        elif api_key == ApiKey.FETCH and body is not None:
            size = fetch_response_bytes(body)
            throttles["fetch"] = quotas.record("fetch", user, client, size)
            if size and max(throttles.values()) > 0:  # no records in a throttled answer
                quotas.unrecord("fetch", user, client, size)
                body["responses"] = []
        elif self.mutation is not None and api_key in MUTATIONS:
            throttles["mutation"] = self.mutation.throttle_ms()
        if not throttles:
            return 0
        kind = max(throttles, key=lambda k: throttles[k])
        ms = throttles[kind]
        if ms > 0:
            quotas.throttled(kind, user, client, ms)
        return ms


def records_bytes(topics: Any) -> int:
    """The bytes of records in a Fetch answer's topics."""
    size = 0
    for topic in topics or ():
        for p in topic.get("partitions") or ():
            records = p.get("records")
            if records is not None:
                size += records.length if hasattr(records, "length") else len(records)
    return size


def fetch_response_bytes(body: dict[str, Any]) -> int:
    return records_bytes(body.get("responses"))
