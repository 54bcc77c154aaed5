"""keep_freed_memory (client/memory.py, called by the produce and consume commands): set on
glibc, left alone when the user tuned malloc (GLIBC_TUNABLES, MALLOC_*_), in a fresh
interpreter each time."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from kafkactl.client import memory

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="mallopt's thresholds are glibc's")

CODE = "from kafkactl.client.memory import keep_freed_memory as k; print(k())"


def _run(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in memory.USER_TUNING}
    out = subprocess.run([sys.executable, "-c", CODE], env={**clean, **env},
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


@glibc
def test_set_on_glibc() -> None:
    assert _run() == "True"


@glibc
@pytest.mark.parametrize("var", ["GLIBC_TUNABLES", "MALLOC_TRIM_THRESHOLD_",
                                 "MALLOC_MMAP_THRESHOLD_"])
def test_left_alone_when_the_user_tuned_malloc(var: str) -> None:
    value = "glibc.malloc.check=0" if var == "GLIBC_TUNABLES" else "1048576"
    assert _run(**{var: value}) == "False"

