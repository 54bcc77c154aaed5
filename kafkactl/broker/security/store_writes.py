"""Writes to the security stores (ACLs, SCRAM credentials) off the event loop.

A store write is a file write with fsync (standalone) or conditional znode writes
(a ZooKeeper cluster), which wait as long as ZooKeeper is slow or away: the
CreateAcls, DeleteAcls and AlterUserScramCredentials handlers make them on one worker
thread of their own (the stores are thread-safe: ZooKeeper's watches update them from
kazoo's threads too), so the broker serves its other clients meanwhile, and writes stay
in the order their requests came."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="security-store")


async def write(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on the security stores' writer thread."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_writer, functools.partial(fn, *args))
