"""The compiler's inline paths (compact strings, compact arrays of structs, whose length
takes one varint byte) against the general field codecs: identical bytes and values on
each side of the one-byte edge (126 / 127 / 128 elements or bytes), for nulls, empty
values, non-ASCII text and truncated input."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kafkactl.protocol import compiler
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ProtocolDecodeError
from kafkactl.protocol.messages import REQUESTS, RESPONSES

ZERO_UUID = uuid.UUID(int=0)
METADATA_V12 = REQUESTS[ApiKey.METADATA]  # topics: compact nullable array, name: string
PRODUCE_RESPONSE_V9 = RESPONSES[ApiKey.PRODUCE]


@contextmanager
def general_only() -> Iterator[None]:
    """Compile with the inline paths switched off (the general codecs only)."""
    saved_read, saved_write = compiler._inline_read, compiler._inline_write

    def read(f: Any, version: int, flexible: bool, var: str, reader: str,
             sym: Any) -> list[str]:
        return [f"    {var}, pos = {reader}(buf, pos)"]

    def write(f: Any, version: int, flexible: bool, path: str, value: str, writer: str,
              sym: Any) -> list[str]:
        return [f"    {writer}(out, parts, {value})"]

    compiler._inline_read, compiler._inline_write = read, write  # type: ignore[assignment]
    try:
        yield
    finally:
        compiler._inline_read, compiler._inline_write = saved_read, saved_write


def _both(message: Any, version: int) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
    fast = (compiler.compile_encoder(message, version), compiler.compile_decoder(message, version))
    with general_only():
        general = (compiler.compile_encoder(message, version),
                   compiler.compile_decoder(message, version))
    return fast, general


def _encode(encoder: Any, body: dict[str, Any]) -> bytes:
    out = bytearray()
    parts: list[Any] = []
    encoder(out, parts, body)
    return b"".join(bytes(p) for p in parts) + bytes(out)


NAMES = ["", "t", "é" * 63, "x" * 126, "x" * 127, "x" * 128, "ü" * 100]


@pytest.mark.parametrize("count", [0, 1, 126, 127, 128])
@pytest.mark.parametrize("name", NAMES, ids=lambda n: f"len{len(n.encode())}")
def test_metadata_request_topics_and_names(count: int, name: str) -> None:
    (fe, fd), (ge, gd) = _both(METADATA_V12, 12)
    body = {"topics": [{"topic_id": ZERO_UUID, "name": name} for _ in range(count)],
            "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    data = _encode(fe, body)
    assert data == _encode(ge, body)
    fast, general = fd(memoryview(data), 0), gd(memoryview(data), 0)
    assert fast == general
    assert [t["name"] for t in fast[0]["topics"]] == [name] * count
    for cut in (1, len(data) // 2, len(data) - 1):  # truncated: both refuse
        for decode in (fd, gd):
            with pytest.raises((ProtocolDecodeError, IndexError, UnicodeDecodeError,
                                struct.error)):
                decode(memoryview(data[:cut]), 0)


@pytest.mark.parametrize("topics", [None, []])
def test_null_and_empty_arrays(topics: list[Any] | None) -> None:
    (fe, fd), (ge, gd) = _both(METADATA_V12, 12)
    body = {"topics": topics, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}
    data = _encode(fe, body)
    assert data == _encode(ge, body)
    assert fd(memoryview(data), 0) == gd(memoryview(data), 0)
    assert fd(memoryview(data), 0)[0]["topics"] == topics


def test_produce_response_nested_arrays() -> None:
    (fe, fd), (ge, gd) = _both(PRODUCE_RESPONSE_V9, 9)
    body = {"responses": [{"name": f"topic-{i}", "partition_responses": [
        {"index": p, "error_code": 0, "base_offset": p * 10, "log_append_time_ms": -1,
         "log_start_offset": 0, "record_errors": [], "error_message": None}
        for p in range(i)]} for i in (0, 1, 127)], "throttle_time_ms": 0}
    data = _encode(fe, body)
    assert data == _encode(ge, body)
    assert fd(memoryview(data), 0) == gd(memoryview(data), 0)


def test_an_array_longer_than_its_bytes_is_refused_by_both() -> None:
    (fe, fd), (_ge, gd) = _both(METADATA_V12, 12)
    data = bytearray(_encode(fe, {"topics": [{"topic_id": ZERO_UUID, "name": "a"}] * 3,
                                  "allow_auto_topic_creation": True,
                                  "include_topic_authorized_operations": False}))
    data[0] = 0x7F  # claims 126 topics
    for decode in (fd, gd):
        with pytest.raises((ProtocolDecodeError, IndexError, struct.error)):
            decode(memoryview(bytes(data)), 0)
