"""Waiting for a condition with a deadline (never a fixed sleep): `wait_until` polls a check
until it returns something truthy, and returns that value."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(cond: Callable[[], T], timeout: float = 60.0, what: str = "condition",
               interval: float = 0.05) -> T:
    """Call `cond` until it returns a truthy value (returned) or `timeout` seconds pass
    (AssertionError naming `what`). The poll interval only sets how soon a change is seen."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
