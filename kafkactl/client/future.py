"""A light thread-safe future (the seed's callback handler, Java's FutureRecordMetadata).

Cheaper than concurrent.futures.Future: no Condition per future; an Event is created only
when someone actually blocks on an unfinished future."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kafkactl.client.errors import KafkaTimeoutError

T = TypeVar("T")
_lock = threading.Lock()


class Future(Generic[T]):
    __slots__ = ("_done", "_value", "_error", "_callbacks", "_event")

    def __init__(self) -> None:
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future[T]], None]] | None = None
        self._event: threading.Event | None = None

    def done(self) -> bool:
        return self._done

    def set_result(self, value: T) -> None:
        self._finish(value, None)

    def set_exception(self, error: BaseException) -> None:
        self._finish(None, error)

    def _finish(self, value: Any, error: BaseException | None) -> None:
        with _lock:
            if self._done:
                return
            self._value = value
            self._error = error
            self._done = True
            event, callbacks = self._event, self._callbacks
            self._callbacks = None
        if event is not None:
            event.set()
        if callbacks:
            for cb in callbacks:
                try:
                    cb(self)
                except Exception:  # a caller's callback: the others, and the rest of the
                    # batch's futures, still complete (Java's ProducerBatch does the same)
                    import logging  # (not at start-up: a plain produce logs nothing)

                    logging.getLogger(__name__).exception(
                        "a callback of a produced record's future raised")

    def add_done_callback(self, fn: Callable[[Future[T]], None]) -> None:
        with _lock:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        fn(self)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._error

    def result(self, timeout: float | None = None) -> T:
        self._wait(timeout)
        if self._error is not None:
            raise self._error
        return self._value

    def _wait(self, timeout: float | None) -> None:
        if self._done:
            return
        with _lock:
            if not self._done and self._event is None:
                self._event = threading.Event()
            event = self._event
        if event is not None and not event.wait(timeout):
            raise KafkaTimeoutError(f"no result within {timeout} s")


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where an acknowledged record landed (offset -1 with acks=0)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class FutureRecordMetadata(Future[RecordMetadata]):
    __slots__ = ("timestamp",)

    def __init__(self, timestamp: int | None) -> None:
        super().__init__()
        self.timestamp = timestamp

    def set_result_from_batch(self, batch: Any, offset: int, index: int,
                              log_append_time: int) -> None:
        ts = log_append_time if log_append_time >= 0 else (
            self.timestamp if self.timestamp is not None else batch.base_timestamp)
        self.set_result(RecordMetadata(batch.topic, batch.partition,
                                       offset if offset >= 0 else -1, ts))
