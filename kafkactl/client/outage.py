"""OutageNotices: say, as it happens, that a producer lost its broker, and that it is back.

    notices = OutageNotices(producer, lambda line: print(line, file=sys.stderr))

A producer whose leader goes away retries quietly for delivery.timeout.ms (120 s by
default) before a record fails; kcat and Java's client log the lost connection at once.
This tells the same, rate-limited: one line when connections start failing (after the
producer had reached the cluster: a cluster never reached is the run's error), a reminder at
most every REMIND_S while they go on, and one line when a batch that had to be retried is
acknowledged (the outage is over for it). Not a line per record or per retry.

It listens to the sender's connection errors (Sender.on_connection_error) and to the
batches acknowledged (a batch callback); both run in the sender thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkactl.client.errors import NoBrokersAvailable

if TYPE_CHECKING:
    from kafkactl.client.producer import Producer
    from kafkactl.client.producer_batch import ProducerBatch

REMIND_S = 30.0  # while the outage lasts, a reminder at most this often
MIN_GAP_S = 10.0  # a new outage right after the last line: told once this has passed


class OutageNotices:
    """Tells `say` (one line each, from the sender thread) of `producer`'s outages."""

    def __init__(self, producer: Producer, say: Callable[[str], None], *,
                 prefix: str = "kafkactl produce",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.producer = producer
        self.say = say
        self.prefix = prefix
        self.clock = clock
        self.lock = threading.Lock()
        self.down_since: float | None = None  # connections failing since then
        self.where = ""  # the broker the outage's first line named
        self.warned = False  # this outage was told
        self.last_said = float("-inf")
        self.timeout_s = producer.sender.delivery_timeout
        producer.sender.on_connection_error = self.on_connection_error
        producer.sender.on_topic_error = self.on_topic_error
        producer.add_batch_callback(self.on_batch)
        self.gone_topics: set[str] = set()  # said: they do not exist (once each)

    def on_topic_error(self, topic: str, error: BaseException) -> None:
        """A topic with records waiting does not exist any more (deleted while producing):
        said once, as Java's client logs UNKNOWN_TOPIC_OR_PARTITION at each refresh."""
        with self.lock:
            if topic in self.gone_topics:
                return
            self.gone_topics.add(topic)
        self.say(f"{self.prefix}: topic {topic} does not exist (deleted?): its records wait "
                 f"for delivery.timeout.ms ({self.timeout_s:g} s), then fail")

    def on_connection_error(self, node: int, error: BaseException | None) -> None:
        if not self.producer.client.metadata_seen:
            return  # never reached the cluster: the run's error tells it, at once
        now = self.clock()
        with self.lock:
            if self.down_since is None:
                self.down_since = now
                self.warned = False
                self.where = self._where(node, error)
            if not self.warned:
                if now - self.last_said < MIN_GAP_S:
                    return
                self.warned = True
                line = (f"{self.where} unreachable ({reason(error, self.where)}); retrying "
                        f"for up to delivery.timeout.ms ({self.timeout_s:g} s)")
            elif now - self.last_said >= REMIND_S:
                line = (f"{self.where} still unreachable after {now - self.down_since:.0f} s "
                        f"({reason(error, self.where)}); retrying")
            else:
                return
            self.last_said = now
        self.say(f"{self.prefix}: {line}")

    def on_batch(self, batch: ProducerBatch, _base_offset: int,
                 error: BaseException | None) -> None:
        if error is not None or batch.attempts <= 1:
            return
        self.recovered()

    def recovered(self) -> None:
        """The cluster answered again (a retried batch was acknowledged, or the caller
        saw a request through): the outage is over."""
        if self.down_since is None:
            return
        with self.lock:
            if self.down_since is None:
                return
            self.down_since = None
            if not self.warned:
                return
            self.warned = False
            self.last_said = self.clock()
            where = self.where
        self.say(f"{self.prefix}: {where} back: resumed")

    def _where(self, node: int, error: BaseException | None) -> str:
        broker = self.producer.client.cluster.brokers.get(node) if node >= 0 else None
        if broker is not None:
            return f"broker {broker.host}:{broker.port}"
        if node < 0 and isinstance(error, NoBrokersAvailable):
            servers = ",".join(f"{h}:{p}" for h, p in self.producer.client.bootstrap_servers)
            return f"every broker ({servers})"
        return f"broker {node}" if node >= 0 else "the cluster"


def reason(error: BaseException | None, where: str = "") -> str:
    """Why a connection failed, short: the system's words (Connection refused) when an
    OSError is behind it, else the error's own first clause (without `where`, the
    broker the line names already)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror
        seen = seen.__cause__ or seen.__context__
    if error is None:
        return "connection lost"
    text = str(error) or type(error).__name__
    if text.startswith("no broker answered at ") and "(" in text:
        text = text[text.index("(") + 1:].split(")")[0]
    if text.startswith("cannot connect to broker ") and ": " in text:
        text = text.rsplit(": ", 1)[1]
    if where and text.startswith(where + " "):
        text = text[len(where) + 1:]
    return text.split(". ")[0].rstrip(".")
