"""`kafkactl top`'s questions to several brokers at once, bounded by a deadline: each on its
own thread, so that one broker that hangs (paused, its disk stuck, a network partition that
drops packets) neither freezes the view nor delays the others' answers; what has not answered
by the deadline is said as not answering in that look.

The threads are daemons: a question still waiting when `top` exits does not keep it alive.
A key's question is never asked again while its previous one still runs (its connection is
in use): the key is then not answering at once.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Clock = Callable[[], float]
K = TypeVar("K", bound=Hashable)


@dataclass
class Answers(Generic[K]):
    """What a round of questions got: each key's result, or the exception it raised, or
    neither (`unanswered`: still running at the deadline)."""

    results: dict[K, Any] = field(default_factory=dict)
    errors: dict[K, BaseException] = field(default_factory=dict)
    unanswered: set[K] = field(default_factory=set)
    # when each key answered (a result or an error), by the asker's clock
    answered_at: dict[K, float] = field(default_factory=dict)

    def last_answer(self, keys: set[K] | None = None) -> float | None:
        """When the last of `keys` (default: all) that returned a result did so."""
        times = [t for k, t in self.answered_at.items()
                 if k in self.results and (keys is None or k in keys)]
        return max(times) if times else None


class Asker:
    """Asks a round of questions concurrently and waits for them at most `timeout`."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._running: dict[Hashable, concurrent.futures.Future[Any]] = {}

    def ask(self, calls: Mapping[K, Callable[[], Any]], timeout: float) -> Answers[K]:
        out: Answers[K] = Answers()
        started: dict[K, concurrent.futures.Future[Any]] = {}
        stamps: dict[Hashable, float] = {}
        for key, call in calls.items():
            previous = self._running.get(key)
            if previous is not None and not previous.done():
                out.unanswered.add(key)  # still asking since an earlier round
                continue
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            future.set_running_or_notify_cancel()
            self._running[key] = started[key] = future
            threading.Thread(target=self._run, args=(call, future, stamps, key),
                             name=f"kafkactl-top-{key}", daemon=True).start()
        concurrent.futures.wait(started.values(), timeout=max(timeout, 0.0))
        for key, future in started.items():
            if not future.done():
                out.unanswered.add(key)
                continue
            out.answered_at[key] = stamps.get(key, self.clock())
            error = future.exception()
            if error is not None:
                out.errors[key] = error
            else:
                out.results[key] = future.result()
        return out

    def _run(self, call: Callable[[], Any], future: concurrent.futures.Future[Any],
             stamps: dict[Hashable, float], key: Hashable) -> None:
        try:
            result = call()
        except BaseException as e:  # handed to the round's caller
            stamps[key] = self.clock()
            future.set_exception(e)
            return
        stamps[key] = self.clock()
        future.set_result(result)
