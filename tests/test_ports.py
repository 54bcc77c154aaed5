"""The tests' port allocator (tests/ports.py) is one per process: pytest loads
tests/conftest.py as `conftest` for the fixtures, test modules import `tests.conftest`, and
a port handed out through one must not come back through the other (a cluster test's
metrics port was handed to its broker's listener again, in CI)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import tests.conftest
from tests import ports

CONFTEST = Path(tests.conftest.__file__).resolve()


def conftest_copies() -> list[ModuleType]:
    return [m for m in list(sys.modules.values())
            if getattr(m, "__file__", None) and Path(m.__file__).resolve() == CONFTEST]


def test_every_copy_of_conftest_hands_out_ports_from_one_allocator() -> None:
    copies = conftest_copies()
    assert len(copies) >= 2, "pytest's own conftest and tests.conftest"  # what the fix is for
    assert {id(m.free_port) for m in copies} == {id(ports.free_port)}


def test_ports_asked_for_through_either_copy_do_not_repeat() -> None:
    copies = conftest_copies()
    calls = min(ports.slice_width() // 2, 2000) or 200
    got = [copies[i % len(copies)].free_port() for i in range(calls)]
    assert len(set(got)) == len(got)
