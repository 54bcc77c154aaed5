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
    # how keys and payloads print (--key-decoder-class, --value-decoder-class): a value
    # of KAFKA_DECODERS
    key_decoder: str = "string"
    value_decoder: str = "string"


# The decoders Kafka ships (DumpLogSegments' --key-decoder-class and --value-decoder-class
# load any class implementing org.apache.kafka.tools.api.Decoder; kafkactl cannot load Java
# classes, so it takes these names): StringDecoder is `new String(bytes, UTF_8)` (Kafka's
# default), IntegerDecoder and LongDecoder read a big-endian int / long from the first 4 /
# 8 bytes, DefaultDecoder returns the bytes (Kafka prints the JVM's array reference,
# `[B@1b6d3586`; kafkactl prints them as hex). Kafka 3.x's kafka.serializer names are the
# same decoders (3.8 and 3.9 convert them to the new ones, 4.0 removed them).
KAFKA_DECODERS: dict[str, str] = {
    f"{package}.{name}Decoder": kind
    for package in ("org.apache.kafka.tools.api", "kafka.serializer")
    for name, kind in (("String", "string"), ("Integer", "integer"), ("Long", "long"),
                       ("Default", "bytes"))
}


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
