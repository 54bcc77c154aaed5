"""The broker's bounded executor for disk work that must not run on the event loop.

Producer-state snapshots (a write and an fsync per partition), the high-watermark
checkpoint (a write, an fsync and a directory fsync) and the producer-state rebuild after a
follower's truncation (a scan of the log) run here, on two threads named `log-io-N`, so a
slow disk delays only them, never produce or fetch. The callers capture what is written on
the loop first (a consistent point) and keep one writer per file (kafkactl/broker/partition.py,
partition_store.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

THREADS = 2
T = TypeVar("T")

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def executor() -> ThreadPoolExecutor:
    """The shared executor (made on first use)."""
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="log-io")
        return _executor


async def run(fn: Callable[..., T], *args: object) -> T:
    """fn(*args) on the log-io executor."""
    return await asyncio.get_running_loop().run_in_executor(executor(), fn, *args)


def run_all(jobs: list[Callable[[], None]]) -> None:
    """Run `jobs` one after the other (one executor task: the other thread stays free)."""
    for job in jobs:
        job()


def shutdown() -> None:
    """Wait for the work under way and stop the threads (a later use makes new ones)."""
    global _executor
    with _lock:
        ex, _executor = _executor, None
    if ex is not None:
        ex.shutdown(wait=True)
