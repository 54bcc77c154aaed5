"""SourceTopics: the source topics the mirror's filter matches, looked up on a thread of
its own every topic refresh interval.

A stream never asks for cluster metadata itself: a metadata request queued behind a fetch
long poll on the stream's connection stalled copying for up to a fetch wait (the p99
latency spikes every 5 s that bench/mirror.py showed). Target topics are created here,
before the streams subscribe to their source topics.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kafkactl.client.admin import AdminClient
from kafkactl.client.consumer import TopicFilter
from kafkactl.mirror.retry import ExponentialBackoff, RetryNotices
from kafkactl.mirror.topics import TargetTopics

log = logging.getLogger("kafkactl.mirror")


class SourceTopics:
    """`wanted`: the matching source topics, sorted (None until the first lookup)."""

    def __init__(self, source: AdminClient, topic_filter: TopicFilter, targets: TargetTopics,
                 interval_s: float, stop: threading.Event,
                 is_transient: Callable[[BaseException], bool],
                 on_error: Callable[[BaseException], None]) -> None:
        self.source = source
        self.filter = topic_filter
        self.targets = targets
        self.interval_s = interval_s
        self.stop = stop
        self.is_transient = is_transient
        self.on_error = on_error
        self.wanted: list[str] | None = None
        # (topic, partition count) of `wanted`: a stream rejoins its group when it changes,
        # so the leader assigns partitions added to a source topic (Java's consumer rejoins
        # when a subscribed topic's partition count changes)
        self.layout: tuple[tuple[str, int], ...] | None = None
        self.known = threading.Event()  # set once `wanted` is
        # failed lookups back off (100 ms doubling to 1 s, as Kafka's clients) and are
        # said once, then every 30 s with their count, and once they succeed again
        self.retries = RetryNotices("looking up source topics",
                                    ExponentialBackoff(source.client.retry_backoff))
        self.thread = threading.Thread(target=self.run, name="mirror-topics", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def refresh(self) -> list[str]:
        """Look the matching topics up, create their target topics, publish them."""
        cluster = self.source.client.refresh_metadata(None)
        wanted = sorted(t for t, tm in cluster.topics.items()
                        if tm.partitions and not tm.error_code
                        and self.filter.matches(t, tm.is_internal))
        for t in wanted:
            self.targets.get(t, len(cluster.topics[t].partitions))
        if self.wanted is not None and wanted != self.wanted:
            log.info("topics now %s", ", ".join(wanted) or "none")
        layout = tuple((t, len(cluster.topics[t].partitions)) for t in wanted)
        if self.layout is not None and wanted == self.wanted and layout != self.layout:
            log.info("partitions now %s", ", ".join(f"{t}: {n}" for t, n in layout))
        self.wanted, self.layout = wanted, layout
        self.known.set()
        return wanted

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.refresh()
            except Exception as e:
                if not self.is_transient(e):
                    self.on_error(e)
                    return
                wait = self.retries.failed(e)
            else:
                self.retries.succeeded()
                wait = self.interval_s
            self.stop.wait(wait)
