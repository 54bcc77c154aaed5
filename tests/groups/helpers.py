"""Shared helpers for the consumer-group tests (real broker, real clients)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

FAST = {"group_initial_rebalance_delay_ms": "0"}


def kafkactl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkactl", *args], capture_output=True,
                          text=True, timeout=timeout)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    r = kafkactl("topics", "create", "-t", topic, "--partitions", str(partitions),
                 "-b", bootstrap)
    assert r.returncode == 0, r.stderr


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), key=str(i).encode())
    assert p.flush(30) == 0


def offsets_show(bootstrap: str, group: str) -> dict[tuple[str, int], Any]:
    r = kafkactl("offsets", "show", "--group", group, "--json", "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    return {(row["topic"], row["partition"]): row for row in json.loads(r.stdout)}


def wait_until(cond: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")
