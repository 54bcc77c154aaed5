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

And the connections accepted from each IP address against its connection_creation_rate
(KIP-612, Kafka's ConnectionQuotas): a new connection is counted in, and when that takes the
address's rate over its quota it is counted out again and refused, with the time Kafka would
throttle it for (bounded by one quota window); kafkactl.broker.connection_quotas asks on
accept (`connection_throttle_ms`), and measures the listeners' and the broker's
max.connection.creation.rate the same way (`record_connection`).
"""

from __future__ import annotations

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
KEY_OF = {"produce": "producer_byte_rate", "fetch": "consumer_byte_rate",
          "request": "request_percentage", "mutation": "controller_mutation_rate"}


@dataclass
class Rate:
    """A rate over the last `num` samples of `size_s` seconds (Kafka's SampledStat Rate)."""

    num: int = WINDOW_NUM
    size_s: float = WINDOW_SIZE_S
    samples: deque[list[float]] = field(default_factory=deque)  # [start, total]

    def record(self, value: float, now: float) -> None:
        self._roll(now)
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


class QuotaManager:
    """Measures each client's rates against the store's quotas; `record` returns the
    throttle time in ms (0 within the quota, or without one)."""

    def __init__(self, store: ClientQuotaStore, *, window_num: int = WINDOW_NUM,
                 window_size_s: float = WINDOW_SIZE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.window_num = window_num
        self.window_size_s = window_size_s
        self.clock = clock
        self._rates: dict[tuple[str, tuple[str, str]], Rate] = {}
        self.throttle_ms_total: dict[tuple[str, str, str], float] = {}  # kind, user, client
        self._ip_rates: dict[str, Rate] = {}  # address -> its connections accepted
        self.ip_throttled = 0  # connections refused over a connection_creation_rate

    def record(self, kind: str, user: str, client_id: str, value: float) -> int:
        found = self.store.quota(KEY_OF[kind], user, client_id)
        if found is None:
            return 0
        bound, entity = found
        key = (kind, _sensor(entity, user, client_id))
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = Rate(self.window_num, self.window_size_s)
        now = self.clock()
        rate.record(value, now)
        observed, window = rate.measure(now)
        if observed <= bound:
            return 0
        throttle = min((observed - bound) / bound * window, self.window_num * self.window_size_s)
        ms = int(round(throttle * 1000))
        if ms > 0:
            tkey = (kind, user, client_id)
            self.throttle_ms_total[tkey] = self.throttle_ms_total.get(tkey, 0.0) + ms
        return ms


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


# ---------------------------------------------------------------- what a request counts for

def throttle_for(quotas: QuotaManager, api_key: int, user: str, client_id: str,
                 request: dict[str, Any], body: dict[str, Any] | None, request_bytes: int,
                 busy_s: float, partition_count: Callable[[str], int]) -> int:
    """Record a handled request against its client's quotas; the throttle time in ms (the
    largest of the quotas it exceeds). Followers' fetches (replica_id >= 0) are exempt, as
    in Kafka."""
    if request.get("replica_id", -1) >= 0:
        return 0
    ms = quotas.record("request", user, client_id, busy_s * 100.0)
    if api_key == ApiKey.PRODUCE:
        ms = max(ms, quotas.record("produce", user, client_id, request_bytes))
    elif api_key == ApiKey.FETCH and body is not None:
        ms = max(ms, quotas.record("fetch", user, client_id, fetch_response_bytes(body)))
    elif api_key in MUTATIONS:
        mutated = partitions_mutated(api_key, request, partition_count)
        if mutated:
            ms = max(ms, quotas.record("mutation", user, client_id, mutated))
    return ms


MUTATIONS = frozenset({ApiKey.CREATE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.DELETE_TOPICS})


def fetch_response_bytes(body: dict[str, Any]) -> int:
    size = 0
    for topic in body.get("responses") or ():
        for p in topic.get("partitions") or ():
            records = p.get("records")
            if records is not None:
                size += records.length if hasattr(records, "length") else len(records)
    return size


def partitions_mutated(api_key: int, request: dict[str, Any],
                       partition_count: Callable[[str], int]) -> int:
    """Partitions a CreateTopics, CreatePartitions or DeleteTopics request creates or
    deletes (Kafka's controller_mutation_rate counts partitions)."""
    if api_key == ApiKey.CREATE_TOPICS:
        n = 0
        for t in request.get("topics") or ():
            assignments = t.get("assignments") or ()
            n += len(assignments) if assignments else max(int(t.get("num_partitions", 1)), 1)
        return n
    if api_key == ApiKey.CREATE_PARTITIONS:
        return sum(max(0, int(t.get("count", 0)) - partition_count(t.get("name", "")))
                   for t in request.get("topics") or ())
    names = [t.get("name") for t in request.get("topics") or ()] or \
        list(request.get("topic_names") or ())
    return sum(partition_count(n) for n in names if n)
