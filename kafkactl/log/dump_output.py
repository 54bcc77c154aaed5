"""The options and output of `kafkactl dump-log` (kafkactl.log.dump, kafkactl.log.dump_index):
text lines to stdout and findings to stderr, or one JSON object per line to stdout."""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INT32_MAX = 2**31 - 1


@dataclass
class Options:
    print_data: bool = False
    deep: bool = False
    skip_metadata: bool = False
    verify_only: bool = False
    sanity_only: bool = False
    max_bytes: int = INT32_MAX
    max_message_size: int = 5 * 1024 * 1024
    as_json: bool = False
    offsets_decoder: bool = False  # decode __consumer_offsets keys and values
    txn_log_decoder: bool = False  # decode __transaction_state keys and values


def _stdout_line(text: str) -> None:
    sys.stdout.write(text + "\n")


def _stderr_line(text: str) -> None:
    sys.stderr.write(text + "\n")


@dataclass
class Output:
    """Text lines or JSON objects to stdout / stderr."""

    opts: Options
    out: Callable[[str], None] = field(default=_stdout_line)
    err: Callable[[str], None] = field(default=_stderr_line)

    def line(self, text: str, obj: dict[str, Any]) -> None:
        self.out(json.dumps(obj) if self.opts.as_json else text)

    def error(self, text: str, obj: dict[str, Any]) -> None:
        if self.opts.as_json:
            self.out(json.dumps(obj))
        else:
            self.err(text)

    def json_line(self, obj: dict[str, Any]) -> None:
        """One JSON object to stdout (--json only)."""
        self.out(json.dumps(obj))


def read_file(path: Path) -> bytes | mmap.mmap:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def close_file(data: bytes | mmap.mmap) -> None:
    """Unmap now if nothing still views the map; otherwise the GC unmaps it later."""
    if isinstance(data, mmap.mmap):
        with contextlib.suppress(BufferError):
            data.close()
