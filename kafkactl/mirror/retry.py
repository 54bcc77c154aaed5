"""Retrying without flooding: how long to wait before the next attempt (ExponentialBackoff)
and what to say about a run of failed attempts (RetryNotices).

Kafka's clients back off exponentially from retry.backoff.ms (100 ms) to
retry.backoff.max.ms (1 s), doubling each time with 20% jitter (KIP-580, Java's
org.apache.kafka.common.utils.ExponentialBackoff), so that many clients retrying at once do
not retry in step; MirrorMaker logs a cluster that does not answer without a line per
retry. A mirror whose source is down retries its topic lookups and its streams' polls the
same way: one line when the failures start, a reminder with the number of attempts at most
every REMIND_S while they go on, and one line when an attempt succeeds again.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable

log = logging.getLogger("kafkactl.mirror")

RETRY_BACKOFF_MAX_S = 1.0  # Kafka's retry.backoff.max.ms default
RETRY_BACKOFF_EXP_BASE = 2  # Kafka's CommonClientConfigs.RETRY_BACKOFF_EXP_BASE
RETRY_BACKOFF_JITTER = 0.2  # Kafka's CommonClientConfigs.RETRY_BACKOFF_JITTER
REMIND_S = 30.0  # while attempts keep failing, a reminder at most this often
MIN_GAP_S = 10.0  # a new run of failures right after a line: told once this has passed


class ExponentialBackoff:
    """Kafka's ExponentialBackoff: `initial_s` * `multiplier` ** attempts, at most
    `max_s`, times a random factor in [1 - jitter, 1 + jitter) (and still at most
    `max_s`)."""

    def __init__(self, initial_s: float, max_s: float = RETRY_BACKOFF_MAX_S,
                 multiplier: float = RETRY_BACKOFF_EXP_BASE,
                 jitter: float = RETRY_BACKOFF_JITTER,
                 rng: Callable[[], float] = random.random) -> None:
        self.initial_s = min(max(initial_s, 0.0), max_s)
        self.max_s = max_s
        self.multiplier = multiplier
        self.jitter = jitter
        self.rng = rng
        # the exponent past which the term only grows beyond max_s
        self.exp_max = (math.log(max_s / max(self.initial_s, 0.001)) / math.log(multiplier)
                        if max_s > self.initial_s and multiplier > 1 else 0.0)

    def backoff(self, attempts: int) -> float:
        """The wait after `attempts` + 1 failed attempts in a row (0: after the first)."""
        if self.exp_max == 0:
            return self.initial_s
        term = self.initial_s * self.multiplier ** min(max(attempts, 0), self.exp_max)
        factor = 1.0 - self.jitter + 2 * self.jitter * self.rng() if self.jitter > 0 else 1.0
        return min(term * factor, self.max_s)


class RetryNotices:
    """A run of failed attempts at one thing (`what`, e.g. "looking up source topics"):
    `failed(error)` counts one and returns how long to wait before the next attempt;
    `succeeded()` ends the run. Said (`say`, a warning by default): a run's first failure
    (unless a line was said less than MIN_GAP_S ago: failures that come and go are not
    told each time), a reminder with the count of attempts at most every `remind_s` while
    it goes on, and, when a run that was told ends after more than one attempt, that it
    did (`back`)."""

    def __init__(self, what: str, backoff: ExponentialBackoff, *, back: str = "back",
                 remind_s: float = REMIND_S, say: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.backoff = backoff
        self.back = back
        self.remind_s = remind_s
        self.say = say or (lambda line: log.warning("%s", line))
        self.clock = clock
        self.lock = threading.Lock()
        self.attempts = 0  # failed in a row (0: the last attempt succeeded)
        self.since: float | None = None  # when the first of them failed
        self.last_error: str | None = None  # the latest one's (None: no failure)
        self.told = False  # this run was said
        self._last_said = float("-inf")

    def failed(self, error: BaseException) -> float:
        """One more failed attempt: the seconds to wait before the next one."""
        now = self.clock()
        line = None
        with self.lock:
            self.attempts += 1
            attempts = self.attempts
            self.last_error = str(error) or type(error).__name__
            if self.since is None:
                self.since, self.told = now, False
            if not self.told:
                if now - self._last_said >= MIN_GAP_S:
                    line = f"{self.what}: {self.last_error}; retrying"
            elif now - self._last_said >= self.remind_s:
                line = (f"{self.what}: still failing after {attempts} attempts in "
                        f"{now - self.since:.0f} s ({self.last_error}); retrying")
            if line is not None:
                self.told, self._last_said = True, now
        if line is not None:
            self.say(line)
        return self.backoff.backoff(attempts - 1)

    def succeeded(self) -> None:
        """An attempt got through: the run of failures, if any, is over."""
        if self.since is None:
            return
        now = self.clock()
        with self.lock:
            since, attempts, told = self.since, self.attempts, self.told
            if since is None:
                return
            self.since, self.attempts, self.last_error, self.told = None, 0, None, False
            if told and attempts > 1:
                self._last_said = now
        if told and attempts > 1:
            self.say(f"{self.what}: {self.back} after {attempts} failed attempts in "
                     f"{now - since:.0f} s")
