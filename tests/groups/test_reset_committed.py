"""A `kafkactl consume -G` member whose committed offset is no longer in the log (retention
or DeleteRecords removed it while the group was stopped) resets it by auto.offset.reset
and commits where it reset to, as Java's consumer commits every valid position: a run
that reads nothing after the reset still moves the group there, so the next run starts at
it and prints what arrived in between (before, the commit stayed below the log start and
every run reset to the end again, skipping what had arrived)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.groups.helpers import FAST, create_topic, kafkactl
from tests.groups.rejoin_helpers import committed


def _produce(bootstrap: str, values: range) -> None:
    r = subprocess.run([sys.executable, "-m", "kafkactl", "produce", "-t", "oor", "-b",
                        bootstrap], input="".join(f"{v}\n" for v in values).encode(),
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr


def _consume(bootstrap: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return kafkactl("consume", "-G", "oorg", "-t", "oor", "-e", "-b", bootstrap, *extra)


@pytest.mark.parametrize("reset, first_run", [("latest", []), ("earliest", list(range(20, 30)))])
def test_the_reset_position_is_committed(broker_factory: Any, reset: str,
                                         first_run: list[int]) -> None:
    b = broker_factory(**FAST)
    create_topic(b.bootstrap, "oor", 1)
    _produce(b.bootstrap, range(30))  # offsets 0..29, values 0..29
    r = kafkactl("offsets", "reset", "-G", "oorg", "--topic", "oor", "--to-offset", "5",
                 "--execute", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    r = kafkactl("delete-records", "-t", "oor", "-p", "0", "--before", "20", "-b", b.bootstrap)
    assert r.returncode == 0, r.stderr
    r = _consume(b.bootstrap, "-X", f"auto.offset.reset={reset}")
    assert r.returncode == 0, r.stderr
    assert "fetch position 5 is out of range for oor-0" in r.stderr, r.stderr
    assert [int(v) for v in r.stdout.split()] == first_run
    assert committed(b.bootstrap, "oorg", "oor", (0,)) == {0: 30}
    _produce(b.bootstrap, range(100, 110))  # offsets 30..39
    r = _consume(b.bootstrap, "-X", f"auto.offset.reset={reset}")
    assert r.returncode == 0, r.stderr
    assert "out of range" not in r.stderr, r.stderr
    assert [int(v) for v in r.stdout.split()] == list(range(100, 110))
    assert committed(b.bootstrap, "oorg", "oor", (0,)) == {0: 40}
